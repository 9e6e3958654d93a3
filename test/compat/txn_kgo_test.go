package compat

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strandlog/strand/test/grouptest"
)

// Transactions with franz-go: consume-transform-produce in a group
// (GroupTransactSession) under both transaction protocols, and the admin
// views of transactions (DescribeTransactions, ListTransactions,
// DescribeProducers) next to what read_committed readers see (ListOffsets
// and Fetch stop at the last stable offset).

// txnAbortCheck is the broker's transaction.abort.timed.out.transaction.
// cleanup.interval.ms in these tests: short, so that a transaction whose
// producer is gone is aborted soon after its timeout.
const txnAbortCheck = 500 * time.Millisecond

// txnBrokerArgs are the flags of a broker running transaction version tv.
func txnBrokerArgs(tv string, extra ...string) []string {
	return append([]string{"--transaction-version", tv,
		"--transaction-abort-check-interval", txnAbortCheck.String()}, extra...)
}

// txnFeatureLevel is the finalized level of the transaction.version feature
// in the broker's ApiVersions answer (-1: not listed), and the highest level
// it says it supports (-1: not listed).
func txnFeatureLevel(t *testing.T, ctx context.Context, cl *kgo.Client) (finalized, supported int16) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strand-compat", "1.0"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	finalized, supported = -1, -1
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			finalized = f.MaxVersionLevel
		}
	}
	for _, f := range resp.SupportedFeatures {
		if f.Name == "transaction.version" {
			supported = f.MaxVersion
		}
	}
	return finalized, supported
}

// checkTxnFeature checks the broker finalized transaction.version want and
// supports level 2.
func checkTxnFeature(t *testing.T, ctx context.Context, addr string, want int16) {
	t.Helper()
	fin, sup := txnFeatureLevel(t, ctx, client(t, addr))
	if fin != want {
		t.Fatalf("ApiVersions finalizes transaction.version %d, want %d (--transaction-version)", fin, want)
	}
	if sup < 2 {
		t.Errorf("ApiVersions supports transaction.version up to %d, want 2", sup)
	}
}

// txnWait polls cond every 50 ms until it holds, failing the test after
// limit with state's description.
func txnWait(t *testing.T, ctx context.Context, limit time.Duration, what string, cond func() bool, state func() string) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit || ctx.Err() != nil {
			t.Fatalf("%s: not true after %v (%v); %s", what, time.Since(start).Round(time.Millisecond), ctx.Err(), state())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// txnStableOffsets lists every partition's high watermark (ListOffsets
// read_uncommitted) and last stable offset (read_committed).
func txnStableOffsets(ctx context.Context, adm *kadm.Client, topic string) (hw, lso map[int32]int64, err error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ListOffsets read_uncommitted: %w", err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ListOffsets read_committed: %w", err)
	}
	hw, lso = map[int32]int64{}, map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { hw[o.Partition] = o.Offset })
	stable.Each(func(o kadm.ListedOffset) { lso[o.Partition] = o.Offset })
	return hw, lso, nil
}

