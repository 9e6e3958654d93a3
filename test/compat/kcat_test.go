package compat

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kcat (librdkafka 2.x) against the real binary.

const kcatTimeout = 20 * time.Second

func needKcat(t *testing.T) string {
	return needTool(t, "kcat", "apt-get install kcat")
}

// kcatLines is n keyed input lines for kcat -K: ("key:value").
func kcatLines(n int, tag string) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("key-%d:%s-value-%d-%s", i%5, tag, i, strings.Repeat("x", i%40))
	}
	return lines
}

func joinLines(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// kcatConsume reads a topic (or one partition, part >= 0) from the
// beginning to its end, exiting there (-e), in format f.
func kcatConsume(t *testing.T, kcat, addr, topic string, part int, f string) string {
	t.Helper()
	args := []string{"-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-f", f}
	if part >= 0 {
		args = append(args, "-p", fmt.Sprint(part))
	}
	r := run(kcatTimeout, "", "", kcat, args...)
	if r.err != nil {
		hint := ""
		if strings.Contains(r.stderr, "invalid MessageSetSize -1") {
			// Kafka always sends an empty record set, never a null one.
			hint = "\nThe broker answered a fetch with a null record set (size -1) for a partition with " +
				"nothing to return; librdkafka rejects the whole response, so it never sees the end of the partition."
		}
		t.Fatalf("kcat consume did not reach the end of %s: %v%s", topic, r, hint)
	}
	return r.stdout
}

func TestKcatMetadata(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	b := startBroker(t, "--default-partitions", "3")
	mustRun(t, kcatTimeout, "", "a:1\n", kcat, "-P", "-b", b.Addr, "-t", "kcat-meta", "-K:")

	r := mustRun(t, kcatTimeout, "", "", kcat, "-L", "-J", "-b", b.Addr)
	var md struct {
		ControllerID int32 `json:"controllerid"`
		Brokers      []struct {
			ID   int32  `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				Leader    int32 `json:"leader"`
			} `json:"partitions"`
			Err *string `json:"error"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &md); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, r.stdout)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 0 || md.Brokers[0].Name != b.Addr {
		t.Errorf("brokers %+v, want one: 0 at %s", md.Brokers, b.Addr)
	}
	if md.ControllerID != 0 {
		t.Errorf("controller %d, want 0", md.ControllerID)
	}
	found := false
	for _, tp := range md.Topics {
		if tp.Topic != "kcat-meta" {
			continue
		}
		found = true
		if tp.Err != nil {
			t.Errorf("topic error %s", *tp.Err)
		}
		if len(tp.Partitions) != 3 {
			t.Errorf("kcat-meta has %d partitions, want 3", len(tp.Partitions))
		}
		for _, p := range tp.Partitions {
			if p.Leader != 0 {
				t.Errorf("partition %d leader %d, want 0", p.Partition, p.Leader)
			}
		}
	}
	if !found {
		t.Errorf("kcat-meta not listed: %s", r.stdout)
	}

	// The human-readable listing too.
	r = mustRun(t, kcatTimeout, "", "", kcat, "-L", "-b", b.Addr, "-t", "kcat-meta")
	for _, want := range []string{" 1 brokers:", "broker 0 at " + b.Addr, `topic "kcat-meta" with 3 partitions:`,
		"partition 2, leader 0, replicas: 0, isrs: 0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kcat -L output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestKcatCodecs produces keyed messages with each codec librdkafka has and
// reads them back exactly; franz-go confirms the batches are stored with the
// producer's codec (Strand stores batches as they arrive).
func TestKcatCodecs(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	b := startBroker(t)
	codecs := []struct {
		name string
		attr uint8 // the batch attribute's compression bits
	}{{"none", 0}, {"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			topic := "kcat-" + c.name
			in := kcatLines(300, c.name)
			mustRun(t, kcatTimeout, "", joinLines(in), kcat, "-P", "-b", b.Addr, "-t", topic, "-K:",
				"-X", "compression.codec="+c.name, "-X", "linger.ms=20")
			recs := readAll(t, b.Addr, topic)
			if len(recs) != len(in) {
				t.Fatalf("franz-go read %d records, want %d", len(recs), len(in))
			}
			if checkCodec(t, recs, c.attr, false) == 0 && c.name == "lz4" {
				// librdkafka (rdkafka_feature.c) counts the broker as
				// supporting LZ4 only when it advertises FindCoordinator
				// (key 10); otherwise it logs "Broker does not support
				// compression type lz4: not compressing batch".
				t.Errorf("librdkafka sent lz4 batches uncompressed: it enables lz4 only for brokers that advertise FindCoordinator (API key 10)")
			}
			for i, r := range recs {
				if want := in[i]; string(r.Key)+":"+string(r.Value) != want || r.Offset != int64(i) {
					t.Fatalf("franz-go record %d at offset %d: %s:%s, want %s", i, r.Offset, r.Key, r.Value, want)
				}
			}
			got := kcatConsume(t, kcat, b.Addr, topic, -1, "%k:%s\n")
			if got != joinLines(in) {
				t.Errorf("consumed differs from produced:\n%s", firstLineDiff(got, joinLines(in)))
			}
		})
	}
}

// TestKcatPartitions produces to and consumes from chosen partitions, and
// checks librdkafka's keyed partitioning keeps each key on one partition.
func TestKcatPartitions(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	b := startBroker(t, "--default-partitions", "3")
	topic := "kcat-parts"
	p0 := kcatLines(40, "p0")
	p2 := kcatLines(25, "p2")
	mustRun(t, kcatTimeout, "", joinLines(p0), kcat, "-P", "-b", b.Addr, "-t", topic, "-K:", "-p", "0")
	mustRun(t, kcatTimeout, "", joinLines(p2), kcat, "-P", "-b", b.Addr, "-t", topic, "-K:", "-p", "2")

	// Keyed, partition chosen by librdkafka: one partition per key, read
	// back by franz-go.
	keyed := "kcat-keyed"
	in := kcatLines(200, "keyed")
	mustRun(t, kcatTimeout, "", joinLines(in), kcat, "-P", "-b", b.Addr, "-t", keyed, "-K:")
	parts := map[string]int32{}
	recs := readAll(t, b.Addr, keyed)
	for _, r := range recs {
		if prev, ok := parts[string(r.Key)]; ok && prev != r.Partition {
			t.Errorf("key %s in partitions %d and %d", r.Key, prev, r.Partition)
		}
		parts[string(r.Key)] = r.Partition
	}
	if len(recs) != len(in) {
		t.Errorf("read %d keyed records, want %d", len(recs), len(in))
	}

	// What kcat -p produced, as franz-go reads it.
	var stored []string
	for _, r := range readAll(t, b.Addr, topic) {
		stored = append(stored, fmt.Sprintf("%d:%d:%s:%s", r.Partition, r.Offset, r.Key, r.Value))
	}
	var want []string
	for i, l := range p0 {
		want = append(want, fmt.Sprintf("0:%d:%s", i, l))
	}
	for i, l := range p2 {
		want = append(want, fmt.Sprintf("2:%d:%s", i, l))
	}
	slices.Sort(want)
	slices.Sort(stored)
	if !slices.Equal(stored, want) {
		t.Errorf("stored by partition:\n%s", firstLineDiff(strings.Join(stored, "\n"), strings.Join(want, "\n")))
	}

	if got := kcatConsume(t, kcat, b.Addr, topic, 0, "%k:%s\n"); got != joinLines(p0) {
		t.Errorf("partition 0:\n%s", firstLineDiff(got, joinLines(p0)))
	}
	if got := kcatConsume(t, kcat, b.Addr, topic, 2, "%k:%s\n"); got != joinLines(p2) {
		t.Errorf("partition 2:\n%s", firstLineDiff(got, joinLines(p2)))
	}
	if got := kcatConsume(t, kcat, b.Addr, topic, 1, "%k:%s\n"); got != "" {
		t.Errorf("partition 1 should be empty, read:\n%s", tail(got, 2000))
	}
	// The whole topic, with partitions and offsets.
	got := strings.Split(strings.TrimSuffix(kcatConsume(t, kcat, b.Addr, topic, -1, "%p:%o:%k:%s\n"), "\n"), "\n")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("whole topic:\n%s", firstLineDiff(strings.Join(got, "\n"), strings.Join(want, "\n")))
	}
}

// firstLineDiff describes where two texts first differ, line by line.
func firstLineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("got %d lines, want %d", len(g), len(w))
}

// checkCodec checks records were stored in batches of codec attr (0 none,
// 1 gzip, 2 snappy, 3 lz4, 4 zstd). Unless strict, batches may also be
// uncompressed: librdkafka and kafka-python send a batch as is when
// compressing would not shrink it; but some batch must be compressed. It
// returns how many records were stored compressed with attr.
func checkCodec(t *testing.T, recs []*kgo.Record, attr uint8, strict bool) (compressed int) {
	t.Helper()
	for _, r := range recs {
		switch got := r.Attrs.CompressionType(); {
		case got == attr:
			compressed++
		case got == 0 && !strict:
		default:
			t.Fatalf("record %d/%d stored with codec %d, want %d", r.Partition, r.Offset, got, attr)
		}
	}
	if compressed == 0 && len(recs) > 0 {
		t.Errorf("no record stored with codec %d", attr)
	}
	return compressed
}
