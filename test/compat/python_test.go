package compat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/test/grouptest"
)

// kafka-python (Debian's python3-kafka) against the real binary. Debian's
// package installs into the system interpreter, so the scripts run under
// /usr/bin/python3 whatever python3 comes first on PATH.

const systemPython = "/usr/bin/python3"

var pythonDir = filepath.Join("..", "python")

func needKafkaPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		missing(t, systemPython+" not found (install: apt-get install python3 python3-kafka)")
	}
	if r := run(30*time.Second, "", "", systemPython, "-c", "import kafka"); r.err != nil {
		missing(t, "kafka-python not importable by "+systemPython+" (install: apt-get install python3-kafka): "+
			strings.TrimSpace(tail(r.stderr, 300)))
	}
}

// TestKafkaPythonRoundTrip produces with KafkaProducer (acks=all, gzip) and
// reads back with an assign-style KafkaConsumer; franz-go reads the same
// records to cross-check offsets, keys and values.
func TestKafkaPythonRoundTrip(t *testing.T) {
	t.Parallel()
	needKafkaPython(t)
	b := startBroker(t, "--default-partitions", "3")
	const n = 500
	topic := "py-roundtrip"
	r := run(3*time.Minute, pythonDir, "", systemPython, "roundtrip.py", "--bootstrap", b.Addr, "--topic", topic,
		"-n", "500", "--compression", "gzip")
	if r.err != nil {
		t.Fatalf("roundtrip.py failed: %v", r)
	}
	h := parseHelper(t, r.stdout)
	acked := checkAcked(t, h, n)
	if h.consumed != n {
		t.Fatalf("kafka-python consumed %d records, want %d\n%v", h.consumed, n, r)
	}
	if d := sameRecs(h.records, acked); d != "" {
		t.Errorf("kafka-python consumed other records than it produced: %s", d)
	}
	if want := checksum(acked); h.sum != want {
		t.Errorf("checksum %s, want %s", h.sum, want)
	}
	// Cross-check with another client, and the stored codec.
	recs := readAll(t, b.Addr, topic)
	if d := sameRecs(asRecs(recs), acked); d != "" {
		t.Errorf("franz-go reads other records than kafka-python produced: %s", d)
	}
	// kafka-python sends a batch uncompressed when gzip would not shrink it.
	checkCodec(t, recs, 1, false)
}

// TestKafkaPythonAdmin runs KafkaAdminClient's create_topics, list_topics,
// describe_topics, describe_configs, create_partitions and delete_topics.
func TestKafkaPythonAdmin(t *testing.T) {
	t.Parallel()
	needKafkaPython(t)
	b := startBroker(t)
	r := run(3*time.Minute, pythonDir, "", systemPython, "admin.py", "--bootstrap", b.Addr, "--topic", "py-admin")
	checkSteps(t, r, []string{"create_topics", "list_topics", "describe_topics", "describe_configs",
		"create_partitions", "delete_topics"})
}

// checkSteps checks a helper's "STEP name OK|FAIL detail" lines, one
// subtest per expected step.
func checkSteps(t *testing.T, r result, steps []string) {
	t.Helper()
	got := map[string]string{}
	for line := range strings.Lines(r.stdout) {
		f := strings.SplitN(strings.TrimSpace(line), " ", 3)
		if len(f) >= 3 && f[0] == "STEP" {
			got[f[1]] = f[2]
		}
	}
	for _, s := range steps {
		t.Run(s, func(t *testing.T) {
			line, ok := got[s]
			switch {
			case !ok:
				t.Errorf("step %s did not run: %v", s, r)
			case strings.HasPrefix(line, "OK"):
				t.Log(line)
			default:
				t.Errorf("%s: %s", s, line)
			}
		})
	}
	if r.err != nil && !t.Failed() {
		t.Errorf("helper failed although every step passed: %v", r)
	}
	if t.Failed() {
		t.Logf("helper stderr:\n%s", grouptest.HeadLines(r.stderr, 60))
	}
}
