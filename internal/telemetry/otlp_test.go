package telemetry

import (
	"errors"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP messages the tests push, encoded field by field.

func message(fields ...[]byte) []byte {
	var b []byte
	for _, f := range fields {
		b = append(b, f...)
	}
	return b
}

func bytesField(num protowire.Number, v []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func varintField(num protowire.Number, v uint64) []byte {
	b := protowire.AppendTag(nil, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func fixed64Field(num protowire.Number, v uint64) []byte {
	b := protowire.AppendTag(nil, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func stringAttr(key, value string) []byte {
	return bytesField(pointAttributes, message(bytesField(keyValueKey, []byte(key)),
		bytesField(keyValueValue, bytesField(anyString, []byte(value)))))
}

func intAttr(key string, value int64) []byte {
	return bytesField(pointAttributes, message(bytesField(keyValueKey, []byte(key)),
		bytesField(keyValueValue, varintField(anyInt, uint64(value)))))
}

func doublePoint(v float64, attrs ...[]byte) []byte {
	return message(append(attrs, fixed64Field(3, 1), fixed64Field(pointAsDouble, math.Float64bits(v)))...)
}

func intPoint(v int64, attrs ...[]byte) []byte {
	return message(append(attrs, fixed64Field(pointAsInt, uint64(v)))...)
}

func gaugeMetric(name string, points ...[]byte) []byte {
	var g []byte
	for _, p := range points {
		g = append(g, bytesField(gaugeDataPoints, p)...)
	}
	return message(bytesField(metricName, []byte(name)), bytesField(2, []byte("a description")), bytesField(metricGauge, g))
}

func sumMetric(name string, delta bool, points ...[]byte) []byte {
	temporality := uint64(2)
	if delta {
		temporality = temporalityDelta
	}
	s := message(varintField(sumTemporality, temporality), varintField(sumMonotonic, 1))
	for _, p := range points {
		s = append(s, bytesField(sumDataPoints, p)...)
	}
	return message(bytesField(metricName, []byte(name)), bytesField(metricSum, s))
}

// metricsData wraps metrics in one resource and one scope, as Kafka's
// clients push them.
func metricsData(metrics ...[]byte) []byte {
	var scope []byte
	scope = append(scope, bytesField(1, bytesField(1, []byte("org.apache.kafka")))...)
	for _, m := range metrics {
		scope = append(scope, bytesField(scopeMetricsMetrics, m)...)
	}
	resource := bytesField(1, stringAttr("client_rack", "a"))
	return bytesField(metricsDataResourceMetrics, message(resource, bytesField(resourceMetricsScope, scope)))
}

func TestDecode(t *testing.T) {
	histogram := message(bytesField(metricName, []byte("a.histogram")), bytesField(9, bytesField(1, doublePoint(1))))
	data := metricsData(
		gaugeMetric("org.apache.kafka.consumer.fetch.manager.records.lag.max", doublePoint(12.5, stringAttr("topic", "t"), intAttr("partition", 3))),
		sumMetric("org.apache.kafka.consumer.fetch.manager.records.consumed.total", false, intPoint(300)),
		sumMetric("org.apache.kafka.producer.record.send.total", true, intPoint(7)),
		histogram,
	)
	points, err := Decode(data, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []Point{
		{Name: "org.apache.kafka.consumer.fetch.manager.records.lag.max", Kind: Gauge, Value: 12.5,
			Attrs: []Attr{{"partition", "3"}, {"topic", "t"}}},
		{Name: "org.apache.kafka.consumer.fetch.manager.records.consumed.total", Kind: Counter, Value: 300},
		{Name: "org.apache.kafka.producer.record.send.total", Kind: Counter, Delta: true, Value: 7},
	}
	if len(points) != len(want) {
		t.Fatalf("decoded %+v, want %+v", points, want)
	}
	for i, p := range points {
		w := want[i]
		if p.Name != w.Name || p.Kind != w.Kind || p.Delta != w.Delta || p.Value != w.Value || len(p.Attrs) != len(w.Attrs) {
			t.Errorf("point %d: %+v, want %+v", i, p, w)
			continue
		}
		for j := range p.Attrs {
			if p.Attrs[j] != w.Attrs[j] {
				t.Errorf("point %d: attributes %v, want %v", i, p.Attrs, w.Attrs)
			}
		}
	}
	if points, err := Decode(data, 2); err != nil || len(points) != 2 {
		t.Errorf("with a limit of 2: %d points, %v", len(points), err)
	}
	for name, bad := range map[string][]byte{
		"truncated":      data[:len(data)-3],
		"not protobuf":   []byte("{\"metrics\": []}"),
		"nameless gauge": metricsData(message(bytesField(metricGauge, bytesField(gaugeDataPoints, doublePoint(1))))),
	} {
		if _, err := Decode(bad, 100); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}
