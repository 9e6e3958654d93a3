package compat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
)

// Transactions with the Java client (test/java's strandlog.compat.Txn)
// against the real binary, under both transaction protocols: the broker's
// --transaction-version sets the finalized transaction.version feature it
// advertises in ApiVersions, and the Java client (4.x) uses KIP-890's flow
// (implicit partition adds, an epoch bump on every EndTxn) only when it is 2.

// javaTxnVersions are the transaction.version values every test runs under.
var javaTxnVersions = []int{1, 2}

// javaTxn is the Java client in the transaction scenarios of
// txn_clients_test.go. Its tests read with a franz-go consumer; librdkafka's
// use raw fetches through franz-go's batch processing.
var javaTxn = txnClient{
	name:   "Java",
	reader: "the Java consumer",
	prefix: "txn-",
	ready:  func(t *testing.T) { javatest.Helper(t) },
	run:    runTxnHelper,
	read:   readByConsumer,
	// The helper checks the last stable offset itself while the first
	// producer's transaction is open and after the second's init aborts it.
	fenceSteps: []string{"first-init", "first-commit", "first-open", "lso-held", "second-init",
		"lso-released", "first-fenced", "second-commit"},
	// The Java client (4.x) uses KIP-890's flow, an epoch bump on every
	// EndTxn, only when the broker finalizes transaction.version 2.
	epochs: func(tv int) (bool, string) {
		if tv >= 2 {
			return true, "the client did not use KIP-890's flow (EndTxn bumps the epoch)"
		}
		return false, "the client bumped epochs as under KIP-890 although the broker did not finalize transaction.version 2"
	},
}

// runTxnHelper runs the Java helper's Txn class with args; when the test fails,
// the tail of its output is logged.
func runTxnHelper(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	java, cp := javatest.Helper(t)
	jargs := []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}
	// More JVM options, such as a client log level:
	// -Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.producer=debug
	jargs = append(jargs, strings.Fields(os.Getenv("STRAND_COMPAT_JAVA_OPTS"))...)
	jargs = append(jargs, "-cp", cp, "strandlog.compat.Txn")
	r := run(timeout, "", "", java, append(jargs, args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Java Txn %s: %v after %v\nstderr:\n%s\nstdout, the last lines but records:\n%s", args[0], r.err,
				r.elapsed.Round(time.Millisecond), grouptest.HeadLines(r.stderr, 40), txnHelperTail(r.stdout, 60))
		}
	})
	return r
}

// txnHelperTail is the last n lines of a Txn helper's output, leaving out the
// record lines ("out", "rec") but the last few and saying how many.
func txnHelperTail(out string, n int) string {
	var kept []string
	records := 0
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		if (strings.HasPrefix(l, "out ") || strings.HasPrefix(l, "rec ")) && i < len(lines)-5 {
			records++
			continue
		}
		kept = append(kept, l)
	}
	if len(kept) > n {
		kept = append([]string{fmt.Sprintf("... %d earlier lines", len(kept)-n)}, kept[len(kept)-n:]...)
	}
	return strings.Join(kept, "\n") + fmt.Sprintf("\n(%d record lines not shown)", records)
}

// txnHelperOutput is what the Txn helper printed.
type txnHelperOutput struct {
	outs      map[string][]rec // "out TAG p o k v" lines by TAG
	committed map[int]int      // committed-txn: txn -> records
	aborted   map[int]int      // aborted-txn: txn -> records
	errors    []string         // "error ..." lines
	failed    []string         // "failed-txn ..." lines: transactions that hit an error, fate unknown
	failedTxn map[int]bool     // their numbers
	// rewindProblems: a rewind (after an abort) that went elsewhere than
	// to what the committed transactions before it had committed.
	rewindProblems []string
	rewinds        int
	done           int // -1: no done line
	recs           []rec
	seen           int // -1: no seen line
	caughtUp       bool
	order          []int // transactions in the order they ended
}

