package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

var discardLogger = slog.New(slog.DiscardHandler)

// txnBatch is testBatch with the transactional attribute.
func txnBatch(pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	b := testBatch(pid, epoch, seq, n, ts)
	binary.BigEndian.PutUint16(b[model.BatchAttributesPos:], model.AttrTransactional)
	binary.BigEndian.PutUint32(b[model.BatchCRCPos:], crc32.Checksum(b[model.BatchAttributesPos:], castagnoli))
	return b
}

// txnStep is one operation of a transaction table.
type txnStep struct {
	op     string // "plain"/"txn": client batch; "cplain"/"ctxn": coordinator batch (AppendInternal); "commit"/"abort": marker
	pid    int64
	epoch  int16
	seq    int32
	n      int   // records (data batches); 0 means 1
	coord  int32 // coordinator epoch (markers)
	want   error
	dupOf  int  // >0: a duplicate of that 1-based step
	noWait bool // do not call the wait function (the high watermark stays)
}

func (s txnStep) marker() bool { return s.op == "commit" || s.op == "abort" }

// stepResult is where a step went.
type stepResult struct {
	base, last int64
	dup        bool
	err        error
	wait       func() error
}

// run performs one step on e's partition.
func (e *env) run(s txnStep) stepResult {
	e.t.Helper()
	n := max(s.n, 1)
	ts := e.clock.Now().UnixMilli()
	var r stepResult
	switch s.op {
	case "commit", "abort":
		r.base, r.wait, r.err = e.p.WriteMarker(Marker{ProducerID: s.pid, ProducerEpoch: s.epoch, Commit: s.op == "commit", CoordinatorEpoch: s.coord})
		r.last = r.base
	case "plain", "txn", "cplain", "ctxn":
		b := testBatch(s.pid, s.epoch, s.seq, n, ts)
		if s.op == "txn" || s.op == "ctxn" {
			b = txnBatch(s.pid, s.epoch, s.seq, n, ts)
		}
		var res AppendResult
		if s.op[0] == 'c' {
			res, r.wait, r.err = e.p.AppendInternal(b)
		} else {
			res, r.wait, r.err = e.p.Append(b)
		}
		r.base, r.last, r.dup = res.BaseOffset, res.LastOffset, res.Duplicate
	default:
		e.t.Fatalf("unknown op %q", s.op)
	}
	if r.err == nil && !s.noWait {
		if err := r.wait(); err != nil {
			e.t.Fatal(err)
		}
	}
	return r
}

// runSteps performs steps, checking each one's error and placement.
func (e *env) runSteps(steps []txnStep) []stepResult {
	e.t.Helper()
	var got []stepResult
	for i, s := range steps {
		end := e.p.Log().EndOffset()
		r := e.run(s)
		got = append(got, r)
		switch {
		case s.want != nil:
			if !errors.Is(r.err, s.want) {
				e.t.Fatalf("step %d %+v: err %v, want %v", i+1, s, r.err, s.want)
			}
			if e.p.Log().EndOffset() != end {
				e.t.Fatalf("step %d: rejected batch was written", i+1)
			}
		case r.err != nil:
			e.t.Fatalf("step %d %+v: %v", i+1, s, r.err)
		case s.dupOf > 0:
			if orig := got[s.dupOf-1]; !r.dup || r.base != orig.base || r.last != orig.last {
				e.t.Fatalf("step %d: %+v, want a duplicate of step %d %+v", i+1, r, s.dupOf, orig)
			}
		default:
			if want := end + int64(max(s.n, 1)) - 1; r.dup || r.base != end || s.marker() && r.last != end || !s.marker() && r.last != want {
				e.t.Fatalf("step %d: %+v, want written at %d", i+1, r, end)
			}
		}
	}
	return got
}

// txnView is the transaction state a test compares.
type txnView struct {
	Open    map[int64]int64 // producer -> first offset of its open transaction
	Coord   map[int64]int32 // producer -> coordinator epoch, where not -1
	Epochs  map[int64]int16
	Aborted []AbortedTxn
	LSO, HW int64
}

func (e *env) view() txnView {
	v := txnView{Open: map[int64]int64{}, Coord: map[int64]int32{}, Epochs: map[int64]int16{}}
	for _, pi := range e.p.Producers() {
		if pi.CurrentTxnStartOffset >= 0 {
			v.Open[pi.ProducerID] = pi.CurrentTxnStartOffset
		}
		if pi.CoordinatorEpoch >= 0 {
			v.Coord[pi.ProducerID] = pi.CoordinatorEpoch
		}
		v.Epochs[pi.ProducerID] = pi.Epoch
	}
	v.Aborted = e.p.AbortedTransactions(0, 1<<62)
	v.LSO, v.HW = e.p.LastStableOffset(), e.p.HighWatermark()
	return v
}

func (v txnView) String() string {
	return fmt.Sprintf("open %v coord %v epochs %v aborted %v lso %d hw %d", v.Open, v.Coord, v.Epochs, v.Aborted, v.LSO, v.HW)
}

