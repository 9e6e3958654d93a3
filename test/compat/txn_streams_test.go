package compat

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
)

// Kafka Streams with processing.guarantee=exactly_once_v2 (test/java's
// strandlog.compat.Streams) against the real binary: the first user of
// transactions. Its topology re-keys the input (a repartition topic, purged
// with DeleteRecords) and keeps a per-key count and sum in a persistent store
// (a compacted changelog topic), so one Streams transaction spans the output,
// the changelog, the repartition topic and the group's offsets.

const (
	streamsKeys       = 5 // aggregation keys g0..g4
	streamsPartitions = 3
)

// streamsValue is input record i's value: its aggregation key and number.
func streamsValue(i int) string { return fmt.Sprintf("g%d %d", i%streamsKeys, i) }

// streamsApp is one run of the Streams helper, its standard input held open
// until stop.
type streamsApp struct {
	name           string
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr grouptest.Lines
	done           chan struct{}
	err            error
	started        time.Time
}

func startStreamsApp(t *testing.T, name, addr, appID, in, out, stateDir string, props ...string) *streamsApp {
	t.Helper()
	java, cp := javatest.Helper(t)
	args := []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}
	args = append(args, strings.Fields(os.Getenv("STRAND_COMPAT_JAVA_OPTS"))...)
	args = append(args, "-cp", cp, "strandlog.compat.Streams", "run", addr, appID, in, out, stateDir)
	a := &streamsApp{name: name, cmd: exec.Command(java, append(args, props...)...), done: make(chan struct{})}
	a.cmd.Stdout, a.cmd.Stderr = &a.stdout, &a.stderr
	var err error
	if a.stdin, err = a.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("starting Streams %s: %v", name, err)
	}
	a.started = time.Now()
	go func() {
		a.err = a.cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(func() {
		a.kill()
		if t.Failed() {
			t.Logf("Streams %s: exit %v\nstdout:\n%s\nstderr:\n%s", name, a.err, tail(a.stdout.String(), 4<<10),
				grouptest.HeadLines(a.stderr.String(), 60))
		}
	})
	return a
}

func (a *streamsApp) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// kill ends the JVM with SIGKILL: no commit, no close, no LeaveGroup.
func (a *streamsApp) kill() {
	if !a.exited() {
		a.cmd.Process.Kill()
		<-a.done
	}
}

// stop closes the helper's standard input, so it closes the application,
// and waits for it to exit.
func (a *streamsApp) stop(t *testing.T) {
	t.Helper()
	a.stdin.Close()
	select {
	case <-a.done:
	case <-time.After(40 * time.Second):
		t.Fatalf("Streams %s did not exit within 40s of its stdin closing", a.name)
	}
	if a.err != nil || !strings.Contains(a.stdout.String(), "\nclosed true\n") {
		t.Errorf("Streams %s did not close cleanly: exit %v", a.name, a.err)
	}
}

// lines are the helper's output lines starting with prefix.
func (a *streamsApp) lines(prefix string) []string {
	var out []string
	for l := range strings.Lines(a.stdout.String()) {
		if strings.HasPrefix(l, prefix) {
			out = append(out, strings.TrimSuffix(l, "\n"))
		}
	}
	return out
}

// check fails the test on an error line or an exit.
func (a *streamsApp) check(t *testing.T) {
	t.Helper()
	if errs := a.lines("error "); len(errs) > 0 {
		t.Fatalf("Streams %s: %s", a.name, strings.Join(errs, "\n"))
	}
	if a.exited() {
		t.Fatalf("Streams %s exited: %v", a.name, a.err)
	}
}

// restored is the number of changelog records the run restored its store
// from.
func (a *streamsApp) restored() int64 {
	var n int64
	for _, l := range a.lines("restored ") {
		if f := strings.Fields(l); len(f) == 5 {
			v, _ := strconv.ParseInt(f[4], 10, 64)
			n += v
		}
	}
	return n
}

// streamsFeed produces input records with a plain (idempotent, not
// transactional) producer, paced, so that a Streams instance can be killed
// while there is input left.
type streamsFeed struct {
	cl   *kgo.Client
	mu   sync.Mutex
	ends map[int32]int64
	next int
	err  error
}

// produce sends records next..next+n-1 in chunks of chunk records every
// pause, then waits for them.
func (f *streamsFeed) produce(ctx context.Context, n, chunk int, pause time.Duration) error {
	for sent := 0; sent < n; {
		var rs []*kgo.Record
		for ; sent < n && len(rs) < chunk; sent++ {
			i := f.next
			f.next++
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "in-%d", i), Value: []byte(streamsValue(i))})
		}
		res := f.cl.ProduceSync(ctx, rs...)
		if err := res.FirstErr(); err != nil {
			return err
		}
		f.mu.Lock()
		for _, r := range res {
			f.ends[r.Record.Partition] = max(f.ends[r.Record.Partition], r.Record.Offset+1)
		}
		f.mu.Unlock()
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	return nil
}

