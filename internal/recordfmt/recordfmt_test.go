package recordfmt

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var sample = &kgo.Record{Topic: "orders", Partition: 2, Offset: 41, LeaderEpoch: 3, Key: []byte("k1"), Value: []byte("v1"),
	Headers:   []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}, {Key: "bin", Value: []byte{0xff, 0x00}}},
	Timestamp: time.UnixMilli(1764590400123)}

func TestFormat(t *testing.T) {
	for format, want := range map[string]string{
		`%k=%v\n`:                     "k1=v1\n",
		`%t/%p@%o %T %l\t%K %V %S %%`: "orders/2@41 1764590400123 3\t2 2 2 %",
		`%d`:                          "2025-12-01T12:00:00.123Z",
		`%s|%h`:                       "v1|trace=abc,bin=\xff\x00",
	} {
		f, err := Parse(format)
		if err != nil {
			t.Fatalf("%q: %v", format, err)
		}
		if got := string(f.Append(nil, sample)); got != want {
			t.Errorf("%q: %q, want %q", format, got, want)
		}
	}
	f, _ := Parse(`%K %V`)
	if got := string(f.Append(nil, &kgo.Record{})); got != "-1 -1" {
		t.Errorf("lengths of a null key and value: %q", got)
	}
	for _, bad := range []string{`%x`, `%`, `\q`, `a\`} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestJSON(t *testing.T) {
	f, _ := Parse("json")
	out := f.Append(nil, sample)
	if !strings.HasSuffix(string(out), "}\n") {
		t.Fatalf("not a line: %q", out)
	}
	var r Record
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if r.Topic != "orders" || r.Partition != 2 || r.Offset != 41 || r.Timestamp != 1764590400123 || *r.Key != "k1" || *r.Value != "v1" ||
		len(r.Headers) != 2 || *r.Headers[0].Value != "abc" || r.Headers[1].Value != nil || *r.Headers[1].ValueBase64 != "/wA=" {
		t.Fatalf("%s", out)
	}
	out = f.Append(nil, &kgo.Record{Value: []byte{0xfe}})
	if strings.Contains(string(out), `"key"`) || !strings.Contains(string(out), `"value_base64":"/g=="`) {
		t.Fatalf("a null key and a binary value: %s", out)
	}
}

func TestInput(t *testing.T) {
	in, err := NewInput(strings.NewReader("a:1\nb:2:3\nnokey\n\nlast:x"), "\n", ":", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	type kv struct {
		key   *string
		value string
	}
	var got []kv
	for {
		k, v, ok := in.Next()
		if !ok {
			break
		}
		r := kv{value: string(v)}
		if k != nil {
			s := string(k)
			r.key = &s
		}
		got = append(got, r)
	}
	if in.Err() != nil {
		t.Fatal(in.Err())
	}
	want := []string{"a=1", "b=2:3", "<nil>=nokey", "<nil>=", "last=x"}
	if len(got) != len(want) {
		t.Fatalf("%d records: %v", len(got), got)
	}
	for i, r := range got {
		k := "<nil>"
		if r.key != nil {
			k = *r.key
		}
		if k+"="+r.value != want[i] {
			t.Errorf("record %d: %s=%s, want %s", i, k, r.value, want[i])
		}
	}

	in, _ = NewInput(strings.NewReader("one||two"), "||", "", 1<<20)
	if _, v, _ := in.Next(); string(v) != "one" {
		t.Fatalf("first record %q", v)
	}
	in, _ = NewInput(strings.NewReader(strings.Repeat("x", 100)+"\n"), "\n", "", 10)
	if _, _, ok := in.Next(); ok || in.Err() == nil {
		t.Fatalf("a record over the limit was read")
	}
}

func TestUnescape(t *testing.T) {
	if s, err := Unescape(`a\tb\n\\`); err != nil || s != "a\tb\n\\" {
		t.Fatalf("%q %v", s, err)
	}
	if _, err := Unescape(`\x`); err == nil {
		t.Fatal("an unknown escape")
	}
}