// txnWaitStable waits until no transaction holds back the topic: the last
// stable offset equals the high watermark on every partition. It fails the
// test after limit, describing the open transactions.
func txnWaitStable(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for {
		hw, lso, err := txnStableOffsets(ctx, adm, topic)
		if err == nil {
			var diff []string
			for _, p := range slices.Sorted(maps.Keys(hw)) {
				if lso[p] != hw[p] {
					diff = append(diff, fmt.Sprintf("%d: LSO %d HW %d", p, lso[p], hw[p]))
				}
			}
			if len(hw) == 0 || len(hw) != len(lso) {
				diff = append(diff, fmt.Sprintf("listed %d high watermarks and %d stable offsets", len(hw), len(lso)))
			}
			if len(diff) == 0 {
				return time.Since(start)
			}
			last = strings.Join(diff, ", ")
		} else {
			last = err.Error()
		}
		if time.Since(start) > limit || ctx.Err() != nil {
			t.Fatalf("%s: last stable offset still behind the high watermark after %v: %s\nopen transactions: %s",
				topic, time.Since(start).Round(time.Millisecond), last, txnDescribeOpen(ctx, adm, topic))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// txnDescribeOpen is what the broker says about open transactions, for
// failure messages.
func txnDescribeOpen(ctx context.Context, adm *kadm.Client, topic string) string {
	var b strings.Builder
	lt, err := adm.ListTransactions(ctx, nil, nil)
	fmt.Fprintf(&b, "ListTransactions (err %v):", err)
	for _, l := range lt.Sorted() {
		fmt.Fprintf(&b, " %s=%s(pid %d)", l.TxnID, l.State, l.ProducerID)
	}
	dps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: nil})
	fmt.Fprintf(&b, "; DescribeProducers (err %v):", err)
	for _, dp := range dps.SortedProducers() {
		if dp.CurrentTxnStartOffset >= 0 {
			fmt.Fprintf(&b, " %d: pid %d epoch %d txn from %d;", dp.Partition, dp.ProducerID, dp.ProducerEpoch, dp.CurrentTxnStartOffset)
		}
	}
	return b.String()
}

// txnReadTopic reads every partition of topic from its log start to its end
// as listed when called (the high watermark for read_uncommitted, the last
// stable offset for read_committed), by raw fetches whose answers go
// through kgo.ProcessFetchPartition, the consumer's own batch processing
// (aborted transactions dropped, control batches skipped). Unlike a
// consumer, it knows its fetch position, so it stops exactly at the end.
func txnReadTopic(t *testing.T, ctx context.Context, addr, topic string, committed bool) []*kgo.Record {
	t.Helper()
	cl := client(t, addr)
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, topic)
	if err != nil || details[topic].Err != nil {
		t.Fatalf("listing %s: %v %v", topic, err, details[topic].Err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("listing start offsets of %s: %v", topic, err)
	}
	hw, lso, err := txnStableOffsets(ctx, adm, topic)
	if err != nil {
		t.Fatalf("%s: %v", topic, err)
	}
	iso, isoName, end := kgo.ReadUncommitted(), "read_uncommitted", hw
	if committed {
		iso, isoName, end = kgo.ReadCommitted(), "read_committed", lso
	}
	next := map[int32]int64{}
	starts.Each(func(o kadm.ListedOffset) {
		if o.Offset < end[o.Partition] {
			next[o.Partition] = o.Offset
		}
	})
	var out []*kgo.Record
	progress := time.Now()
	var lastState string
	for len(next) > 0 {
		if time.Since(progress) > 15*time.Second || ctx.Err() != nil {
			t.Fatalf("reading %s %s: no progress for 15s; positions %v, ends %v; last answer: %s", topic, isoName, next, end, lastState)
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 200
		req.MinBytes = 1
		req.MaxBytes = 4 << 20
		req.SessionEpoch = -1
		req.IsolationLevel = 0
		if committed {
			req.IsolationLevel = 1
		}
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, details[topic].ID
		for _, p := range slices.Sorted(maps.Keys(next)) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, next[p], 1<<20
			rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			lastState = err.Error()
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			lastState = err.Error()
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				rp := &resp.Topics[i].Partitions[j]
				at, ok := next[rp.Partition]
				if !ok {
					continue
				}
				lastState = fmt.Sprintf("partition %d at %d: error %v, HW %d, LSO %d, %d bytes, %d aborted txns",
					rp.Partition, at, kerr.ErrorForCode(rp.ErrorCode), rp.HighWatermark, rp.LastStableOffset,
					len(rp.RecordBatches), len(rp.AbortedTransactions))
				if rp.ErrorCode != 0 {
					continue
				}
				fp, n := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: at, IsolationLevel: iso,
					Topic: topic, Partition: rp.Partition}, rp, kgo.DefaultDecompressor(), nil)
				if fp.Err != nil {
					t.Fatalf("reading %s/%d %s at %d: %v", topic, rp.Partition, isoName, at, fp.Err)
				}
				out = append(out, fp.Records...)
				if n > at {
					progress = time.Now()
					next[rp.Partition] = n
				}
				if n >= end[rp.Partition] {
					delete(next, rp.Partition)
				}
			}
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// TestKgoGroupTransactSession

// eosBatch is one transaction of a session: the records it polled,
// transformed and produced, and how it ended.
type eosBatch struct {
	n         int
	commit    bool // ended with TryCommit (else TryAbort)
	committed bool // End's answer
	inputs    int
	produced  []*kgo.Record // acknowledged output records
}

// eosSession runs a kgo.GroupTransactSession: poll at most 10 input
// records, produce one output record for each in a transaction, end it;
// every 5th transaction ends with TryAbort.
type eosSession struct {
	name string
	sess *kgo.GroupTransactSession
	log  *grouptest.Lines
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	batches []eosBatch
	owned   map[int32]bool
	events  []string // assignment changes, for failure messages
	err     error
}

func startEOSSession(t *testing.T, ctx context.Context, addr, name, input, output, group string, extra ...kgo.Opt) *eosSession {
	t.Helper()
	s := &eosSession{name: name, log: &grouptest.Lines{}, stop: make(chan struct{}), done: make(chan struct{}),
		owned: map[int32]bool{}}
	track := func(what string, assigned bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, p := range m[input] {
				s.owned[p] = assigned
				if !assigned {
					delete(s.owned, p)
				}
			}
			s.events = append(s.events, fmt.Sprintf("%s %s %v", time.Now().Format("15:04:05.000"), what, m[input]))
		}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.TransactionalID("eos-" + name),
		kgo.TransactionTimeout(30 * time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(output),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.OnPartitionsAssigned(track("assigned", true)),
		kgo.OnPartitionsRevoked(track("revoked", false)),
		kgo.OnPartitionsLost(track("lost", false)),
		kgo.WithLogger(kgo.BasicLogger(s.log, kgo.LogLevelInfo, func() string { return time.Now().Format("15:04:05.000 ") })),
	}
	sess, err := kgo.NewGroupTransactSession(append(opts, extra...)...)
	if err != nil {
		t.Fatalf("NewGroupTransactSession %s: %v", name, err)
	}
	s.sess = sess
	t.Cleanup(func() {
		s.close()
		if t.Failed() {
			s.mu.Lock()
			t.Logf("session %s: error %v; %d transactions; assignments:\n%s", name, s.err, len(s.batches), strings.Join(s.events, "\n"))
			s.mu.Unlock()
			t.Logf("session %s client log (tail):\n%s", name, tail(s.log.String(), 12<<10))
		}
	})
	go s.run(ctx)
	return s
}

func (s *eosSession) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *eosSession) run(ctx context.Context) {
	defer close(s.done)
	for n := 0; ; {
		select {
		case <-s.stop:
			return
		default:
		}
		if ctx.Err() != nil {
			s.fail(ctx.Err())
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := s.sess.PollRecords(pctx, 10)
		cancel()
		if fs.IsClientClosed() {
			s.fail(errors.New("client closed while polling"))
			return
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("fetch %s/%d: %w", topic, p, err)
			}
		})
		if ferr != nil {
			s.fail(ferr)
			return
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := s.sess.Begin(); err != nil {
			s.fail(fmt.Errorf("Begin: %w", err))
			return
		}
		b := eosBatch{n: n, commit: n%5 != 4, inputs: len(recs)}
		n++
		out := make([]*kgo.Record, len(recs))
		for i, r := range recs {
			out[i] = &kgo.Record{Key: r.Key, Value: fmt.Appendf(nil, "in %d %d %s %d %s", r.Partition, r.Offset, s.name, b.n, r.Value)}
		}
		// A pause inside the transaction, so that rebalances land in the
		// middle of some.
		time.Sleep(20 * time.Millisecond)
		results := s.sess.ProduceSync(ctx, out...)
		for _, r := range results {
			if r.Err == nil {
				b.produced = append(b.produced, r.Record)
			}
		}
		prodErr := results.FirstErr()
		committed, err := s.sess.End(ctx, kgo.TransactionEndTry(b.commit && prodErr == nil))
		b.committed = committed
		s.mu.Lock()
		s.batches = append(s.batches, b)
		s.mu.Unlock()
		switch {
		case prodErr != nil:
			s.fail(fmt.Errorf("transaction %d: produce: %w", b.n, prodErr))
			return
		case err != nil:
			s.fail(fmt.Errorf("transaction %d: End(commit=%v): %w", b.n, b.commit, err))
			return
		case committed && !b.commit:
			s.fail(fmt.Errorf("transaction %d: End(TryAbort) answered committed", b.n))
			return
		}
	}
}

