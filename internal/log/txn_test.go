package log

// Tests of what the log does for transactions: control batches written by
// the broker (markers with no sequence), ScanBatches handing markers over
// whole with their type, and compaction's rules for transactions.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// txnDataBatch is a transactional batch of producer pid with the given
// keys and values ("" value: tombstone).
func txnDataBatch(t testing.TB, pid int64, seq int32, ts int64, codec model.Compression, kv ...string) []byte {
	t.Helper()
	var recs []Record
	for i := 0; i+1 < len(kv); i += 2 {
		r := Record{OffsetDelta: int32(i / 2), Key: []byte(kv[i])}
		if kv[i+1] != "" {
			r.Value = []byte(kv[i+1])
		}
		recs = append(recs, r)
	}
	b, err := appendBatch(nil, batchHeader{
		PartitionLeaderEpoch: -1, Attributes: int16(codec) | model.AttrTransactional,
		LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: ts, MaxTimestamp: ts,
		ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq,
	}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// markerBatch is a transaction marker as the broker writes it: control and
// transactional, sequence -1, one record with key version 0 + type and
// value version 0 + coordinator epoch.
func markerBatch(t testing.TB, pid int64, typ ControlType, ts int64, codec model.Compression) []byte {
	t.Helper()
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 7)
	b, err := appendBatch(nil, batchHeader{
		PartitionLeaderEpoch: -1, Attributes: int16(codec) | model.AttrTransactional | model.AttrControl,
		BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: 0, BaseSequence: -1,
	}, []Record{{Key: key, Value: val}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidateControlBatchSequence(t *testing.T) {
	for _, tc := range []struct {
		name     string
		internal bool
		control  bool
		pid      int64
		seq      int32
		want     error
	}{
		{"internal marker without sequence", true, true, 5, -1, nil},
		{"internal marker of no producer", true, true, -1, -1, nil},
		{"client marker", false, true, 5, -1, ErrInvalidRecord},
		{"client marker with sequence", false, true, 5, 0, ErrInvalidRecord},
		{"client data without sequence", false, false, 5, -1, ErrInvalidRecord},
		{"internal data without sequence", true, false, 5, -1, ErrInvalidRecord},
		{"internal data with sequence", true, false, 5, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := int16(model.AttrTransactional)
			if tc.control {
				attrs |= model.AttrControl
			}
			b, err := appendBatch(nil, batchHeader{PartitionLeaderEpoch: -1, Attributes: attrs, ProducerID: tc.pid,
				BaseSequence: tc.seq, BaseTimestamp: 1, MaxTimestamp: 1}, []Record{{Key: []byte{0, 0, 0, 1}, Value: []byte("v")}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = validateBatch(b, &validateOptions{allowControl: tc.internal})
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			l := openLog(t, vfs.NewMem(), "/d", testConfig(), nil)
			defer l.Close()
			if _, err := l.Append(b, AppendOptions{LeaderEpoch: -1, Internal: tc.internal}); (err == nil) != (tc.want == nil) {
				t.Fatalf("Append: err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestControlRecordType(t *testing.T) {
	for _, codec := range rvCodecs {
		for _, typ := range []ControlType{ControlAbort, ControlCommit, 4} {
			got, err := ControlRecordType(markerBatch(t, 3, typ, 10, codec))
			if err != nil || got != typ {
				t.Errorf("%s type %d: got %d, %v", codec, typ, got, err)
			}
		}
	}
	bad := func(key []byte, attrs int16) []byte {
		b, err := appendBatch(nil, batchHeader{Attributes: attrs, ProducerID: 1, BaseSequence: -1}, []Record{{Key: key}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctl := int16(model.AttrControl | model.AttrTransactional)
	for name, c := range map[string]struct {
		b    []byte
		want error
	}{
		"short key":     {bad([]byte{0, 0, 1}, ctl), ErrCorruptMessage},
		"null key":      {bad(nil, ctl), ErrCorruptMessage},
		"version -1":    {bad([]byte{0xff, 0xff, 0, 1}, ctl), ErrCorruptMessage},
		"not control":   {bad([]byte{0, 0, 0, 1}, model.AttrTransactional), ErrInvalidRecord},
		"header only":   {bad([]byte{0, 0, 0, 1}, ctl)[:model.BatchHeaderSize], ErrCorruptMessage},
		"garbage after": {append(bad([]byte{0, 0, 0, 1}, ctl)[:model.BatchHeaderSize], 0xff, 0xff), ErrCorruptMessage},
	} {
		if _, err := ControlRecordType(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", name, err, c.want)
		}
	}
}

// TestScanBatchesPassesMarkersWhole scans a log of data batches and markers
// of every size relation to the scan chunk (markers inside a chunk, across
// its end, and one larger than a chunk) and checks that every marker comes
// whole, with its type, and data batches as headers.
func TestScanBatchesPassesMarkersWhole(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := testConfig()
		cfg.SegmentBytes = 1 << 20 // one segment, many chunks
		l := openLog(t, fsys, dir, cfg, nil)
		defer l.Close()
		type want struct {
			base    int64
			control bool
			typ     ControlType
		}
		var wants []want
		big := string(make([]byte, 3000))
		for i := range 200 {
			var b []byte
			w := want{base: l.EndOffset()}
			switch i % 3 {
			case 0, 1:
				v := "v"
				if i%7 == 0 {
					v = big // moves markers to every position within a chunk
				}
				b = txnDataBatch(t, 1, int32(i), 1, model.CompressionNone, "k", v)
			case 2:
				w.control, w.typ = true, ControlType(i%2)
				b = markerBatch(t, 1, w.typ, 1, model.CompressionNone)
			}
			if _, err := l.Append(b, AppendOptions{LeaderEpoch: -1, Internal: true}); err != nil {
				t.Fatal(err)
			}
			wants = append(wants, w)
		}
		// A marker larger than a scan chunk (Strand never writes one, but
		// the scan must not depend on that).
		rec := Record{Key: []byte{0, 0, 0, 1}, Value: make([]byte, scanChunk+100)}
		huge, err := appendBatch(nil, batchHeader{Attributes: model.AttrControl | model.AttrTransactional, ProducerID: 2, BaseSequence: -1}, []Record{rec})
		if err != nil {
			t.Fatal(err)
		}
		wants = append(wants, want{base: l.EndOffset(), control: true, typ: ControlCommit})
		if _, err := l.Append(huge, AppendOptions{LeaderEpoch: -1, Internal: true}); err != nil {
			t.Fatal(err)
		}
		for _, from := range []int64{0, 1, 50, 199, 200} {
			var got []want
			err := l.ScanBatches(from, func(b model.Batch) bool {
				w := want{base: b.BaseOffset(), control: b.IsControl()}
				if w.control {
					if len(b) != b.Size() {
						t.Fatalf("marker at %d: %d bytes of %d", w.base, len(b), b.Size())
					}
					if err := checkCRC(b); err != nil {
						t.Fatalf("marker at %d: %v", w.base, err)
					}
					var err error
					if w.typ, err = ControlRecordType(b); err != nil {
						t.Fatal(err)
					}
				} else if len(b) != model.BatchHeaderSize {
					t.Fatalf("data batch at %d: %d bytes", w.base, len(b))
				}
				got = append(got, w)
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, wants[from:]) {
				t.Fatalf("from %d: got %v\nwant %v", from, got, wants[from:])
			}
		}
	})
}

// txnOp is one step of a compaction table: a plain batch, a transactional
// batch of producer pid, a marker of pid, or an action on the log.
type txnOp struct {
	pid    int64    // producer of txn batches and markers
	txn    bool     // a transactional batch
	marker string   // "commit"/"abort": a marker instead
	kv     []string // records ("" value: tombstone)
	roll   bool     // start a new segment here
	hw     bool     // the high watermark stays here (default: the log end)
	fuo    bool     // SetFirstUnstableOffset(the log end here)
}

func plainOp(kv ...string) txnOp            { return txnOp{kv: kv} }
func txnOpOf(pid int64, kv ...string) txnOp { return txnOp{pid: pid, txn: true, kv: kv} }
func commitOp(pid int64) txnOp              { return txnOp{pid: pid, marker: "commit"} }
func abortOp(pid int64) txnOp               { return txnOp{pid: pid, marker: "abort"} }

// TestCompactionWithTransactions checks Kafka's rules for cleaning
// transactional data: aborted records go, committed records are compacted
// as plain ones, nothing at or past the first unstable offset is cleaned
// or supersedes, and markers stay while their data does and go
// delete.retention.ms later (abort markers only when the replica layer
// hears of it).
func TestCompactionWithTransactions(t *testing.T) {
	cases := []struct {
		name      string
		ops       []txnOp
		passes    int             // compaction passes, a second apart (default 1)
		retention time.Duration   // delete.retention.ms (default 1ms: gone at the first pass)
		noHook    bool            // no SetMarkerRemoval
		kept      []int64         // offsets of the records left, markers included
		aborts    []RemovedMarker // abort markers reported before removal
		commits   []int64         // commit markers reported before removal, when not nil
	}{
		{name: "aborted record removed, earlier plain value stays", ops: []txnOp{
			plainOp("a", "1"), txnOpOf(1, "a", "2"), abortOp(1),
		}, kept: []int64{0, 2}},
		{name: "abort marker goes the pass after its data", ops: []txnOp{
			plainOp("a", "1"), txnOpOf(1, "a", "2"), abortOp(1),
		}, passes: 2, kept: []int64{0}, aborts: []RemovedMarker{{1, 2, false}}},
		{name: "abort marker kept without the replica's hook", ops: []txnOp{
			plainOp("a", "1"), txnOpOf(1, "a", "2"), abortOp(1),
		}, passes: 2, noHook: true, kept: []int64{0, 2}},
		{name: "abort marker kept before delete.retention.ms", ops: []txnOp{
			plainOp("a", "1"), txnOpOf(1, "a", "2"), abortOp(1),
		}, passes: 2, retention: time.Hour, kept: []int64{0, 2}},
		{name: "aborted tombstone deletes nothing", ops: []txnOp{
			plainOp("a", "1"), txnOpOf(1, "a", ""), abortOp(1),
		}, passes: 2, kept: []int64{0}, aborts: []RemovedMarker{{1, 2, false}}},
		{name: "committed value replaces earlier plain one", ops: []txnOp{
			plainOp("a", "1"), txnOpOf(1, "a", "2", "b", "1"), commitOp(1),
		}, passes: 2, kept: []int64{1, 2, 3}},
		{name: "committed duplicates compacted within the transaction", ops: []txnOp{
			txnOpOf(1, "a", "1", "a", "2", "b", "1"), commitOp(1), plainOp("b", "2"),
		}, passes: 2, kept: []int64{1, 3, 4}},
		{name: "later plain value replaces committed one, then the marker goes", ops: []txnOp{
			txnOpOf(1, "a", "1"), commitOp(1), plainOp("a", "2"),
		}, kept: []int64{1, 2}},
		{name: "commit marker goes the pass after its data", ops: []txnOp{
			txnOpOf(1, "a", "1"), commitOp(1), plainOp("a", "2"),
		}, passes: 2, kept: []int64{2}, commits: []int64{1}},
		{name: "commit marker kept without the replica's hook", ops: []txnOp{
			txnOpOf(1, "a", "1"), commitOp(1), plainOp("a", "2"),
		}, passes: 2, noHook: true, kept: []int64{1, 2}},
		{name: "commit marker kept before delete.retention.ms", ops: []txnOp{
			txnOpOf(1, "a", "1"), commitOp(1), plainOp("a", "2"),
		}, passes: 2, retention: time.Hour, kept: []int64{1, 2}},
		{name: "committed tombstone deletes, then goes", ops: []txnOp{
			plainOp("a", "1"), txnOpOf(1, "a", ""), commitOp(1),
		}, passes: 2, kept: []int64{}},
		{name: "interleaved producers and transactions", ops: []txnOp{
			plainOp("b", "0"), txnOpOf(1, "a", "1"), txnOpOf(2, "b", "1"), commitOp(1),
			txnOpOf(1, "c", "1"), abortOp(2), abortOp(1),
		}, kept: []int64{0, 1, 3, 5, 6}},
		{name: "interleaved producers, second pass", ops: []txnOp{
			plainOp("b", "0"), txnOpOf(1, "a", "1"), txnOpOf(2, "b", "1"), commitOp(1),
			txnOpOf(1, "c", "1"), abortOp(2), abortOp(1),
		}, passes: 2, kept: []int64{0, 1, 3}, aborts: []RemovedMarker{{2, 5, false}, {1, 6, false}}},
		{name: "open transaction and what follows untouched", ops: []txnOp{
			plainOp("a", "1", "b", "1"), {roll: true}, txnOpOf(1, "a", "2"), plainOp("b", "2", "a", "3"), {roll: true},
			plainOp("b", "4"), abortOp(2),
		}, passes: 2, kept: []int64{0, 1, 2, 3, 4, 5, 6}},
		{name: "open transaction as the replica reports it", ops: []txnOp{
			plainOp("a", "1", "b", "1"), {roll: true, fuo: true}, txnOpOf(1, "a", "2"), plainOp("b", "2", "a", "3"), {roll: true},
			plainOp("b", "4"),
		}, passes: 2, kept: []int64{0, 1, 2, 3, 4, 5}},
		{name: "marker above the high watermark decides nothing yet", ops: []txnOp{
			plainOp("a", "1"), {roll: true}, txnOpOf(1, "a", "2"), plainOp("a", "3"), {hw: true}, commitOp(1),
			{roll: true}, plainOp("a", "4"),
		}, passes: 2, kept: []int64{0, 1, 2, 3, 4}},
		{name: "first unstable offset bounds plain data too", ops: []txnOp{
			plainOp("a", "1"), {roll: true, fuo: true}, plainOp("a", "2"), {roll: true}, plainOp("a", "3"),
		}, passes: 2, kept: []int64{0, 1, 2}},
		{name: "decided transactions across segments", ops: []txnOp{
			plainOp("a", "1"), txnOpOf(1, "a", "2"), {roll: true}, txnOpOf(2, "b", "1"), txnOpOf(1, "c", "1"),
			{roll: true}, commitOp(1), abortOp(2), plainOp("c", "2"),
		}, passes: 2, kept: []int64{1, 4, 6}, aborts: []RemovedMarker{{2, 5, false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: time.UnixMilli(50_000_000)}
			cfg := compactConfig()
			cfg.DeleteRetention = cmp.Or(tc.retention, time.Millisecond)
			cfg.SegmentBytes = 1 << 20 // segments roll where the table says
			l := openLog(t, vfs.NewMem(), "/d", cfg, clk.now)
			defer l.Close()
			var aborts []RemovedMarker
			var commits []int64
			if !tc.noHook {
				l.SetMarkerRemoval(func(ms []RemovedMarker) error {
					for _, m := range ms {
						if m.Commit {
							commits = append(commits, m.Offset)
						} else {
							aborts = append(aborts, m)
						}
					}
					return nil
				})
			}
			ts := clk.t.UnixMilli()
			seq := map[int64]int32{}
			hw := int64(-1)
			for _, o := range tc.ops {
				switch {
				case o.roll || o.hw || o.fuo:
					if o.roll {
						if err := l.Roll(); err != nil {
							t.Fatal(err)
						}
					}
					if o.hw {
						hw = l.EndOffset()
					}
					if o.fuo {
						l.SetFirstUnstableOffset(l.EndOffset())
					}
					continue
				}
				var b []byte
				switch {
				case o.marker != "":
					typ := ControlAbort
					if o.marker == "commit" {
						typ = ControlCommit
					}
					b = markerBatch(t, o.pid, typ, ts, model.CompressionNone)
				case o.txn:
					b = txnDataBatch(t, o.pid, seq[o.pid], ts, model.CompressionLZ4, o.kv...)
					seq[o.pid] += int32(len(o.kv) / 2)
				default:
					b = keyedBatch(t, ts, model.CompressionNone, o.kv...)
				}
				if _, err := l.Append(b, AppendOptions{LeaderEpoch: -1, Internal: true}); err != nil {
					t.Fatal(err)
				}
			}
			end := l.EndOffset()
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			if hw < 0 {
				hw = end
			}
			l.SetHighWatermark(hw)
			for range max(tc.passes, 1) {
				clk.t = clk.t.Add(time.Second)
				if _, err := l.Compact(); err != nil {
					t.Fatal(err)
				}
			}
			got := []int64{}
			for _, r := range readAll(t, l, 0) {
				got = append(got, r.offset)
			}
			if !slices.Equal(got, tc.kept) {
				t.Fatalf("kept %v, want %v", got, tc.kept)
			}
			if !slices.Equal(aborts, tc.aborts) {
				t.Fatalf("abort markers reported %v, want %v", aborts, tc.aborts)
			}
			if tc.commits != nil && !slices.Equal(commits, tc.commits) {
				t.Fatalf("commit markers reported %v, want %v", commits, tc.commits)
			}
			if l.EndOffset() != end {
				t.Fatalf("end moved %d -> %d", end, l.EndOffset())
			}
			// After two passes, what is left stays.
			if st, err := l.Compact(); tc.passes > 1 && (err != nil || st.RecordsRemoved != 0) {
				t.Fatalf("an immediate further pass: %+v %v", st, err)
			}
		})
	}
}

// TestCompactionAbortHookErrorKeepsMarkers: when the replica layer cannot
// forget an aborted transaction, its marker stays, and the next pass
// removes it once it can.
func TestCompactionAbortHookErrorKeepsMarkers(t *testing.T) {
	clk := &clock{t: time.UnixMilli(50_000_000)}
	cfg := compactConfig()
	cfg.DeleteRetention = time.Millisecond
	l := openLog(t, vfs.NewMem(), "/d", cfg, clk.now)
	defer l.Close()
	fail := errors.New("snapshot failed")
	hookErr := fail
	l.SetMarkerRemoval(func([]RemovedMarker) error { return hookErr })
	ts := clk.t.UnixMilli()
	for _, b := range [][]byte{
		txnDataBatch(t, 1, 0, ts, model.CompressionNone, "a", "1"),
		markerBatch(t, 1, ControlAbort, ts, model.CompressionNone),
		keyedBatch(t, ts, model.CompressionNone, "b", "1"),
	} {
		if _, err := l.Append(b, AppendOptions{LeaderEpoch: -1, Internal: true}); err != nil {
			t.Fatal(err)
		}
	}
	l.Roll()
	l.SetHighWatermark(l.EndOffset())
	offsets := func() []int64 {
		var got []int64
		for _, r := range readAll(t, l, 0) {
			got = append(got, r.offset)
		}
		return got
	}
	clk.t = clk.t.Add(time.Second)
	if _, err := l.Compact(); err != nil { // removes the aborted record
		t.Fatal(err)
	}
	if _, err := l.Compact(); !errors.Is(err, fail) {
		t.Fatalf("err %v, want the hook's", err)
	}
	if got := offsets(); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("after a failed hook: %v, want [1 2]", got)
	}
	hookErr = nil
	if _, err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	if got := offsets(); !slices.Equal(got, []int64{2}) {
		t.Fatalf("after the hook succeeded: %v, want [2]", got)
	}
}
