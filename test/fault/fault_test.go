package fault

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
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

	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/testutil"
)

const (
	partitions     = 6
	topic          = "faults"
	sessionTimeout = 2 * time.Second
	// maxRecords bounds what the producers write in a run; each writes
	// about one record a millisecond.
	maxRecords = 5_000_000
	pace       = time.Millisecond
)

// The kinds of fault, each a round on its own, then mixed at random.
var faultKinds = []string{"kill-leader", "kill-controller", "pause-leader", "isolate-leader", "isolate-controller",
	"rolling-restart"}

// Three brokers, every kind of fault, then mixed rounds.
func TestFaults(t *testing.T) { runFaults(t, 3, faultKinds, 2) }

// Five brokers: the faults that differ with a larger quorum, among them a
// split of the cluster into two brokers (with the controller) and three.
func TestFaultsFiveBrokers(t *testing.T) {
	runFaults(t, 5, []string{"kill-controller", "isolate-leader", "split", "pause-leader"}, 0)
}

// runFaults runs each of kinds once on a cluster of n brokers, then
// rounds more (STRAND_FAULT_ROUNDS) drawn at random from them, and checks
// the cluster once healed.
func runFaults(t *testing.T, brokers int, kinds []string, rounds int) {
	if testing.Short() {
		t.Skip("broker processes and faults: not in -short")
	}
	if v, err := strconv.Atoi(os.Getenv("STRAND_FAULT_ROUNDS")); err == nil && v >= 0 {
		rounds = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("STRAND_FAULT_SEED"), 10, 64); err == nil {
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d (STRAND_FAULT_SEED), %d mixed rounds (STRAND_FAULT_ROUNDS)", seed, rounds)

	c := testutil.StartNetCluster(t, brokers, "--broker-session-timeout", sessionTimeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(kinds)+rounds)*40*time.Second+2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	minISR := "2"
	if _, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &minISR}, topic); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": &minISR}, txnTopic); err != nil {
		t.Fatal(err)
	}
	waitLed(t, ctx, c.ProcessCluster, nil)

	w := newWorkload(t, c.Seeds())
	w.logs = func() string { return logTails(c.ProcessCluster) }
	w.start(ctx)
	tw := newTxnWorkload(t, c.Seeds())
	tw.start(ctx)
	time.Sleep(time.Second)

	plan := slices.Clone(kinds)
	for range rounds {
		plan = append(plan, kinds[rng.IntN(len(kinds))])
	}
	var recoveries []string
	for round, kind := range plan {
		before := w.acked()
		took := inject(t, ctx, c, w, kind, rng)
		waitInSync(t, ctx, c.ProcessCluster)
		time.Sleep(500 * time.Millisecond) // writes go on healed
		if w.acked() <= before {
			t.Fatalf("round %d (%s): nothing acknowledged since the fault", round, kind)
		}
		recoveries = append(recoveries, fmt.Sprintf("%s %v", kind, took.Round(time.Millisecond)))
		t.Logf("round %d: %s; the victim's partitions took writes again after %v; %d records acknowledged so far",
			round, kind, took.Round(time.Millisecond), w.acked())
	}
	tw.stop()
	w.stop(ctx)
	check(t, ctx, c.ProcessCluster, w)
	tw.check(t, ctx, c.Seeds())
	t.Logf("%d rounds; recovery per fault: %s", len(plan), strings.Join(recoveries, ", "))
}