// close stops the loop between transactions and closes the client (which
// leaves the group).
func (s *eosSession) close() {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		s.sess.Close()
	})
}

func (s *eosSession) committedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, b := range s.batches {
		if b.committed {
			n++
		}
	}
	return n
}

func (s *eosSession) ownedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.owned)
}

func (s *eosSession) error() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *eosSession) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, a := 0, 0
	for _, b := range s.batches {
		if b.committed {
			c++
		} else {
			a++
		}
	}
	return fmt.Sprintf("session %s: %d transactions committed, %d aborted, owns %v, error %v",
		s.name, c, a, slices.Sorted(maps.Keys(s.owned)), s.err)
}

// inputFeed produces plain (idempotent, not transactional) records to the
// input topic, round robin, 5 every 50 ms, until stopped.
type inputFeed struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	recs  map[[2]int64]string // (partition, offset) -> value
	err   error
}

func startInputFeed(t *testing.T, addr, topic string) *inputFeed {
	t.Helper()
	cl := client(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	f := &inputFeed{stopc: make(chan struct{}), done: make(chan struct{}), recs: map[[2]int64]string{}}
	go func() {
		defer close(f.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; {
			select {
			case <-f.stopc:
				return
			case <-tick.C:
			}
			rs := make([]*kgo.Record, 5)
			for j := range rs {
				rs[j] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%16), Value: fmt.Appendf(nil, "v-%06d", i)}
				i++
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := cl.ProduceSync(ctx, rs...).FirstErr()
			cancel()
			f.mu.Lock()
			if err != nil {
				f.err = err
				f.mu.Unlock()
				return
			}
			for _, r := range rs {
				f.recs[[2]int64{int64(r.Partition), r.Offset}] = string(r.Value)
			}
			f.mu.Unlock()
		}
	}()
	t.Cleanup(func() { f.stop() })
	return f
}

// stop ends the feed and returns what it produced and each partition's end.
func (f *inputFeed) stop() (map[[2]int64]string, map[int32]int64, error) {
	select {
	case <-f.stopc:
	default:
		close(f.stopc)
	}
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	ends := map[int32]int64{}
	for k := range f.recs {
		if k[1]+1 > ends[int32(k[0])] {
			ends[int32(k[0])] = k[1] + 1
		}
	}
	return f.recs, ends, f.err
}

// TestKgoGroupTransactSession runs franz-go's GroupTransactSession
// (consume-transform-produce, exactly once) on a 6-partition input: one
// session, then two in the group (a join, rebalances inside transactions),
// then the first leaves; every 5th transaction of a session ends with
// TryAbort. A read_committed reader of the output sees every input record
// transformed exactly once and nothing of an aborted transaction; the
// group's committed offsets are the input's ends; a read_uncommitted reader
// sees the aborted records too. Under transaction version 2 (KIP-890 part 2)
// every EndTxn bumps the producer epoch, under version 1 (and for a client
// capped at Kafka 3.9's request versions on a version-2 broker) the epoch
// stays, which the output records' epochs show.
func TestKgoGroupTransactSession(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		tv     int16
		capped bool
	}{
		{"tv2", 2, false},
		{"tv1", 1, false},
		{"tv2-client-3.9", 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testGroupTransactSession(t, c.tv, c.capped)
		})
	}
}

