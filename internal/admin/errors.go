package admin

import (
	"reflect"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors of answers, counted by API and error code as Kafka's
// RequestMetrics ErrorsPerSec does: each error code an answer holds (its
// own, and each partition's, topic's or resource's) counts once. Answers
// without an error count nothing.

// errorKey names one counter of strand_request_errors_total.
type errorKey struct {
	api  int16
	code int16
}

// Answered counts a request of API key answered in d with body (nil for
// an acks=0 produce), its latency and the error codes it holds.
func (m *Metrics) Answered(key int16, d time.Duration, body kmsg.Response) {
	m.Request(key, d)
	if body == nil {
		return
	}
	eachErrorCode(body, func(code int16) {
		k := errorKey{key, code}
		c, ok := m.errorsBy.Load(k)
		if !ok {
			name := "UNKNOWN_" + strconv.Itoa(int(code))
			if e := kerr.ErrorForCode(code); e != nil {
				if ke, ok := e.(*kerr.Error); ok {
					name = ke.Message
				}
			}
			c, _ = m.errorsBy.LoadOrStore(k, m.errors.WithLabelValues(kmsg.NameForKey(key), name))
		}
		c.(prometheus.Counter).Inc()
	})
}

// eachErrorCode calls fn with each non-zero error code in an answer. The
// answers that carry many partitions on the hot path are walked by hand;
// the rest by their fields named ErrorCode.
func eachErrorCode(body kmsg.Response, fn func(int16)) {
	switch r := body.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					fn(p.ErrorCode)
				}
			}
		}
	case *kmsg.FetchResponse:
		if r.ErrorCode != 0 {
			fn(r.ErrorCode)
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					fn(p.ErrorCode)
				}
			}
		}
	default:
		walkErrorCodes(reflect.ValueOf(body), fn)
	}
}

func walkErrorCodes(v reflect.Value, fn func(int16)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			walkErrorCodes(v.Elem(), fn)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Struct && v.Type().Elem().Kind() != reflect.Pointer {
			return // bytes, strings, numbers
		}
		for i := range v.Len() {
			walkErrorCodes(v.Index(i), fn)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
				if code := int16(v.Field(i).Int()); code != 0 {
					fn(code)
				}
				continue
			}
			walkErrorCodes(v.Field(i), fn)
		}
	}
}