func parseTxnHelper(t *testing.T, out string) txnHelperOutput {
	t.Helper()
	o := txnHelperOutput{outs: map[string][]rec{}, committed: map[int]int{}, aborted: map[int]int{},
		failedTxn: map[int]bool{}, done: -1, seen: -1}
	// The committed position of every input partition, from the
	// committed-txn lines so far: what a rewind must find.
	position := map[string]string{}
	uncertain := false // a transaction failed since the last rewind: it may have committed
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("helper line %q: %v", sc.Text(), err)
		}
		return n
	}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "error":
			o.errors = append(o.errors, sc.Text())
		case f[0] == "failed-txn":
			o.failed = append(o.failed, sc.Text())
			if len(f) > 1 {
				o.failedTxn[atoi(f[1])] = true
			}
			uncertain = true
		case (f[0] == "out" && len(f) == 6) || (f[0] == "rec" && len(f) == 5):
			i := len(f) - 4
			r := rec{P: int32(atoi(f[i])), O: int64(atoi(f[i+1])), K: f[i+2], V: f[i+3]}
			if f[0] == "out" {
				o.outs[f[1]] = append(o.outs[f[1]], r)
			} else {
				o.recs = append(o.recs, r)
			}
		case f[0] == "committed-txn" && len(f) == 4:
			n := atoi(f[1])
			o.committed[n] = atoi(f[2])
			o.order = append(o.order, n)
			for _, po := range strings.Split(f[3], ",") {
				p, off, _ := strings.Cut(po, ":")
				position[p] = off
			}
		case f[0] == "aborted-txn" && len(f) == 3:
			n := atoi(f[1])
			o.aborted[n] = atoi(f[2])
			o.order = append(o.order, n)
		case f[0] == "rewind" && len(f) == 3:
			o.rewinds++
			if f[2] == "-" {
				break // nothing assigned
			}
			for _, po := range strings.Split(f[2], ",") {
				p, off, _ := strings.Cut(po, ":")
				want, ok := position[p]
				if !ok {
					want = "-1" // nothing committed yet: back to the start
				}
				if off != want && !uncertain {
					o.rewindProblems = append(o.rewindProblems, fmt.Sprintf("%s: partition %s rewound to %s, committed %s",
						sc.Text(), p, off, want))
				}
				position[p] = off
			}
			uncertain = false
		case f[0] == "done" && len(f) == 2:
			o.done = atoi(f[1])
		case f[0] == "seen" && len(f) == 2:
			o.seen = atoi(f[1])
		case f[0] == "caughtup" && len(f) == 2:
			o.caughtUp = f[1] == "true"
		}
	}
	return o
}

// readIsolatedQuiet reads topic from the start of every partition with
// franz-go at an isolation level, without a group, until it has want
// records and then a quiet second more (so that extra records show up).
func readIsolatedQuiet(t *testing.T, addr, topic string, level kgo.IsolationLevel, want int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := client(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(300*time.Millisecond))
	var out []*kgo.Record
	for {
		pollCtx, pollCancel := ctx, context.CancelFunc(func() {})
		if len(out) >= want {
			pollCtx, pollCancel = context.WithTimeout(ctx, time.Second)
		}
		fs := cl.PollFetches(pollCtx)
		quiet := pollCtx.Err() != nil
		pollCancel()
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %d records after 60s, want %d", topic, len(out), want)
		}
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Fatalf("reading %s/%d: %v", tp, p, err)
			}
		})
		n := len(out)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
		if quiet && len(out) == n {
			return out
		}
	}
}

// transformedValue splits a transformed value, IN-out-TXN.
func transformedValue(v string) (in string, txn int, ok bool) {
	i := strings.LastIndex(v, "-out-")
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(v[i+len("-out-"):])
	return v[:i], n, err == nil
}

// TestJavaTransformExactlyOnce runs a consume-transform-produce loop in
// Java (read_committed KafkaConsumer in a group, transactional
// KafkaProducer, offsets committed with sendOffsetsToTransaction, every
// fourth transaction aborted after its records reached the log and the
// consumer sent back to the group's committed offsets) over input franz-go
// produced, then checks:
//   - every input record is in the output exactly once, from a committed
//     transaction, for read_committed readers (the Java consumer and
//     franz-go), at exactly the offsets the producer had acknowledged;
//   - a read_uncommitted reader sees the aborted transactions' records too;
//   - each rewind after an abort went to the offsets committed so far
//     (OffsetFetch, require_stable, after transactional commits);
//   - the group's committed offsets are the input's end offsets, and the
//     output's last stable offsets its end offsets;
//   - the protocol the client used: under transaction.version 2 every
//     transaction has its own producer epoch (EndTxn bumps it), under 1
//     they all share one.
func TestJavaTransformExactlyOnce(t *testing.T) {
	javaTxn.eachVersion(t, javaTxn.transform)
}