func testGroupTransactSession(t *testing.T, tv int16, capped bool) {
	b := startBroker(t, txnBrokerArgs(fmt.Sprint(tv), groupBrokerArgs...)...)
	ctx := groupCtx(t, 3*time.Minute)
	const input, output, group = "eos-in", "eos-out", "eos-group"
	createTopic(t, b.Addr, input, 6, nil)
	createTopic(t, b.Addr, output, 3, nil)
	adm := kadm.NewClient(client(t, b.Addr))
	checkTxnFeature(t, ctx, b.Addr, tv)
	var extra []kgo.Opt
	if capped {
		extra = append(extra, kgo.MaxVersions(kversion.V3_9_0()))
	}
	newProtocol := tv >= 2 && !capped

	feed := startInputFeed(t, b.Addr, input)
	sa := startEOSSession(t, ctx, b.Addr, "a", input, output, group, extra...)
	took := txnWait(t, ctx, 45*time.Second, "session a commits 5 transactions",
		func() bool { return sa.committedCount() >= 5 }, sa.String)
	t.Logf("session a alone: %v after %v", sa, took.Round(time.Millisecond))

	sb := startEOSSession(t, ctx, b.Addr, "b", input, output, group, extra...)
	aBefore := sa.committedCount()
	took = txnWait(t, ctx, 45*time.Second, "sessions a and b share the partitions and both commit 10 transactions",
		func() bool {
			return sa.ownedCount() > 0 && sb.ownedCount() > 0 && sa.ownedCount()+sb.ownedCount() == 6 &&
				sb.committedCount() >= 10 && sa.committedCount() >= aBefore+10
		},
		func() string { return sa.String() + "; " + sb.String() })
	t.Logf("a and b together: %v; %v; after %v", sa, sb, took.Round(time.Millisecond))

	sa.close()
	bBefore := sb.committedCount()
	took = txnWait(t, ctx, 45*time.Second, "session b owns all 6 partitions after a left and commits 5 more",
		func() bool { return sb.ownedCount() == 6 && sb.committedCount() >= bBefore+5 }, sb.String)
	t.Logf("b alone after a left: %v; after %v", sb, took.Round(time.Millisecond))

	inputs, ends, err := feed.stop()
	if err != nil {
		t.Fatalf("input producer: %v", err)
	}
	took = txnWait(t, ctx, 60*time.Second, "the group's committed offsets reach the input's ends",
		func() bool {
			offs, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return false
			}
			for p, end := range ends {
				if o, ok := offs.Lookup(input, p); !ok || o.Err != nil || o.At != end {
					return false
				}
			}
			return true
		},
		func() string {
			offs, err := adm.FetchOffsets(ctx, group)
			return fmt.Sprintf("ends %v; committed %v (err %v); %v", ends, offs, err, sb)
		})
	t.Logf("b drained %d input records %v later", len(inputs), took.Round(time.Millisecond))
	sb.close()
	for _, s := range []*eosSession{sa, sb} {
		if err := s.error(); err != nil {
			t.Errorf("session %s: %v", s.name, err)
		}
	}
	if t.Failed() {
		return
	}
	// The group's offsets, asked with require_stable: nothing is pending.
	offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
	if err != nil {
		t.Fatalf("FetchOffsets require_stable: %v", err)
	}
	for p, end := range ends {
		if o, ok := offs.Lookup(input, p); !ok || o.Err != nil || o.At != end {
			t.Errorf("group %s: partition %d committed %+v, want %d", group, p, o, end)
		}
	}

	// Every transaction of both sessions, by (session, number).
	type batchKey struct {
		session string
		n       int
	}
	batches := map[batchKey]eosBatch{}
	aborts := map[string]int{}
	refused := 0 // TryCommit ended in an abort (a rebalance during the transaction)
	for _, s := range []*eosSession{sa, sb} {
		s.mu.Lock()
		for _, bt := range s.batches {
			batches[batchKey{s.name, bt.n}] = bt
			if !bt.commit {
				aborts[s.name]++
			} else if !bt.committed {
				refused++
			}
		}
		s.mu.Unlock()
	}
	if aborts["a"] == 0 || aborts["b"] == 0 {
		t.Errorf("transactions ended with TryAbort: %v, want some by each session", aborts)
	}

	txnWaitStable(t, ctx, adm, output, 10*time.Second)
	type parsed struct {
		in    [2]int64
		key   batchKey
		value string
	}
	parse := func(r *kgo.Record) (parsed, bool) {
		f := strings.Fields(string(r.Value))
		if len(f) != 6 || f[0] != "in" {
			return parsed{}, false
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		n, err3 := strconv.Atoi(f[4])
		if err1 != nil || err2 != nil || err3 != nil {
			return parsed{}, false
		}
		return parsed{in: [2]int64{p, o}, key: batchKey{f[3], n}, value: f[5]}, true
	}

	// read_committed: each input record exactly once, only from committed
	// transactions, and all of each committed transaction.
	committedRecs := txnReadTopic(t, ctx, b.Addr, output, true)
	seen := map[[2]int64]int{}
	perBatch := map[batchKey]int{}
	bad := 0
	for _, r := range committedRecs {
		pr, ok := parse(r)
		if !ok {
			t.Fatalf("output record %d/%d: unexpected value %q", r.Partition, r.Offset, r.Value)
		}
		seen[pr.in]++
		perBatch[pr.key]++
		bt, known := batches[pr.key]
		if !known || !bt.committed {
			if bad++; bad <= 10 {
				t.Errorf("read_committed returned %d/%d from transaction %+v, which did not commit (known %v)", r.Partition, r.Offset, pr.key, known)
			}
		}
		if want, ok := inputs[pr.in]; !ok || want != pr.value {
			t.Errorf("output %d/%d says input %v was %q; the input holds %q (present %v)", r.Partition, r.Offset, pr.in, pr.value, want, ok)
		}
	}
	missingIn, dupIn := 0, 0
	for _, k := range slices.SortedFunc(maps.Keys(inputs), func(a, b [2]int64) int {
		if a[0] != b[0] {
			return int(a[0] - b[0])
		}
		return int(a[1] - b[1])
	}) {
		switch n := seen[k]; {
		case n == 0:
			if missingIn++; missingIn <= 5 {
				t.Errorf("input %d/%d: no output in read_committed", k[0], k[1])
			}
		case n > 1:
			if dupIn++; dupIn <= 5 {
				t.Errorf("input %d/%d: %d outputs in read_committed", k[0], k[1], n)
			}
		}
	}
	if missingIn+dupIn > 0 {
		t.Errorf("of %d input records, %d have no committed output and %d more than one", len(inputs), missingIn, dupIn)
	}
	if len(seen) != len(inputs) {
		t.Errorf("read_committed output covers %d input records, the input has %d", len(seen), len(inputs))
	}
	committedN := 0
	for k, bt := range batches {
		if bt.committed {
			committedN++
			if perBatch[k] != len(bt.produced) || len(bt.produced) != bt.inputs {
				t.Errorf("committed transaction %+v: %d records in read_committed, %d produced for %d inputs", k, perBatch[k], len(bt.produced), bt.inputs)
			}
		}
	}

	// read_uncommitted: every acknowledged record, aborted ones included,
	// where it was acknowledged.
	all := txnReadTopic(t, ctx, b.Addr, output, false)
	at := map[[2]int64]*kgo.Record{}
	for _, r := range all {
		at[[2]int64{int64(r.Partition), r.Offset}] = r
	}
	abortedSeen := 0
	for k, bt := range batches {
		for _, pr := range bt.produced {
			got, ok := at[[2]int64{int64(pr.Partition), pr.Offset}]
			if !ok || string(got.Value) != string(pr.Value) {
				t.Errorf("transaction %+v: record acknowledged at %d/%d is not there in read_uncommitted", k, pr.Partition, pr.Offset)
				continue
			}
			if got.ProducerID != pr.ProducerID || got.ProducerEpoch != pr.ProducerEpoch {
				t.Errorf("transaction %+v: record at %d/%d stored with producer %d/%d, acknowledged as %d/%d", k, pr.Partition,
					pr.Offset, got.ProducerID, got.ProducerEpoch, pr.ProducerID, pr.ProducerEpoch)
			}
			if !bt.committed {
				abortedSeen++
			}
		}
	}
	if abortedSeen == 0 {
		t.Errorf("read_uncommitted holds no record of an aborted transaction")
	}
	if len(all) != len(committedRecs)+abortedSeen {
		t.Errorf("read_uncommitted returned %d records, want %d committed + %d aborted", len(all), len(committedRecs), abortedSeen)
	}

	// The producer epochs tell which protocol ran: KIP-890 part 2 bumps
	// the epoch at every EndTxn, the older flow keeps it.
	for _, s := range []string{"a", "b"} {
		var keys []batchKey
		for k := range batches {
			if k.session == s {
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, func(x, y batchKey) int { return x.n - y.n })
		var prevID int64 = -1
		var prevEpoch int16 = -1
		for _, k := range keys {
			bt := batches[k]
			if len(bt.produced) == 0 {
				continue
			}
			id, epoch := bt.produced[0].ProducerID, bt.produced[0].ProducerEpoch
			for _, r := range bt.produced {
				if r.ProducerID != id || r.ProducerEpoch != epoch {
					t.Errorf("transaction %+v: records from producer %d/%d and %d/%d", k, id, epoch, r.ProducerID, r.ProducerEpoch)
				}
			}
			if prevID >= 0 {
				switch {
				case newProtocol && !(id == prevID && epoch > prevEpoch):
					t.Errorf("transaction %+v produced as %d/%d after %d/%d: under KIP-890 part 2 each EndTxn bumps the epoch",
						k, id, epoch, prevID, prevEpoch)
				case !newProtocol && (id != prevID || epoch != prevEpoch):
					t.Errorf("transaction %+v produced as %d/%d after %d/%d: the transaction version 1 flow keeps the epoch",
						k, id, epoch, prevID, prevEpoch)
				}
			}
			prevID, prevEpoch = id, epoch
		}
	}
	t.Logf("%d input records; %d transactions (%d committed, TryAbort by session %v, %d aborted by a rebalance); read_committed %d records, read_uncommitted %d",
		len(inputs), len(batches), committedN, aborts, refused, len(committedRecs), len(all))
}

// ---------------------------------------------------------------------------
// TestKgoTransactionsDescribe

// TestKgoTransactionsDescribe looks at transactions from the side, under
// both transaction versions: transaction a writes to partitions 0 and 1
// (after 5 plain records on 0), b then to partition 0. While they are open,
// DescribeTransactions says Ongoing with their partitions, ListTransactions
// lists and filters them, DescribeProducers gives each partition's open
// transaction's first offset, ListOffsets read_committed answers the last
// stable offset, and a read_committed fetch stops there. a commits (the
// last stable offset moves to b's first offset), b aborts (the aborted range
// comes with fetches, read_committed skips it), and everything is stable.
func TestKgoTransactionsDescribe(t *testing.T) {
	t.Parallel()
	for _, tv := range []int16{2, 1} {
		t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
			t.Parallel()
			testTransactionsDescribe(t, tv)
		})
	}
}

