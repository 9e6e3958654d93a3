package config

import (
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Client metrics subscriptions (KIP-714's CLIENT_METRICS config
// resources): which metrics the clients a subscription matches are asked
// to push, and how often. Their configs, as Kafka 4.4 defines them.
const (
	ClientMetricsInterval = "interval.ms" // how often to push, 100 ms to an hour
	ClientMetricsMatch    = "match"       // selector=regex pairs the client must all match
	ClientMetricsMetrics  = "metrics"     // metric name prefixes ("*": all)
)

// ClientMetricsDefs are the client metrics configs with Kafka's types and
// defaults, sorted by name.
var ClientMetricsDefs = []KafkaDef{
	{Name: ClientMetricsInterval, Type: TypeInt, Default: ptr("300000")},
	{Name: ClientMetricsMatch, Type: TypeList, Default: ptr("")},
	{Name: ClientMetricsMetrics, Type: TypeList, Default: ptr("")},
}

func ptr(s string) *string { return &s }

// ClientMatchSelectors are the client properties a match may select on.
var ClientMatchSelectors = []string{"client_instance_id", "client_id", "client_software_name",
	"client_software_version", "client_source_address", "client_source_port"}

// ErrInvalidRequest marks a refusal Kafka answers INVALID_REQUEST (the
// client metrics configs' unknown names and out-of-range intervals).
var ErrInvalidRequest = errors.New("config: invalid request")

// CheckClientMetrics checks a subscription's configs as Kafka's
// ClientMetricsConfigs does: known names (INVALID_REQUEST), an interval
// within range (INVALID_REQUEST), and a match of selector=regex pairs with
// known selectors and valid expressions (INVALID_CONFIG).
func CheckClientMetrics(configs map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		if !slices.ContainsFunc(ClientMetricsDefs, func(d KafkaDef) bool { return d.Name == name }) {
			return refused(ErrInvalidRequest, "Unknown client metrics configuration: %s", name)
		}
	}
	if v, ok := configs[ClientMetricsInterval]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 100 || n > 3600000 {
			return refused(ErrInvalidRequest, "Invalid value %s for %s, interval must be between 100 and 3600000 (1 hour)",
				v, ClientMetricsInterval)
		}
	}
	for _, pair := range SplitList(configs[ClientMetricsMatch]) {
		sel, expr, ok := strings.Cut(pair, "=")
		if !ok || !slices.Contains(ClientMatchSelectors, strings.TrimSpace(sel)) {
			return refused(ErrInvalidConfig, "Illegal client matching pattern: %s", pair)
		}
		if _, err := regexp.Compile(expr); err != nil {
			return refused(ErrInvalidConfig, "Illegal client matching pattern: %s", pair)
		}
	}
	return nil
}