func TestTransactionRules(t *testing.T) {
	type abortedRef struct {
		pid         int64
		first, last int // 1-based steps: the transaction's first batch and its marker
	}
	cases := []struct {
		name    string
		steps   []txnStep
		open    map[int64]int // producer -> 1-based step of its open transaction's first batch
		coord   map[int64]int32
		aborted []abortedRef
		lso     int // >0: the LSO is that step's base offset; 0: the high watermark
	}{
		{name: "first batch opens the transaction", steps: []txnStep{
			{op: "txn", pid: 1, seq: 0, n: 2}, {op: "txn", pid: 1, seq: 2}, {op: "plain", pid: -1, epoch: -1, seq: -1},
		}, open: map[int64]int{1: 1}, lso: 1},
		{name: "commit closes it", steps: []txnStep{
			{op: "txn", pid: 1, seq: 0, n: 2}, {op: "txn", pid: 1, seq: 2}, {op: "commit", pid: 1, coord: 0},
		}, coord: map[int64]int32{1: 0}},
		{name: "abort is recorded", steps: []txnStep{
			{op: "txn", pid: 1, seq: 0}, {op: "plain", pid: 2, seq: 0}, {op: "txn", pid: 1, seq: 1, n: 3}, {op: "abort", pid: 1, coord: 3},
		}, coord: map[int64]int32{1: 3}, aborted: []abortedRef{{1, 1, 4}}},
		{name: "next transaction opens at its own first batch", steps: []txnStep{
			{op: "txn", pid: 1, seq: 0}, {op: "abort", pid: 1}, {op: "plain", pid: -1, epoch: -1, seq: -1},
			{op: "txn", pid: 1, seq: 1}, {op: "txn", pid: 1, seq: 2},
		}, open: map[int64]int{1: 4}, coord: map[int64]int32{1: 0}, aborted: []abortedRef{{1, 1, 2}}, lso: 4},
		{name: "plain batch while the transaction is open", steps: []txnStep{
			{op: "txn", pid: 1, seq: 0}, {op: "plain", pid: 1, seq: 1, want: ErrInvalidTxnState},
			{op: "commit", pid: 1}, {op: "plain", pid: 1, seq: 1}, // same epoch: sequences continue
		}, coord: map[int64]int32{1: 0}},
		{name: "sequence errors come before the transaction state", steps: []txnStep{
			{op: "txn", pid: 1, seq: 0}, {op: "plain", pid: 1, seq: 5, want: ErrOutOfOrderSequence},
			{op: "plain", pid: 1, epoch: 0, seq: 1, want: ErrInvalidTxnState},
		}, open: map[int64]int{1: 1}, lso: 1},
		{name: "duplicate of a transactional batch", steps: []txnStep{
			{op: "txn", pid: 1, seq: 0, n: 2}, {op: "txn", pid: 1, seq: 2}, {op: "txn", pid: 1, seq: 0, n: 2, dupOf: 1},
		}, open: map[int64]int{1: 1}, lso: 1},
		{name: "marker without a transaction records nothing", steps: []txnStep{
			{op: "commit", pid: 7, epoch: 2, coord: 5}, {op: "abort", pid: 7, epoch: 2, coord: 5},
			{op: "plain", pid: 7, epoch: 2, seq: 1, want: ErrOutOfOrderSequence}, // known now: sequence 0 first
			{op: "plain", pid: 7, epoch: 2, seq: 0},
		}, coord: map[int64]int32{7: 5}},
		{name: "marker epoch bump drops the sequences", steps: []txnStep{
			{op: "txn", pid: 1, seq: 0, n: 3}, {op: "abort", pid: 1, epoch: 1},
			{op: "txn", pid: 1, epoch: 1, seq: 3, want: ErrOutOfOrderSequence},
			{op: "txn", pid: 1, epoch: 0, seq: 3, want: ErrInvalidProducerEpoch},
			{op: "txn", pid: 1, epoch: 1, seq: 0},
		}, open: map[int64]int{1: 5}, coord: map[int64]int32{1: 0}, aborted: []abortedRef{{1, 1, 2}}, lso: 5},
		{name: "same-epoch marker keeps the sequences", steps: []txnStep{
			{op: "txn", pid: 1, seq: 0, n: 2}, {op: "commit", pid: 1},
			{op: "txn", pid: 1, seq: 0, want: ErrOutOfOrderSequence}, {op: "txn", pid: 1, seq: 0, n: 2, dupOf: 1},
			{op: "txn", pid: 1, seq: 2},
		}, open: map[int64]int{1: 5}, coord: map[int64]int32{1: 0}, lso: 5},
		{name: "older marker epoch fenced", steps: []txnStep{
			{op: "txn", pid: 1, epoch: 2, seq: 0}, {op: "abort", pid: 1, epoch: 1, want: ErrInvalidProducerEpoch},
			{op: "commit", pid: 1, epoch: 2},
		}, coord: map[int64]int32{1: 0}},
		{name: "older coordinator epoch fenced", steps: []txnStep{
			{op: "commit", pid: 1, coord: 5}, {op: "txn", pid: 1, seq: 0},
			{op: "abort", pid: 1, coord: 4, want: ErrTransactionCoordinatorFenced},
			// the producer epoch is checked first
			{op: "abort", pid: 1, epoch: -1, coord: 4, want: ErrInvalidProducerEpoch},
			{op: "abort", pid: 1, coord: 6},
		}, coord: map[int64]int32{1: 6}, aborted: []abortedRef{{1, 2, 5}}},
		{name: "fencing marker with a new epoch aborts", steps: []txnStep{
			{op: "txn", pid: 1, epoch: 3, seq: 0}, {op: "abort", pid: 1, epoch: 4, coord: 1},
			{op: "txn", pid: 1, epoch: 3, seq: 1, want: ErrInvalidProducerEpoch},
		}, coord: map[int64]int32{1: 1}, aborted: []abortedRef{{1, 1, 2}}},
		{name: "the oldest open transaction holds the LSO", steps: []txnStep{
			{op: "txn", pid: 1, seq: 0}, {op: "txn", pid: 2, seq: 0}, {op: "txn", pid: 3, seq: 0},
			{op: "commit", pid: 1}, {op: "abort", pid: 3},
		}, open: map[int64]int{2: 2}, coord: map[int64]int32{1: 0, 3: 0}, aborted: []abortedRef{{3, 3, 5}}, lso: 2},
		{name: "coordinator batches: no sequence or duplicate checks", steps: []txnStep{
			{op: "ctxn", pid: 1, seq: 0}, {op: "ctxn", pid: 1, seq: 0}, {op: "ctxn", pid: 1, seq: 9},
			{op: "cplain", pid: 1, seq: 0, want: ErrInvalidTxnState},
			{op: "commit", pid: 1}, {op: "cplain", pid: 1, seq: 0},
			{op: "ctxn", pid: 1, epoch: 1, seq: 0}, {op: "ctxn", pid: 1, epoch: 0, seq: 0, want: ErrInvalidProducerEpoch},
			{op: "cplain", pid: -1, epoch: -1, seq: -1},
		}, open: map[int64]int{1: 7}, coord: map[int64]int32{1: 0}, lso: 7},
		{name: "coordinator and client batches share the producer", steps: []txnStep{
			{op: "txn", pid: 1, epoch: 2, seq: 0}, {op: "ctxn", pid: 1, epoch: 1, seq: 0, want: ErrInvalidProducerEpoch},
			{op: "ctxn", pid: 1, epoch: 2, seq: 0}, {op: "abort", pid: 1, epoch: 2},
		}, coord: map[int64]int32{1: 0}, aborted: []abortedRef{{1, 1, 4}}},
		{name: "marker of no producer refused", steps: []txnStep{
			{op: "commit", pid: -1, want: ErrInvalidRecord},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			got := e.runSteps(tc.steps)
			want := txnView{Open: map[int64]int64{}, Coord: map[int64]int32{}, HW: e.p.Log().EndOffset()}
			for pid, step := range tc.open {
				want.Open[pid] = got[step-1].base
			}
			for pid, c := range tc.coord {
				want.Coord[pid] = c
			}
			for _, a := range tc.aborted {
				want.Aborted = append(want.Aborted, AbortedTxn{a.pid, got[a.first-1].base, got[a.last-1].base})
			}
			slices.SortFunc(want.Aborted, func(a, b AbortedTxn) int { return int(a.FirstOffset - b.FirstOffset) })
			want.LSO = want.HW
			if tc.lso > 0 {
				want.LSO = got[tc.lso-1].base
			}
			v := e.view()
			v.Epochs = nil
			if fmt.Sprint(v) != fmt.Sprint(want) {
				t.Fatalf("state\n got %v\nwant %v", v, want)
			}
			// The same state after a clean restart and after a rebuild
			// from the log alone.
			for _, snapshot := range []bool{true, false} {
				if !snapshot {
					for _, off := range e.snapshots() {
						if err := e.p.Log().FS().Remove(filepath.Join(e.p.Log().Dir(), snapshotName(off))); err != nil {
							t.Fatal(err)
						}
					}
				}
				e.restart(snapshot)
				v := e.view()
				v.Epochs = nil
				if fmt.Sprint(v) != fmt.Sprint(want) {
					t.Fatalf("after restart (snapshot %v)\n got %v\nwant %v", snapshot, v, want)
				}
			}
		})
	}
}