func testTransactionsDescribe(t *testing.T, tv int16) {
	b := startBroker(t, txnBrokerArgs(fmt.Sprint(tv))...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic = "txn-describe"
	createTopic(t, b.Addr, topic, 3, nil)
	checkTxnFeature(t, ctx, b.Addr, tv)
	admCl := client(t, b.Addr)
	adm := kadm.NewClient(admCl)
	manual := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}

	plain := client(t, b.Addr, manual...)
	var pre []*kgo.Record
	for i := range 5 {
		pre = append(pre, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "plain-%d", i)})
	}
	if err := plain.ProduceSync(ctx, pre...).FirstErr(); err != nil {
		t.Fatalf("plain produce: %v", err)
	}
	if pre[0].Offset != 0 || pre[4].Offset != 4 {
		t.Fatalf("plain records at %d-%d, want 0-4", pre[0].Offset, pre[4].Offset)
	}

	// Transaction a: 3 records on partition 0 (offsets 5-7), 2 on 1 (0-1).
	txA := client(t, b.Addr, append(manual, kgo.TransactionalID("describe-a"), kgo.TransactionTimeout(time.Minute))...)
	if err := txA.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	recsA := []*kgo.Record{
		{Partition: 0, Value: []byte("a-0")}, {Partition: 0, Value: []byte("a-1")}, {Partition: 0, Value: []byte("a-2")},
		{Partition: 1, Value: []byte("a-3")}, {Partition: 1, Value: []byte("a-4")},
	}
	if err := txA.ProduceSync(ctx, recsA...).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	wantOffsets := []int64{5, 6, 7, 0, 1}
	for i, r := range recsA {
		if r.Offset != wantOffsets[i] {
			t.Fatalf("transaction a's record %d at %d/%d, want offset %d", i, r.Partition, r.Offset, wantOffsets[i])
		}
	}
	pidA, epochA := recsA[0].ProducerID, recsA[0].ProducerEpoch
	if pidA < 0 || epochA < 0 {
		t.Fatalf("transactional records carry producer %d/%d", pidA, epochA)
	}

	describe := func(id string) kadm.DescribedTransaction {
		t.Helper()
		ds, err := adm.DescribeTransactions(ctx, id)
		if err != nil {
			t.Fatalf("DescribeTransactions %s: %v", id, err)
		}
		d, ok := ds[id]
		if !ok || d.Err != nil {
			t.Fatalf("DescribeTransactions %s: %+v (present %v)", id, d, ok)
		}
		return d
	}
	listed := func(pids []int64, states ...string) kadm.ListedTransactions {
		t.Helper()
		l, err := adm.ListTransactions(ctx, pids, states)
		if err != nil {
			t.Fatalf("ListTransactions %v %v: %v", pids, states, err)
		}
		return l
	}
	tps := func(d kadm.DescribedTransaction) map[int32]bool {
		out := map[int32]bool{}
		for tp, ps := range d.Topics {
			for p := range ps {
				if tp != topic {
					t.Errorf("transaction %s lists topic %s", d.TxnID, tp)
				}
				out[p] = true
			}
		}
		return out
	}

	d := describe("describe-a")
	if d.State != "Ongoing" || d.ProducerID != pidA || d.ProducerEpoch != epochA || d.TimeoutMillis != 60000 {
		t.Errorf("describe-a while open: state %s, producer %d/%d, timeout %d ms; want Ongoing, %d/%d, 60000",
			d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMillis, pidA, epochA)
	}
	if st := time.UnixMilli(d.StartTimestamp); st.Before(began.Add(-2*time.Second)) || st.After(time.Now().Add(2*time.Second)) {
		t.Errorf("describe-a started at %v, the transaction began at %v", st, began)
	}
	if got := tps(d); !maps.Equal(got, map[int32]bool{0: true, 1: true}) {
		t.Errorf("describe-a lists partitions %v, want 0 and 1", slices.Sorted(maps.Keys(got)))
	}
	if l := listed(nil); l["describe-a"].State != "Ongoing" || l["describe-a"].ProducerID != pidA {
		t.Errorf("ListTransactions: describe-a is %+v, want Ongoing with producer %d", l["describe-a"], pidA)
	}
	if l := listed(nil, "Ongoing"); len(l) != 1 || l["describe-a"].TxnID != "describe-a" {
		t.Errorf("ListTransactions Ongoing: %v, want describe-a only", l.TransactionalIDs())
	}
	if l := listed(nil, "CompleteCommit", "CompleteAbort", "Empty"); len(l) != 0 {
		t.Errorf("ListTransactions CompleteCommit/CompleteAbort/Empty: %v, want none", l.TransactionalIDs())
	}
	if l := listed([]int64{pidA}); len(l) != 1 || l["describe-a"].ProducerID != pidA {
		t.Errorf("ListTransactions for producer %d: %v, want describe-a", pidA, l.TransactionalIDs())
	}
	if l := listed([]int64{pidA + 1000}); len(l) != 0 {
		t.Errorf("ListTransactions for producer %d: %v, want none", pidA+1000, l.TransactionalIDs())
	}

	producers := func() map[int32]kadm.DescribedProducers {
		t.Helper()
		var s kadm.TopicsSet
		s.Add(topic, 0, 1, 2)
		dps, err := adm.DescribeProducers(ctx, s)
		if err != nil {
			t.Fatalf("DescribeProducers: %v", err)
		}
		out := map[int32]kadm.DescribedProducers{}
		for _, dp := range dps[topic].Partitions.Sorted() {
			if dp.Err != nil {
				t.Fatalf("DescribeProducers %s/%d: %v %s", topic, dp.Partition, dp.Err, dp.ErrMessage)
			}
			out[dp.Partition] = dp.ActiveProducers
		}
		if len(out) != 3 {
			t.Fatalf("DescribeProducers answered partitions %v, want 0-2", slices.Sorted(maps.Keys(out)))
		}
		return out
	}
	dp := producers()
	checkProducer := func(p int32, pid int64, epoch int16, lastSeq int32, txnStart int64, coordEpoch int32) {
		t.Helper()
		got, ok := dp[p][pid]
		if !ok {
			t.Errorf("DescribeProducers %d: producer %d missing (%d listed)", p, pid, len(dp[p]))
			return
		}
		if got.ProducerEpoch != epoch || (lastSeq != -2 && got.LastSequence != lastSeq) ||
			got.CurrentTxnStartOffset != txnStart || got.CoordinatorEpoch != coordEpoch {
			t.Errorf("DescribeProducers %d, producer %d: epoch %d, last sequence %d, txn start %d, coordinator epoch %d; "+
				"want %d, %d, %d, %d", p, pid, got.ProducerEpoch, got.LastSequence, got.CurrentTxnStartOffset, got.CoordinatorEpoch,
				epoch, lastSeq, txnStart, coordEpoch)
		}
	}
	checkProducer(0, pidA, epochA, 2, 5, -1)
	checkProducer(1, pidA, epochA, 1, 0, -1)
	checkProducer(0, pre[0].ProducerID, pre[0].ProducerEpoch, 4, -1, -1)
	if _, ok := dp[2][pidA]; ok {
		t.Errorf("DescribeProducers 2 lists producer %d, which never wrote there", pidA)
	}

	checkOffsets := func(when string, wantHW, wantLSO map[int32]int64) {
		t.Helper()
		hw, lso, err := txnStableOffsets(ctx, adm, topic)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if !maps.Equal(hw, wantHW) || !maps.Equal(lso, wantLSO) {
			t.Errorf("%s: ListOffsets high watermarks %v, last stable offsets %v; want %v, %v", when, hw, lso, wantHW, wantLSO)
		}
	}
	checkOffsets("a open", map[int32]int64{0: 8, 1: 2, 2: 0}, map[int32]int64{0: 5, 1: 0, 2: 0})

	// fetch reads one partition at offset with an isolation level.
	fetch := func(p int32, offset int64, committed bool) (*kmsg.FetchResponseTopicPartition, []int64) {
		t.Helper()
		req := fetchRequest(t, ctx, adm, topic, p, offset)
		req.MaxWaitMillis = 100
		if committed {
			req.IsolationLevel = 1
		}
		resp, err := req.RequestWith(ctx, admCl)
		if err != nil {
			t.Fatalf("fetch %d at %d: %v", p, offset, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch %d at %d: %d topics in the answer", p, offset, len(resp.Topics))
		}
		rp := &resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			t.Fatalf("fetch %d at %d: %v", p, offset, kerr.ErrorForCode(rp.ErrorCode))
		}
		iso := kgo.ReadUncommitted()
		if committed {
			iso = kgo.ReadCommitted()
		}
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: offset, IsolationLevel: iso, Topic: topic,
			Partition: p}, rp, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			t.Fatalf("fetch %d at %d: %v", p, offset, fp.Err)
		}
		var offs []int64
		for _, r := range fp.Records {
			offs = append(offs, r.Offset)
		}
		return rp, offs
	}
	span := func(from, to int64) []int64 {
		var out []int64
		for o := from; o < to; o++ {
			out = append(out, o)
		}
		return out
	}
	checkFetch := func(when string, p int32, offset int64, committed bool, wantHW, wantLSO int64, want []int64) *kmsg.FetchResponseTopicPartition {
		t.Helper()
		rp, got := fetch(p, offset, committed)
		if rp.HighWatermark != wantHW || rp.LastStableOffset != wantLSO || !slices.Equal(got, want) {
			t.Errorf("%s: fetch %d at %d (read_committed %v): HW %d, LSO %d, records %v; want %d, %d, %v",
				when, p, offset, committed, rp.HighWatermark, rp.LastStableOffset, got, wantHW, wantLSO, want)
		}
		return rp
	}
	checkFetch("a open", 0, 0, true, 8, 5, span(0, 5))
	checkFetch("a open", 0, 5, true, 8, 5, nil)
	checkFetch("a open", 1, 0, true, 2, 0, nil)
	checkFetch("a open", 0, 0, false, 8, 5, span(0, 8))

	// Transaction b: 1 record on partition 0 (offset 8).
	txB := client(t, b.Addr, append(manual, kgo.TransactionalID("describe-b"), kgo.TransactionTimeout(time.Minute))...)
	if err := txB.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	recB := &kgo.Record{Partition: 0, Value: []byte("b-0")}
	if err := txB.ProduceSync(ctx, recB).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	if recB.Offset != 8 {
		t.Fatalf("transaction b's record at %d, want 8", recB.Offset)
	}
	pidB, epochB := recB.ProducerID, recB.ProducerEpoch
	if l := listed(nil, "Ongoing"); len(l) != 2 {
		t.Errorf("ListTransactions Ongoing: %v, want describe-a and describe-b", l.TransactionalIDs())
	}
	checkOffsets("a and b open", map[int32]int64{0: 9, 1: 2, 2: 0}, map[int32]int64{0: 5, 1: 0, 2: 0})

	// a commits: markers at 0/9 and 1/2; partition 0 is then held back by b.
	if err := txA.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("committing a: %v", err)
	}
	epochAfter := func(e int16) int16 {
		if tv >= 2 {
			return e + 1 // KIP-890 part 2: EndTxn bumps the epoch
		}
		return e
	}
	d = describe("describe-a")
	if d.State != "CompleteCommit" || d.ProducerID != pidA || d.ProducerEpoch != epochAfter(epochA) || len(tps(d)) != 0 {
		t.Errorf("describe-a after commit: state %s, producer %d/%d, partitions %v; want CompleteCommit, %d/%d, none",
			d.State, d.ProducerID, d.ProducerEpoch, tps(d), pidA, epochAfter(epochA))
	}
	if l := listed(nil, "CompleteCommit"); len(l) != 1 || l["describe-a"].TxnID == "" {
		t.Errorf("ListTransactions CompleteCommit: %v, want describe-a", l.TransactionalIDs())
	}
	if l := listed(nil, "Ongoing"); len(l) != 1 || l["describe-b"].TxnID == "" {
		t.Errorf("ListTransactions Ongoing: %v, want describe-b", l.TransactionalIDs())
	}
	dp = producers()
	checkProducer(0, pidA, epochAfter(epochA), -2, -1, 0)
	checkProducer(1, pidA, epochAfter(epochA), -2, -1, 0)
	checkProducer(0, pidB, epochB, 0, 8, -1)
	checkOffsets("a committed, b open", map[int32]int64{0: 10, 1: 3, 2: 0}, map[int32]int64{0: 8, 1: 3, 2: 0})
	checkFetch("a committed, b open", 0, 0, true, 10, 8, span(0, 8))
	checkFetch("a committed, b open", 1, 0, true, 3, 3, span(0, 2))

	// b aborts: marker at 0/10.
	if err := txB.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("aborting b: %v", err)
	}
	d = describe("describe-b")
	if d.State != "CompleteAbort" || d.ProducerID != pidB || d.ProducerEpoch != epochAfter(epochB) || len(tps(d)) != 0 {
		t.Errorf("describe-b after abort: state %s, producer %d/%d, partitions %v; want CompleteAbort, %d/%d, none",
			d.State, d.ProducerID, d.ProducerEpoch, tps(d), pidB, epochAfter(epochB))
	}
	if l := listed(nil, "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"); len(l) != 0 {
		t.Errorf("ListTransactions open states: %v, want none", l.TransactionalIDs())
	}
	dp = producers()
	checkProducer(0, pidB, epochAfter(epochB), -2, -1, 0)
	checkOffsets("both ended", map[int32]int64{0: 11, 1: 3, 2: 0}, map[int32]int64{0: 11, 1: 3, 2: 0})
	rp := checkFetch("both ended", 0, 0, true, 11, 11, span(0, 8))
	if len(rp.AbortedTransactions) != 1 || rp.AbortedTransactions[0].ProducerID != pidB || rp.AbortedTransactions[0].FirstOffset != 8 {
		t.Errorf("read_committed fetch of 0: aborted transactions %+v, want producer %d from offset 8", rp.AbortedTransactions, pidB)
	}
	if rp := checkFetch("both ended", 0, 0, false, 11, 11, span(0, 9)); len(rp.AbortedTransactions) != 0 {
		t.Errorf("read_uncommitted fetch of 0: aborted transactions %+v, want none (only read_committed gets them)", rp.AbortedTransactions)
	}
	// From inside the aborted range: no records (the marker is skipped).
	checkFetch("both ended", 0, 9, true, 11, 11, nil)

	// A whole read_committed read sees the committed data only.
	got := txnReadTopic(t, ctx, b.Addr, topic, true)
	var vals []string
	for _, r := range got {
		vals = append(vals, fmt.Sprintf("%d:%s", r.Partition, r.Value))
	}
	slices.Sort(vals)
	want := []string{"0:a-0", "0:a-1", "0:a-2", "0:plain-0", "0:plain-1", "0:plain-2", "0:plain-3", "0:plain-4", "1:a-3", "1:a-4"}
	if !slices.Equal(vals, want) {
		t.Errorf("read_committed read: %v, want %v", vals, want)
	}
}
