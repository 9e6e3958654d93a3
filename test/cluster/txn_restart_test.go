package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
)

// Transactions across a broker's stop and return, with one replica per
// partition so that nothing can take over meanwhile:
//   - the coordinator's broker stops with one transaction being ended and
//     another left open by a producer that went away: the first stalls
//     until the broker returns, then commits or (retried as an abort, as
//     franz-go does with an unconfirmed commit) aborts; the second is
//     loaded back Ongoing, times out and aborts;
//   - a data partition's leader stops while a transaction commits: its
//     marker waits for it (the coordinator retries in the background) and
//     lands once it is back.
//
// Afterwards every transaction is whole or absent in read_committed (the
// committed ones whole, the timed-out one absent), read_uncommitted has
// everything, and no partition has a transaction left open.
func TestClusterTxnBrokerRestarts(t *testing.T) {
	for _, tv := range txnVersions {
		t.Run(fmt.Sprintf("transaction.version=%d", tv), func(t *testing.T) {
			// The transaction state too: the coordinator is away exactly
			// while its broker is.
			c := startTxnCluster(t, tv, func(cfg *config.Broker) { cfg.TransactionStateReplicationFactor = 1 })
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			const partitions = 6
			txnTopic(t, ctx, c, "rs", partitions)
			txnStateTopic(t, ctx, c)
			const coordinator, dataLeader = 2, 0
			idA := keyLedBy(t, c, "__transaction_state", "rs-a", coordinator)
			idB := keyLedBy(t, c, "__transaction_state", "rs-b", coordinator)
			// The transactions' partitions are led by every broker.
			for node := range int32(3) {
				led := false
				for p := range int32(partitions) {
					led = led || leaderOf(t, c, "rs", p) == node
				}
				if !led {
					t.Fatalf("broker %d leads no partition of rs", node)
				}
			}

			txn := func(cl *kgo.Client, name string) []string {
				t.Helper()
				if err := cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				var vals []string
				for p := range int32(partitions) {
					for r := range 2 {
						v := fmt.Sprintf("%s-p%d-r%d", name, p, r)
						vals = append(vals, v)
						if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
							t.Fatalf("%s: produce: %v", name, err)
						}
					}
				}
				return vals
			}
			producer := func(id string, timeout time.Duration) *kgo.Client {
				return txnClient(t, c.Seeds(), kgo.TransactionalID(id), kgo.DefaultProduceTopic("rs"),
					kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(timeout))
			}

			a := producer(idA, 30*time.Second)
			var committed, all []string
			t0 := txn(a, "t0")
			if err := a.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			committed, all = append(committed, t0...), append(all, t0...)

			// B opens a transaction and goes away without ending it.
			b := producer(idB, 3*time.Second)
			all = append(all, txn(b, "b0")...)
			b.Close()

			// The coordinator's broker stops while A's transaction ends.
			t1 := txn(a, "t1")
			all = append(all, t1...)
			c.Brokers[coordinator].Stop(t)
			// The commit cannot reach the coordinator; as franz-go
			// prescribes, an unconfirmed commit is retried as an abort
			// (which reloads the producer id, fencing the transaction),
			// until one succeeds.
			ended := make(chan kgo.TransactionEndTry, 1)
			go func() {
				try := kgo.TryCommit
				for ctx.Err() == nil {
					err := a.EndTransaction(ctx, try)
					if err == nil {
						ended <- try
						return
					}
					t.Logf("EndTransaction(commit %v) with the coordinator away: %v", try, err)
					try = kgo.TryAbort
					time.Sleep(100 * time.Millisecond)
				}
			}()
			waitLeaderless(t, c, "__transaction_state", coordinator)
			select {
			case <-ended:
				t.Fatal("EndTransaction succeeded while its coordinator was away")
			case <-time.After(500 * time.Millisecond):
			}
			c.Brokers[coordinator].Restart(t)
			c.WaitLive(t, 3, 30*time.Second)
			select {
			case try := <-ended:
				if try == kgo.TryCommit {
					committed = append(committed, t1...)
					break
				}
				// The abort reloaded the producer id with the epoch the
				// client held, which the coordinator's own fence had
				// bumped meanwhile: the client is fenced (as with Kafka)
				// and the application starts a new one.
				a.Close()
				a = producer(idA, 30*time.Second)
			case <-ctx.Done():
				t.Fatal("EndTransaction did not succeed after the coordinator came back")
			}

			// A data partition's leader stops while a transaction commits:
			// EndTransaction answers once the decision is durable, and the
			// marker follows when the leader is back.
			t2 := txn(a, "t2")
			all = append(all, t2...)
			c.Brokers[dataLeader].Stop(t)
			if err := a.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("EndTransaction with broker %d away: %v", dataLeader, err)
			}
			committed = append(committed, t2...)
			c.Brokers[dataLeader].Restart(t)
			c.WaitLive(t, 3, 30*time.Second)

			// And the producer carries on.
			t3 := txn(a, "t3")
			if err := a.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			committed, all = append(committed, t3...), append(all, t3...)

			checkStable(t, ctx, c.Seeds(), "rs")
			expectExactly(t, "read_committed", readValues(t, ctx, c.Seeds(), "rs", true, len(committed)), committed)
			expectExactly(t, "read_uncommitted", readValues(t, ctx, c.Seeds(), "rs", false, len(all)), all)
			if d := describeTxn(t, ctx, c.Seeds(), idB); d.State != "CompleteAbort" {
				t.Errorf("the abandoned transaction: %s, want CompleteAbort", d.State)
			}
		})
	}
}

// waitLeaderless waits until the running brokers see the partitions of
// topic that node led without a leader (node is fenced).
func waitLeaderless(t *testing.T, c *testutil.Cluster, topic string, node int32) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, b := range c.Brokers {
		for b.Server() != nil {
			tp, _ := b.Server().Metadata().Topic(topic)
			led := false
			for _, st := range tp.States {
				led = led || st.Leader == node
			}
			if !led {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker %d still sees broker %d leading %s", b.Config.NodeID, node, topic)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
