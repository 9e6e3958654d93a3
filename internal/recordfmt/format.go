package recordfmt

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Formatter writes a record in a format.
type Formatter struct {
	parts []part
	json  bool
}

// part is a piece of a format: literal text, or a field (a verb).
type part struct {
	text string
	verb byte
}

// Verbs are the fields a format string may name, after %.
var Verbs = map[byte]string{
	't': "topic", 'p': "partition", 'o': "offset", 'k': "key", 'v': "value", 's': "value",
	'K': "key length (-1 for a null key)", 'V': "value length (-1 for a null value)", 'S': "value length",
	'h': "headers, as k=v separated by commas", 'T': "timestamp in milliseconds since 1970",
	'd': "timestamp, RFC 3339", 'l': "leader epoch", 'c': "delivery count (a share group's; 0 otherwise)",
}

// Parse reads a format: "json" is a JSON object per record and line;
// anything else is text with %-verbs (Verbs, and %% for a percent sign)
// and the escapes \n, \t, \r, \0 and \\.
func Parse(format string) (*Formatter, error) {
	if format == "json" {
		return &Formatter{json: true}, nil
	}
	f := &Formatter{}
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			f.parts = append(f.parts, part{text: string(lit)})
			lit = nil
		}
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch c {
		case '\\':
			e, err := escaped(format, i)
			if err != nil {
				return nil, err
			}
			lit = append(lit, e)
			i++
		case '%':
			if i+1 == len(format) {
				return nil, fmt.Errorf("format %q ends with %%", format)
			}
			i++
			n := format[i]
			if n == '%' {
				lit = append(lit, '%')
				continue
			}
			if _, ok := Verbs[n]; !ok {
				return nil, fmt.Errorf("format %q: unknown field %%%c", format, n)
			}
			flush()
			f.parts = append(f.parts, part{verb: n})
		default:
			lit = append(lit, c)
		}
	}
	flush()
	return f, nil
}

var escapes = map[byte]byte{'n': '\n', 't': '\t', 'r': '\r', '0': 0, '\\': '\\'}

// escaped is the byte the escape at s[i], a backslash, stands for.
func escaped(s string, i int) (byte, error) {
	if i+1 == len(s) {
		return 0, fmt.Errorf("%q ends with \\", s)
	}
	e, ok := escapes[s[i+1]]
	if !ok {
		return 0, fmt.Errorf("%q: unknown escape \\%c", s, s[i+1])
	}
	return e, nil
}

// Append appends r as the format says.
func (f *Formatter) Append(dst []byte, r *kgo.Record) []byte {
	if f.json {
		b, _ := json.Marshal(jsonOf(r)) // the fields are strings and numbers: it cannot fail
		return append(append(dst, b...), '\n')
	}
	for _, p := range f.parts {
		if p.verb == 0 {
			dst = append(dst, p.text...)
			continue
		}
		dst = appendField(dst, p.verb, r)
	}
	return dst
}

func appendField(dst []byte, verb byte, r *kgo.Record) []byte {
	switch verb {
	case 't':
		return append(dst, r.Topic...)
	case 'p':
		return strconv.AppendInt(dst, int64(r.Partition), 10)
	case 'o':
		return strconv.AppendInt(dst, r.Offset, 10)
	case 'k':
		return append(dst, r.Key...)
	case 'v', 's':
		return append(dst, r.Value...)
	case 'K':
		return strconv.AppendInt(dst, length(r.Key), 10)
	case 'V', 'S':
		return strconv.AppendInt(dst, length(r.Value), 10)
	case 'h':
		for i, h := range r.Headers {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(append(append(dst, h.Key...), '='), h.Value...)
		}
		return dst
	case 'T':
		return strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
	case 'd':
		return r.Timestamp.UTC().AppendFormat(dst, time.RFC3339Nano)
	case 'l':
		return strconv.AppendInt(dst, int64(r.LeaderEpoch), 10)
	case 'c':
		return strconv.AppendInt(dst, int64(r.DeliveryCount()), 10)
	}
	return dst
}

// length is a key's or value's length, -1 when it is null.
func length(b []byte) int64 {
	if b == nil {
		return -1
	}
	return int64(len(b))
}

// Record is a record as the JSON format writes it. A key, value or
// header value that is not UTF-8 text is given in base64, in the field
// of the same name with "_base64" after it; a null key or value is
// absent.
type Record struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	Timestamp   int64  `json:"timestamp"`
	LeaderEpoch int32  `json:"leader_epoch"`
	// DeliveryCount is a share group's delivery of the record (1 the
	// first); absent otherwise.
	DeliveryCount int32    `json:"delivery_count,omitempty"`
	Key           *string  `json:"key,omitempty"`
	KeyBase64     *string  `json:"key_base64,omitempty"`
	Value         *string  `json:"value,omitempty"`
	ValueBase64   *string  `json:"value_base64,omitempty"`
	Headers       []Header `json:"headers"`
}

// Header is a record header in the JSON format.
type Header struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

func jsonOf(r *kgo.Record) Record {
	out := Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(),
		LeaderEpoch: r.LeaderEpoch, DeliveryCount: r.DeliveryCount(), Headers: make([]Header, len(r.Headers))}
	out.Key, out.KeyBase64 = textOrBase64(r.Key)
	out.Value, out.ValueBase64 = textOrBase64(r.Value)
	for i, h := range r.Headers {
		out.Headers[i].Key = h.Key
		out.Headers[i].Value, out.Headers[i].ValueBase64 = textOrBase64(h.Value)
	}
	return out
}

// textOrBase64 gives b as text when it is UTF-8, else in base64; neither
// when it is null.
func textOrBase64(b []byte) (text, b64 *string) {
	if b == nil {
		return nil, nil
	}
	s := string(b)
	if utf8.ValidString(s) {
		return &s, nil
	}
	e := base64.StdEncoding.EncodeToString(b)
	return nil, &e
}
