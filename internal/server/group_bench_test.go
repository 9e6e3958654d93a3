package server_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/testutil"
)

// Group coordinator benchmarks against an in-process broker with franz-go
// clients over loopback:
//
//	go test -run '^$' -bench 'OffsetCommit|GroupRebalance' -benchtime 3x ./internal/server/   (rebalances)
//	go test -run '^$' -bench 'OffsetCommit' -benchtime 2s ./internal/server/
//
// BenchmarkOffsetCommit: OffsetCommit round trips, one request at a time
// from a group member (generation and member id checked), committing 1 or
// 100 partitions per request (batched commits), with the default fsync
// policy (every append: a commit is answered once durable) and with fsync
// never; and 16 clients committing at once to their own groups. Metrics:
// commits/s (requests) and offsets/s (partitions committed).
//
// BenchmarkGroupRebalance: a 50-member group on a 100-partition topic,
// from starting the 50 clients to every member having its assignment
// (each partition owned exactly once), eager (range) and cooperative
// (cooperative-sticky); and, in a stable 50-member group, a 51st member
// joining until the group is settled again. Members heartbeat every 100 ms
// (franz-go's default is 3 s: members in a formed generation learn of a
// rebalance from a heartbeat, so the interval would dominate) and the
// broker's group.initial.rebalance.delay.ms is 100 ms (Kafka's default 3 s
// would).

func commitBroker(b *testing.B, policy log.FlushPolicy) *testutil.Broker {
	return testutil.StartBroker(b, func(c *config.Broker) {
		c.GroupInitialRebalanceDelay = 0
		c.Topic.FlushPolicy = policy
	})
}

// commitRequest commits offset at for partitions 0..n-1 of topic.
func commitRequest(group, member string, gen int32, topic string, n int, at int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, gen, member
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p := range n {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = int32(p), at, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func checkCommit(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

func BenchmarkOffsetCommit(b *testing.B) {
	for _, fs := range []struct {
		name   string
		policy log.FlushPolicy
	}{{"fsync=every-append", log.FlushEveryAppend}, {"fsync=never", log.FlushNever}} {
		for _, n := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/member/partitions=%d", fs.name, n), func(b *testing.B) {
				benchMemberCommits(b, fs.policy, n)
			})
		}
		b.Run(fs.name+"/16-clients/partitions=1", func(b *testing.B) { benchConcurrentCommits(b, fs.policy, 16) })
	}
}

// benchMemberCommits commits from the one member of a stable group.
func benchMemberCommits(b *testing.B, policy log.FlushPolicy, n int) {
	br := commitBroker(b, policy)
	createTopic(b, br.Addr, "commits", int32(n))
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.ConsumerGroup("bench"), kgo.ConsumeTopics("commits"),
		kgo.DisableAutoCommit())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	member, gen := "", int32(-1)
	for gen < 1 {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		cl.PollFetches(pctx) // joins the group
		pcancel()
		if ctx.Err() != nil {
			b.Fatal("never joined the group")
		}
		member, gen = cl.GroupMetadata()
	}
	b.ResetTimer()
	for i := range b.N {
		req := commitRequest("bench", member, gen, "commits", n, int64(i+1))
		if err := checkCommit(req.RequestWith(ctx, cl)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/s, "commits/s")
	b.ReportMetric(float64(b.N*n)/s, "offsets/s")
}