// inject makes one fault, heals it, and returns how long the partitions the
// victim led took to acknowledge a write again after the fault began.
func inject(t *testing.T, ctx context.Context, nc *testutil.NetCluster, w *workload, kind string, rng *rand.Rand) time.Duration {
	t.Helper()
	c := nc.ProcessCluster
	brokers := len(c.Procs)
	leaders := waitLed(t, ctx, c, nil)
	victim := leaders[int32(rng.IntN(partitions))]
	if kind == "kill-controller" || kind == "isolate-controller" || kind == "split" {
		l, err := testutil.QuorumLeader(c.Seeds()[0])
		if err != nil || l < 0 {
			l, err = testutil.QuorumLeader(c.Seeds()[1])
		}
		if err != nil || l < 0 {
			t.Fatalf("no controller: %v", err)
		}
		victim = l
	}
	// The brokers the fault takes out: the victim, and for a split as
	// many more as leave a majority on the other side.
	out := []int32{victim}
	if kind == "split" {
		for _, i := range rng.Perm(brokers) {
			if len(out) < (brokers-1)/2 && int32(i) != victim {
				out = append(out, int32(i))
			}
		}
	}
	var led []int32
	for p, l := range leaders {
		if slices.Contains(out, l) {
			led = append(led, p)
		}
	}
	if len(led) == 0 {
		// A controller leading no partition: time every partition's
		// next write, which waits on nothing the victim did.
		for p := range int32(partitions) {
			led = append(led, p)
		}
	}
	start := time.Now()
	proc := c.Procs[victim]
	switch kind {
	case "kill-leader", "kill-controller":
		proc.Kill()
		waitLed(t, ctx, c, func(p, l int32) bool { return l != victim })
		took := w.writtenAfter(ctx, led, start)
		proc.Restart(t)
		c.WaitLive(t, brokers, 30*time.Second)
		return took
	case "pause-leader":
		// Past its session timeout it is fenced and its partitions move;
		// resumed, it must not acknowledge as the leader it was.
		proc.Pause()
		waitLed(t, ctx, c, func(p, l int32) bool { return l != victim })
		took := w.writtenAfter(ctx, led, start)
		time.Sleep(sessionTimeout)
		proc.Resume()
		c.WaitLive(t, brokers, 30*time.Second)
		return took
	case "isolate-leader", "isolate-controller", "split":
		// Cut off from the other brokers but not from the clients: the
		// others fence it and lead its partitions; it must not
		// acknowledge a write they do not have, and healed it follows.
		var side []int
		for _, b := range out {
			side = append(side, int(b))
		}
		// A partition with fewer than min.insync.replicas replicas on
		// the majority's side takes no acks=all write until healed: that
		// is the promise min.insync.replicas makes.
		writable := writableWithout(t, c, out)
		led = slices.DeleteFunc(led, func(p int32) bool { return !slices.Contains(writable, p) })
		if len(led) == 0 {
			led = writable // none of theirs can take writes: time the others'
		}
		nc.Split(t, side)
		start = time.Now() // the cut takes a few commands: it is whole from here
		waitLed(t, ctx, c, func(p, l int32) bool { return !slices.Contains(out, l) || !slices.Contains(writable, p) })
		t.Logf("%s: brokers %v cut off at %s; their partitions %v moved after %v", kind, out, start.Format("15:04:05.000"), led, time.Since(start).Round(time.Millisecond))
		took := w.writtenAfter(ctx, led, start)
		if d := sessionTimeout + 2500*time.Millisecond - time.Since(start); d > 0 { // its limit, and a tick
			time.Sleep(d)
		}
		var victimLed []int32
		for p, l := range leaders {
			if l == victim {
				victimLed = append(victimLed, p)
			}
		}
		if len(victimLed) > 0 {
			zombieRefuses(t, ctx, c.Procs[victim].Addr, victimLed)
		}
		time.Sleep(sessionTimeout)
		nc.Heal(t)
		c.WaitLive(t, brokers, 30*time.Second)
		return took
	case "rolling-restart":
		// Every broker in turn, stopped cleanly (SIGTERM) and started.
		var worst time.Duration
		for i, p := range c.Procs {
			leaders := waitLed(t, ctx, c, nil)
			var mine []int32
			for part, l := range leaders {
				if l == int32(i) {
					mine = append(mine, part)
				}
			}
			at := time.Now()
			if err := p.Stop(); err != nil {
				t.Errorf("broker %d did not stop cleanly: %v", i, err)
			}
			worst = max(worst, w.writtenAfter(ctx, mine, at))
			p.Restart(t)
			c.WaitLive(t, brokers, 30*time.Second)
			waitInSync(t, ctx, c) // as an operator waits for no under-replicated partition
		}
		return worst
	}
	t.Fatalf("unknown fault %s", kind)
	return 0
}

// writableWithout lists the partitions that keep min.insync.replicas (2)
// replicas without the brokers out.
func writableWithout(t *testing.T, c *testutil.ProcessCluster, out []int32) []int32 {
	t.Helper()
	md, err := testutil.BrokerMetadata(c.Seeds()[0])
	if err != nil {
		t.Fatal(err)
	}
	var ok []int32
	for _, tp := range md.Topics {
		if tp.Topic == nil || *tp.Topic != topic {
			continue
		}
		for _, p := range tp.Partitions {
			left := slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool { return slices.Contains(out, r) })
			if len(left) >= 2 {
				ok = append(ok, p.Partition)
			}
		}
	}
	return ok
}