// TestJavaTransactionalFencing: a second producer with the same
// transactional.id fences the first. The first commits a transaction, then
// leaves one open with its records in the log (the last stable offset stays
// at that transaction's first offset); the second's initTransactions
// aborts it (the last stable offset moves past it) and fences the first,
// whose next send and commit fail with ProducerFencedException or
// InvalidProducerEpochException; the second commits. read_committed
// readers (Java and franz-go) then see the first's committed records and
// the second's, never the open transaction's; read_uncommitted sees those
// too, at the offsets acknowledged.
func TestJavaTransactionalFencing(t *testing.T) {
	javaTxn.eachVersion(t, javaTxn.fencing)
}

// TestJavaTransactionTimeout: a producer that dies with its transaction
// open (the JVM halts after its records are acknowledged: no abort, no
// close) holds read_committed readers at that transaction's first offset,
// even for records other producers write after it, until the coordinator
// aborts it when transaction.timeout.ms has passed (the broker checks every
// 500 ms here). Then the last stable offset reaches the end, read_committed
// readers see every record but the abandoned ones, the coordinator
// describes the transaction as CompleteAbort with the epoch bumped (so the
// dead producer is fenced), and a new producer with the same
// transactional.id commits.
func TestJavaTransactionTimeout(t *testing.T) {
	javaTxn.eachVersion(t, testJavaTimeout)
}

