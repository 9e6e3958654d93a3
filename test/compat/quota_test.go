package compat

import (
	"context"
	"crypto/rand"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClientQuotas: quotas set with Kafka's kafka-configs.sh (producer and
// consumer byte rates for every client id) hold a producer that sends as
// fast as it can to within 10% of its quota over 30 s, and then a consumer
// reading it back to within 10% of its own, with no errors: the broker
// answers throttle times, and the client waits them out. The quotas are
// described back as set.
func TestClientQuotas(t *testing.T) {
	t.Parallel()
	// Finer windows than Kafka's default 1 s track the rate more closely
	// over a short measure (Kafka allows only whole seconds).
	b := startBroker(t, "--quota-window-size", "200ms")
	const (
		produceRate = 1 << 20 // bytes a second
		fetchRate   = 2 << 20
		measure     = 30 * time.Second
		warmup      = 5 * time.Second
		valueSize   = 10 << 10
	)
	r := runKafkaTool(t, configTool, "--bootstrap-server", b.Addr, "--alter", "--add-config",
		"producer_byte_rate=1048576,consumer_byte_rate=2097152", "--entity-type", "clients", "--entity-default")
	wantCLI(t, r, true, "Completed updating default config for clients")
	wantCLI(t, runKafkaTool(t, configTool, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "clients", "--entity-default"),
		true, "producer_byte_rate=1048576.0", "consumer_byte_rate=2097152.0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(client(t, b.Addr))
	described, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(described) != 1 || len(described[0].Entity) != 1 || described[0].Entity[0].Type != "client-id" ||
		described[0].Entity[0].Name != nil || len(described[0].Values) != 2 {
		t.Fatalf("described %+v", described)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "quota"); err != nil {
		t.Fatal(err)
	}

	// The producer keeps 200 records buffered for the whole measure, in
	// batches of at most 64 KiB.
	prod := client(t, b.Addr, kgo.ClientID("quota-producer"), kgo.DefaultProduceTopic("quota"),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(200), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(64<<10))
	var acked, failed, ackedAtStart atomic.Int64
	// Random values, sent uncompressed: the quota counts the bytes sent.
	value := make([]byte, valueSize)
	rand.Read(value)
	// The first seconds are a new client's allowance (Kafka counts its
	// rate over at least the windows but one); the rate is measured after.
	begin := time.Now()
	var start time.Time
	for time.Since(begin) < warmup+measure {
		if start.IsZero() && time.Since(begin) >= warmup {
			start = time.Now()
			ackedAtStart.Store(acked.Load())
		}
		prod.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				return
			}
			acked.Add(int64(len(r.Value)))
		})
	}
	got := float64(acked.Load()-ackedAtStart.Load()) / time.Since(start).Seconds()
	if err := prod.Flush(ctx); err != nil || failed.Load() > 0 {
		t.Fatalf("producing: %v, %d records failed", err, failed.Load())
	}
	t.Logf("producer: %.0f B/s against a quota of %d (%.3f)", got, produceRate, got/produceRate)
	if math.Abs(got-produceRate)/produceRate > 0.10 {
		t.Errorf("the producer ran at %.0f B/s, quota %d", got, produceRate)
	}
	total := acked.Load()

	cons := client(t, b.Addr, kgo.ClientID("quota-consumer"), kgo.ConsumeTopics("quota"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var read int64
	start = time.Now()
	for read < total && time.Since(start) < measure/2 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consuming: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { read += int64(len(r.Value)) })
	}
	got = float64(read) / time.Since(start).Seconds()
	t.Logf("consumer: %.0f B/s against a quota of %d (%.3f)", got, fetchRate, got/fetchRate)
	if math.Abs(got-fetchRate)/fetchRate > 0.10 {
		t.Errorf("the consumer ran at %.0f B/s, quota %d", got, fetchRate)
	}
}