func TestTransactionChecksWithinOneAppend(t *testing.T) {
	ts := time.Now().UnixMilli()
	cases := []struct {
		name    string
		batches [][]byte
		want    error
		open    int64 // expected open transaction's first offset for producer 1, -1 for none
	}{
		{"transactional then plain", [][]byte{txnBatch(1, 0, 0, 1, ts), testBatch(1, 0, 1, 1, ts)}, ErrInvalidTxnState, -1},
		{"plain then transactional", [][]byte{testBatch(1, 0, 0, 1, ts), txnBatch(1, 0, 1, 2, ts)}, nil, 1},
		{"two transactional", [][]byte{txnBatch(1, 0, 0, 2, ts), txnBatch(1, 0, 2, 1, ts)}, nil, 0},
		{"other producer's plain batch", [][]byte{txnBatch(1, 0, 0, 2, ts), testBatch(2, 0, 0, 1, ts)}, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, internal := range []bool{false, true} {
				e := newEnv(t, nil)
				data := slices.Concat(tc.batches...)
				var err error
				if internal {
					_, _, err = e.p.AppendInternal(data)
				} else {
					_, _, err = e.p.Append(data)
				}
				if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
					t.Fatalf("internal %v: err %v, want %v", internal, err, tc.want)
				}
				open := int64(-1)
				for _, pi := range e.p.Producers() {
					if pi.ProducerID == 1 {
						open = pi.CurrentTxnStartOffset
					}
				}
				if open != tc.open {
					t.Fatalf("internal %v: open transaction at %d, want %d", internal, open, tc.open)
				}
			}
		})
	}
}

