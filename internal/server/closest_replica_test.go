package server_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
)

// servedBy records which broker served each batch a client read.
type servedBy struct {
	mu    sync.Mutex
	nodes map[int32]int
}

func (s *servedBy) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, _ kgo.FetchBatchMetrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[meta.NodeID]++
}

func (s *servedBy) counts() map[int32]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int32]int{}
	for k, v := range s.nodes {
		out[k] = v
	}
	return out
}

// TestFetchFromClosestReplica (KIP-392): brokers in three racks with the
// rack-aware replica selector. A consumer that names a follower's rack
// (client.rack) is sent there by the leader and reads every record from
// that follower; one that names no rack, or the leader's, reads from the
// leader. The time from a write's acknowledgement to its read is logged
// for both: the follower serves what its high watermark, learnt on its
// next fetch from the leader, covers.
func TestFetchFromClosestReplica(t *testing.T) {
	// Slow: three brokers, and each read from a follower waits for its next fetch from the leader.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	c := testutil.StartCluster(t, 3, 0, func(i int, cfg *config.Broker) {
		cfg.Rack = fmt.Sprintf("rack-%d", i)
		cfg.ReplicaSelector = config.RackAwareSelector
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	seed := c.Brokers[0].Addr
	adm := kadm.NewClient(newClient(t, seed))
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "near"); err != nil {
		t.Fatal(err)
	}
	var leader int32
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, b := range c.Brokers {
			st, ok := b.Server().Metadata().Partition("near", 0)
			if !ok || len(st.ISR) != 3 || st.Leader < 0 {
				return fmt.Errorf("%s: %+v", b.Addr, st)
			}
			leader = st.Leader
		}
		return nil
	})
	follower := (leader + 1) % 3
	producer := newClient(t, seed, kgo.DefaultProduceTopic("near"), kgo.RequiredAcks(kgo.AllISRAcks()))
	const n = 200
	for i := range n {
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(rack string) map[int32]int {
		t.Helper()
		seen := &servedBy{nodes: map[int32]int{}}
		opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"near": {0: kgo.NewOffset().AtStart()}}),
			kgo.WithHooks(seen), kgo.FetchMaxWait(100 * time.Millisecond)}
		if rack != "" {
			opts = append(opts, kgo.Rack(rack))
		}
		cl := newClient(t, seed, opts...)
		got := 0
		for got < n {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("rack %q: %d of %d records read: %v", rack, got, n, err)
			}
			got += fs.NumRecords()
		}
		cl.Close()
		return seen.counts()
	}
	if got := read(fmt.Sprintf("rack-%d", follower)); len(got) != 1 || got[follower] == 0 {
		t.Errorf("a consumer in the follower's rack read batches from %v, want broker %d alone (the leader is %d)", got, follower, leader)
	}
	for _, rack := range []string{"", fmt.Sprintf("rack-%d", leader)} {
		if got := read(rack); len(got) != 1 || got[leader] == 0 {
			t.Errorf("a consumer of rack %q read batches from %v, want the leader %d alone", rack, got, leader)
		}
	}

	// From a write to its read, at the follower and at the leader: a
	// consumer reads from the end while writes are made one at a time,
	// each after the previous one was read.
	latency := func(rack string) time.Duration {
		t.Helper()
		// From the end as it is now, so that the first write is read
		// whenever the consumer gets going.
		ends, err := adm.ListEndOffsets(ctx, "near")
		if err != nil {
			t.Fatal(err)
		}
		end, _ := ends.Lookup("near", 0)
		opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"near": {0: kgo.NewOffset().At(end.Offset)}}),
			kgo.FetchMaxWait(time.Second)}
		if rack != "" {
			opts = append(opts, kgo.Rack(rack))
		}
		cl := newClient(t, seed, opts...)
		defer cl.Close()
		readAt := make(chan time.Time, 1)
		go func() {
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				if fs.NumRecords() > 0 {
					select {
					case readAt <- time.Now():
					case <-ctx.Done():
						return
					}
				}
			}
		}()
		var took []time.Duration
		for i := range 12 {
			sent := time.Now()
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("timed")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			select {
			case at := <-readAt:
				if i > 0 { // the first finds the replica to read
					took = append(took, at.Sub(sent))
				}
			case <-ctx.Done():
				t.Fatalf("write %d not read", i)
			}
		}
		slices.Sort(took)
		return took[len(took)/2]
	}
	t.Logf("from a write (acks=all) to its read (median of 11): %v at the follower in the consumer's rack, %v at the leader",
		latency(fmt.Sprintf("rack-%d", follower)).Round(10*time.Microsecond), latency("").Round(10*time.Microsecond))
}