// zombieRefuses holds a leader cut off from the metadata quorum past its
// session timeout (and an election's time) to taking no write for the partitions it led, not even
// with acks=1: they are led elsewhere by now, and what it took would be
// lost. It answers NOT_LEADER_OR_FOLLOWER, which sends clients to fresh
// metadata.
func zombieRefuses(t *testing.T, ctx context.Context, addr string, led []int32) {
	t.Helper()
	cl := newClient(t, []string{addr}, kgo.RequestRetries(0))
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for _, p := range led {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rp.Records = model.EncodeBatch([]model.KeyValue{{Value: []byte("zombie")}}, time.Now().UnixMilli(), model.NoProducer)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		t.Fatalf("producing to the cut-off leader %s: %v", addr, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != kerr.NotLeaderForPartition.Code {
				t.Errorf("the cut-off leader %s answered a write to %d with %v (offset %d), want NOT_LEADER_OR_FOLLOWER",
					addr, rp.Partition, kerr.ErrorForCode(rp.ErrorCode), rp.BaseOffset)
			}
		}
	}
}

// waitLed waits until every partition has a leader (that ok accepts, if
// given) in the metadata of a live broker, and returns the leaders.
func waitLed(t *testing.T, ctx context.Context, c *testutil.ProcessCluster, ok func(p, leader int32) bool) map[int32]int32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, seed := range c.Seeds() {
			md, err := testutil.BrokerMetadata(seed)
			if err != nil {
				continue
			}
			leaders := map[int32]int32{}
			for _, tp := range md.Topics {
				if tp.Topic == nil || *tp.Topic != topic {
					continue
				}
				for _, p := range tp.Partitions {
					if p.Leader >= 0 && (ok == nil || ok(p.Partition, p.Leader)) {
						leaders[p.Partition] = p.Leader
					}
				}
			}
			if len(leaders) == partitions {
				return leaders
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("partitions of %s not all led after 30 s%s", topic, logTails(c))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitInSync waits until every partition has all its replicas in sync.
func waitInSync(t *testing.T, ctx context.Context, c *testutil.ProcessCluster) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for {
		md, err := testutil.BrokerMetadata(c.Seeds()[0])
		full := 0
		var lagging []string
		if err == nil {
			for _, tp := range md.Topics {
				if tp.Topic != nil && *tp.Topic == topic {
					for _, p := range tp.Partitions {
						if len(p.ISR) == len(p.Replicas) && p.Leader >= 0 {
							full++
						} else {
							lagging = append(lagging, fmt.Sprintf("%d (leader %d, epoch %d, replicas %v, in sync %v)",
								p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR))
						}
					}
				}
			}
		}
		if full == partitions {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%d of %d partitions fully in sync after %v (err %v); not in sync: %s%s",
				full, partitions, time.Since(start).Round(time.Second), err, strings.Join(lagging, "; "), logTails(c))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logTails is the end of every broker's log, for a failure's message.
func logTails(c *testutil.ProcessCluster) string {
	var logs strings.Builder
	for i, p := range c.Procs {
		fmt.Fprintf(&logs, "\n--- broker %d ---\n%s", i, p.Output.Tail(60))
	}
	return logs.String()
}

func newClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(250 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// ack is one acknowledged record.
type ack struct {
	value    string
	sent, at time.Time
}

// workload is two idempotent producers and one group consumer.
type workload struct {
	t     *testing.T
	seeds []string
	prod  []*kgo.Client
	cons  *kgo.Client

	mu       sync.Mutex
	acks     map[int32]map[int64]ack // by partition, offset
	lastAck  map[int32]time.Time
	failures int
	seen     map[int32]map[int64]string
	dups     int
	sent     int

	logs      func() string // the brokers' log tails, for a failure
	stopc     chan struct{} // the producers stop
	stopCons  chan struct{} // the consumer stops
	wg, consW sync.WaitGroup
}

const group = "faults-group"

func newWorkload(t *testing.T, seeds []string) *workload {
	w := &workload{t: t, seeds: seeds, acks: map[int32]map[int64]ack{}, lastAck: map[int32]time.Time{},
		seen: map[int32]map[int64]string{}, stopc: make(chan struct{}), stopCons: make(chan struct{})}
	for range 2 {
		// A request to a stalled broker is given up after 5 s, so that
		// recovery times measure the brokers, not the client's timeout
		// (franz-go's default is 20 s, Java's 30 s).
		w.prod = append(w.prod, newClient(t, seeds, kgo.DefaultProduceTopic(topic), kgo.MaxBufferedRecords(200),
			kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProduceRequestTimeout(3*time.Second),
			kgo.RequestTimeoutOverhead(2*time.Second)))
	}
	w.cons = newClient(t, seeds, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond), kgo.AutoCommitInterval(500*time.Millisecond))
	return w
}

func (w *workload) start(ctx context.Context) {
	for i, cl := range w.prod {
		w.wg.Go(func() { w.produce(ctx, i, cl) })
	}
	w.consW.Go(func() { w.consume(ctx) })
}

// produce writes records "p<producer>-<n>" keyed by n mod 13, so that each
// partition gets each producer's records in order.
func (w *workload) produce(ctx context.Context, id int, cl *kgo.Client) {
	for n := 0; ; n++ {
		select {
		case <-w.stopc:
			cl.Flush(ctx)
			return
		default:
		}
		w.mu.Lock()
		if w.sent >= maxRecords {
			w.mu.Unlock()
			<-w.stopc
			cl.Flush(ctx)
			return
		}
		w.sent++
		w.mu.Unlock()
		time.Sleep(pace)
		v := fmt.Sprintf("p%d-%d", id, n)
		sent := time.Now()
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(n % 13)), Value: []byte(v)}, func(r *kgo.Record, err error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if err != nil {
				w.failures++
				return
			}
			if w.acks[r.Partition] == nil {
				w.acks[r.Partition] = map[int64]ack{}
			}
			if prev, ok := w.acks[r.Partition][r.Offset]; ok && prev.value != v {
				w.t.Errorf("offset %d/%d acknowledged for %s and for %s", r.Partition, r.Offset, prev.value, v)
			}
			now := time.Now()
			w.acks[r.Partition][r.Offset] = ack{value: v, sent: sent, at: now}
			w.lastAck[r.Partition] = now
		})
	}
}

