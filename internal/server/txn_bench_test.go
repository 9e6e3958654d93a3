package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// Transactions with franz-go against an in-process broker: one operation is
// one transaction of recordsPerTxn 100-byte records spread over 6
// partitions, committed, at fsync on every acknowledged write. The peer in
// the same run is BenchmarkTxnPeerIdempotent: the same records in the same
// groups from an idempotent (non-transactional) producer, flushed per group,
// so the ratio of the two is what the transaction itself costs (partitions
// added, the prepare and complete records, one marker per partition).
//
//	go test -run '^$' -bench 'Txn' -benchtime=3s ./internal/server/

func benchTxnRecords() []int { return []int{10, 100, 1000} }

func BenchmarkTxnCommit(b *testing.B) {
	for _, n := range benchTxnRecords() {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			br := testutil.StartBroker(b, nil)
			createTopic(b, br.Addr, "bench", 6)
			cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.DefaultProduceTopic("bench"),
				kgo.TransactionalID("bench-txn"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			runTxnBench(b, cl, n, true)
		})
	}
}

func BenchmarkTxnPeerIdempotent(b *testing.B) {
	for _, n := range benchTxnRecords() {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			br := testutil.StartBroker(b, nil)
			createTopic(b, br.Addr, "bench", 6)
			cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.DefaultProduceTopic("bench"),
				kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			runTxnBench(b, cl, n, false)
		})
	}
}

func runTxnBench(b *testing.B, cl *kgo.Client, n int, txn bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := make([]byte, 100)
	b.SetBytes(int64(100 * n))
	b.ResetTimer()
	for range b.N {
		if txn {
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
		}
		for range n {
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if txn {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "txn/s")
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
}
