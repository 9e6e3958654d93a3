package admin

import (
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandlog/strand/internal/telemetry"
)

// ClientTelemetry is what clients pushed (KIP-714), for /metrics.
type ClientTelemetry interface {
	Snapshot() []telemetry.Instance
}

// telemetryCollector exports the values clients pushed, each under its
// OTLP name made a Prometheus name (org.apache.kafka.consumer.x ->
// org_apache_kafka_consumer_x, totals ending in _total), labelled with
// the client (instance id, client id, software) and the point's own
// attributes. The families are only known at scrape time, so the
// collector is unchecked; it keeps each family's labels and types
// consistent itself, as the registry requires.
type telemetryCollector struct{ clients ClientTelemetry }

// clientLabels name the client a pushed value comes from.
var clientLabels = []string{"client_instance_id", "client_id", "client_software_name", "client_software_version"}

// reservedPrefixes are the names a client may not push into: the
// broker's own families.
var reservedPrefixes = []string{"strand_", "go_", "process_", "promhttp_"}

func (telemetryCollector) Describe(chan<- *prometheus.Desc) {}

func (c telemetryCollector) Collect(ch chan<- prometheus.Metric) {
	type sample struct {
		value  float64
		labels map[string]string
	}
	type family struct {
		original string
		kind     telemetry.Kind
		keys     map[string]bool
		samples  []sample
	}
	families := map[string]*family{}
	for _, in := range c.clients.Snapshot() {
		cl := in.Client
		for _, p := range in.Points {
			name := promName(p.Name, p.Kind)
			if name == "" {
				continue
			}
			f := families[name]
			if f == nil {
				f = &family{original: p.Name, kind: p.Kind, keys: map[string]bool{}}
				families[name] = f
			} else if f.kind != p.Kind {
				continue // a gauge and a total under one name: the first seen wins
			}
			labels := map[string]string{"client_instance_id": cl.InstanceIDString(), "client_id": cl.ClientID,
				"client_software_name": cl.SoftwareName, "client_software_version": cl.SoftwareVersion}
			for _, a := range p.Attrs {
				key := promLabel(a.Key)
				if _, taken := labels[key]; taken {
					continue // the client's own labels, or two attributes alike once renamed
				}
				labels[key] = a.Value
				f.keys[key] = true
			}
			f.samples = append(f.samples, sample{value: p.Value, labels: labels})
		}
	}
	for name, f := range families {
		keys := append(slices.Clone(clientLabels), slices.Sorted(maps.Keys(f.keys))...)
		desc := prometheus.NewDesc(name, "Pushed by clients (KIP-714) as "+f.original+".", keys, nil)
		valueType := prometheus.GaugeValue
		if f.kind == telemetry.Counter {
			valueType = prometheus.CounterValue
		}
		seen := map[string]bool{}
		for _, s := range f.samples {
			values := make([]string, len(keys))
			for i, k := range keys {
				values[i] = s.labels[k]
			}
			// Attributes that differ only in what renaming dropped would
			// give one series twice, which the registry refuses.
			if id := strings.Join(values, "\x00"); !seen[id] {
				seen[id] = true
				ch <- prometheus.MustNewConstMetric(desc, valueType, s.value, values...)
			}
		}
	}
}

// promName makes a pushed metric's name a Prometheus name, "" for one a
// client may not use.
func promName(name string, kind telemetry.Kind) string {
	n := sanitize(name, true)
	if kind == telemetry.Counter && !strings.HasSuffix(n, "_total") {
		n += "_total"
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(n, p) {
			return ""
		}
	}
	return n
}

// promLabel makes an attribute's key a Prometheus label name; names
// beginning "__" are Prometheus's own.
func promLabel(key string) string {
	l := sanitize(key, false)
	if strings.HasPrefix(l, "__") {
		l = "attr" + l
	}
	return l
}

// sanitize replaces what a Prometheus name may not hold with "_" and
// keeps it from starting with a digit (colons are allowed in metric
// names only).
func sanitize(s string, colons bool) string {
	b := []byte(s)
	for i, c := range b {
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || colons && c == ':'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] >= '0' && b[0] <= '9' {
		b = append([]byte{'_'}, b...)
	}
	return string(b)
}