func (w *workload) consume(ctx context.Context) {
	for {
		select {
		case <-w.stopCons:
			return
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := w.cons.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			if w.seen[r.Partition] == nil {
				w.seen[r.Partition] = map[int64]string{}
			}
			if prev, ok := w.seen[r.Partition][r.Offset]; ok {
				w.dups++
				if prev != string(r.Value) {
					w.t.Errorf("the group read %s and %s at %d/%d", prev, r.Value, r.Partition, r.Offset)
				}
			}
			w.seen[r.Partition][r.Offset] = string(r.Value)
		})
		w.mu.Unlock()
	}
}

func (w *workload) acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.acks {
		n += len(m)
	}
	return n
}

// writtenAfter waits until every one of parts has acknowledged a record
// sent after since, and returns how long after since the last of those
// first acknowledgements came.
func (w *workload) writtenAfter(ctx context.Context, parts []int32, since time.Time) time.Duration {
	if len(parts) == 0 {
		return 0
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var latest time.Time
		all := true
		w.mu.Lock()
		for _, p := range parts {
			at := w.lastAck[p]
			if !at.After(since) {
				all = false
				break
			}
			// The first ack of a record sent after since: scan for it.
			var first time.Time
			for _, a := range w.acks[p] {
				if a.sent.After(since) && (first.IsZero() || a.at.Before(first)) {
					first = a.at
				}
			}
			if first.IsZero() {
				all = false
				break
			}
			if first.After(latest) {
				latest = first
			}
		}
		w.mu.Unlock()
		if all {
			return latest.Sub(since)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			tails := ""
			if w.logs != nil {
				tails = w.logs()
			}
			w.t.Fatalf("partitions %v took no write for 60 s after the fault%s", parts, tails)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop stops the producers, lets the group read everything acknowledged
// (for up to a minute), and stops it.
func (w *workload) stop(ctx context.Context) {
	close(w.stopc)
	w.wg.Wait()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		if w.unseen() == 0 {
			break
		}
	}
	close(w.stopCons)
	w.consW.Wait()
}

// unseen counts the acknowledged records the group has not read.
func (w *workload) unseen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.unseenLocked()
}

func (w *workload) unseenLocked() int {
	n := 0
	for p, m := range w.acks {
		for off := range m {
			if _, ok := w.seen[p][off]; !ok {
				n++
			}
		}
	}
	return n
}

// check holds the healed cluster to its promises.
func check(t *testing.T, ctx context.Context, c *testutil.ProcessCluster, w *workload) {
	t.Helper()
	leaders := waitLed(t, ctx, c, nil)
	reader := newClient(t, c.Seeds())
	ends, err := kadm.NewClient(reader).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	// Every acknowledged record is at its offset, each producer's records
	// in order per partition, no offset twice.
	stored := map[int32]map[int64]string{}
	rd := newClient(t, c.Seeds(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	got := int64(0)
	last := map[string]int{} // producer/partition -> last n
	for got < want {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if stored[r.Partition] == nil {
				stored[r.Partition] = map[int64]string{}
			}
			if _, ok := stored[r.Partition][r.Offset]; ok {
				t.Errorf("offset %d/%d read twice", r.Partition, r.Offset)
			}
			stored[r.Partition][r.Offset] = string(r.Value)
			prod, n, _ := strings.Cut(string(r.Value), "-")
			k := fmt.Sprintf("%s/%d", prod, r.Partition)
			seq, _ := strconv.Atoi(n)
			if prev, ok := last[k]; ok && seq <= prev {
				t.Errorf("partition %d: %s after %s-%d (out of order or duplicated)", r.Partition, r.Value, prod, prev)
			}
			last[k] = seq
			got++
		})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	acked, missing := 0, 0
	for p, m := range w.acks {
		for off, a := range m {
			acked++
			if stored[p][off] != a.value {
				missing++
				if missing <= 10 {
					t.Errorf("acknowledged %s at %d/%d; the log holds %q", a.value, p, off, stored[p][off])
				}
			}
		}
	}
	unseen := w.unseenLocked()
	t.Logf("%d records acknowledged (%d sends failed), %d stored; lost %d; the group read all but %d, with %d duplicates",
		acked, w.failures, got, missing, unseen, w.dups)
	if missing > 0 {
		t.Errorf("%d acknowledged records lost", missing)
	}
	if unseen > 0 {
		t.Errorf("the group never read %d acknowledged records", unseen)
	}
	// Replicas identical byte for byte once caught up.
	md, err := testutil.BrokerMetadata(c.Seeds()[leaders[0]])
	if err != nil {
		t.Fatal(err)
	}
	replicas := map[int32][]int32{}
	for _, tp := range md.Topics {
		if tp.Topic != nil && *tp.Topic == topic {
			for _, p := range tp.Partitions {
				replicas[p.Partition] = p.Replicas
			}
		}
	}
	for p := range int32(partitions) {
		waitIdentical(t, c, p, leaders[p], replicas[p])
	}
}

// waitIdentical waits until every replica of partition p holds the same
// bytes.
func waitIdentical(t *testing.T, c *testutil.ProcessCluster, p, leader int32, replicas []int32) {
	t.Helper()
	if len(replicas) != 3 {
		t.Fatalf("partition %d has replicas %v", p, replicas)
	}
	testutil.EventuallyEvery(t, 30*time.Second, 100*time.Millisecond, func() error {
		var sizes []int
		var logs [][]byte
		for _, r := range replicas {
			b := testutil.ReplicaBytes(t, c.Procs[r].DataDir, topic, p)
			logs = append(logs, b)
			sizes = append(sizes, len(b))
		}
		for _, l := range logs[1:] {
			if !bytes.Equal(l, logs[0]) {
				return fmt.Errorf("partition %d (leader %d): replicas %v differ, sizes %v%s", p, leader, replicas, sizes, divergence(replicas, logs))
			}
		}
		return nil
	})
}

// divergence describes where replicas' logs first differ: the batch there
// as each replica holds it.
func divergence(replicas []int32, logs [][]byte) string {
	at := -1
	for i := 0; at < 0; i++ {
		for _, l := range logs {
			if i >= len(l) || l[i] != logs[0][i] {
				at = i
				break
			}
		}
		if i >= len(logs[0]) && at < 0 {
			at = i
		}
	}
	start := 0 // the batch holding byte at, by the first replica's boundaries
	for start+model.BatchHeaderSize <= len(logs[0]) {
		n := model.Batch(logs[0][start:]).Size()
		if start+n > at {
			break
		}
		start += n
	}
	var b strings.Builder
	fmt.Fprintf(&b, "; first difference at byte %d, in the batch at byte %d:", at, start)
	for i, l := range logs {
		if start+model.BatchHeaderSize > len(l) {
			fmt.Fprintf(&b, "\n  replica %d: ends at byte %d", replicas[i], len(l))
			continue
		}
		h := model.Batch(l[start:])
		fmt.Fprintf(&b, "\n  replica %d: offsets %d-%d, %d bytes, leader epoch %d, producer %d/%d seq %d, crc %08x, attributes %x, %d batches after",
			replicas[i], h.BaseOffset(), h.LastOffset(), h.Size(), h.PartitionLeaderEpoch(), h.ProducerID(), h.ProducerEpoch(),
			h.BaseSequence(), h.CRC(), h.Attributes(), countBatches(l[start:]))
	}
	return b.String()
}

func countBatches(l []byte) int {
	n := 0
	for pos := 0; pos+model.BatchHeaderSize <= len(l); pos += model.Batch(l[pos:]).Size() {
		n++
	}
	return n
}