func TestAppendInternalRefusesControlBatches(t *testing.T) {
	e := newEnv(t, nil)
	b := markerBatch(Marker{ProducerID: 1, Commit: true}, e.clock.Now().UnixMilli())
	if _, _, err := e.p.AppendInternal(b); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("AppendInternal of a marker: %v", err)
	}
	if _, _, err := e.p.Append(slices.Clone(b)); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("Append of a marker: %v", err)
	}
	if e.p.Log().EndOffset() != 0 {
		t.Fatal("a client's marker was written")
	}
}

// TestMarkerFormat decodes a marker with kmsg: Kafka's control batch and
// EndTransactionMarker.
func TestMarkerFormat(t *testing.T) {
	for _, m := range []Marker{
		{ProducerID: 42, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 9},
		{ProducerID: 1 << 40, ProducerEpoch: 32766, Commit: false, CoordinatorEpoch: 0},
	} {
		e := newEnv(t, nil)
		off, wait, err := e.p.WriteMarker(m)
		if err != nil || wait() != nil {
			t.Fatal(err)
		}
		sec, err := e.p.Read(off, 1<<20, false)
		if err != nil {
			t.Fatal(err)
		}
		data, err := sec.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(data); err != nil {
			t.Fatal(err)
		}
		if rb.Magic != 2 || rb.Attributes != 0x30 || rb.ProducerID != m.ProducerID || rb.ProducerEpoch != m.ProducerEpoch ||
			rb.FirstSequence != -1 || rb.NumRecords != 1 || rb.LastOffsetDelta != 0 || rb.FirstOffset != off {
			t.Fatalf("%+v: batch %+v", m, rb)
		}
		if crc := crc32.Checksum(data[model.BatchAttributesPos:], castagnoli); uint32(rb.CRC) != crc {
			t.Fatalf("crc %08x, want %08x", uint32(rb.CRC), crc)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(rb.Records); err != nil {
			t.Fatal(err)
		}
		var key kmsg.ControlRecordKey
		if err := key.ReadFrom(rec.Key); err != nil {
			t.Fatal(err)
		}
		wantType := kmsg.ControlRecordKeyTypeAbort
		if m.Commit {
			wantType = kmsg.ControlRecordKeyTypeCommit
		}
		if key.Version != 0 || key.Type != wantType {
			t.Fatalf("key %+v", key)
		}
		var val kmsg.EndTxnMarker
		if err := val.ReadFrom(rec.Value); err != nil {
			t.Fatal(err)
		}
		if val.Version != 0 || val.CoordinatorEpoch != m.CoordinatorEpoch || len(rec.Value) != 6 {
			t.Fatalf("value %+v (%d bytes)", val, len(rec.Value))
		}
	}
}

// TestLastStableOffsetFollowsHighWatermark: a decided transaction holds
// the LSO until its marker is below the high watermark, and the high
// watermark's move wakes parked fetches and bounds read_committed reads.
func TestLastStableOffsetFollowsHighWatermark(t *testing.T) {
	e := newEnv(t, nil)
	w := NewWaiter()
	e.p.Watch(w)
	defer e.p.Unwatch(w)
	drain := func() bool {
		select {
		case <-w.C:
			return true
		default:
			return false
		}
	}
	readable := func(committed bool) int64 { // offset after the last readable batch
		sec, err := e.p.Read(0, 1<<20, committed)
		if err != nil {
			t.Fatal(err)
		}
		data, err := sec.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		end := int64(0)
		for len(data) > 0 {
			b := model.Batch(data)
			end = b.LastOffset() + 1
			data = data[b.Size():]
		}
		return end
	}
	type want struct{ hw, lso int64 }
	check := func(step string, w want, woken bool) {
		t.Helper()
		if hw, lso := e.p.HighWatermark(), e.p.LastStableOffset(); hw != w.hw || lso != w.lso {
			t.Fatalf("%s: hw %d lso %d, want %d %d", step, hw, lso, w.hw, w.lso)
		}
		if got := readable(false); got != w.hw {
			t.Fatalf("%s: read_uncommitted reads to %d, want %d", step, got, w.hw)
		}
		if got := readable(true); got != w.lso {
			t.Fatalf("%s: read_committed reads to %d, want %d", step, got, w.lso)
		}
		if got := drain(); got != woken {
			t.Fatalf("%s: woken %v, want %v", step, got, woken)
		}
	}
	check("empty", want{0, 0}, false)
	e.run(txnStep{op: "plain", pid: -1, epoch: -1, seq: -1, n: 2}) // 0-1
	check("plain", want{2, 2}, true)
	e.run(txnStep{op: "txn", pid: 1, seq: 0, n: 2}) // 2-3
	check("open", want{4, 2}, true)
	e.run(txnStep{op: "plain", pid: -1, epoch: -1, seq: -1}) // 4
	check("plain after open", want{5, 2}, true)
	m := e.run(txnStep{op: "commit", pid: 1, noWait: true}) // 5
	check("marker above the high watermark", want{5, 2}, false)
	e.run(txnStep{op: "txn", pid: 2, seq: 0, noWait: true}) // 6
	check("second open above the high watermark", want{5, 2}, false)
	if err := m.wait(); err != nil {
		t.Fatal(err)
	}
	check("marker below the high watermark", want{7, 6}, true)
	e.run(txnStep{op: "abort", pid: 2})
	check("abort", want{8, 8}, true)
	if got := e.p.AbortedTransactions(0, 8); !slices.Equal(got, []AbortedTxn{{2, 6, 7}}) {
		t.Fatalf("aborted %v", got)
	}
}

// TestLastStableOffsetWithSyncedHighWatermark: with a flush on every
// append the high watermark is the synced end, and a marker's wait makes
// it durable before the LSO passes it.
func TestLastStableOffsetWithSyncedHighWatermark(t *testing.T) {
	e := newEnv(t, nil)
	e.cfg.FlushPolicy = log.FlushEveryAppend
	if err := e.p.Log().SetConfig(e.cfg.Config); err != nil {
		t.Fatal(err)
	}
	e.run(txnStep{op: "txn", pid: 1, seq: 0})
	m := e.run(txnStep{op: "abort", pid: 1, noWait: true})
	if lso := e.p.LastStableOffset(); lso != 0 {
		t.Fatalf("lso %d before the marker is durable", lso)
	}
	if err := m.wait(); err != nil {
		t.Fatal(err)
	}
	if lso, synced := e.p.LastStableOffset(), e.p.Log().SyncedOffset(); lso != 2 || synced < 2 {
		t.Fatalf("lso %d synced %d after the marker's wait", lso, synced)
	}
}

// TestAbortedTransactionsQuery checks abortedIn (with its early stop)
// against a brute-force filter over random histories of interleaved
// transactions.
func TestAbortedTransactionsQuery(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var ts txnState
		open := map[int64]int64{}
		var all []AbortedTxn
		var off int64
		for range 200 {
			pid := int64(rng.IntN(6))
			switch first, ok := open[pid]; {
			case !ok && rng.IntN(2) == 0:
				open[pid] = off
				ts.open(pid, off)
			case ok && rng.IntN(3) == 0:
				commit := rng.IntN(2) == 0
				ts.complete(pid, first, off, commit)
				delete(open, pid)
				if !commit {
					all = append(all, AbortedTxn{pid, first, off})
				}
			}
			off++
			ts.onHighWatermark(off - int64(rng.IntN(3)))
		}
		for from := int64(0); from <= off; from += 1 + int64(rng.IntN(5)) {
			for upTo := from; upTo <= off+1; upTo += 1 + int64(rng.IntN(7)) {
				var want []AbortedTxn
				for _, a := range all {
					if a.LastOffset >= from && a.FirstOffset < upTo {
						want = append(want, a)
					}
				}
				slices.SortFunc(want, func(a, b AbortedTxn) int { return int(a.FirstOffset - b.FirstOffset) })
				if got := ts.abortedIn(from, upTo); !slices.Equal(got, want) {
					t.Fatalf("seed %d [%d, %d): got %v\nwant %v", seed, from, upTo, got, want)
				}
			}
		}
		// The LSO is the oldest open transaction's start, or the high
		// watermark once every decided one is below it.
		ts.onHighWatermark(off + 1)
		lso := off + 1
		for _, first := range open {
			lso = min(lso, first)
		}
		if got := ts.lastStable(off+1, 0); got != lso {
			t.Fatalf("seed %d: lso %d, want %d", seed, got, lso)
		}
	}
}

