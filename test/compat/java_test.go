package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/test/javatest"
)

// The official Java client (org.apache.kafka:kafka-clients) against the real
// binary, through the Maven project in test/java (test/javatest builds it).

// runJava runs the helper's main class with args.
func runJava(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	java, cp := javatest.Helper(t)
	// C1 only and the serial collector: these runs are short.
	jargs := append([]string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp, "strandlog.compat.Compat"}, args...)
	return run(timeout, "", "", java, jargs...)
}

// TestJavaProducerDefaults sends keyed records with a KafkaProducer left at
// its defaults (so idempotent: InitProducerId, sequence numbers, acks=all,
// up to 5 requests in flight) and checks what was acknowledged is stored.
func TestJavaProducerDefaults(t *testing.T) {
	t.Parallel()
	javatest.Helper(t) // build (or skip) before starting a broker
	b := startBroker(t, "--default-partitions", "3")
	const n = 400
	topic := "java-defaults"
	r := runJava(t, 3*time.Minute, "produce", b.Addr, topic, fmt.Sprint(n))
	if r.err != nil {
		t.Fatalf("Java producer failed: %v", r)
	}
	acked := checkAcked(t, parseHelper(t, r.stdout), n)
	recs := readAll(t, b.Addr, topic)
	if d := sameRecs(asRecs(recs), acked); d != "" {
		t.Errorf("stored records differ from those the Java producer had acknowledged: %s", d)
	}
	for _, rr := range recs {
		if rr.ProducerID < 0 {
			t.Fatalf("record %d/%d has no producer id: the default (idempotent) producer did not get one", rr.Partition, rr.Offset)
		}
	}
}

// TestJavaProducerCodecs produces with each compression.type the Java client
// has, all else default.
func TestJavaProducerCodecs(t *testing.T) {
	t.Parallel()
	javatest.Helper(t) // build (or skip) before starting a broker
	b := startBroker(t, "--default-partitions", "2")
	for _, c := range []struct {
		name string
		attr uint8
	}{{"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}} {
		t.Run(c.name, func(t *testing.T) {
			const n = 200
			topic := "java-" + c.name
			r := runJava(t, 3*time.Minute, "produce", b.Addr, topic, fmt.Sprint(n), "compression.type="+c.name, "linger.ms=20")
			if r.err != nil {
				t.Fatalf("Java producer failed: %v", r)
			}
			acked := checkAcked(t, parseHelper(t, r.stdout), n)
			recs := readAll(t, b.Addr, topic)
			if d := sameRecs(asRecs(recs), acked); d != "" {
				t.Errorf("stored records differ from those acknowledged: %s", d)
			}
			checkCodec(t, recs, c.attr, true)
		})
	}
}

// TestJavaConsumer reads, with KafkaConsumer assign + seekToBeginning,
// records franz-go produced to three partitions.
func TestJavaConsumer(t *testing.T) {
	t.Parallel()
	javatest.Helper(t) // build (or skip) before starting a broker
	b := startBroker(t, "--default-partitions", "3")
	const n = 300
	topic := "java-consume"
	createTopic(t, b.Addr, topic, 3, nil)
	cl := client(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Key: []byte(helperKey(i)), Value: []byte(helperValue(i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want := asRecs(rs)
	r := runJava(t, 3*time.Minute, "consume", b.Addr, topic, fmt.Sprint(n))
	if r.err != nil {
		t.Fatalf("Java consumer failed: %v", r)
	}
	h := parseHelper(t, r.stdout)
	if h.consumed != n {
		t.Fatalf("Java consumed %d records, want %d", h.consumed, n)
	}
	if d := sameRecs(h.records, want); d != "" {
		t.Errorf("Java read other records than franz-go produced: %s", d)
	}
	if s := checksum(want); h.sum != s {
		t.Errorf("checksum %s, want %s", h.sum, s)
	}
}

// TestJavaAdmin runs the AdminClient calls of Compat.admin, one subtest per
// call: describeCluster, createTopics (with configs, and again for
// TopicExistsException), listTopics, describeTopics, describeConfigs,
// incrementalAlterConfigs, createPartitions, deleteRecords (after producing
// ten records), listOffsets and deleteTopics.
func TestJavaAdmin(t *testing.T) {
	t.Parallel()
	javatest.Helper(t) // build (or skip) before starting a broker
	b := startBroker(t)
	r := runJava(t, 4*time.Minute, "admin", b.Addr, "java-admin")
	checkSteps(t, r, []string{"describeCluster", "createTopics", "createTopicsDuplicate", "listTopics",
		"describeTopics", "describeConfigs", "incrementalAlterConfigs", "createPartitions", "produceForDelete",
		"deleteRecords", "listOffsets", "deleteTopics"})
}
