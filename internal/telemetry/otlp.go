package telemetry

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Kind is how a pushed metric is exported.
type Kind uint8

const (
	Gauge   Kind = iota // a value that goes up and down (OTLP gauges and non-monotonic sums)
	Counter             // a total that only grows (OTLP monotonic sums)
)

// Attr is one attribute of a data point, its value as text.
type Attr struct{ Key, Value string }

// Point is one value a client pushed: a data point of an OTLP gauge or
// sum, with its attributes sorted by key.
type Point struct {
	Name  string
	Kind  Kind
	Delta bool // a monotonic sum's increase since the client's last push
	Value float64
	Attrs []Attr
}

// series names the point within its client instance: its name and
// attributes.
func (p Point) series() string {
	var b strings.Builder
	b.WriteString(p.Name)
	for _, a := range p.Attrs {
		b.WriteByte(0)
		b.WriteString(a.Key)
		b.WriteByte(0)
		b.WriteString(a.Value)
	}
	return b.String()
}

// ErrMalformed marks a payload that is not OTLP metrics data (Kafka
// answers INVALID_RECORD, which tells the client to stop pushing).
var ErrMalformed = errors.New("telemetry: malformed OTLP metrics")

// The OTLP field numbers decoded (opentelemetry-proto's metrics/v1 and
// common/v1 schemas); everything else is skipped.
const (
	metricsDataResourceMetrics = 1
	resourceMetricsScope       = 2
	scopeMetricsMetrics        = 2
	metricName                 = 1
	metricGauge                = 5
	metricSum                  = 7
	gaugeDataPoints            = 1
	sumDataPoints              = 1
	sumTemporality             = 2
	sumMonotonic               = 3
	pointAsDouble              = 4
	pointAsInt                 = 6
	pointAttributes            = 7
	keyValueKey                = 1
	keyValueValue              = 2
	anyString                  = 1
	anyBool                    = 2
	anyInt                     = 3
	anyDouble                  = 4

	temporalityDelta = 1
)

// Decode reads an OTLP MetricsData message and returns its gauge and sum
// data points; histograms and summaries, which Kafka's clients do not
// push, are skipped. At most limit points are returned.
func Decode(data []byte, limit int) ([]Point, error) {
	var out []Point
	err := fields(data, func(num protowire.Number, v []byte) error {
		if num != metricsDataResourceMetrics {
			return nil
		}
		return fields(v, func(num protowire.Number, v []byte) error {
			if num != resourceMetricsScope {
				return nil
			}
			return fields(v, func(num protowire.Number, v []byte) error {
				if num != scopeMetricsMetrics {
					return nil
				}
				var err error
				out, err = decodeMetric(v, out, limit)
				return err
			})
		})
	})
	return out, err
}

func decodeMetric(data []byte, out []Point, limit int) ([]Point, error) {
	var name string
	var gauge, sum []byte
	var seen bool
	err := fields(data, func(num protowire.Number, v []byte) error {
		switch num {
		case metricName:
			name = string(v)
		case metricGauge:
			gauge, seen = v, true
		case metricSum:
			sum, seen = v, true
		}
		return nil
	})
	if err != nil || !seen {
		return out, err
	}
	if name == "" {
		return out, fmt.Errorf("%w: a metric without a name", ErrMalformed)
	}
	kind, pointsField, body := Gauge, protowire.Number(gaugeDataPoints), gauge
	var delta bool
	if sum != nil {
		pointsField, body = sumDataPoints, sum
		if err := scalars(sum, func(num protowire.Number, x uint64) {
			switch num {
			case sumTemporality:
				delta = x == temporalityDelta
			case sumMonotonic:
				if x != 0 {
					kind = Counter
				}
			}
		}); err != nil {
			return out, err
		}
	}
	err = fields(body, func(num protowire.Number, v []byte) error {
		if num != pointsField || len(out) >= limit {
			return nil
		}
		p, err := decodePoint(v)
		if err != nil {
			return err
		}
		p.Name, p.Kind, p.Delta = name, kind, delta && kind == Counter
		out = append(out, p)
		return nil
	})
	return out, err
}

func decodePoint(data []byte) (Point, error) {
	var p Point
	err := fields(data, func(num protowire.Number, v []byte) error {
		if num != pointAttributes {
			return nil
		}
		a, err := decodeAttr(v)
		if err == nil && a.Key != "" {
			p.Attrs = append(p.Attrs, a)
		}
		return err
	})
	if err != nil {
		return p, err
	}
	err = scalars(data, func(num protowire.Number, x uint64) {
		switch num {
		case pointAsDouble:
			p.Value = math.Float64frombits(x)
		case pointAsInt:
			p.Value = float64(int64(x))
		}
	})
	slices.SortFunc(p.Attrs, func(a, b Attr) int { return strings.Compare(a.Key, b.Key) })
	p.Attrs = slices.CompactFunc(p.Attrs, func(a, b Attr) bool { return a.Key == b.Key })
	return p, err
}

func decodeAttr(data []byte) (Attr, error) {
	var a Attr
	err := fields(data, func(num protowire.Number, v []byte) error {
		switch num {
		case keyValueKey:
			a.Key = string(v)
		case keyValueValue:
			if err := fields(v, func(num protowire.Number, v []byte) error {
				if num == anyString {
					a.Value = string(v)
				}
				return nil
			}); err != nil {
				return err
			}
			return scalars(v, func(num protowire.Number, x uint64) {
				switch num {
				case anyBool:
					a.Value = strconv.FormatBool(x != 0)
				case anyInt:
					a.Value = strconv.FormatInt(int64(x), 10)
				case anyDouble:
					a.Value = strconv.FormatFloat(math.Float64frombits(x), 'g', -1, 64)
				}
			})
		}
		return nil
	})
	return a, err
}

// fields calls fn with each length-delimited field of a message, and
// checks that the whole message parses.
func fields(data []byte, fn func(protowire.Number, []byte) error) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		data = data[n:]
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
			}
			if err := fn(num, v); err != nil {
				return err
			}
			data = data[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, data)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		data = data[n:]
	}
	return nil
}

// scalars calls fn with each varint and fixed64 field of a message.
func scalars(data []byte, fn func(protowire.Number, uint64)) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		data = data[n:]
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(data)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(data)
		default:
			n = protowire.ConsumeFieldValue(num, typ, data)
		}
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		if typ == protowire.VarintType || typ == protowire.Fixed64Type {
			fn(num, x)
		}
		data = data[n:]
	}
	return nil
}
