package compat

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// The transaction scenarios every client with a transaction helper runs:
// Java's strandlog.compat.Txn and txn_librdkafka.py take the same commands
// and print the same lines, so each scenario is written once and told here
// what differs between the clients.

// txnClient is a client under test in the transaction scenarios.
type txnClient struct {
	name   string // in messages: "Java", "librdkafka"
	reader string // its read_committed consumer, in messages
	prefix string // of the topics, groups and transactional ids
	// ready builds the helper, or skips the test, before brokers start.
	ready func(t *testing.T)
	// run runs the helper with args and logs its output if the test fails.
	run func(t *testing.T, timeout time.Duration, args ...string) result
	// read reads topic with franz-go: read_committed or not, until it has
	// at least want records. The clients' tests read in different ways so
	// that both of franz-go's read paths meet the broker's transactions.
	read func(t *testing.T, ctx context.Context, addr, topic string, committed bool, want int) []*kgo.Record
	// fenceSteps are the steps the helper's fence command reports.
	fenceSteps []string
	// epochs says whether each transaction takes a new producer epoch
	// under transaction.version tv (KIP-890: EndTxn bumps it) or all
	// share one, and what it means when the log shows otherwise.
	epochs func(tv int) (bumps bool, otherwise string)
}

// readByConsumer reads with a franz-go consumer until it has want records
// and then a quiet second more, so that extra records show up.
func readByConsumer(t *testing.T, _ context.Context, addr, topic string, committed bool, want int) []*kgo.Record {
	t.Helper()
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	return readIsolatedQuiet(t, addr, topic, level, want)
}

// readByFetches reads with raw fetches through franz-go's batch processing
// up to the ends listed when called, which txnWaitStable has made final.
func readByFetches(t *testing.T, ctx context.Context, addr, topic string, committed bool, _ int) []*kgo.Record {
	t.Helper()
	return txnReadTopic(t, ctx, addr, topic, committed)
}

// eachVersion runs test once per transaction.version, in parallel, after
// the client's helper is ready.
func (c txnClient) eachVersion(t *testing.T, test func(t *testing.T, tv int)) {
	t.Parallel()
	c.ready(t) // build (or skip) before starting brokers
	for _, tv := range javaTxnVersions {
		t.Run(fmt.Sprintf("transaction.version=%d", tv), func(t *testing.T) {
			t.Parallel()
			test(t, tv)
		})
	}
}

// startTxnBroker starts a broker that finalizes transaction.version tv,
// with extra flags, and checks that it advertises that level. The context
// ends after limit.
func startTxnBroker(t *testing.T, tv int, limit time.Duration, extra ...string) (*testutil.Process, context.Context) {
	t.Helper()
	b := startBroker(t, append([]string{fmt.Sprintf("--transaction-version=%d", tv)}, extra...)...)
	ctx := groupCtx(t, limit)
	checkTxnFeature(t, ctx, b.Addr, int16(tv))
	return b, ctx
}

// readCommitted reads topic with the client's read_committed consumer until
// it has seen want records, checks that the helper ran cleanly, printed
// every record it saw and reached the last stable offsets, and returns the
// records.
func (c txnClient) readCommitted(t *testing.T, addr, topic string, want int) []rec {
	t.Helper()
	r := c.run(t, 2*time.Minute, "read-committed", addr, topic, fmt.Sprint(want))
	o := parseTxnHelper(t, r.stdout)
	if r.err != nil || len(o.errors) > 0 || o.seen != len(o.recs) || !o.caughtUp {
		t.Errorf("%s read-committed: exit %v, errors %q, seen %d, printed %d, caught up %v", c.name, r.err, o.errors,
			o.seen, len(o.recs), o.caughtUp)
	}
	return o.recs
}