func TestOpenTransactionNeverExpires(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.ProducerIDExpiration = time.Hour
		o.ProducerIDExpirationCheck = time.Minute
	})
	e.runSteps([]txnStep{{op: "txn", pid: 1, seq: 0}, {op: "plain", pid: 2, seq: 0}, {op: "commit", pid: 3}, {op: "txn", pid: 4, seq: 0}})
	e.clock.Advance(2 * time.Hour)
	e.runSteps([]txnStep{{op: "plain", pid: 5, seq: 0}}) // sweeps: 2 and 3 go, 1 and 4 stay
	pids := func() []int64 {
		var out []int64
		for _, pi := range e.p.Producers() {
			out = append(out, pi.ProducerID)
		}
		return out
	}
	if got := pids(); !slices.Equal(got, []int64{1, 4, 5}) {
		t.Fatalf("producers after the sweep %v", got)
	}
	e.runSteps([]txnStep{{op: "abort", pid: 4}})
	// On open too: the idle producer with an open transaction stays, the
	// one whose transaction is decided goes.
	e.clock.Advance(2 * time.Hour)
	e.restart(true)
	if got := pids(); !slices.Equal(got, []int64{1}) {
		t.Fatalf("producers after restart %v", got)
	}
	e.runSteps([]txnStep{{op: "plain", pid: 1, seq: 1, want: ErrInvalidTxnState}, {op: "commit", pid: 1}})
	e.clock.Advance(2 * time.Hour)
	e.runSteps([]txnStep{{op: "plain", pid: 5, seq: 1}})
	if got := pids(); !slices.Equal(got, []int64{5}) {
		t.Fatalf("producers after the decided transaction idled %v", got)
	}
}

