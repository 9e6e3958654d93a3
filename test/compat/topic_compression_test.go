package compat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strandlog/strand/test/librdkafkatest"
)

// storedCodecs fetches a partition from offset 0 and returns the codec of
// each batch as stored (the attributes' low bits), in order.
func storedCodecs(t *testing.T, addr, topic string) []int16 {
	t.Helper()
	// Fetch v12 names topics by name (v13 by id).
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxWaitMillis, req.MaxBytes = 100, 10<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 10 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var codecs []int16
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch of %s: %+v", topic, resp)
	}
	data := resp.Topics[0].Partitions[0].RecordBatches
	for len(data) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(data); err != nil {
			t.Fatal(err)
		}
		codecs = append(codecs, b.Attributes&0x7)
		data = data[12+int(b.Length):]
	}
	return codecs
}

// TestTopicCompressionLibrdkafka: librdkafka (confluent-kafka) produces
// lz4 batches to topics whose compression.type is zstd, uncompressed and
// lz4. The zstd and uncompressed topics store every batch in their codec,
// recompressed on the way in, the lz4 one as sent; librdkafka consumes
// every record back from each, in order.
func TestTopicCompressionLibrdkafka(t *testing.T) {
	t.Parallel()
	python := librdkafkatest.Python(t)
	b := startBroker(t)
	want := map[string]int16{"stored-zstd": 4, "stored-uncompressed": 0, "stored-lz4": 3}
	for topic, codec := range map[string]string{"stored-zstd": "zstd", "stored-uncompressed": "uncompressed", "stored-lz4": "lz4"} {
		createTopic(t, b.Addr, topic, 1, map[string]*string{"compression.type": &codec})
	}
	py := fmt.Sprintf(`
from confluent_kafka import Producer, Consumer, TopicPartition
topics = ["stored-zstd", "stored-uncompressed", "stored-lz4"]
p = Producer({"bootstrap.servers": %[1]q, "compression.type": "lz4", "linger.ms": 20, "batch.num.messages": 50})
for t in topics:
    for i in range(300):
        p.produce(t, key=b"k%%d" %% i, value=(b"value-%%d-" %% i) * 20, partition=0)
if p.flush(30) != 0:
    raise SystemExit("not all delivered")
for t in topics:
    c = Consumer({"bootstrap.servers": %[1]q, "group.id": "check-" + t, "enable.auto.commit": False})
    c.assign([TopicPartition(t, 0, 0)])
    got = []
    while len(got) < 300:
        m = c.poll(10)
        if m is None:
            raise SystemExit("%%s: nothing after %%d records" %% (t, len(got)))
        if m.error():
            raise SystemExit("%%s: %%s" %% (t, m.error()))
        got.append((m.offset(), m.key(), m.value()))
    c.close()
    for i, (off, k, v) in enumerate(got):
        if off != i or k != b"k%%d" %% i or v != (b"value-%%d-" %% i) * 20:
            raise SystemExit("%%s: record %%d is %%r" %% (t, i, (off, k, v[:20])))
    print(t, "ok")
`, b.Addr)
	if r := run(90*time.Second, "", "", python, "-c", py); r.err != nil || strings.Count(r.stdout, " ok") != 3 {
		t.Fatalf("confluent-kafka: %v", r)
	}
	for topic, codec := range want {
		codecs := storedCodecs(t, b.Addr, topic)
		if len(codecs) < 2 {
			t.Errorf("%s: %d batches stored", topic, len(codecs))
		}
		for i, c := range codecs {
			if c != codec {
				t.Errorf("%s: batch %d stored with codec %d, want %d", topic, i, c, codec)
			}
		}
	}
}