// transform is the consume-transform-produce scenario (see
// TestJavaTransformExactlyOnce and TestLibrdkafkaTransformExactlyOnce).
func (c txnClient) transform(t *testing.T, tv int) {
	const (
		n          = 240
		abortEvery = 4
		partitions = 3
	)
	in, out := c.prefix+"in", c.prefix+"out"
	group := fmt.Sprintf("%stransform-%d", c.prefix, tv)
	txnID := group
	b, ctx := startTxnBroker(t, tv, 4*time.Minute, groupBrokerArgs...)
	createTopic(t, b.Addr, in, partitions, nil)
	createTopic(t, b.Addr, out, partitions, nil)

	inputs, inEnds := produceTransformInput(t, ctx, b.Addr, in, n)

	r := c.run(t, 3*time.Minute, "transform", b.Addr, in, out, group, txnID, fmt.Sprint(n), fmt.Sprint(abortEvery),
		"compat.max.poll.records=10", "compat.deadline.ms=150000")
	o := parseTxnHelper(t, r.stdout)
	if r.err != nil || len(o.errors) > 0 || o.done != n {
		t.Fatalf("%s transform: exit %v, done %d of %d, errors %q", c.name, r.err, o.done, n, o.errors)
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
	checkCommittedRead("franz-go", asRecs(c.read(t, ctx, b.Addr, out, true, len(committedOut))))
	checkCommittedRead(c.reader, c.readCommitted(t, b.Addr, out, len(committedOut)))

	// read_uncommitted sees the aborted records too, where they were written.
	all := c.read(t, ctx, b.Addr, out, false, len(allOut))
	if d := sameRecs(asRecs(all), allOut); d != "" {
		t.Errorf("read_uncommitted read other records than every transaction wrote: %s", d)
	}
	if len(all) <= len(committedOut) {
		t.Errorf("read_uncommitted read %d records, no more than the %d committed: the aborted data is not in the log",
			len(all), len(committedOut))
	}

	c.checkTransformEpochs(t, tv, o, all)

	// Offsets: the group committed the whole input; nothing is pending in the output.
	offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
	if err != nil {
		t.Fatalf("fetching %s's offsets (require_stable): %v", group, err)
	}
	for p, end := range inEnds {
		if got, ok := offs.Lookup(in, p); !ok || got.Err != nil || got.At != end {
			t.Errorf("group %s: %s/%d committed %+v, want %d (the input's end)", group, in, p, got, end)
		}
	}
	ends, lso, err := txnStableOffsets(ctx, adm, out)
	if err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	for p, end := range ends {
		if lso[p] != end {
			t.Errorf("%s/%d: last stable offset %d, end offset %d: no transaction is open, they must be equal",
				out, p, lso[p], end)
		}
	}
}

// checkTransformEpochs checks the transaction protocol the client used, from
// the stored batches' producer ids and epochs: one producer id, one epoch
// per transaction, and either a higher epoch for each transaction than for
// the one before or one epoch for them all, as c.epochs says for tv.
func (c txnClient) checkTransformEpochs(t *testing.T, tv int, o txnHelperOutput, all []*kgo.Record) {
	t.Helper()
	bumps, otherwise := c.epochs(tv)
	epochs := map[int]int16{} // by transaction
	distinct := map[int16]bool{}
	pids := map[int64]bool{}
	for _, x := range all {
		_, txn, _ := transformedValue(string(x.Value))
		pids[x.ProducerID] = true
		distinct[x.ProducerEpoch] = true
		if e, ok := epochs[txn]; ok && e != x.ProducerEpoch {
			t.Errorf("transaction %d wrote records with epochs %d and %d", txn, e, x.ProducerEpoch)
		}
		epochs[txn] = x.ProducerEpoch
	}
	if len(pids) != 1 {
		t.Errorf("output written by producer ids %v, want one", pids)
	}
	if !bumps {
		if len(distinct) != 1 {
			t.Errorf("transaction.version=%d: the transactions used epochs %v, want one: %s", tv, distinct, otherwise)
		}
		return
	}
	prev := -1
	for _, txn := range o.order {
		e, ok := epochs[txn]
		if !ok {
			continue
		}
		if int(e) <= prev {
			t.Errorf("transaction.version=%d: transaction %d has epoch %d, not above the one before (%d): %s",
				tv, txn, e, prev, otherwise)
		}
		prev = int(e)
	}
}

// fencing is the fencing scenario (see TestJavaTransactionalFencing and
// TestLibrdkafkaTransactionalFencing).
func (c txnClient) fencing(t *testing.T, tv int) {
	const (
		n          = 30
		partitions = 3
	)
	topic := c.prefix + "fence"
	txnID := fmt.Sprintf("%sfence-%d", c.prefix, tv)
	b, ctx := startTxnBroker(t, tv, 3*time.Minute)
	createTopic(t, b.Addr, topic, partitions, nil)

	r := c.run(t, 3*time.Minute, "fence", b.Addr, topic, txnID, fmt.Sprint(n))
	checkSteps(t, r, c.fenceSteps)
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
	// The second producer's commit ended the last transaction: nothing
	// holds the topic back.
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
	checkCommittedRead("franz-go", asRecs(c.read(t, ctx, b.Addr, topic, true, len(committed))))
	checkCommittedRead(c.reader, c.readCommitted(t, b.Addr, topic, len(committed)))

	// The open transaction's records are in the log (the fenced producer did
	// write them); its late send after the fencing is not.
	all := c.read(t, ctx, b.Addr, topic, false, 3*n)
	want := append(slices.Clone(committed), o.outs["first-open"]...)
	if d := sameRecs(asRecs(all), want); d != "" {
		t.Errorf("read_uncommitted read other records than were acknowledged: %s", d)
	}

	// With one producer id for both (Kafka bumps the epoch, and takes a new
	// id only when the epoch is exhausted), the second's epoch is above the
	// first's; the coordinator describes the second's committed state.
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
	d, ok := describeTxn(t, ctx, adm, txnID)
	switch {
	case !ok || d.Err != nil:
		t.Errorf("DescribeTransactions %s: %+v", txnID, d)
	case d.State != "CompleteCommit" || d.ProducerID != pid2 || d.ProducerEpoch < e2:
		t.Errorf("DescribeTransactions %s: state %s, producer %d epoch %d; want CompleteCommit, producer %d epoch >= %d",
			txnID, d.State, d.ProducerID, d.ProducerEpoch, pid2, e2)
	}
}

// describeTxn is what the coordinator says about txnID, and whether it
// said anything.
func describeTxn(t *testing.T, ctx context.Context, adm *kadm.Client, txnID string) (kadm.DescribedTransaction, bool) {
	t.Helper()
	ds, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		t.Fatalf("DescribeTransactions %s: %v", txnID, err)
	}
	d, ok := ds[txnID]
	return d, ok
}