// background runs produce in a goroutine; the returned function waits for it.
func (f *streamsFeed) background(ctx context.Context, n, chunk int, pause time.Duration) func() error {
	done := make(chan error, 1)
	go func() { done <- f.produce(ctx, n, chunk, pause) }()
	return func() error { return <-done }
}

// produced is the number of records acknowledged so far.
func (f *streamsFeed) produced() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, end := range f.ends {
		n += end
	}
	return n
}

func (f *streamsFeed) inputEnds() map[int32]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.ends)
}

// watchOutput counts, in the background until the test ends, the records
// of topic a read_committed reader sees.
func watchOutput(t *testing.T, ctx context.Context, addr, topic string) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	cl := client(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			n.Add(int64(cl.PollFetches(ctx).NumRecords()))
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &n
}

// TestStreamsExactlyOnce runs the Streams helper over input franz-go
// produces (a plain producer) in three batches, the last two paced (about
// 2 s each):
//   - instance A processes the first batch and is killed (SIGKILL) during
//     the second, once a quarter of it is processed and a transaction of its
//     is open with records in the output (linger.ms=5: it sends as it goes);
//   - B, on the same state directory, so with the same process id and
//     transactional id (its InitProducerId fences A and aborts A's open
//     transaction), wipes its uncheckpointed store and restores it from the
//     changelog, finishes the second batch, and is killed the same way
//     during the third;
//   - C, on a fresh state directory (a new transactional id: B's open
//     transaction ends by its 10 s timeout, which holds C's read_committed
//     reads of the repartition topic and the changelog until then), restores
//     the whole store from the changelog, finishes, and is stopped cleanly
//     (stdin closed: KafkaStreams.close).
//
// Progress is what a read_committed reader of the output sees. Then:
//   - the read_committed output has one record per input record: per key
//     the counts go 1, 2, 3, ... without a gap or a repeat, each sum is the
//     previous one plus the record's number, every input number of the key
//     appears once, and the last count and sum are those of the input (a
//     read_uncommitted reader also sees the killed instances' aborted
//     records: their number is logged);
//   - the group (the application id) committed the input's end offsets
//     (OffsetFetch with require_stable);
//   - the changelog topic is compacted, the repartition topic is not, both
//     with the input's partition count, and the repartition topic was purged
//     (DeleteRecords) behind the committed offsets.
func TestStreamsExactlyOnce(t *testing.T) {
	t.Parallel()
	javatest.Helper(t) // build (or skip) before starting brokers
	for _, tv := range javaTxnVersions {
		t.Run(fmt.Sprintf("transaction.version=%d", tv), func(t *testing.T) {
			t.Parallel()
			testStreamsExactlyOnce(t, tv)
		})
	}
}

