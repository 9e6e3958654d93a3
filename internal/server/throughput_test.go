package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
)

// Loopback throughput with franz-go against an in-process broker, 100-byte
// records over 6 partitions, acks=all, default fsync policy. Run with
// -benchtime=1000000x for the 1M-record figure. Produce and consume run
// with the admin listener's metrics (the default) and without, in one run:
// what counting requests and bytes costs.

// withMetrics runs bench against a broker with the admin listener and
// one without.
func withMetrics(b *testing.B, bench func(b *testing.B, br *testutil.Broker)) {
	for _, on := range []bool{true, false} {
		b.Run(map[bool]string{true: "metrics", false: "no-metrics"}[on], func(b *testing.B) {
			bench(b, testutil.StartBroker(b, func(c *config.Broker) {
				if on {
					c.AdminListen = "127.0.0.1:0"
				}
			}))
		})
	}
}

func BenchmarkProduce100B(b *testing.B) { withMetrics(b, benchProduce) }

func benchProduce(b *testing.B, br *testutil.Broker) {
	createTopic(b, br.Addr, "bench", 6)
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	value := make([]byte, 100)
	b.SetBytes(100)
	b.ResetTimer()
	for range b.N {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkConsume100B(b *testing.B) {
	withMetrics(b, func(b *testing.B, br *testutil.Broker) { benchConsume(b, br) })
}

// benchConsume writes b.N 100-byte records to a new topic of 6 partitions
// and times a consumer with opts reading them all.
func benchConsume(b *testing.B, br *testutil.Broker, opts ...kgo.Opt) {
	createTopic(b, br.Addr, "bench", 6)
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	value := make([]byte, 100)
	for range b.N {
		cl.Produce(ctx, &kgo.Record{Value: value}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	cl.Close()
	b.SetBytes(100)
	b.ResetTimer()
	cons, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(br.Addr), kgo.ConsumeTopics("bench"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < b.N; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			b.Fatal(err)
		}
		got += fs.NumRecords()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func createTopic(t testing.TB, addr, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), partitions, 1, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// BenchmarkGroupConsume100B is BenchmarkConsume100B by a member of a
// consumer group, with the hand-off ledger (every fetch reported to the
// group coordinator) and without it: the ledger's cost on the fetch path.
func BenchmarkGroupConsume100B(b *testing.B) {
	for _, on := range []bool{true, false} {
		name := map[bool]string{true: "ledger", false: "no-ledger"}[on]
		b.Run(name, func(b *testing.B) {
			br := testutil.StartBroker(b, func(c *config.Broker) {
				c.HandoffLedger = on
				c.GroupInitialRebalanceDelay = 0
				c.AdminListen = "127.0.0.1:0" // the default: its counters see the hand-offs
			})
			benchConsume(b, br, kgo.ConsumerGroup("bench"))
		})
	}
}
