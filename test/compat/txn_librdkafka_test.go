package compat

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/librdkafkatest"
)

// Transactions with librdkafka, through confluent-kafka for Python
// (test/python/txn_librdkafka.py), against the real binary, under both
// transaction protocols. librdkafka 2.16 does not implement KIP-890: it adds
// partitions with AddPartitionsToTxn and keeps one producer epoch for all its
// transactions even where the broker finalizes transaction.version 2, so
// these tests are also the older flow served by a version-2 broker.
//
// confluent-kafka and its virtualenv: test/librdkafkatest.

// runLibrdkafkaTxn runs txn_librdkafka.py with args; when the test fails,
// the tail of its output is logged.
func runLibrdkafkaTxn(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	python := librdkafkatest.Python(t)
	r := run(timeout, pythonDir, "", python, append([]string{"txn_librdkafka.py"}, args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("txn_librdkafka.py %s: %v after %v\nstderr:\n%s\nstdout, the last lines but records:\n%s", args[0],
				r.err, r.elapsed.Round(time.Millisecond), grouptest.HeadLines(r.stderr, 40), txnHelperTail(r.stdout, 60))
		}
	})
	return r
}

// TestLibrdkafkaTransformExactlyOnce runs a consume-transform-produce loop
// with librdkafka (read_committed Consumer in a group, transactional
// Producer, offsets committed with send_offsets_to_transaction from the
// consumer's positions, every fourth transaction aborted after its records
// reached the log and the consumer sent back to the group's committed
// offsets) over input franz-go produced, then checks:
//   - every input record is in the output exactly once, from a committed
//     transaction, for read_committed readers (franz-go's batch processing
//     over raw fetches, and librdkafka), at exactly the offsets the producer
//     had acknowledged;
//   - a read_uncommitted reader sees the aborted transactions' records too;
//   - each rewind after an abort went to the offsets committed so far
//     (OffsetFetch with require_stable, after transactional commits);
//   - the group's committed offsets (require_stable) are the input's end
//     offsets, and the output's last stable offsets its end offsets;
//   - one producer id and one epoch for every transaction: librdkafka 2.16
//     keeps the older flow under both transaction versions.
func TestLibrdkafkaTransformExactlyOnce(t *testing.T) {
	t.Parallel()
	librdkafkatest.Python(t) // skip (or fail) before starting brokers
	for _, tv := range javaTxnVersions {
		t.Run(fmt.Sprintf("transaction.version=%d", tv), func(t *testing.T) {
			t.Parallel()
			testLibrdkafkaTransform(t, tv)
		})
	}
}