func testStreamsExactlyOnce(t *testing.T, tv int) {
	const (
		batch      = 400
		in, out    = "streams-in", "streams-out"
		killAfter  = batch / 4 // records of a batch committed before the kill
		chunk      = 8
		chunkPause = 40 * time.Millisecond // a batch takes about 2 s to arrive
	)
	appID := fmt.Sprintf("streams-eos-%d", tv)
	changelog, repartition := appID+"-totals-changelog", appID+"-rekeyed-repartition"
	start := time.Now()
	b := startBroker(t, append(slices.Clone(groupBrokerArgs), txnBrokerArgs(fmt.Sprint(tv))...)...)
	ctx := groupCtx(t, 3*time.Minute)
	createTopic(t, b.Addr, in, streamsPartitions, nil)
	createTopic(t, b.Addr, out, streamsPartitions, nil)
	adm := kadm.NewClient(client(t, b.Addr))
	feed := &streamsFeed{cl: client(t, b.Addr, kgo.DefaultProduceTopic(in)), ends: map[int32]int64{}}

	// committed is the number of input records the group committed (the
	// input starts at offset 0); offsets pending in an open transaction do
	// not count.
	committed := func() int64 {
		offs, err := adm.FetchOffsets(ctx, appID)
		if err != nil {
			return -1
		}
		var n int64
		for _, p := range offs[in] {
			if p.Err == nil && p.At > 0 {
				n += p.At
			}
		}
		return n
	}
	// processed is the number of output records a read_committed reader
	// has seen so far: one per input record processed and committed.
	processed := watchOutput(t, ctx, b.Addr, out)
	waitProcessed := func(a *streamsApp, want int64, limit time.Duration) {
		t.Helper()
		txnWait(t, ctx, limit, fmt.Sprintf("Streams %s: %d output records committed", a.name, want),
			func() bool { a.check(t); return processed.Load() >= want },
			func() string {
				return fmt.Sprintf("%d output records committed, %d input records; open transactions: %s",
					processed.Load(), committed(), txnDescribeOpen(ctx, adm, out))
			})
	}
	// killOpen kills a once it has processed at least want records and has
	// a transaction open with records in the output (it sends as it goes:
	// linger.ms is short), so that the kill leaves records to abort.
	killOpen := func(a *streamsApp, want int64, total int) {
		t.Helper()
		waitProcessed(a, want, 20*time.Second)
		open := ""
		for deadline := time.Now().Add(5 * time.Second); open == "" && time.Now().Before(deadline); {
			hw, lso, err := txnStableOffsets(ctx, adm, out)
			for p := range hw {
				if err == nil && lso[p] < hw[p] {
					open = fmt.Sprintf("partition %d: LSO %d, HW %d", p, lso[p], hw[p])
				}
			}
			if open == "" {
				time.Sleep(20 * time.Millisecond)
			}
		}
		a.kill()
		if open == "" {
			open = "none seen within 5s"
		}
		t.Logf("%s killed with %d of %d input records produced, %d output records committed, an open transaction in "+
			"the output: %s", a.name, feed.produced(), total, processed.Load(), open)
		if processed.Load() >= int64(total) {
			t.Errorf("%s had processed all %d records before it was killed: the kill tested nothing", a.name, total)
		}
	}
	stateDir := t.TempDir()
	props := []string{"producer.linger.ms=5"}

	// First batch, first instance.
	if err := feed.produce(ctx, batch, batch, 0); err != nil {
		t.Fatalf("producing the first batch: %v", err)
	}
	a := startStreamsApp(t, "A", b.Addr, appID, in, out, stateDir, props...)
	waitProcessed(a, batch, 40*time.Second)
	t.Logf("A: first batch processed %v after its start", time.Since(a.started).Round(time.Millisecond))

	// Second batch arriving; A killed once some of it is processed.
	wait := feed.background(ctx, batch, chunk, chunkPause)
	killOpen(a, batch+killAfter, 2*batch)
	if err := wait(); err != nil {
		t.Fatalf("producing the second batch: %v", err)
	}

	// Same state directory: the same process id and transactional id.
	bb := startStreamsApp(t, "B", b.Addr, appID, in, out, stateDir, props...)
	waitProcessed(bb, 2*batch, 40*time.Second)
	t.Logf("B: second batch processed %v after its start (restored %d changelog records)",
		time.Since(bb.started).Round(time.Millisecond), bb.restored())
	wait = feed.background(ctx, batch, chunk, chunkPause)
	killOpen(bb, 2*batch+killAfter, 3*batch)
	if err := wait(); err != nil {
		t.Fatalf("producing the third batch: %v", err)
	}

	// A fresh state directory: a new process id and transactional id (the
	// killed one's transaction ends by its timeout), the store rebuilt from
	// the changelog alone.
	c := startStreamsApp(t, "C", b.Addr, appID, in, out, t.TempDir(), props...)
	waitProcessed(c, 3*batch, 40*time.Second)
	t.Logf("C: all input processed %v after its start (restored %d changelog records)",
		time.Since(c.started).Round(time.Millisecond), c.restored())
	if c.restored() == 0 {
		t.Errorf("C, on an empty state directory, restored no changelog records: %q", c.lines("restore"))
	}
	txnWait(t, ctx, 10*time.Second, "the group committing the input's end", func() bool { return committed() >= 3*batch },
		func() string { return fmt.Sprintf("%d input records committed", committed()) })
	c.stop(t)
	for _, a := range []*streamsApp{a, bb, c} {
		if errs := a.lines("error "); len(errs) > 0 {
			t.Errorf("Streams %s: %s", a.name, strings.Join(errs, "\n"))
		}
	}

	const n = 3 * batch
	ends := feed.inputEnds()
	offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), appID)
	if err != nil {
		t.Fatalf("fetching %s's offsets (require_stable): %v", appID, err)
	}
	for p := range int32(streamsPartitions) {
		if o, ok := offs.Lookup(in, p); !ok || o.Err != nil || o.At != ends[p] {
			t.Errorf("group %s: %s/%d committed %+v, want %d (the input's end)", appID, in, p, o, ends[p])
		}
	}

	got := readIsolatedQuiet(t, b.Addr, out, kgo.ReadCommitted(), n)
	checkStreamsOutput(t, got, n)
	all := readIsolatedQuiet(t, b.Addr, out, kgo.ReadUncommitted(), len(got))
	t.Logf("output: %d records read_committed, %d read_uncommitted (%d of aborted transactions)",
		len(got), len(all), len(all)-len(got))

	checkStreamsTopics(t, ctx, adm, in, changelog, repartition)
	t.Logf("transaction.version=%d: %v in all", tv, time.Since(start).Round(time.Millisecond))
}

