package compat

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/test/librdkafkatest"
)

// TestRecordErrorsLibrdkafka: librdkafka (confluent-kafka) sends four
// records in one batch to a compacted topic, two without a key. The broker
// names those two in its answer (KIP-467), so librdkafka fails them with
// INVALID_RECORD, and the other two with its own
// _INVALID_DIFFERENT_RECORD (another record of the batch was invalid),
// instead of failing all four alike.
func TestRecordErrorsLibrdkafka(t *testing.T) {
	t.Parallel()
	python := librdkafkatest.Python(t)
	b := startBroker(t)
	compact := "compact"
	createTopic(t, b.Addr, "compacted", 1, map[string]*string{"cleanup.policy": &compact})
	py := fmt.Sprintf(`
import sys
from confluent_kafka import Producer
# One batch of exactly the four records: sent when the fourth is in (or
# after a long linger), not when the first finds the connection ready.
p = Producer({"bootstrap.servers": %q, "linger.ms": 10000, "batch.num.messages": 4,
              "enable.idempotence": False, "compression.type": "none", "retries": 0})
p.list_topics("compacted", timeout=30)
def report(i):
    def done(err, msg):
        print(i, "ok" if err is None else err.name() + ": " + err.str())
    return done
for i, key in enumerate([b"a", None, b"c", None]):
    p.produce("compacted", key=key, value=b"v%%d" %% i, partition=0, on_delivery=report(i))
p.flush(30)
`, b.Addr)
	r := run(90*time.Second, "", "", python, "-c", py)
	if r.err != nil {
		t.Fatalf("confluent-kafka: %v", r)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		i, report, _ := strings.Cut(line, " ")
		got[i] = report
	}
	for i, want := range map[string]string{"0": "_INVALID_DIFFERENT_RECORD", "1": "INVALID_RECORD: ", "2": "_INVALID_DIFFERENT_RECORD",
		"3": "INVALID_RECORD: "} {
		if !strings.HasPrefix(got[i], want) {
			t.Errorf("record %s: %q, want %s...", i, got[i], want)
		}
	}
	t.Logf("librdkafka's reports:\n%s", r.stdout)
}
