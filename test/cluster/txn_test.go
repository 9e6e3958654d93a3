package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The transaction protocols the broker can finalize: 1 is the older flow
// (AddPartitionsToTxn, then produce verified with the coordinator), 2 is
// KIP-890's (the partition leader adds the partition itself).
var txnVersions = []int16{1, 2}

// A transactional producer whose transactions span partitions led by all
// three brokers, its coordinator one of them: commits and aborts mixed, a
// read_committed consumer sees exactly the committed records, every
// transaction whole; read_uncommitted sees the aborted ones too; and no
// transaction is left open on any partition.
func TestClusterTxnSpansBrokers(t *testing.T) {
	for _, tv := range txnVersions {
		t.Run(fmt.Sprintf("transaction.version=%d", tv), func(t *testing.T) {
			c := startTxnCluster(t, tv)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const partitions = 6
			txnTopic(t, ctx, c, "span", partitions)
			txnStateTopic(t, ctx, c)
			leaders := map[int32]bool{}
			for p := range int32(partitions) {
				leaders[leaderOf(t, c, "span", p)] = true
			}
			if len(leaders) != 3 {
				t.Fatalf("span's partitions are led by %v, want all three brokers", leaders)
			}
			// The coordinator is broker 1; the producer knows only broker 0.
			id := keyLedBy(t, c, "__transaction_state", "span-txn", 1)
			cl := txnClient(t, c.Seeds()[:1], kgo.TransactionalID(id), kgo.DefaultProduceTopic("span"),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(20*time.Second))

			const txns, perPartition = 12, 3
			var committed, all []string
			for i := range txns {
				if err := cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				var vals []string
				for r := range perPartition {
					for p := range int32(partitions) {
						v := fmt.Sprintf("t%02d-p%d-r%d", i, p, r)
						vals = append(vals, v)
						cl.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(v)}, func(_ *kgo.Record, err error) {
							if err != nil {
								t.Errorf("produce %s: %v", v, err)
							}
						})
					}
				}
				if err := cl.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				commit := i%3 != 1
				if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
					t.Fatalf("ending transaction %d (commit %v): %v", i, commit, err)
				}
				all = append(all, vals...)
				if commit {
					committed = append(committed, vals...)
				}
			}
			if t.Failed() {
				return
			}
			checkStable(t, ctx, c.Seeds(), "span")
			got := readValues(t, ctx, c.Seeds(), "span", true, len(committed))
			expectExactly(t, "read_committed", got, committed)
			got = readValues(t, ctx, c.Seeds(), "span", false, len(all))
			expectExactly(t, "read_uncommitted", got, all)
			if d := describeTxn(t, ctx, c.Seeds(), id); d.Coordinator != 1 || d.State != "CompleteCommit" || len(d.Topics) != 0 {
				t.Fatalf("DescribeTransactions: coordinator %d, state %s, topics %v", d.Coordinator, d.State, d.Topics)
			}
		})
	}
}

// expectExactly checks that got holds each of want once, and nothing else.
func expectExactly(t *testing.T, what string, got map[string]int, want []string) {
	t.Helper()
	for _, v := range want {
		if got[v] != 1 {
			t.Errorf("%s: %s seen %d times, want once", what, v, got[v])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d distinct values, want %d", what, len(got), len(want))
	}
}