// checkStreamsOutput checks the read_committed output of n input records:
// per key, one record per input record, counts 1, 2, 3, ..., sums growing by
// each record's number, every number once.
func checkStreamsOutput(t *testing.T, got []*kgo.Record, n int) {
	t.Helper()
	slices.SortFunc(got, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	type total struct{ count, sum int64 }
	want := map[string]total{}
	numbers := map[string]map[int64]bool{} // by key: the input numbers not seen yet
	for i := range n {
		k := fmt.Sprintf("g%d", i%streamsKeys)
		w := want[k]
		want[k] = total{w.count + 1, w.sum + int64(i)}
		if numbers[k] == nil {
			numbers[k] = map[int64]bool{}
		}
		numbers[k][int64(i)] = true
	}
	have := map[string]total{}
	bad := 0
	problem := func(format string, args ...any) {
		t.Helper()
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	for _, r := range got {
		k := string(r.Key)
		var cur total
		var last int64
		if _, err := fmt.Sscanf(string(r.Value), "%d %d %d", &cur.count, &cur.sum, &last); err != nil {
			problem("output %d/%d %s=%q is not \"COUNT SUM LAST\": %v", r.Partition, r.Offset, k, r.Value, err)
			continue
		}
		prev := have[k]
		switch {
		case numbers[k] == nil:
			problem("output %d/%d: unknown key %q", r.Partition, r.Offset, k)
		case cur.count != prev.count+1:
			problem("output %d/%d: key %s count %d after %d (an increment skipped or repeated)", r.Partition,
				r.Offset, k, cur.count, prev.count)
		case cur.sum != prev.sum+last:
			problem("output %d/%d: key %s sum %d after %d, adding %d", r.Partition, r.Offset, k, cur.sum, prev.sum, last)
		case !numbers[k][last]:
			problem("output %d/%d: key %s adds %d, which is not an input number of the key or was added before",
				r.Partition, r.Offset, k, last)
		}
		delete(numbers[k], last)
		have[k] = cur
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if have[k] != want[k] {
			problem("key %s: final count %d sum %d, want count %d sum %d (%d input numbers never added)", k,
				have[k].count, have[k].sum, want[k].count, want[k].sum, len(numbers[k]))
		}
	}
	if len(got) != n || bad > 0 {
		t.Errorf("read_committed output: %d records for %d input records, %d problems", len(got), n, bad)
	}
}

// checkStreamsTopics checks the internal topics Streams created: the
// changelog compacted, the repartition topic deleting (and purged by
// DeleteRecords after commits), both with the input's partitions.
func checkStreamsTopics(t *testing.T, ctx context.Context, adm *kadm.Client, in, changelog, repartition string) {
	t.Helper()
	td, err := adm.ListTopics(ctx, in, changelog, repartition)
	if err != nil {
		t.Fatalf("listing topics: %v", err)
	}
	for _, topic := range []string{changelog, repartition} {
		d, ok := td[topic]
		if !ok || d.Err != nil {
			t.Errorf("topic %s: %+v (Streams creates it)", topic, d)
			continue
		}
		if len(d.Partitions) != streamsPartitions {
			t.Errorf("topic %s has %d partitions, want %d (the input's)", topic, len(d.Partitions), streamsPartitions)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, changelog, repartition)
	if err != nil {
		t.Fatalf("describing the internal topics' configs: %v", err)
	}
	want := map[string]string{changelog: "compact", repartition: "delete"}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Errorf("configs of %s: %v", rc.Name, rc.Err)
			continue
		}
		policy := "(missing)"
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" {
				policy = c.MaybeValue()
			}
		}
		if policy != want[rc.Name] {
			t.Errorf("topic %s: cleanup.policy=%s, want %s", rc.Name, policy, want[rc.Name])
		}
	}
	starts, err := adm.ListStartOffsets(ctx, repartition)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("listing %s's start offsets: %v", repartition, err)
	}
	purged := false
	starts.Each(func(o kadm.ListedOffset) { purged = purged || o.Offset > 0 })
	if !purged {
		t.Errorf("%s: every partition starts at offset 0: Streams' purges (DeleteRecords after commits) did not "+
			"move a log start offset", repartition)
	}
}
