package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
)

// testBatch builds a v2 record batch of n uncompressed records of producer
// pid (-1: not idempotent) with a valid CRC.
func testBatch(pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	var recs []byte
	for i := range n {
		var r []byte
		r = append(r, 0)                     // attributes
		r = binary.AppendVarint(r, 0)        // timestamp delta
		r = binary.AppendVarint(r, int64(i)) // offset delta
		r = binary.AppendVarint(r, -1)       // null key
		v := fmt.Appendf(nil, "p%d-e%d-s%d", pid, epoch, int64(seq)+int64(i))
		r = binary.AppendVarint(r, int64(len(v)))
		r = append(r, v...)
		r = binary.AppendVarint(r, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	b := make([]byte, model.BatchHeaderSize, model.BatchHeaderSize+len(recs))
	binary.BigEndian.PutUint32(b[model.BatchLengthPos:], uint32(model.BatchHeaderSize+len(recs)-model.BatchLengthOverhead))
	b[model.BatchMagicPos] = model.BatchMagic
	binary.BigEndian.PutUint32(b[model.BatchLastDeltaPos:], uint32(n-1))
	binary.BigEndian.PutUint64(b[model.BatchBaseTimestampPos:], uint64(ts))
	binary.BigEndian.PutUint64(b[model.BatchMaxTimestampPos:], uint64(ts))
	binary.BigEndian.PutUint64(b[model.BatchProducerIDPos:], uint64(pid))
	binary.BigEndian.PutUint16(b[model.BatchProducerEpochPos:], uint16(epoch))
	binary.BigEndian.PutUint32(b[model.BatchBaseSequencePos:], uint32(seq))
	binary.BigEndian.PutUint32(b[model.BatchRecordCountPos:], uint32(n))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[model.BatchCRCPos:], crc32.Checksum(b[model.BatchAttributesPos:], castagnoli))
	return b
}

// fakeClock is a settable Options.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// env is one partition served from a data directory that survives reopen.
type env struct {
	t     *testing.T
	dir   string
	opts  Options
	cfg   Config
	logs  *log.Manager
	m     *Manager
	p     *Partition
	clock *fakeClock
}

var testTP = model.TopicPartition{Topic: "t", Partition: 0}

func newEnv(t *testing.T, edit func(*Options)) *env {
	t.Helper()
	clock := &fakeClock{now: time.Now()}
	e := &env{t: t, dir: t.TempDir(), clock: clock, cfg: Defaults()}
	e.cfg.FlushPolicy = log.FlushNever
	e.opts = Options{Now: clock.Now}
	if edit != nil {
		edit(&e.opts)
	}
	e.open()
	t.Cleanup(func() {
		if e.logs != nil {
			e.logs.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	logs, err := log.NewManager(e.dir, log.ManagerOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.logs = logs
	e.m = NewManagerWith(logs, e.opts)
	if e.p, err = e.m.Open(testTP, [16]byte{1}, e.cfg); err != nil {
		e.t.Fatal(err)
	}
}

// restart closes cleanly (with the snapshot when snapshot is set) and
// opens again.
func (e *env) restart(snapshot bool) {
	e.t.Helper()
	if snapshot {
		if err := e.m.Close(); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := e.logs.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.logs = nil
	e.open()
}

func (e *env) snapshots() []int64 {
	e.t.Helper()
	offs, err := listSnapshots(e.p.Log().FS(), e.p.Log().Dir())
	if err != nil {
		e.t.Fatal(err)
	}
	return offs
}

type produced struct {
	res AppendResult
	err error
}

func (e *env) produce(pid int64, epoch int16, seq int32, n int) produced {
	e.t.Helper()
	res, wait, err := e.p.Append(testBatch(pid, epoch, seq, n, e.clock.Now().UnixMilli()))
	if err == nil {
		if werr := wait(); werr != nil {
			e.t.Fatal(werr)
		}
	}
	return produced{res, err}
}

// step is one append of a table and what it must give.
type step struct {
	pid   int64
	epoch int16
	seq   int32
	n     int
	want  error // nil: written or duplicate
	dupOf int   // >0: a duplicate of the step with this 1-based index
}

func TestProducerSequenceRules(t *testing.T) {
	const max32 = math.MaxInt32
	cases := []struct {
		name  string
		steps []step
	}{
		{"in sequence", []step{
			{pid: 1, seq: 0, n: 3}, {pid: 1, seq: 3, n: 1}, {pid: 1, seq: 4, n: 10}, {pid: 1, seq: 14, n: 1},
		}},
		{"gap", []step{
			{pid: 1, seq: 0, n: 3}, {pid: 1, seq: 4, n: 1, want: ErrOutOfOrderSequence},
			{pid: 1, seq: 3, n: 1},
		}},
		{"behind but not cached", []step{
			{pid: 1, seq: 0, n: 3}, {pid: 1, seq: 3, n: 2}, {pid: 1, seq: 1, n: 1, want: ErrOutOfOrderSequence},
			{pid: 1, seq: 3, n: 1, want: ErrOutOfOrderSequence}, // same start, other range: not a duplicate
		}},
		{"duplicate of the last", []step{
			{pid: 1, seq: 0, n: 3}, {pid: 1, seq: 0, n: 3, dupOf: 1}, {pid: 1, seq: 3, n: 1},
		}},
		{"duplicates among the last five", []step{
			{pid: 1, seq: 0, n: 1}, {pid: 1, seq: 1, n: 2}, {pid: 1, seq: 3, n: 3}, {pid: 1, seq: 6, n: 1},
			{pid: 1, seq: 7, n: 1}, {pid: 1, seq: 8, n: 2},
			{pid: 1, seq: 1, n: 2, dupOf: 2}, {pid: 1, seq: 3, n: 3, dupOf: 3}, {pid: 1, seq: 6, n: 1, dupOf: 4},
			{pid: 1, seq: 7, n: 1, dupOf: 5}, {pid: 1, seq: 8, n: 2, dupOf: 6},
			{pid: 1, seq: 0, n: 1, want: ErrOutOfOrderSequence}, // sixth from the end: forgotten
			{pid: 1, seq: 10, n: 1},
		}},
		{"unknown producer starts anywhere (Kafka 4)", []step{
			{pid: 7, epoch: 3, seq: 42, n: 2}, {pid: 7, epoch: 3, seq: 44, n: 1},
			{pid: 8, epoch: 0, seq: 0, n: 1},
		}},
		{"sequence wraps past MaxInt32", []step{
			{pid: 1, seq: max32 - 2, n: 3}, {pid: 1, seq: 0, n: 2}, {pid: 1, seq: 2, n: 1},
		}},
		{"a batch spanning the wrap", []step{
			{pid: 1, seq: max32 - 5, n: 4}, {pid: 1, seq: max32 - 1, n: 4}, {pid: 1, seq: max32 - 1, n: 4, dupOf: 2},
			{pid: 1, seq: 2, n: 1},
		}},
		{"no wrap to 1", []step{
			{pid: 1, seq: max32, n: 1}, {pid: 1, seq: 1, n: 1, want: ErrOutOfOrderSequence},
		}},
		{"epoch bump restarts at 0", []step{
			{pid: 1, epoch: 0, seq: 0, n: 5}, {pid: 1, epoch: 1, seq: 0, n: 2}, {pid: 1, epoch: 1, seq: 2, n: 1},
		}},
		{"new epoch must start at 0", []step{
			{pid: 1, epoch: 0, seq: 0, n: 5}, {pid: 1, epoch: 1, seq: 5, n: 1, want: ErrOutOfOrderSequence},
			{pid: 1, epoch: 0, seq: 5, n: 1},
		}},
		{"older epoch fenced", []step{
			{pid: 1, epoch: 2, seq: 0, n: 1}, {pid: 1, epoch: 1, seq: 1, n: 1, want: ErrInvalidProducerEpoch},
			{pid: 1, epoch: 1, seq: 0, n: 1, want: ErrInvalidProducerEpoch},
			{pid: 1, epoch: 2, seq: 1, n: 1},
		}},
		{"retry of the old epoch after a bump is fenced, not a duplicate", []step{
			{pid: 1, epoch: 0, seq: 0, n: 2}, {pid: 1, epoch: 1, seq: 0, n: 2},
			{pid: 1, epoch: 0, seq: 0, n: 2, want: ErrInvalidProducerEpoch},
			{pid: 1, epoch: 1, seq: 0, n: 2, dupOf: 2},
		}},
		{"producers are independent", []step{
			{pid: 1, seq: 0, n: 2}, {pid: 2, seq: 0, n: 2}, {pid: 1, seq: 2, n: 1}, {pid: 2, seq: 0, n: 2, dupOf: 2},
			{pid: 2, seq: 5, n: 1, want: ErrOutOfOrderSequence},
		}},
		{"non-idempotent batches are not checked", []step{
			{pid: -1, epoch: -1, seq: -1, n: 2}, {pid: -1, epoch: -1, seq: -1, n: 2},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			var got []produced
			for i, s := range tc.steps {
				end := e.p.Log().EndOffset()
				r := e.produce(s.pid, s.epoch, s.seq, s.n)
				got = append(got, r)
				switch {
				case s.want != nil:
					if !errors.Is(r.err, s.want) {
						t.Fatalf("step %d: err %v, want %v", i+1, r.err, s.want)
					}
					if e.p.Log().EndOffset() != end {
						t.Fatalf("step %d: rejected batch was written", i+1)
					}
				case r.err != nil:
					t.Fatalf("step %d: %v", i+1, r.err)
				case s.dupOf > 0:
					orig := got[s.dupOf-1].res
					if !r.res.Duplicate || r.res.BaseOffset != orig.BaseOffset || r.res.LastOffset != orig.LastOffset {
						t.Fatalf("step %d: %+v, want duplicate of step %d %+v", i+1, r.res, s.dupOf, orig)
					}
					if e.p.Log().EndOffset() != end {
						t.Fatalf("step %d: duplicate was written", i+1)
					}
				default:
					if r.res.Duplicate || r.res.BaseOffset != end || r.res.LastOffset != end+int64(s.n)-1 {
						t.Fatalf("step %d: %+v, want written at %d", i+1, r.res, end)
					}
				}
			}
		})
	}
}

func TestLastSequence(t *testing.T) {
	for _, c := range []struct{ base, delta, want int32 }{
		{0, 0, 0}, {0, 4, 4}, {math.MaxInt32, 0, math.MaxInt32}, {math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1}, {math.MaxInt32 - 10, 10, math.MaxInt32},
	} {
		if got := lastSequence(c.base, c.delta); got != c.want {
			t.Errorf("lastSequence(%d, %d) = %d, want %d", c.base, c.delta, got, c.want)
		}
	}
	if !inSequence(math.MaxInt32, 0) || !inSequence(-1, 0) || inSequence(math.MaxInt32, 1) || !inSequence(5, 6) || inSequence(5, 5) {
		t.Error("inSequence")
	}
}

func TestDuplicateWithBadCRCIsCorrupt(t *testing.T) {
	e := newEnv(t, nil)
	b := testBatch(1, 0, 0, 2, e.clock.Now().UnixMilli())
	if _, _, err := e.p.Append(slices.Clone(b)); err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if _, _, err := e.p.Append(b); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("err %v, want corrupt", err)
	}
	gap := testBatch(1, 0, 9, 1, e.clock.Now().UnixMilli())
	gap[len(gap)-1] ^= 0xff
	if _, _, err := e.p.Append(gap); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("err %v, want corrupt before the sequence check", err)
	}
}

func TestDuplicateLogAppendTime(t *testing.T) {
	e := newEnv(t, nil)
	e.cfg.LogAppendTime = true
	if err := e.p.Log().SetConfig(e.cfg.Config); err != nil {
		t.Fatal(err)
	}
	first := e.produce(1, 0, 0, 2)
	if first.err != nil || first.res.LogAppendTime < 0 {
		t.Fatalf("%+v", first)
	}
	dup := e.produce(1, 0, 0, 2)
	if dup.err != nil || !dup.res.Duplicate || dup.res.LogAppendTime != first.res.LogAppendTime {
		t.Fatalf("duplicate %+v, original %+v", dup, first)
	}
}

// checkState checks that producer 1's last five batches (of those in
// written) are recognised as duplicates and that it continues at next.
func checkState(t *testing.T, e *env, written []produced, seqs []int32, counts []int, next int32) {
	t.Helper()
	for i := max(len(written)-5, 0); i < len(written); i++ {
		r := e.produce(1, 0, seqs[i], counts[i])
		if r.err != nil || !r.res.Duplicate || r.res.BaseOffset != written[i].res.BaseOffset {
			t.Fatalf("retry of batch %d: %+v %v, want duplicate at %d", i, r.res, r.err, written[i].res.BaseOffset)
		}
	}
	if len(written) > 5 {
		i := len(written) - 6
		if r := e.produce(1, 0, seqs[i], counts[i]); !errors.Is(r.err, ErrOutOfOrderSequence) {
			t.Fatalf("retry of batch %d, no longer cached: %v", i, r.err)
		}
	}
	if r := e.produce(1, 0, next+1, 1); !errors.Is(r.err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after restart: %v", r.err)
	}
	if r := e.produce(1, 0, next, 1); r.err != nil || r.res.Duplicate {
		t.Fatalf("next batch after restart: %+v %v", r.res, r.err)
	}
}

func writeSome(t *testing.T, e *env, n int) ([]produced, []int32, []int, int32) {
	t.Helper()
	var written []produced
	var seqs []int32
	var counts []int
	seq := int32(0)
	for i := range n {
		c := 1 + i%3
		r := e.produce(1, 0, seq, c)
		if r.err != nil {
			t.Fatal(r.err)
		}
		written, seqs, counts = append(written, r), append(seqs, seq), append(counts, c)
		seq += int32(c)
	}
	return written, seqs, counts, seq
}

func TestRestartFromSnapshot(t *testing.T) {
	e := newEnv(t, nil)
	written, seqs, counts, next := writeSome(t, e, 8)
	e.produce(2, 4, 100, 1)
	end := e.p.Log().EndOffset()
	e.restart(true)
	if got := e.snapshots(); !slices.Equal(got, []int64{end}) {
		t.Fatalf("snapshots %v, want [%d]", got, end)
	}
	want := []ProducerInfo{{ProducerID: 1, LastSequence: next - 1, Batches: 5}, {ProducerID: 2, Epoch: 4, LastSequence: 100, Batches: 1}}
	for i, pi := range e.p.Producers() {
		if pi.ProducerID != want[i].ProducerID || pi.Epoch != want[i].Epoch || pi.LastSequence != want[i].LastSequence || pi.Batches != want[i].Batches {
			t.Fatalf("producer %d after restart: %+v, want %+v", i, pi, want[i])
		}
	}
	checkState(t, e, written, seqs, counts, next)
}

func TestRestartWithoutSnapshot(t *testing.T) {
	e := newEnv(t, nil)
	written, seqs, counts, next := writeSome(t, e, 12)
	e.restart(false) // as after a crash before any snapshot: the whole log is scanned
	if got, end := e.snapshots(), e.p.Log().EndOffset(); !slices.Equal(got, []int64{end}) {
		t.Fatalf("snapshots after the rebuild %v, want [%d]", got, end)
	}
	checkState(t, e, written, seqs, counts, next)
}

func TestRestartFromSnapshotAndTail(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.ProducerSnapshotEvery = 4 })
	written, seqs, counts, next := writeSome(t, e, 10) // snapshots after 4 and 8 appends
	if got := e.snapshots(); len(got) != 2 || got[1] != written[7].res.LastOffset+1 {
		t.Fatalf("snapshots %v, want the 8th append's end last", got)
	}
	e.restart(false) // no snapshot at close: batches 9 and 10 come from the log
	checkState(t, e, written, seqs, counts, next)
}

func TestSnapshotPastLogEndIsDiscarded(t *testing.T) {
	e := newEnv(t, nil)
	written, seqs, counts, _ := writeSome(t, e, 9)
	if err := e.p.SnapshotProducers(); err != nil {
		t.Fatal(err)
	}
	// The log loses its tail after the snapshot was written (as unsynced
	// data in a crash): the snapshot knows batches that are gone.
	cut := written[6].res.BaseOffset
	if err := e.p.Log().Truncate(cut); err != nil {
		t.Fatal(err)
	}
	e.restart(false)
	if got := e.snapshots(); !slices.Equal(got, []int64{cut}) {
		t.Fatalf("snapshots %v, want only the rebuilt one at %d", got, cut)
	}
	checkState(t, e, written[:6], seqs[:6], counts[:6], seqs[6])
}

func TestCorruptSnapshotIsDiscarded(t *testing.T) {
	e := newEnv(t, nil)
	written, seqs, counts, next := writeSome(t, e, 7)
	if err := e.m.Close(); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(e.p.Log().Dir(), snapshotName(e.p.Log().EndOffset()))
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-3] ^= 1
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	e.restart(false)
	checkState(t, e, written, seqs, counts, next)
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := newProducerState()
	s.end = 1234
	s.producers[5] = &producerEntry{epoch: 3, lastActive: 99, batches: []batchMeta{{1, 2, 10, 11, 7}, {3, 3, 12, 12, 8}},
		txnFirst: 11, coordEpoch: 4}
	s.producers[-0x7000] = &producerEntry{epoch: -1, lastActive: 1, txnFirst: -1, coordEpoch: -1}
	s.txns.aborted = []abortedEntry{{AbortedTxn{5, 3, 8}, 9}, {AbortedTxn{6, 1, 20}, 11}, {AbortedTxn{5, 30, 40}, 41}}
	snap, err := decodeSnapshot(s.encode(0))
	if err != nil || snap.end != 1234 || len(snap.producers) != 2 {
		t.Fatalf("%+v %v", snap, err)
	}
	for pid, want := range s.producers {
		e := snap.producers[pid]
		if e == nil || e.epoch != want.epoch || e.lastActive != want.lastActive || !slices.Equal(e.batches, want.batches) ||
			e.txnFirst != want.txnFirst || e.coordEpoch != want.coordEpoch {
			t.Fatalf("producer %d: %+v, want %+v", pid, e, want)
		}
	}
	if !slices.Equal(snap.aborted, s.txns.aborted) {
		t.Fatalf("aborted %v, want %v", snap.aborted, s.txns.aborted)
	}
	// The log start drops the aborted transactions wholly below it.
	if snap, err := decodeSnapshot(s.encode(9)); err != nil || !slices.Equal(snap.aborted, s.txns.aborted[1:]) {
		t.Fatalf("encoded from log start 9: %v %v", snap.aborted, err)
	}
	enc := s.encode(0)
	for i := range enc {
		bad := slices.Clone(enc)
		bad[i] ^= 0x10
		if _, err := decodeSnapshot(bad); err == nil {
			t.Fatalf("flipping byte %d went unnoticed", i)
		}
	}
	for n := range len(enc) {
		if _, err := decodeSnapshot(enc[:n]); err == nil {
			t.Fatalf("truncation to %d bytes went unnoticed", n)
		}
	}
}

func TestProducerExpiration(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.ProducerIDExpiration = time.Hour
		o.ProducerIDExpirationCheck = time.Minute
	})
	if r := e.produce(1, 0, 0, 3); r.err != nil {
		t.Fatal(r.err)
	}
	e.clock.Advance(50 * time.Minute)
	if r := e.produce(2, 0, 0, 1); r.err != nil { // sweeps; producer 1 is still young
		t.Fatal(r.err)
	}
	if r := e.produce(1, 0, 0, 3); !r.res.Duplicate {
		t.Fatalf("producer 1 expired early: %+v %v", r.res, r.err)
	}
	e.clock.Advance(61 * time.Minute)
	if r := e.produce(2, 0, 1, 1); r.err != nil { // sweeps producer 1 out
		t.Fatal(r.err)
	}
	if got := e.p.Producers(); len(got) != 1 || got[0].ProducerID != 2 {
		t.Fatalf("producers after expiry: %+v", got)
	}
	// Unknown again: any sequence is accepted, and the old batch is no
	// longer recognised.
	if r := e.produce(1, 0, 17, 1); r.err != nil || r.res.Duplicate {
		t.Fatalf("%+v %v", r.res, r.err)
	}

	// On open, producers idle too long (by snapshot or batch time) are dropped.
	e.clock.Advance(2 * time.Hour)
	e.restart(true)
	if got := e.p.Producers(); len(got) != 0 {
		t.Fatalf("producers after restart: %+v", got)
	}
}

func TestScanBatchesFrom(t *testing.T) {
	e := newEnv(t, nil)
	e.cfg.SegmentBytes = 300 // several segments
	if err := e.p.Log().SetConfig(e.cfg.Config); err != nil {
		t.Fatal(err)
	}
	writeSome(t, e, 30)
	if n := len(e.p.Log().Segments()); n < 3 {
		t.Fatalf("%d segments", n)
	}
	var all []int64
	if err := e.p.Log().ScanBatches(0, func(b model.Batch) bool { all = append(all, b.BaseOffset()); return true }); err != nil {
		t.Fatal(err)
	}
	if len(all) != 30 {
		t.Fatalf("%d batches", len(all))
	}
	for i, from := range all {
		var got []int64
		err := e.p.Log().ScanBatches(from, func(b model.Batch) bool {
			got = append(got, b.BaseOffset())
			return len(got) < 3
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := all[i:min(i+3, len(all))]; !slices.Equal(got, want) {
			t.Fatalf("from %d: %v, want %v", from, got, want)
		}
	}
}