func testLibrdkafkaTransform(t *testing.T, tv int) {
	const (
		n          = 240
		abortEvery = 4
		partitions = 3
		in, out    = "rdk-txn-in", "rdk-txn-out"
	)
	group := fmt.Sprintf("rdk-txn-transform-%d", tv)
	txnID := fmt.Sprintf("rdk-txn-transform-%d", tv)
	b := startBroker(t, append(slices.Clone(groupBrokerArgs), fmt.Sprintf("--transaction-version=%d", tv))...)
	ctx := groupCtx(t, 4*time.Minute)
	checkTxnFeature(t, ctx, b.Addr, int16(tv))
	createTopic(t, b.Addr, in, partitions, nil)
	createTopic(t, b.Addr, out, partitions, nil)

	inputs, inEnds := produceTransformInput(t, ctx, b.Addr, in, n)

	r := runLibrdkafkaTxn(t, 3*time.Minute, "transform", b.Addr, in, out, group, txnID, fmt.Sprint(n),
		fmt.Sprint(abortEvery), "compat.max.poll.records=10", "compat.deadline.ms=150000")
	o := parseTxnHelper(t, r.stdout)
	if r.err != nil || len(o.errors) > 0 || o.done != n {
		t.Fatalf("librdkafka transform: exit %v, done %d of %d, errors %q", r.err, o.done, n, o.errors)
	}
	if len(o.failed) > 0 {
		t.Errorf("%d transactions failed, first: %s", len(o.failed), o.failed[0])
	}
	t.Logf("transaction.version=%d: %d transactions committed, %d aborted, in %v", tv, len(o.committed),
		len(o.aborted), r.elapsed.Round(time.Millisecond))

	committedOut, allOut, txnOf := checkTransformAccount(t, o, inputs, abortEvery)
	if t.Failed() {
		return
	}

	// Nothing is left open: the markers of the last transaction land soon
	// after its EndTxn is answered.
	adm := kadm.NewClient(client(t, b.Addr))
	txnWaitStable(t, ctx, adm, out, 15*time.Second)

	// read_committed readers see exactly the committed transactions' records.
	checkCommittedRead := func(who string, got []rec) {
		t.Helper()
		if d := sameRecs(got, committedOut); d != "" {
			aborted := 0
			for _, x := range got {
				if _, ok := o.aborted[txnOf[x]]; ok {
					aborted++
				}
			}
			t.Errorf("%s (read_committed) read other records than the committed transactions wrote: %s "+
				"(%d of the %d records read are from aborted transactions)", who, d, aborted, len(got))
		}
	}
	checkCommittedRead("franz-go", asRecs(txnReadTopic(t, ctx, b.Addr, out, true)))
	lr := runLibrdkafkaTxn(t, 2*time.Minute, "read-committed", b.Addr, out, fmt.Sprint(len(committedOut)))
	lo := parseTxnHelper(t, lr.stdout)
	if lr.err != nil || len(lo.errors) > 0 || lo.seen != len(lo.recs) {
		t.Errorf("librdkafka read-committed: exit %v, errors %q, seen %d, printed %d", lr.err, lo.errors, lo.seen,
			len(lo.recs))
	}
	if !lo.caughtUp {
		t.Errorf("librdkafka read-committed did not reach the last stable offsets (%d records seen)", lo.seen)
	}
	checkCommittedRead("librdkafka", lo.recs)

	// read_uncommitted sees the aborted records too, where they were written.
	all := txnReadTopic(t, ctx, b.Addr, out, false)
	if d := sameRecs(asRecs(all), allOut); d != "" {
		t.Errorf("read_uncommitted read other records than every transaction wrote: %s", d)
	}
	if len(all) <= len(committedOut) {
		t.Errorf("read_uncommitted read %d records, no more than the %d committed: the aborted data is not in the log",
			len(all), len(committedOut))
	}

	// The protocol the client used, from the stored batches' producer ids
	// and epochs: librdkafka 2.16 has no KIP-890, so it keeps its epoch, and
	// a version-2 broker must not bump it for a client using the older
	// EndTxn versions.
	pids := map[int64]bool{}
	epochs := map[int16]bool{}
	for _, x := range all {
		pids[x.ProducerID] = true
		epochs[x.ProducerEpoch] = true
	}
	if len(pids) != 1 || len(epochs) != 1 {
		t.Errorf("transaction.version=%d: output written by producer ids %v with epochs %v, want one id and one epoch "+
			"(librdkafka 2.16 uses the older transaction flow, which keeps the epoch)", tv, pids, epochs)
	}

	// Offsets: the group committed the whole input.
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

// TestLibrdkafkaTransactionalFencing: a second librdkafka producer with the
// same transactional.id fences the first. The first commits a transaction,
// then leaves one open with its records in the log; the second's
// init_transactions aborts it and fences the first, whose next produce and
// commit fail with a fatal (fenced) error; the second commits.
// read_committed readers (franz-go and librdkafka) then see the first's
// committed records and the second's, never the open transaction's nor the
// fenced producer's late record; read_uncommitted sees the open
// transaction's too, at the offsets acknowledged, written with an epoch
// below the second producer's.
func TestLibrdkafkaTransactionalFencing(t *testing.T) {
	t.Parallel()
	librdkafkatest.Python(t) // skip (or fail) before starting brokers
	for _, tv := range javaTxnVersions {
		t.Run(fmt.Sprintf("transaction.version=%d", tv), func(t *testing.T) {
			t.Parallel()
			testLibrdkafkaFencing(t, tv)
		})
	}
}

func testLibrdkafkaFencing(t *testing.T, tv int) {
	const (
		n          = 30
		partitions = 3
		topic      = "rdk-txn-fence"
	)
	txnID := fmt.Sprintf("rdk-txn-fence-%d", tv)
	b := startBroker(t, fmt.Sprintf("--transaction-version=%d", tv))
	ctx := groupCtx(t, 3*time.Minute)
	createTopic(t, b.Addr, topic, partitions, nil)

	r := runLibrdkafkaTxn(t, 3*time.Minute, "fence", b.Addr, topic, txnID, fmt.Sprint(n))
	checkSteps(t, r, []string{"first-init", "first-commit", "first-open", "second-init", "first-fenced",
		"second-commit"})
	o := parseTxnHelper(t, r.stdout)
	if len(o.errors) > 0 {
		t.Errorf("helper errors: %q", o.errors)
	}
	for _, tag := range []string{"first-committed", "first-open", "second"} {
		if len(o.outs[tag]) != n {
			t.Errorf("%d %s records acknowledged, want %d", len(o.outs[tag]), tag, n)
		}
	}
	if t.Failed() {
		return
	}
	adm := kadm.NewClient(client(t, b.Addr))
	txnWaitStable(t, ctx, adm, topic, 15*time.Second)
	committed := append(slices.Clone(o.outs["first-committed"]), o.outs["second"]...)
	open := map[rec]bool{}
	for _, x := range o.outs["first-open"] {
		open[x] = true
	}
	checkCommittedRead := func(who string, got []rec) {
		t.Helper()
		if d := sameRecs(got, committed); d != "" {
			leaked := 0
			for _, x := range got {
				if open[x] || strings.HasPrefix(x.V, "a-late") {
					leaked++
				}
			}
			t.Errorf("%s (read_committed) read other records than the committed transactions wrote: %s "+
				"(%d of the %d records read are from the fenced producer)", who, d, leaked, len(got))
		}
	}
	checkCommittedRead("franz-go", asRecs(txnReadTopic(t, ctx, b.Addr, topic, true)))
	lr := runLibrdkafkaTxn(t, 2*time.Minute, "read-committed", b.Addr, topic, fmt.Sprint(len(committed)))
	lo := parseTxnHelper(t, lr.stdout)
	if lr.err != nil || len(lo.errors) > 0 || lo.seen != len(lo.recs) || !lo.caughtUp {
		t.Errorf("librdkafka read-committed: exit %v, errors %q, seen %d, printed %d, caught up %v", lr.err, lo.errors,
			lo.seen, len(lo.recs), lo.caughtUp)
	}
	checkCommittedRead("librdkafka", lo.recs)

	// The open transaction's records are in the log (the fenced producer did
	// write them); its late send after the fencing is not.
	all := txnReadTopic(t, ctx, b.Addr, topic, false)
	want := append(slices.Clone(committed), o.outs["first-open"]...)
	if d := sameRecs(asRecs(all), want); d != "" {
		t.Errorf("read_uncommitted read other records than were acknowledged: %s", d)
	}
	epochOf := func(prefix string) (int64, int16) {
		for _, x := range all {
			if strings.HasPrefix(string(x.Value), prefix) {
				return x.ProducerID, x.ProducerEpoch
			}
		}
		return -1, -1
	}
	pid1, e1 := epochOf("a-open-")
	pid2, e2 := epochOf("b-")
	if pid1 == pid2 && e2 <= e1 {
		t.Errorf("the second producer wrote with epoch %d, the fenced one with %d: want a higher epoch", e2, e1)
	}
	ds, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		t.Fatalf("DescribeTransactions %s: %v", txnID, err)
	}
	d, ok := ds[txnID]
	switch {
	case !ok || d.Err != nil:
		t.Errorf("DescribeTransactions %s: %+v", txnID, d)
	case d.State != "CompleteCommit" || d.ProducerID != pid2 || d.ProducerEpoch < e2:
		t.Errorf("DescribeTransactions %s: state %s, producer %d epoch %d; want CompleteCommit, producer %d epoch >= %d",
			txnID, d.State, d.ProducerID, d.ProducerEpoch, pid2, e2)
	}
}