func testJavaTimeout(t *testing.T, tv int) {
	const (
		n          = 20
		partitions = 2
		topic      = "txn-timeout"
		timeout    = 8 * time.Second // the abandoned transaction's transaction.timeout.ms
	)
	txnID := fmt.Sprintf("txn-timeout-%d", tv)
	b, ctx := startTxnBroker(t, tv, 3*time.Minute, "--transaction-abort-check-interval", "500ms")
	createTopic(t, b.Addr, topic, partitions, nil)
	adm := kadm.NewClient(client(t, b.Addr))

	// The transaction starts after the JVM does: before start+timeout the
	// coordinator cannot have aborted it, whatever the machine's load.
	start := time.Now()
	r := runTxnHelper(t, 2*time.Minute, "abandon", b.Addr, topic, txnID, fmt.Sprint(n),
		fmt.Sprintf("transaction.timeout.ms=%d", timeout.Milliseconds()))
	gone := time.Now()
	o := parseTxnHelper(t, r.stdout)
	abandoned := o.outs["abandoned"]
	if r.err != nil || len(o.errors) > 0 || len(abandoned) != n || !strings.Contains(r.stdout, "abandoning\n") {
		t.Fatalf("Java abandon: exit %v, errors %q, %d of %d records acknowledged", r.err, o.errors, len(abandoned), n)
	}
	first := map[int32]int64{}
	for _, x := range abandoned {
		if f, ok := first[x.P]; !ok || x.O < f {
			first[x.P] = x.O
		}
	}

	// Plain records after the open transaction: acknowledged, but not
	// readable with read_committed while it is open.
	var after []rec
	pcl := client(t, b.Addr, kgo.DefaultProduceTopic(topic))
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Key: []byte(helperKey(i)), Value: fmt.Appendf(nil, "after-%d", i)})
	}
	if err := pcl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing after the open transaction: %v", err)
	}
	after = asRecs(rs)
	lastStable := func() map[int32]int64 {
		t.Helper()
		_, lso, err := txnStableOffsets(ctx, adm, topic)
		if err != nil {
			t.Fatalf("listing the last stable offsets: %v", err)
		}
		return lso
	}
	held := lastStable()
	if since := time.Since(start); since < timeout {
		for p, f := range first {
			if held[p] != f {
				t.Errorf("partition %d: last stable offset %d %v after the producer started, want %d (the open "+
					"transaction's first offset)", p, held[p], since.Round(time.Millisecond), f)
			}
		}
	} else {
		t.Errorf("the held last stable offset could not be checked: %v passed before the check, more than the "+
			"transaction timeout", since)
	}

	// The coordinator's timeout aborts it.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var released time.Duration
	for {
		l := lastStable()
		// The abort markers land after the records: the end offsets grow
		// by one on each partition of the transaction.
		done := true
		ends.Each(func(e kadm.ListedOffset) {
			want := e.Offset
			if _, ok := first[e.Partition]; ok {
				want++
			}
			if l[e.Partition] < want {
				done = false
			}
		})
		if done {
			released = time.Since(gone)
			if since := time.Since(start); since < timeout {
				t.Errorf("the transaction was aborted %v after its producer started, before its %v timeout", since, timeout)
			}
			break
		}
		if time.Since(gone) > timeout+20*time.Second {
			t.Fatalf("last stable offsets %v %v after the producer died (transaction timeout %v), want the ends %v "+
				"and a marker: the coordinator did not abort the timed-out transaction", l, time.Since(gone).Round(time.Millisecond),
				timeout, ends)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("transaction.version=%d: the abandoned transaction was aborted %v after its producer died (timeout %v)",
		tv, released.Round(time.Millisecond), timeout)

	pid, epoch := int64(-1), int16(-1)
	all := readIsolatedQuiet(t, b.Addr, topic, kgo.ReadUncommitted(), 2*n)
	if d := sameRecs(asRecs(all), append(slices.Clone(abandoned), after...)); d != "" {
		t.Errorf("read_uncommitted read other records than were acknowledged: %s", d)
	}
	for _, x := range all {
		if strings.HasPrefix(string(x.Value), "abandoned-") {
			pid, epoch = x.ProducerID, x.ProducerEpoch
		}
	}
	d, _ := describeTxn(t, ctx, adm, txnID)
	if d.Err != nil || d.State != "CompleteAbort" || d.ProducerID != pid || d.ProducerEpoch <= epoch {
		t.Errorf("DescribeTransactions %s: state %s, producer %d epoch %d, err %v; want CompleteAbort, producer %d, "+
			"epoch above the dead producer's %d (the timeout fences it)", txnID, d.State, d.ProducerID, d.ProducerEpoch,
			d.Err, pid, epoch)
	}

	// The transactional id is usable again.
	pr := runTxnHelper(t, 2*time.Minute, "produce-txn", b.Addr, topic, txnID, "resumed", fmt.Sprint(n))
	po := parseTxnHelper(t, pr.stdout)
	if pr.err != nil || len(po.errors) > 0 || len(po.outs["resumed"]) != n {
		t.Fatalf("Java produce-txn with the same transactional.id: exit %v, errors %q, %d of %d acknowledged",
			pr.err, po.errors, len(po.outs["resumed"]), n)
	}
	want := append(slices.Clone(after), po.outs["resumed"]...)
	if d := sameRecs(asRecs(readIsolatedQuiet(t, b.Addr, topic, kgo.ReadCommitted(), len(want))), want); d != "" {
		t.Errorf("franz-go (read_committed) read other records than were committed: %s", d)
	}
	if d := sameRecs(javaTxn.readCommitted(t, b.Addr, topic, len(want)), want); d != "" {
		t.Errorf("the Java consumer (read_committed) read other records than were committed: %s", d)
	}
}

// TestJavaTransformBrokerRestart runs the Java consume-transform-produce
// loop (as TestJavaTransformExactlyOnce, no deliberate aborts but every
// fifth) while the broker restarts under it, cleanly (SIGTERM) and by
// kill -9. The application does what an EOS application does on an error:
// abort (or, when even that fails, a new producer with the same
// transactional.id), then back to the group's committed offsets. Whatever
// failed, the result must still be exactly once: read_committed readers
// see every input record once, never one from an aborted transaction,
// every transaction the client saw committed is there, and the group's
// committed offsets are the input's ends.
func TestJavaTransformBrokerRestart(t *testing.T) {
	t.Parallel()
	javatest.Helper(t) // build (or skip) before starting brokers
	for _, tv := range javaTxnVersions {
		for _, kill := range []bool{false, true} {
			name := fmt.Sprintf("transaction.version=%d/sigterm", tv)
			if kill {
				name = fmt.Sprintf("transaction.version=%d/kill-9", tv)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testJavaTransformRestart(t, tv, kill)
			})
		}
	}
}