// TestLastStableOffsetNotBelowLogStart: DeleteRecords past the start of
// an open transaction moves the LSO up to the log start, as in Kafka.
func TestLastStableOffsetNotBelowLogStart(t *testing.T) {
	e := newEnv(t, nil)
	e.runSteps([]txnStep{
		{op: "txn", pid: 1, seq: 0, n: 2}, {op: "plain", pid: -1, epoch: -1, seq: -1, n: 3}, {op: "txn", pid: 2, seq: 0},
	})
	for _, c := range []struct{ start, lso int64 }{{0, 0}, {1, 1}, {4, 4}, {6, 6}} {
		if _, err := e.p.DeleteRecords(c.start); err != nil {
			t.Fatal(err)
		}
		if lso := e.p.LastStableOffset(); lso != c.lso {
			t.Fatalf("log start %d: lso %d, want %d", c.start, lso, c.lso)
		}
	}
}

// TestAbortedBelowLogStartDropped: aborted transactions whose markers the
// log start has passed are forgotten, by the sweep and on open.
func TestAbortedBelowLogStartDropped(t *testing.T) {
	for _, how := range []string{"sweep", "restart", "rebuild"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.ProducerIDExpirationCheck = time.Minute })
			got := e.runSteps([]txnStep{
				{op: "txn", pid: 1, seq: 0}, {op: "abort", pid: 1}, // 0, 1
				{op: "txn", pid: 2, seq: 0}, {op: "txn", pid: 3, seq: 0}, {op: "abort", pid: 2}, // 2, 3, 4
				{op: "abort", pid: 3}, // 5
			})
			all := []AbortedTxn{{1, 0, 1}, {2, 2, 4}, {3, 3, 5}}
			if v := e.p.AbortedTransactions(0, 100); !slices.Equal(v, all) {
				t.Fatalf("aborted %v", v)
			}
			if _, err := e.p.DeleteRecords(got[2].base + 1); err != nil { // log start 3: inside pid 2's
				t.Fatal(err)
			}
			switch how {
			case "sweep":
				e.clock.Advance(2 * time.Minute)
				e.runSteps([]txnStep{{op: "plain", pid: -1, epoch: -1, seq: -1}})
			case "restart":
				e.restart(true)
			case "rebuild":
				e.restart(false)
			}
			if v := e.p.AbortedTransactions(0, 100); !slices.Equal(v, all[1:]) {
				t.Fatalf("aborted after the log start moved to 3: %v", v)
			}
		})
	}
}

// writeV1Snapshot encodes s in the version-1 format (before transactions).
func writeV1Snapshot(s *producerState) []byte {
	pids := make([]int64, 0, len(s.producers))
	for pid := range s.producers {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	b := binary.BigEndian.AppendUint16(nil, 1)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(s.end))
	b = binary.BigEndian.AppendUint32(b, uint32(len(pids)))
	for _, pid := range pids {
		e := s.producers[pid]
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastActive))
		b = append(b, byte(len(e.batches)))
		for _, m := range e.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(m.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(m.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(m.firstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.lastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.timestamp))
		}
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[snapshotCRCStart:], castagnoli))
	return b
}

