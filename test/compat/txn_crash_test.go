package compat

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
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
)

// Transactions across kill -9: a transactional producer keeps committing and
// aborting while the broker is killed and restarted under it.

const (
	crashTxnID        = "crash-txn"
	crashPartitions   = 4
	crashTxnRecords   = 8 // per transaction, 2 on each partition
	crashTxnTimeout   = 5 * time.Second
	crashDefaultKills = 8
)

// crashCommits is the deterministic rule: which transactions the producer
// tries to commit (the others it aborts).
func crashCommits(i int) bool { return i%4 != 3 }

// crashAbandons: the producer abandons these transactions after producing
// their records, closing its client without ending them; the next client's
// InitProducerId must fence and abort them.
func crashAbandons(i int) bool { return i%40 == 21 }

var errAbandoned = errors.New("abandoned: client closed without ending the transaction")

func crashValue(txn, rec int) string { return fmt.Sprintf("t%07d r%02d", txn, rec) }

func parseCrashValue(v []byte) (txn, rec int, ok bool) {
	f := strings.Fields(string(v))
	if len(f) != 2 || len(f[0]) < 2 || len(f[1]) < 2 || f[0][0] != 't' || f[1][0] != 'r' {
		return 0, 0, false
	}
	t, err1 := strconv.Atoi(f[0][1:])
	r, err2 := strconv.Atoi(f[1][1:])
	return t, r, err1 == nil && err2 == nil && r >= 0 && r < crashTxnRecords && crashValue(t, r) == string(v)
}

// crashTxn is what the producer knows about one transaction.
type crashTxn struct {
	i      int
	commit bool          // the rule's decision
	acked  []*kgo.Record // records the broker acknowledged
	ended  bool          // EndTransaction was called (with commit as decided)
	ok     bool          // and returned nil: the outcome is known
	err    error         // the first error (outcome unknown)
	client int           // which client (1, 2, ...) ran it
}

func (tx crashTxn) String() string {
	return fmt.Sprintf("transaction %d (commit %v, %d records acknowledged, ended %v, ok %v, error %v, client %d)",
		tx.i, tx.commit, len(tx.acked), tx.ended, tx.ok, tx.err, tx.client)
}

// crashProducer runs transactions one after another with one
// transactional id, replacing its client after any error (the new client's
// InitProducerId fences the old one and aborts what it left open).
type crashProducer struct {
	addr, topic string
	log         grouptest.Lines
	stop        chan struct{}
	done        chan struct{}
	settled     atomic.Int64 // transactions whose EndTransaction returned nil
	clients     atomic.Int64

	mu   sync.Mutex
	txns []*crashTxn
}

func startCrashProducer(addr, topic string) *crashProducer {
	p := &crashProducer{addr: addr, topic: topic, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *crashProducer) newClient() (*kgo.Client, error) {
	n := p.clients.Add(1)
	return kgo.NewClient(
		kgo.SeedBrokers(p.addr),
		kgo.TransactionalID(crashTxnID),
		kgo.TransactionTimeout(crashTxnTimeout),
		kgo.DefaultProduceTopic(p.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(10*time.Second),
		kgo.RetryTimeout(10*time.Second),
		kgo.WithLogger(kgo.BasicLogger(&p.log, crashLogLevel(), func() string {
			return time.Now().Format("15:04:05.000 ") + fmt.Sprintf("[client %d] ", n)
		})),
	)
}

// crashLogLevel is the producer's log level: STRAND_TXN_LOG=debug for
// every request, info otherwise.
func crashLogLevel() kgo.LogLevel {
	if os.Getenv("STRAND_TXN_LOG") == "debug" {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelInfo
}

func (p *crashProducer) run() {
	defer close(p.done)
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		default:
		}
		if cl == nil {
			var err error
			if cl, err = p.newClient(); err != nil {
				p.log.Printf("new client: %v", err)
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		tx := &crashTxn{i: i, commit: crashCommits(i), client: int(p.clients.Load())}
		p.mu.Lock()
		p.txns = append(p.txns, tx)
		p.mu.Unlock()
		if !p.one(cl, tx) {
			p.log.Printf("transaction %d: %v; replacing the client", i, tx.err)
			cl.Close()
			cl = nil
		}
	}
}

// one runs transaction tx; false: an error, the client must be replaced.
func (p *crashProducer) one(cl *kgo.Client, tx *crashTxn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		p.setErr(tx, fmt.Errorf("begin: %w", err))
		return false
	}
	rs := make([]*kgo.Record, crashTxnRecords)
	for r := range rs {
		rs[r] = &kgo.Record{Partition: int32(r % crashPartitions), Value: []byte(crashValue(tx.i, r))}
	}
	results := cl.ProduceSync(ctx, rs...)
	var acked []*kgo.Record
	for _, res := range results {
		if res.Err == nil {
			acked = append(acked, res.Record)
		}
	}
	p.mu.Lock()
	tx.acked = acked
	p.mu.Unlock()
	if err := results.FirstErr(); err != nil {
		p.setErr(tx, fmt.Errorf("produce: %w", err))
		return false
	}
	if crashAbandons(tx.i) {
		p.setErr(tx, errAbandoned)
		return false
	}
	p.mu.Lock()
	tx.ended = true
	p.mu.Unlock()
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(tx.commit)); err != nil {
		p.setErr(tx, fmt.Errorf("end (commit %v): %w", tx.commit, err))
		return false
	}
	p.mu.Lock()
	tx.ok = true
	p.mu.Unlock()
	p.settled.Add(1)
	return true
}

func (p *crashProducer) setErr(tx *crashTxn, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tx.err = err
}

func (p *crashProducer) finish() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// snapshot copies the transactions.
func (p *crashProducer) snapshot() []crashTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]crashTxn, len(p.txns))
	for i, tx := range p.txns {
		out[i] = *tx
	}
	return out
}