func testJavaTransformRestart(t *testing.T, tv int, kill bool) {
	b := startBroker(t, append(slices.Clone(groupBrokerArgs), fmt.Sprintf("--transaction-version=%d", tv))...)
	testJavaTransformUnderFault(t, transformTarget{
		seed:   b.Addr,
		create: func(t *testing.T, topic string, partitions int32) { createTopic(t, b.Addr, topic, partitions, nil) },
		fault: func(t *testing.T, _ string) (string, func()) {
			if kill {
				b.Kill()
			} else if err := b.Stop(); err != nil {
				t.Errorf("the broker did not stop cleanly on SIGTERM: %v", err)
			}
			down := time.Now()
			// Down long enough for the clients' requests to fail and their
			// connections to be refused, shorter than their timeouts.
			time.Sleep(3 * time.Second)
			b.Restart(t)
			return fmt.Sprintf("transaction.version=%d: broker restarted (kill -9: %v), down %v", tv, kill,
				time.Since(down).Round(time.Millisecond)), func() {}
		},
	})
}

// transformTarget is what testJavaTransformUnderFault runs against: a seed
// broker, how to create a topic there, and the fault made once a third of
// the input is committed, which returns what it did and how to heal what it
// left broken (after the transform ends).
type transformTarget struct {
	seed   string
	create func(t *testing.T, topic string, partitions int32)
	fault  func(t *testing.T, txnID string) (what string, heal func())
}

// testJavaTransformUnderFault runs the Java helper's exactly-once transform
// while the target suffers its fault, and checks that every input record is
// in the committed output exactly once, that the client saw every
// transaction it committed, and that the group's committed offsets are the
// input's end.
func testJavaTransformUnderFault(t *testing.T, target transformTarget) {
	const (
		n          = 1500
		abortEvery = 5
		partitions = 3
		in, out    = "txn-in", "txn-out"
		group      = "txn-restart"
		txnID      = "txn-restart"
	)
	seed := target.seed
	ctx := groupCtx(t, 4*time.Minute)
	target.create(t, in, partitions)
	target.create(t, out, partitions)
	prod := client(t, seed, kgo.DefaultProduceTopic(in))
	inputs := map[string]rec{}
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Key: []byte(helperKey(i)), Value: fmt.Appendf(nil, "in-%d", i)})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing the input: %v", err)
	}
	inEnds := map[int32]int64{}
	for _, r := range rs {
		inputs[string(r.Value)] = rec{P: r.Partition, O: r.Offset, K: string(r.Key), V: string(r.Value)}
		inEnds[r.Partition] = max(inEnds[r.Partition], r.Offset+1)
	}
	prod.Close()

	// The helper runs in the background; the broker restarts once a third
	// of the input is committed.
	java, cp := javatest.Helper(t)
	var stdout, stderr grouptest.Lines
	cmd := exec.Command(java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp,
		"strandlog.compat.Txn", "transform", seed, in, out, group, txnID, fmt.Sprint(n), fmt.Sprint(abortEvery),
		"compat.max.poll.records=5", "compat.deadline.ms=150000")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var exitErr error
	ended := false
	t.Cleanup(func() {
		if !ended {
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("Java Txn transform: %v\nstderr:\n%s\nstdout, the last lines but records:\n%s", exitErr,
				grouptest.HeadLines(stderr.String(), 40), txnHelperTail(stdout.String(), 80))
		}
	})
	committedSoFar := func() int {
		c := 0
		for l := range strings.Lines(stdout.String()) {
			if f := strings.Fields(l); len(f) == 4 && f[0] == "committed-txn" {
				c += atoiOr(f[2], 0)
			}
		}
		return c
	}
	started := time.Now()
	for committedSoFar() < n/3 {
		select {
		case exitErr = <-exited:
			ended = true
			t.Fatalf("the transform ended before a third of the input was committed: %v", exitErr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Since(started) > 90*time.Second {
			t.Fatalf("a third of the input not committed after 90s (%d records)", committedSoFar())
		}
	}
	at := committedSoFar()
	what, heal := target.fault(t, txnID)
	t.Logf("%s, after %d of %d input records were committed", what, at, n)
	select {
	case exitErr = <-exited:
		ended = true
	case <-time.After(3 * time.Minute):
		t.Fatalf("the transform did not finish within 3 minutes of the fault")
	}
	heal()
	o := parseTxnHelper(t, stdout.String())
	if exitErr != nil || len(o.errors) > 0 || o.done != n {
		t.Fatalf("Java transform: exit %v, done %d of %d, errors %q", exitErr, o.done, n, o.errors)
	}
	if at >= n {
		t.Fatalf("the whole input was committed before the restart: nothing was tested")
	}
	t.Logf("%d transactions committed, %d aborted, %d failed and were recovered from (first: %s)", len(o.committed),
		len(o.aborted), len(o.failed), strings.Join(o.failed[:min(1, len(o.failed))], ""))
	for _, p := range o.rewindProblems {
		t.Errorf("after an abort the consumer went elsewhere than to the committed offsets: %s", p)
	}

	var claimed []rec // records of transactions the client saw committed
	for tag, recs := range o.outs {
		if txn, _ := strconv.Atoi(tag); o.committed[txn] > 0 {
			claimed = append(claimed, recs...)
		}
	}
	check := func(who string, got []rec) {
		t.Helper()
		times := map[string]int{}
		seen := map[rec]bool{}
		bad := 0
		for _, x := range got {
			seen[x] = true
			v, txn, ok := transformedValue(x.V)
			in, known := inputs[v]
			_, committed := o.committed[txn]
			switch {
			case !ok || !known || x.K != in.K:
				t.Errorf("%s: output record %+v is not a transformed input record", who, x)
			case o.aborted[txn] > 0:
				t.Errorf("%s: output record %+v is from transaction %d, which was aborted", who, x, txn)
			case !committed && !o.failedTxn[txn]:
				t.Errorf("%s: output record %+v is from transaction %d, which neither committed nor failed", who, x, txn)
			}
			times[v]++
		}
		for v := range inputs {
			if times[v] != 1 {
				bad++
				if bad <= 10 {
					t.Errorf("%s: input %s is in the output %d times, want once", who, v, times[v])
				}
			}
		}
		missing := 0
		for _, x := range claimed {
			if !seen[x] {
				missing++
				if missing <= 10 {
					t.Errorf("%s: record %+v of a committed transaction is not there", who, x)
				}
			}
		}
		if bad > 0 || missing > 0 {
			t.Errorf("%s: %d input records not exactly once, %d committed records missing", who, bad, missing)
		}
	}
	check("franz-go read_committed", asRecs(readIsolatedQuiet(t, seed, out, kgo.ReadCommitted(), n)))
	jr := runTxnHelper(t, 2*time.Minute, "read-committed", seed, out, fmt.Sprint(n))
	jo := parseTxnHelper(t, jr.stdout)
	if jr.err != nil || len(jo.errors) > 0 || !jo.caughtUp {
		t.Errorf("Java read-committed: exit %v, errors %q, seen %d, caught up %v", jr.err, jo.errors, jo.seen, jo.caughtUp)
	}
	check("Java read_committed", jo.recs)

	adm := kadm.NewClient(client(t, seed))
	offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
	if err != nil {
		t.Fatalf("fetching %s's offsets (require_stable): %v", group, err)
	}
	for p, end := range inEnds {
		if c, ok := offs.Lookup(in, p); !ok || c.Err != nil || c.At != end {
			t.Errorf("group %s: %s/%d committed %+v, want %d (the input's end)", group, in, p, c, end)
		}
	}
}

func atoiOr(s string, or int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return or
	}
	return n
}

