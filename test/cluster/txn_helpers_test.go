package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/testutil"
)

// The transaction tests' cluster: three brokers at a transaction protocol
// (transaction.version 1: AddPartitionsToTxn and verification; 2: KIP-890),
// with few coordinator partitions and a quick timeout check.
const (
	txnStatePartitions   = 6
	txnOffsetsPartitions = 6
)

func startTxnCluster(t *testing.T, tv int16, more ...func(cfg *config.Broker)) *testutil.Cluster {
	t.Helper()
	return testutil.StartCluster(t, 3, 0, func(_ int, cfg *config.Broker) {
		cfg.TransactionVersion = tv
		cfg.TransactionStatePartitions = txnStatePartitions
		cfg.OffsetsTopicPartitions = txnOffsetsPartitions
		cfg.GroupInitialRebalanceDelay = 0
		cfg.TransactionAbortCheck = 300 * time.Millisecond
		for _, f := range more {
			f(cfg)
		}
	})
}

func txnClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RetryTimeout(60 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// txnTopic creates a topic of partitions partitions, one replica each, and
// waits until every running broker knows its leaders.
func txnTopic(t *testing.T, ctx context.Context, c *testutil.Cluster, name string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(txnClient(t, c.Seeds()))
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, name); err != nil {
		t.Fatal(err)
	}
	txnWaitLeaders(t, c, name)
}

// txnWaitLeaders waits until every running broker's metadata has topic
// with a leader for each partition.
func txnWaitLeaders(t *testing.T, c *testutil.Cluster, topic string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, b := range c.Brokers {
			if b.Server() == nil {
				continue // stopped
			}
			tp, ok := b.Server().Metadata().Topic(topic)
			if !ok {
				return fmt.Errorf("broker %d does not know %s", b.Config.NodeID, topic)
			}
			for p, st := range tp.States {
				if st.Leader < 0 {
					return fmt.Errorf("broker %d knows no leader of %s-%d", b.Config.NodeID, topic, p)
				}
			}
		}
		return nil
	})
}

// txnStateTopic makes __transaction_state and __consumer_offsets exist
// (FindCoordinator creates them, as in Kafka) and known to every broker.
func txnStateTopic(t *testing.T, ctx context.Context, c *testutil.Cluster) {
	t.Helper()
	cl := txnClient(t, c.Seeds()[:1])
	for _, kind := range []int8{1, 0} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = kind
		req.CoordinatorKey, req.CoordinatorKeys = "first", []string{"first"}
		if _, err := req.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	txnWaitLeaders(t, c, "__transaction_state")
	txnWaitLeaders(t, c, "__consumer_offsets")
}

// leaderOf is the broker leading a partition, as broker 0 sees it.
func leaderOf(t *testing.T, c *testutil.Cluster, topic string, partition int32) int32 {
	t.Helper()
	st, ok := c.Brokers[0].Server().Metadata().Partition(topic, partition)
	if !ok {
		t.Fatalf("%s-%d unknown", topic, partition)
	}
	return st.Leader
}

// keyLedBy returns the first key prefix-0, prefix-1, ... whose coordinator
// (the leader of its partition of topic, FindCoordinator's rule) is node.
func keyLedBy(t *testing.T, c *testutil.Cluster, topic, prefix string, node int32) string {
	t.Helper()
	tp, ok := c.Brokers[0].Server().Metadata().Topic(topic)
	if !ok {
		t.Fatalf("%s unknown", topic)
	}
	for i := range 1000 {
		key := fmt.Sprintf("%s-%d", prefix, i)
		if tp.States[model.CoordinatorPartition(key, tp.Partitions)].Leader == node {
			return key
		}
	}
	t.Fatalf("no key of %s led by %d", prefix, node)
	return ""
}

// readValues reads topic from the start at an isolation level until want
// records have come, then a moment more (anything more would be records
// that should not be seen), and returns how often each value came.
func readValues(t *testing.T, ctx context.Context, seeds []string, topic string, committed bool, want int) map[string]int {
	t.Helper()
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl := txnClient(t, seeds, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	got := map[string]int{}
	n := 0
	add := func(fs kgo.Fetches) {
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Errorf("fetch %s[%d]: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)]++
			n++
		})
	}
	for n < want {
		add(cl.PollFetches(ctx))
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s (committed %v)", n, want, topic, committed)
		}
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	add(cl.PollFetches(short))
	return got
}

// checkStable waits (up to 10 s) until every partition of topic has its
// last stable offset at its high watermark: no transaction left open.
func checkStable(t *testing.T, ctx context.Context, seeds []string, topic string) {
	t.Helper()
	adm := kadm.NewClient(txnClient(t, seeds))
	testutil.EventuallyEvery(t, 10*time.Second, 50*time.Millisecond, func() error {
		hw, err1 := adm.ListEndOffsets(ctx, topic)
		lso, err2 := adm.ListCommittedOffsets(ctx, topic)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%s: listing offsets: %v %v", topic, err1, err2)
		}
		var open []string
		hw.Each(func(o kadm.ListedOffset) {
			l, ok := lso.Lookup(topic, o.Partition)
			if o.Err != nil || !ok || l.Err != nil || l.Offset != o.Offset {
				open = append(open, fmt.Sprintf("%d: hw %d (%v), lso %d (%v)", o.Partition, o.Offset, o.Err, l.Offset, l.Err))
			}
		})
		if len(open) > 0 {
			return fmt.Errorf("%s not stable: %v", topic, open)
		}
		return nil
	})
}

// describeTxn is a transactional id's state at its coordinator.
func describeTxn(t *testing.T, ctx context.Context, seeds []string, id string) kadm.DescribedTransaction {
	t.Helper()
	ds, err := kadm.NewClient(txnClient(t, seeds)).DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ds[id]
	if !ok || d.Err != nil {
		t.Fatalf("DescribeTransactions %s: %+v", id, d)
	}
	return d
}