// TestTransactionsKill9 kills the broker (SIGKILL) several times while a
// transactional producer runs a stream of transactions (8 records over 4
// partitions each; crashCommits decides commit or abort, and crashAbandons
// picks some to leave open by closing the client), restarting it on the
// same data directory and port; under both transaction versions. The
// producer replaces its client after any error. Then: no transaction hangs
// (the last stable offset reaches the high watermark on every partition
// within the transaction timeout, and ListTransactions lists nothing open),
// a read_committed reader sees every transaction the producer saw commit,
// exactly once, in order in each partition, all of each transaction or none
// of it, never an aborted one, and nothing whose commit was never asked; a
// read_uncommitted reader sees every acknowledged record where it was
// acknowledged. Last, a transaction is left open by a client that goes away,
// and the broker is killed and restarted: the transaction timeout aborts it
// after the restart, and the checks hold again.
//
// STRAND_TXN_KILLS sets the number of kills (default 8), STRAND_TXN_SEED the
// kill timing's seed; STRAND_TXN_LOG=1 (or =debug, with every request)
// shows the producer's whole log and the broker's output even when the test
// passes.
func TestTransactionsKill9(t *testing.T) {
	t.Parallel()
	kills := crashDefaultKills
	if s := os.Getenv("STRAND_TXN_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("STRAND_TXN_KILLS=%q: want a count", s)
		}
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STRAND_TXN_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STRAND_TXN_SEED=%q: %v", s, err)
		}
		seed = n
	}
	for _, tv := range []int16{2, 1} {
		t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
			t.Parallel()
			testTransactionsKill9(t, tv, kills, seed)
		})
	}
}