// TestJavaAdminAbortsHangingTransaction is what an operator does about a
// transaction left open by a producer that died (kafka-transactions.sh
// find-hanging, then abort), with the Java AdminClient: ListTransactions
// shows it Ongoing, DescribeProducers finds its open transaction on each
// partition, Admin.abortTransaction (WriteTxnMarkers) ends it at once, long
// before its timeout, and read_committed readers move past it without
// seeing its records.
func TestJavaAdminAbortsHangingTransaction(t *testing.T) {
	t.Parallel()
	javatest.Helper(t)
	const (
		n          = 12
		partitions = 3
		topic      = "txn-hanging"
		txnID      = "txn-hanging"
	)
	b := startBroker(t)
	ctx := groupCtx(t, 3*time.Minute)
	createTopic(t, b.Addr, topic, partitions, nil)

	// A 10-minute timeout: only the operator can end it within the test.
	r := runTxnHelper(t, 2*time.Minute, "abandon", b.Addr, topic, txnID, fmt.Sprint(n), "transaction.timeout.ms=600000")
	o := parseTxnHelper(t, r.stdout)
	if r.err != nil || len(o.errors) > 0 || len(o.outs["abandoned"]) != n {
		t.Fatalf("Java abandon: exit %v, errors %q, %d of %d records acknowledged", r.err, o.errors, len(o.outs["abandoned"]), n)
	}
	adm := kadm.NewClient(client(t, b.Addr))
	hw, lso, err := txnStableOffsets(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	held := false
	for p, h := range hw {
		held = held || lso[p] < h
	}
	if !held {
		t.Fatalf("the abandoned transaction holds no partition back: high watermarks %v, last stable offsets %v", hw, lso)
	}

	r = runTxnHelper(t, 2*time.Minute, "abort-hanging", b.Addr, topic, txnID)
	checkSteps(t, r, []string{"list-ongoing", "find-hanging", "abort", "none-open", "stable"})

	if got := txnReadTopic(t, ctx, b.Addr, topic, true); len(got) != 0 {
		t.Fatalf("read_committed sees %d records of the aborted transaction", len(got))
	}
	if got := txnReadTopic(t, ctx, b.Addr, topic, false); len(got) != n {
		t.Fatalf("read_uncommitted sees %d records, want the %d aborted ones still in the log", len(got), n)
	}
}

// produceTransformInput writes a transform test's input: n plain (idempotent,
// not transactional) franz-go records to topic in. It returns them by value
// and the input's end offset per partition.
func produceTransformInput(t *testing.T, ctx context.Context, addr, in string, n int) (map[string]rec, map[int32]int64) {
	t.Helper()
	prod := client(t, addr, kgo.DefaultProduceTopic(in))
	inputs := map[string]rec{} // by value
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Key: []byte(helperKey(i)), Value: fmt.Appendf(nil, "in-%d", i)})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing the input: %v", err)
	}
	inEnds := map[int32]int64{}
	for _, r := range rs {
		inputs[string(r.Value)] = rec{P: r.Partition, O: r.Offset, K: string(r.Key), V: string(r.Value)}
		inEnds[r.Partition] = max(inEnds[r.Partition], r.Offset+1)
	}
	return inputs, inEnds
}

