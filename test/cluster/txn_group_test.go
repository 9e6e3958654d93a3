package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Consume-transform-produce with the offsets in the transaction
// (GroupTransactSession), the group's coordinator, the transaction's
// coordinator and the client's only seed three different brokers, and
// the topics' partitions led by all three: every input record comes out
// once in read_committed, though every fourth transaction aborts (the
// session then reads its records again from the committed offsets); the
// group's committed offsets are the inputs' ends; nothing is left open.
func TestClusterTxnGroupTransactSession(t *testing.T) {
	for _, tv := range txnVersions {
		t.Run(fmt.Sprintf("transaction.version=%d", tv), func(t *testing.T) {
			c := startTxnCluster(t, tv)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const partitions, inputs = 6, 240
			txnTopic(t, ctx, c, "eos-in", partitions)
			txnTopic(t, ctx, c, "eos-out", partitions)
			txnStateTopic(t, ctx, c)
			prod := txnClient(t, c.Seeds(), kgo.DefaultProduceTopic("eos-in"))
			for i := range inputs {
				prod.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "in-%03d", i)}, nil)
			}
			if err := prod.Flush(ctx); err != nil {
				t.Fatal(err)
			}

			group := keyLedBy(t, c, "__consumer_offsets", "eos-group", 0)
			id := keyLedBy(t, c, "__transaction_state", "eos-txn", 2)
			sess, err := kgo.NewGroupTransactSession(
				kgo.SeedBrokers(c.Seeds()[1]),
				kgo.RetryTimeout(60*time.Second),
				kgo.TransactionalID(id),
				kgo.TransactionTimeout(20*time.Second),
				kgo.ConsumerGroup(group),
				kgo.ConsumeTopics("eos-in"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.RequireStableFetchOffsets(),
				kgo.DefaultProduceTopic("eos-out"),
				kgo.FetchMaxWait(200*time.Millisecond),
			)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()

			var want, all []string
			for n := 0; len(want) < inputs; {
				if ctx.Err() != nil {
					t.Fatalf("%d of %d inputs committed after %d transactions", len(want), inputs, n)
				}
				pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
				fs := sess.PollRecords(pctx, 40)
				pcancel()
				fs.EachError(func(topic string, p int32, err error) {
					if ctx.Err() == nil && pctx.Err() == nil {
						t.Fatalf("fetch %s[%d]: %v", topic, p, err)
					}
				})
				recs := fs.Records()
				if len(recs) == 0 {
					continue
				}
				if err := sess.Begin(); err != nil {
					t.Fatal(err)
				}
				var outs []string
				var out []*kgo.Record
				for _, r := range recs {
					v := "out-" + string(r.Value)
					outs = append(outs, v)
					out = append(out, &kgo.Record{Key: r.Key, Value: []byte(v)})
				}
				// Written before End, so that aborted records are in the
				// log for read_uncommitted to see.
				if err := sess.ProduceSync(ctx, out...).FirstErr(); err != nil {
					t.Fatalf("transaction %d: produce: %v", n, err)
				}
				commit := n%4 != 3
				n++
				committed, err := sess.End(ctx, kgo.TransactionEndTry(commit))
				if err != nil {
					t.Fatalf("transaction %d: End(commit %v): %v", n, commit, err)
				}
				if committed != commit {
					t.Fatalf("transaction %d: End(commit %v) answered committed %v", n, commit, committed)
				}
				all = append(all, outs...)
				if committed {
					want = append(want, outs...)
				}
			}

			checkStable(t, ctx, c.Seeds(), "eos-out")
			checkStable(t, ctx, c.Seeds(), "__consumer_offsets")
			got := readValues(t, ctx, c.Seeds(), "eos-out", true, inputs)
			for i := range inputs {
				if v := fmt.Sprintf("out-in-%03d", i); got[v] != 1 {
					t.Errorf("read_committed: %s seen %d times, want once", v, got[v])
				}
			}
			if len(got) != inputs {
				t.Errorf("read_committed: %d distinct values, want %d", len(got), inputs)
			}
			if len(all) == len(want) {
				t.Fatalf("no transaction aborted (%d records)", len(all))
			}
			if got := readValues(t, ctx, c.Seeds(), "eos-out", false, len(all)); len(got) != inputs {
				t.Errorf("read_uncommitted: %d distinct values, want %d", len(got), inputs)
			}

			adm := kadm.NewClient(txnClient(t, c.Seeds()))
			ends, err := adm.ListEndOffsets(ctx, "eos-in")
			if err != nil {
				t.Fatal(err)
			}
			offsets, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			ends.Each(func(e kadm.ListedOffset) {
				o, ok := offsets.Lookup("eos-in", e.Partition)
				if !ok || o.Err != nil || o.At != e.Offset {
					t.Errorf("eos-in[%d]: committed %+v, end %d", e.Partition, o, e.Offset)
				}
			})
			if d := describeTxn(t, ctx, c.Seeds(), id); d.Coordinator != 2 {
				t.Errorf("transaction coordinator %d, want 2", d.Coordinator)
			}
			groups, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			if g := groups[group]; g.Coordinator.NodeID != 0 {
				t.Errorf("group coordinator %d, want 0", g.Coordinator.NodeID)
			}
		})
	}
}
