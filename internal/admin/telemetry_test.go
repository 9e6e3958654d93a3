package admin

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandlog/strand/internal/telemetry"
)

type pushed []telemetry.Instance

func (p pushed) Snapshot() []telemetry.Instance { return p }

// TestTelemetryCollector: whatever clients push, /metrics stays
// gatherable: names and labels are made valid, the broker's own families
// cannot be pushed into, a name pushed as both a gauge and a total keeps
// the first, and attributes alike once renamed give one series.
func TestTelemetryCollector(t *testing.T) {
	java := telemetry.Client{InstanceID: [16]byte{1}, ClientID: "orders-1", SoftwareName: "apache-kafka-java", SoftwareVersion: "4.4.0"}
	rdkafka := telemetry.Client{InstanceID: [16]byte{2}, ClientID: "orders-2", SoftwareName: "librdkafka", SoftwareVersion: "2.8.0"}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(telemetryCollector{clients: pushed{
		{Client: java, Points: []telemetry.Point{
			{Name: "org.apache.kafka.consumer.fetch.manager.records.lag.max", Value: 12,
				Attrs: []telemetry.Attr{{Key: "topic", Value: "orders"}, {Key: "partition", Value: "0"}}},
			{Name: "org.apache.kafka.consumer.fetch.manager.records.consumed", Kind: telemetry.Counter, Value: 300},
			{Name: "strand.connections", Value: 99},
			{Name: "9lives", Value: 1, Attrs: []telemetry.Attr{{Key: "node.id", Value: "1"}, {Key: "node_id", Value: "2"}, {Key: "__name__", Value: "x"}}},
			{Name: "client.id.clash", Value: 1, Attrs: []telemetry.Attr{{Key: "client_id", Value: "spoofed"}}},
		}},
		{Client: rdkafka, Points: []telemetry.Point{
			{Name: "org.apache.kafka.consumer.fetch.manager.records.lag.max", Value: 3},
			{Name: "9lives", Kind: telemetry.Counter, Value: 5},
		}},
	}})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	byName := map[string]int{}
	for _, f := range fams {
		byName[f.GetName()] = len(f.Metric)
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "client_id" && l.GetValue() == "spoofed" {
					t.Errorf("%s: a pushed attribute replaced the client's id", f.GetName())
				}
			}
		}
	}
	for name, n := range map[string]int{
		"org_apache_kafka_consumer_fetch_manager_records_lag_max":        2,
		"org_apache_kafka_consumer_fetch_manager_records_consumed_total": 1,
		"_9lives":         1,
		"client_id_clash": 1,
	} {
		if byName[name] != n {
			t.Errorf("%s: %d series, want %d (families %v)", name, byName[name], n, byName)
		}
	}
	if _, ok := byName["strand_connections"]; ok {
		t.Errorf("a client pushed into strand_connections")
	}
}