func TestSnapshotVersion1Loads(t *testing.T) {
	// A fixed version-1 file: end 100, producer 5 epoch 3 active at 99
	// with one batch (sequences 0-1, offsets 10-11, timestamp 7).
	golden := []byte{
		0, 1, 0, 0, 0, 0, // version, crc (below)
		0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 1,
		0, 0, 0, 0, 0, 0, 0, 5, 0, 3, 0, 0, 0, 0, 0, 0, 0, 99, 1,
		0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 11, 0, 0, 0, 0, 0, 0, 0, 7,
	}
	binary.BigEndian.PutUint32(golden[2:], crc32.Checksum(golden[snapshotCRCStart:], castagnoli))
	s := newProducerState()
	s.end = 100
	s.producers[5] = &producerEntry{epoch: 3, lastActive: 99, batches: []batchMeta{{0, 1, 10, 11, 7}}}
	if enc := writeV1Snapshot(s); !slices.Equal(enc, golden) {
		t.Fatalf("test encoder drifted:\n%v\n%v", enc, golden)
	}
	snap, err := decodeSnapshot(golden)
	if err != nil {
		t.Fatal(err)
	}
	e := snap.producers[5]
	if snap.end != 100 || len(snap.producers) != 1 || e.epoch != 3 || e.lastActive != 99 || e.txnFirst != -1 ||
		e.coordEpoch != -1 || !slices.Equal(e.batches, []batchMeta{{0, 1, 10, 11, 7}}) || snap.aborted != nil {
		t.Fatalf("%+v %+v", snap, e)
	}

	// A partition whose only snapshot is version 1 opens from it: the
	// producer's retry is still recognised, and transactions work on top.
	env := newEnv(t, nil)
	written, seqs, counts, next := writeSome(t, env, 6)
	end := env.p.Log().EndOffset()
	env.p.appendMu.Lock()
	v1 := writeV1Snapshot(env.p.producers)
	env.p.appendMu.Unlock()
	if got := env.snapshots(); len(got) != 0 {
		t.Fatalf("snapshots %v before the test writes one", got)
	}
	if err := writeSnapshot(env.p.Log().FS(), env.p.Log().Dir(), end, v1); err != nil {
		t.Fatal(err)
	}
	env.restart(false)
	if got := env.snapshots(); !slices.Equal(got, []int64{end}) {
		t.Fatalf("snapshots %v, want the version-1 one only", got)
	}
	checkState(t, env, written, seqs, counts, next)
	env.runSteps([]txnStep{{op: "txn", pid: 9, seq: 0}, {op: "abort", pid: 9, coord: 2}})
	env.restart(true)
	if v := env.view(); len(v.Aborted) != 1 || v.Coord[9] != 2 {
		t.Fatalf("after v1 then v2: %v", v)
	}
}