// benchConcurrentCommits commits from c clients at once, each to its own
// group (with no members: generation -1, as admin tools and
// non-group consumers commit).
func benchConcurrentCommits(b *testing.B, policy log.FlushPolicy, c int) {
	br := commitBroker(b, policy)
	createTopic(b, br.Addr, "commits", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cls := make([]*kgo.Client, c)
	for i := range cls {
		cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		// Warm up: the coordinator lookup and __consumer_offsets.
		if err := checkCommit(commitRequest(fmt.Sprint("bench-", i), "", -1, "commits", 1, 0).RequestWith(ctx, cl)); err != nil {
			b.Fatal(err)
		}
		cls[i] = cl
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, c)
	for i, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < b.N; j += c {
				if err := checkCommit(commitRequest(fmt.Sprint("bench-", i), "", -1, "commits", 1, int64(j+1)).RequestWith(ctx, cl)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/s, "commits/s")
	b.ReportMetric(float64(b.N)/s, "offsets/s")
}

func BenchmarkGroupRebalance(b *testing.B) {
	for _, bal := range []kgo.GroupBalancer{kgo.RangeBalancer(), kgo.CooperativeStickyBalancer()} {
		b.Run("join-50/"+bal.ProtocolName(), func(b *testing.B) { benchRebalance(b, bal, 50, false) })
		b.Run("add-1-to-50/"+bal.ProtocolName(), func(b *testing.B) { benchRebalance(b, bal, 50, true) })
	}
}

// benchMember is a group member that tracks what it owns.
type benchMember struct {
	cl    *kgo.Client
	mu    sync.Mutex
	owned map[int32]bool
}

func (m *benchMember) set(ps map[string][]int32, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ps["rebalance"] {
		if on {
			m.owned[p] = true
		} else {
			delete(m.owned, p)
		}
	}
}

func startBenchMember(b *testing.B, addr, group string, bal kgo.GroupBalancer, changed chan<- struct{}) *benchMember {
	m := &benchMember{owned: map[int32]bool{}}
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics("rebalance"),
		kgo.Balancers(bal), kgo.HeartbeatInterval(100*time.Millisecond), kgo.SessionTimeout(10*time.Second),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { m.set(ps, true); notify() }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { m.set(ps, false); notify() }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { m.set(ps, false); notify() }))
	if err != nil {
		b.Fatal(err)
	}
	m.cl = cl
	// Polling drives the group: kgo joins and heartbeats on its own, but
	// runs the callbacks from the poll loop.
	go func() {
		for {
			if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
				return
			}
		}
	}()
	return m
}

// settled reports whether every member owns something and every one of
// the partitions is owned exactly once.
func settled(ms []*benchMember, partitions int) bool {
	seen := map[int32]bool{}
	for _, m := range ms {
		m.mu.Lock()
		n := len(m.owned)
		for p := range m.owned {
			if seen[p] {
				m.mu.Unlock()
				return false
			}
			seen[p] = true
		}
		m.mu.Unlock()
		if n == 0 {
			return false
		}
	}
	return len(seen) == partitions
}

func benchRebalance(b *testing.B, bal kgo.GroupBalancer, n int, addOne bool) {
	const partitions = 100
	br := testutil.StartBroker(b, func(c *config.Broker) {
		c.GroupInitialRebalanceDelay = 100 * time.Millisecond
		c.Topic.FlushPolicy = log.FlushEveryAppend
	})
	createTopic(b, br.Addr, "rebalance", partitions)
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		group := fmt.Sprint("g", i)
		changed := make(chan struct{}, 1)
		wait := func(ms []*benchMember) {
			deadline := time.After(2 * time.Minute)
			for !settled(ms, partitions) {
				select {
				case <-changed:
				case <-time.After(20 * time.Millisecond):
				case <-deadline:
					b.Fatalf("%d members never settled", len(ms))
				}
			}
		}
		var ms []*benchMember
		if addOne {
			for range n {
				ms = append(ms, startBenchMember(b, br.Addr, group, bal, changed))
			}
			wait(ms)
			time.Sleep(200 * time.Millisecond) // stable, heartbeating
		}
		b.StartTimer()
		start := time.Now()
		if addOne {
			ms = append(ms, startBenchMember(b, br.Addr, group, bal, changed))
		} else {
			for range n {
				ms = append(ms, startBenchMember(b, br.Addr, group, bal, changed))
			}
		}
		wait(ms)
		took = append(took, time.Since(start))
		b.StopTimer()
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Add(1)
			go func() { defer wg.Done(); m.cl.Close() }()
		}
		wg.Wait()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "median-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
}