func testTransactionsKill9(t *testing.T, tv int16, kills int, seed uint64) {
	t.Logf("%d kills, timing seed %d (STRAND_TXN_SEED)", kills, seed)
	rng := rand.New(rand.NewPCG(seed, uint64(tv)))

	b := startBroker(t, txnBrokerArgs(fmt.Sprint(tv))...)
	const topic = "txn-crash"
	createTopic(t, b.Addr, topic, crashPartitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	checkTxnFeature(t, ctx, b.Addr, tv)

	p := startCrashProducer(b.Addr, topic)
	t.Cleanup(func() {
		p.finish()
		switch {
		case os.Getenv("STRAND_TXN_LOG") != "":
			t.Logf("producer log:\n%s", p.log.String())
			t.Logf("strand output:\n%s", b.Output.String())
		case t.Failed():
			t.Logf("producer log (tail):\n%s", tail(p.log.String(), 16<<10))
		}
	})
	progress := func(n int64, limit time.Duration, what string) time.Duration {
		t.Helper()
		from := p.settled.Load()
		return txnWait(t, ctx, limit, what, func() bool { return p.settled.Load() >= from+n }, func() string {
			txns := p.snapshot()
			last := "none"
			if len(txns) > 0 {
				last = txns[len(txns)-1].String()
			}
			return fmt.Sprintf("%d transactions ended, %d clients; last transaction %s", p.settled.Load(), p.clients.Load(), last)
		})
	}
	progress(5, 30*time.Second, "the producer ends 5 transactions")
	for k := 1; k <= kills; k++ {
		time.Sleep(time.Duration(rng.IntN(600)) * time.Millisecond)
		b.Kill()
		before := p.settled.Load()
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		b.Restart(t)
		took := progress(3, 40*time.Second, fmt.Sprintf("after kill %d, the producer ends 3 more transactions", k))
		t.Logf("kill %d: at %d transactions ended; 3 more %v after the restart (%d clients so far)", k, before,
			took.Round(time.Millisecond), p.clients.Load())
	}
	// At least one abandoned transaction (and so a fencing client) before
	// the end.
	txnWait(t, ctx, 30*time.Second, "the producer passes an abandoned transaction", func() bool {
		txns := p.snapshot()
		return len(txns) > 0 && txns[len(txns)-1].i > 21
	}, func() string { return fmt.Sprintf("%d transactions", len(p.snapshot())) })
	p.finish()
	txns := p.snapshot()

	adm := kadm.NewClient(client(t, b.Addr))
	// A transaction left open by the last client (if its last transaction
	// failed) is aborted by the timeout.
	stableLimit := crashTxnTimeout + txnAbortCheck + time.Second
	took := txnWaitStable(t, ctx, adm, topic, stableLimit)
	t.Logf("stable %v after the producer stopped (%d clients)", took.Round(time.Millisecond), p.clients.Load())
	first := checkCrashTxns(t, ctx, b.Addr, adm, topic, txns)

	// A transaction left open by a client that goes away, then kill -9:
	// after the restart the transaction timeout aborts it.
	cl, err := p.newClient()
	if err != nil {
		t.Fatal(err)
	}
	hang := &crashTxn{i: txns[len(txns)-1].i + 1}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	rs := make([]*kgo.Record, crashTxnRecords)
	for r := range rs {
		rs[r] = &kgo.Record{Partition: int32(r % crashPartitions), Value: []byte(crashValue(hang.i, r))}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing the transaction left open: %v", err)
	}
	hang.acked, hang.err = rs, errAbandoned
	opened := time.Now()
	cl.Close()
	txns = append(txns, *hang)
	if _, lso, err := txnStableOffsets(ctx, adm, topic); err != nil || lso[0] != rs[0].Offset {
		t.Errorf("with transaction %d open from offset %d, partition 0's last stable offset is %d (%v)", hang.i, rs[0].Offset, lso[0], err)
	}
	b.Kill()
	b.Restart(t)
	took = txnWaitStable(t, ctx, adm, topic, stableLimit)
	t.Logf("the transaction left open became stable %v after it opened (%v after the restart)",
		time.Since(opened).Round(time.Millisecond), took.Round(time.Millisecond))
	second := checkCrashTxns(t, ctx, b.Addr, adm, topic, txns)
	if !slices.Equal(first, second) {
		t.Errorf("after the last kill -9, read_committed holds %d records, before it %d (or they differ)", len(second), len(first))
	}
}

// checkCrashTxns checks the topic against what the producer saw and returns
// the read_committed records as "partition/offset value" lines.
func checkCrashTxns(t *testing.T, ctx context.Context, addr string, adm *kadm.Client, topic string, txns []crashTxn) []string {
	t.Helper()
	open, err := adm.ListTransactions(ctx, nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
	if err != nil {
		t.Fatalf("ListTransactions: %v", err)
	}
	if len(open) != 0 {
		t.Errorf("ListTransactions lists open transactions after the producer stopped: %+v", open.Sorted())
	}
	ds, err := adm.DescribeTransactions(ctx, crashTxnID)
	if err != nil {
		t.Fatalf("DescribeTransactions: %v", err)
	}
	if d := ds[crashTxnID]; d.Err != nil || !slices.Contains([]string{"CompleteCommit", "CompleteAbort", "Empty"}, d.State) {
		t.Errorf("%s after the producer stopped: state %q, error %v; want CompleteCommit, CompleteAbort or Empty", crashTxnID, d.State, d.Err)
	}

	byTxn := map[int]crashTxn{}
	stats := map[string]int{}
	for _, tx := range txns {
		byTxn[tx.i] = tx
		switch {
		case tx.ok && tx.commit:
			stats["committed"]++
		case tx.ok:
			stats["aborted"]++
		case tx.ended && tx.commit:
			stats["commit outcome unknown"]++
		case errors.Is(tx.err, errAbandoned):
			stats["abandoned"]++
		default:
			stats["failed before commit"]++
		}
	}

	// read_committed.
	recs := txnReadTopic(t, ctx, addr, topic, true)
	type pos struct {
		txn, rec int
	}
	where := map[pos][2]int64{}
	count := map[int]int{}
	last := map[int32]pos{}
	lines := make([]string, 0, len(recs))
	bad := 0
	report := func(format string, args ...any) {
		t.Helper()
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	for _, r := range recs {
		lines = append(lines, fmt.Sprintf("%d/%d %s", r.Partition, r.Offset, r.Value))
		ti, ri, ok := parseCrashValue(r.Value)
		if !ok {
			report("read_committed %d/%d: not a record of the producer: %q", r.Partition, r.Offset, r.Value)
			continue
		}
		k := pos{ti, ri}
		if prev, dup := where[k]; dup {
			report("transaction %d record %d read twice: at %d/%d and %d/%d", ti, ri, prev[0], prev[1], r.Partition, r.Offset)
			continue
		}
		where[k] = [2]int64{int64(r.Partition), r.Offset}
		count[ti]++
		if want := int32(ri % crashPartitions); r.Partition != want {
			report("transaction %d record %d on partition %d, produced to %d", ti, ri, r.Partition, want)
		}
		if prev, ok := last[r.Partition]; ok && (ti < prev.txn || ti == prev.txn && ri <= prev.rec) {
			report("partition %d: transaction %d record %d at offset %d after transaction %d record %d", r.Partition, ti, ri,
				r.Offset, prev.txn, prev.rec)
		}
		last[r.Partition] = k
		tx, known := byTxn[ti]
		switch {
		case !known:
			report("read_committed %d/%d: transaction %d was never run", r.Partition, r.Offset, ti)
		case !tx.commit:
			report("read_committed %d/%d: the producer aborted %v", r.Partition, r.Offset, tx)
		case !tx.ended:
			report("read_committed %d/%d: the producer never asked to commit %v", r.Partition, r.Offset, tx)
		}
	}
	visible := 0
	for _, ti := range slices.Sorted(maps.Keys(count)) {
		visible++
		if count[ti] != crashTxnRecords {
			report("transaction %d: %d of its %d records in read_committed (partial transaction); %v", ti, count[ti], crashTxnRecords, byTxn[ti])
		}
	}
	for _, tx := range txns {
		if !tx.ok || !tx.commit {
			continue
		}
		if count[tx.i] == 0 {
			report("transaction %d committed (EndTransaction returned nil), but read_committed has none of it", tx.i)
			continue
		}
		for _, r := range tx.acked {
			_, ri, _ := parseCrashValue(r.Value)
			if got := where[pos{tx.i, ri}]; got != [2]int64{int64(r.Partition), r.Offset} {
				report("transaction %d record %d acknowledged at %d/%d, read_committed has it at %v", tx.i, ri, r.Partition, r.Offset, got)
			}
		}
	}

	// read_uncommitted: every acknowledged record where it was
	// acknowledged.
	all := txnReadTopic(t, ctx, addr, topic, false)
	at := map[[2]int64]string{}
	for _, r := range all {
		at[[2]int64{int64(r.Partition), r.Offset}] = string(r.Value)
	}
	acked := 0
	for _, tx := range txns {
		for _, r := range tx.acked {
			acked++
			if got, ok := at[[2]int64{int64(r.Partition), r.Offset}]; !ok || got != string(r.Value) {
				report("transaction %d: %q acknowledged at %d/%d; read_uncommitted has %q there (present %v)", tx.i, r.Value,
					r.Partition, r.Offset, got, ok)
			}
		}
	}
	if bad > 20 {
		t.Errorf("... %d problems in all", bad)
	}
	if stats["committed"] == 0 || stats["aborted"] == 0 {
		t.Errorf("the producer saw %d transactions commit and %d abort; the test needs both", stats["committed"], stats["aborted"])
	}
	t.Logf("%d transactions: %v; read_committed: %d records of %d transactions; read_uncommitted: %d records (%d acknowledged)",
		len(txns), stats, len(recs), visible, len(all), acked)
	return lines
}