// checkTransformAccount checks a transform helper's own account (Java's Txn
// or txn_librdkafka.py): every transaction it ended printed its records, an
// abort was followed by a rewind to the committed offsets, and the committed
// transactions' records cover the input once, each the transformed input
// value with its key. It returns the committed and all output records and
// the transaction of each.
func checkTransformAccount(t *testing.T, o txnHelperOutput, inputs map[string]rec, abortEvery int) (committedOut, allOut []rec, txnOf map[rec]int) {
	t.Helper()
	if len(o.aborted) == 0 {
		t.Errorf("no transaction was aborted (every %d-th should be)", abortEvery)
	}
	if o.rewinds != len(o.aborted) {
		t.Errorf("%d rewinds for %d aborted transactions", o.rewinds, len(o.aborted))
	}
	for _, p := range o.rewindProblems {
		t.Errorf("after an abort the consumer went elsewhere than to the committed offsets: %s", p)
	}
	txnOf = map[rec]int{}
	for tag, recs := range o.outs {
		txn, err := strconv.Atoi(tag)
		if err != nil {
			t.Fatalf("out line with tag %q", tag)
		}
		cn, committed := o.committed[txn]
		an, aborted := o.aborted[txn]
		switch {
		case committed && cn != len(recs), aborted && an != len(recs):
			t.Errorf("transaction %d printed %d records, ended with %d", txn, len(recs), max(cn, an))
		case !committed && !aborted:
			t.Errorf("transaction %d printed records but did not end", txn)
		}
		for _, x := range recs {
			txnOf[x] = txn
			allOut = append(allOut, x)
			if committed {
				committedOut = append(committedOut, x)
			}
		}
	}
	times := map[string]int{}
	for _, x := range committedOut {
		v, txn, ok := transformedValue(x.V)
		in, known := inputs[v]
		switch {
		case !ok || !known:
			t.Errorf("output record %+v is not a transformed input value", x)
		case txn != txnOf[x]:
			t.Errorf("output record %+v was written by transaction %d", x, txnOf[x])
		case x.K != in.K:
			t.Errorf("output record %+v has key %s, its input %+v key %s", x, x.K, in, in.K)
		}
		times[v]++
	}
	for v := range inputs {
		if times[v] != 1 {
			t.Errorf("input %s committed to the output %d times, want once", v, times[v])
		}
	}
	return committedOut, allOut, txnOf
}