func TestSnapshotRejectsBadTransactionFields(t *testing.T) {
	base := func() *producerState {
		s := newProducerState()
		s.end = 100
		s.producers[1] = &producerEntry{epoch: 0, txnFirst: 50, coordEpoch: 2}
		s.txns.aborted = []abortedEntry{{AbortedTxn{2, 10, 20}, 21}, {AbortedTxn{3, 15, 30}, 31}}
		return s
	}
	for name, edit := range map[string]func(*producerState){
		"open transaction at the end":   func(s *producerState) { s.producers[1].txnFirst = 100 },
		"open transaction below -1":     func(s *producerState) { s.producers[1].txnFirst = -2 },
		"coordinator epoch below -1":    func(s *producerState) { s.producers[1].coordEpoch = -5 },
		"aborted marker at the end":     func(s *producerState) { s.txns.aborted[1].LastOffset = 100 },
		"aborted first after marker":    func(s *producerState) { s.txns.aborted[0].FirstOffset = 20 },
		"aborted out of marker order":   func(s *producerState) { s.txns.aborted[1].LastOffset = 20 },
		"aborted negative first":        func(s *producerState) { s.txns.aborted[0].FirstOffset = -1 },
		"aborted markers not ascending": func(s *producerState) { s.txns.aborted[0], s.txns.aborted[1] = s.txns.aborted[1], s.txns.aborted[0] },
	} {
		s := base()
		if _, err := decodeSnapshot(s.encode(0)); err != nil {
			t.Fatalf("base: %v", err)
		}
		edit(s)
		if _, err := decodeSnapshot(s.encode(0)); !errors.Is(err, errBadSnapshot) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

// txnModel is an independent model of the transaction rules for the crash
// test: it applies the operations that survived, in log order.
type txnModel struct {
	open    map[int64]int64
	coord   map[int64]int32
	epochs  map[int64]int16
	aborted []AbortedTxn
}

func (m *txnModel) apply(s txnStep, r stepResult) {
	switch {
	case s.marker():
		if first, ok := m.open[s.pid]; ok {
			if s.op == "abort" {
				m.aborted = append(m.aborted, AbortedTxn{s.pid, first, r.base})
			}
			delete(m.open, s.pid)
		}
		m.coord[s.pid] = s.coord
	case s.op == "txn" || s.op == "ctxn":
		if _, ok := m.open[s.pid]; !ok {
			m.open[s.pid] = r.base
		}
	}
	if s.pid >= 0 {
		m.epochs[s.pid] = s.epoch
	}
}

// TestTransactionsCrashRebuild writes random transactional histories to an
// in-memory file system, takes crash clones (keeping only synced data, or a
// random part of the rest) at random points, reopens the clone and checks
// the rebuilt transaction state against a model of the operations the
// recovered log still holds. Snapshots are taken every few appends, so
// rebuilds start from snapshots at, before and past the recovered end.
func TestTransactionsCrashRebuild(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 7))
		mem := vfs.NewMem()
		clock := &fakeClock{now: time.Now()}
		opts := Options{Now: clock.Now, ProducerSnapshotEvery: 1 + rng.IntN(5), Logger: discardLogger}
		cfg := Defaults()
		cfg.SegmentBytes = 1 << 10
		cfg.FlushPolicy = log.FlushEveryAppend
		if rng.IntN(3) == 0 {
			cfg.FlushPolicy = log.FlushNever
		}
		open := func(fsys vfs.FS) (*log.Manager, *Partition) {
			logs, err := log.NewManager("/data", log.ManagerOptions{FS: fsys, Logger: discardLogger})
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewManagerWith(logs, opts).Open(testTP, [16]byte{1}, cfg)
			if err != nil {
				t.Fatalf("seed %d: open: %v", seed, err)
			}
			return logs, p
		}
		logs, p := open(mem)
		e := &env{t: t, p: p, clock: clock}
		type done struct {
			s txnStep
			r stepResult
		}
		var history []done
		seqs := map[int64]int32{}
		epochs := map[int64]int16{}
		coords := map[int64]int32{}
		inTxn := map[int64]bool{}
		for round := range 60 {
			pid := int64(rng.IntN(4))
			var s txnStep
			switch k := rng.IntN(10); {
			case k < 4 || !inTxn[pid] && k < 6:
				s = txnStep{op: "txn", pid: pid, epoch: epochs[pid], seq: seqs[pid], n: 1 + rng.IntN(3)}
				if pid == 3 {
					s.op, s.seq = "ctxn", 0 // a coordinator's producer
				}
				inTxn[pid] = true
			case k < 6:
				s = txnStep{op: "plain", pid: -1, epoch: -1, seq: -1, n: 1 + rng.IntN(3)}
			default:
				s = txnStep{op: "abort", pid: pid, epoch: epochs[pid], coord: coords[pid]}
				if rng.IntN(2) == 0 {
					s.op = "commit"
				}
				if rng.IntN(3) == 0 { // KIP-890: the marker bumps the epoch
					s.epoch++
				}
				if rng.IntN(4) == 0 {
					s.coord++
				}
				inTxn[pid] = false
			}
			s.noWait = rng.IntN(3) == 0
			r := e.run(s)
			if r.err != nil {
				t.Fatalf("seed %d round %d: %+v: %v", seed, round, s, r.err)
			}
			history = append(history, done{s, r})
			switch {
			case s.marker():
				if s.epoch != epochs[pid] {
					seqs[pid] = 0
				}
				epochs[pid], coords[pid] = s.epoch, s.coord
			case s.op == "txn":
				seqs[pid] += int32(s.n)
			}
			if rng.IntN(8) != 0 {
				continue
			}
			var crashOpts vfs.CrashOptions
			if rng.IntN(2) == 0 {
				crashOpts.Rand = rand.New(rand.NewPCG(seed, uint64(round)))
			}
			clone := mem.CrashClone(crashOpts)
			cl, cp := open(clone)
			end := cp.Log().EndOffset()
			m := txnModel{open: map[int64]int64{}, coord: map[int64]int32{}, epochs: map[int64]int16{}}
			for _, d := range history {
				if d.r.last < end {
					m.apply(d.s, d.r)
				}
			}
			ce := &env{t: t, p: cp, clock: clock}
			v := ce.view()
			want := txnView{Open: m.open, Coord: m.coord, Epochs: m.epochs, Aborted: m.aborted, HW: end, LSO: end}
			for _, first := range m.open {
				want.LSO = min(want.LSO, first)
			}
			slices.SortFunc(want.Aborted, func(a, b AbortedTxn) int { return int(a.FirstOffset - b.FirstOffset) })
			if fmt.Sprint(v) != fmt.Sprint(want) {
				t.Fatalf("seed %d round %d: recovered to %d of %d\n got %v\nwant %v", seed, round, end, p.Log().EndOffset(), v, want)
			}
			if err := cl.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := logs.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTransactionsConcurrent runs transactional producers, markers and
// read_committed readers at once, for the race detector and to check that
// the LSO never passes an open transaction nor moves backwards.
func TestTransactionsConcurrent(t *testing.T) {
	e := newEnv(t, nil)
	const producers, txns = 4, 30
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for pid := range int64(producers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := int32(0)
			for i := range txns {
				for range 3 {
					_, wait, err := e.p.Append(txnBatch(pid, 0, seq, 2, time.Now().UnixMilli()))
					if err == nil {
						err = wait()
					}
					if err != nil {
						t.Error(err)
						return
					}
					seq += 2
				}
				_, wait, err := e.p.WriteMarker(Marker{ProducerID: pid, Commit: i%2 == 0})
				if err == nil {
					err = wait()
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		w := NewWaiter()
		e.p.Watch(w)
		defer e.p.Unwatch(w)
		last := int64(0)
		for {
			select {
			case <-stop:
				return
			case <-w.C:
			case <-time.After(time.Millisecond):
			}
			lso, hw := e.p.LastStableOffset(), e.p.HighWatermark()
			if lso < last || lso > hw {
				t.Errorf("lso %d after %d, hw %d", lso, last, hw)
				return
			}
			last = lso
			// A transaction that starts below the LSO was decided, and its
			// marker below the high watermark, when the LSO was read.
			for _, a := range e.p.AbortedTransactions(0, lso) {
				if a.LastOffset >= hw {
					t.Errorf("aborted %+v starts below lso %d but its marker is not below hw %d", a, lso, hw)
				}
			}
			if _, err := e.p.Read(0, 1<<16, true); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	rwg.Wait()
	v := e.view()
	if len(v.Open) != 0 || v.LSO != v.HW || len(v.Aborted) != producers*txns/2 {
		t.Fatalf("final %v", v)
	}
}
