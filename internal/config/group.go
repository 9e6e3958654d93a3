package config

import (
	_ "embed"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The group configs Strand acts on: a consumer group's own session timeout
// and heartbeat interval (KIP-848), over the broker's
// group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms.
const (
	GroupConsumerSessionTimeout    = "consumer.session.timeout.ms"
	GroupConsumerHeartbeatInterval = "consumer.heartbeat.interval.ms"
)

// kafkaGroupConfigs is every group config (the GROUP config resource,
// Kafka 4.0+) of the Kafka release Strand answers as, written with
// kafka_broker_configs.tsv from that release's DescribeConfigs.
//
//go:embed kafka_group_configs.tsv
var kafkaGroupConfigs string

// GroupDefs are Kafka's group configs, sorted by name.
var GroupDefs = parseKafkaDefs(kafkaGroupConfigs)

// LookupGroupDef finds one of Kafka's group configs.
func LookupGroupDef(name string) (*KafkaDef, bool) {
	i, ok := slices.BinarySearchFunc(GroupDefs, name, func(d KafkaDef, n string) int { return strings.Compare(d.Name, n) })
	if !ok {
		return nil, false
	}
	return &GroupDefs[i], true
}

// GroupBrokerDefault is the broker config whose value a group config takes
// where the group sets none (group.consumer.session.timeout.ms for
// consumer.session.timeout.ms), "" for one without.
func GroupBrokerDefault(name string) string {
	if _, ok := LookupKafkaDef("group." + name); ok {
		return "group." + name
	}
	return ""
}

// CheckGroupConfigs checks a group's configs as Kafka's GroupConfig does:
// known names, values of their type, and each timing of the consumer
// protocol within the broker's bounds, the heartbeat below the session
// timeout.
func CheckGroupConfigs(configs map[string]string, b Broker) error {
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		d, ok := LookupGroupDef(name)
		if !ok {
			return refused(ErrUnknownConfig, "Unknown group config name: %s", name)
		}
		if err := checkType(d.Type, configs[name]); err != nil {
			return &ValueError{Name: name, Value: configs[name], Err: err}
		}
	}
	ms := func(name string, def int64) int64 {
		if v, ok := configs[name]; ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
		return def
	}
	session := ms(GroupConsumerSessionTimeout, b.GroupConsumerSessionTimeout.Milliseconds())
	heartbeat := ms(GroupConsumerHeartbeatInterval, b.GroupConsumerHeartbeatInterval.Milliseconds())
	for _, c := range []struct {
		name     string
		v        int64
		min, max int64
	}{
		{GroupConsumerSessionTimeout, session, b.GroupConsumerMinSessionTimeout.Milliseconds(), b.GroupConsumerMaxSessionTimeout.Milliseconds()},
		{GroupConsumerHeartbeatInterval, heartbeat, b.GroupConsumerMinHeartbeatInterval.Milliseconds(), b.GroupConsumerMaxHeartbeatInterval.Milliseconds()},
	} {
		if _, set := configs[c.name]; !set {
			continue
		}
		if c.v < c.min {
			return &ValueError{Name: c.name, Value: configs[c.name], Err: fmt.Errorf("%w: Value must be at least %d", ErrInvalidConfig, c.min)}
		}
		if c.v > c.max {
			return &ValueError{Name: c.name, Value: configs[c.name], Err: fmt.Errorf("%w: Value must be no more than %d", ErrInvalidConfig, c.max)}
		}
	}
	if heartbeat >= session {
		return refused(ErrInvalidConfig, "%s must be less than %s", GroupConsumerHeartbeatInterval, GroupConsumerSessionTimeout)
	}
	return checkShareGroupConfigs(configs)
}

// shareBounds are the bounds of a share group's numbers, Kafka's
// group.share.min.* and group.share.max.* defaults.
var shareBounds = map[string][2]int64{
	"share.record.lock.duration.ms":    {15000, 60000},
	"share.delivery.count.limit":       {2, 10},
	"share.partition.max.record.locks": {100, 4000},
	"share.session.timeout.ms":         {45000, 60000},
	"share.heartbeat.interval.ms":      {5000, 15000},
}

// checkShareGroupConfigs checks a share group's configs as Kafka's
// GroupConfig does: numbers within their bounds, and the words of
// share.auto.offset.reset and share.isolation.level.
func checkShareGroupConfigs(configs map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		v := strings.TrimSpace(configs[name])
		if bounds, ok := shareBounds[name]; ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			if n < bounds[0] {
				return &ValueError{Name: name, Value: configs[name], Err: fmt.Errorf("%w: Value must be at least %d", ErrInvalidConfig, bounds[0])}
			}
			if n > bounds[1] {
				return &ValueError{Name: name, Value: configs[name], Err: fmt.Errorf("%w: Value must be no more than %d", ErrInvalidConfig, bounds[1])}
			}
		}
		switch name {
		case "share.auto.offset.reset":
			if _, err := ShareResetDuration(v); err != nil || (v != "latest" && v != "earliest" && !strings.HasPrefix(v, "by_duration:")) {
				return &ValueError{Name: name, Value: configs[name], Err: fmt.Errorf("%w: Invalid value `%s` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.", ErrInvalidConfig, v)}
			}
		case "share.isolation.level":
			if v != "read_committed" && v != "read_uncommitted" {
				return &ValueError{Name: name, Value: configs[name], Err: fmt.Errorf("%w: String must be one of: read_committed, read_uncommitted", ErrInvalidConfig)}
			}
		}
	}
	return nil
}

// ShareResetDuration reads share.auto.offset.reset's by_duration:<ISO-8601
// duration> (by_duration:PT1H, P1DT12H); 0 for earliest or latest.
func ShareResetDuration(v string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(v, "by_duration:")
	if !ok {
		return 0, nil
	}
	// Java's Duration.parse, which Kafka uses: either case, at least one
	// unit, and none missing after the T.
	u := strings.ToUpper(rest)
	m := isoDuration.FindStringSubmatch(u)
	if m == nil || u == "P" || strings.HasSuffix(u, "T") {
		return 0, fmt.Errorf("%q is not an ISO-8601 duration", rest)
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute} {
		if m[i+1] != "" {
			n, _ := strconv.ParseInt(m[i+1], 10, 64)
			d += time.Duration(n) * unit
		}
	}
	if m[4] != "" {
		f, _ := strconv.ParseFloat(m[4], 64)
		d += time.Duration(f * float64(time.Second))
	}
	return d, nil
}

// isoDuration is the days-and-time form of an ISO-8601 duration, as
// Java's Duration.parse takes it.
var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)
