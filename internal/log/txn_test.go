package log

// Tests of what the log does for transactions: control batches written by
// the broker (markers with no sequence), ScanBatches handing markers over
// whole with their type, and compaction leaving transactional batches alone.

import (
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

// TestCompactionKeepsTransactions: records of transactional batches do not
// supersede earlier records of their keys, and transactional batches and
// markers are never cleaned; plain records still supersede everything
// before them.
func TestCompactionKeepsTransactions(t *testing.T) {
	type op struct {
		txn    bool   // a transactional batch of producer 1
		marker string // "commit"/"abort": a marker of producer 1 instead
		kv     []string
	}
	cases := []struct {
		name string
		ops  []op
		kept []int64 // offsets of the records left below the active segment, markers included
	}{
		{"aborted write does not hide the committed value", []op{
			{kv: []string{"a", "1"}}, {txn: true, kv: []string{"a", "2"}}, {marker: "abort"},
		}, []int64{0, 1, 2}},
		{"committed write does not supersede", []op{
			{kv: []string{"a", "1"}}, {txn: true, kv: []string{"a", "2", "a", "3"}}, {marker: "commit"},
		}, []int64{0, 1, 2, 3}},
		{"later plain write supersedes plain, not transactional", []op{
			{kv: []string{"a", "1"}}, {txn: true, kv: []string{"a", "2"}}, {marker: "commit"}, {kv: []string{"a", "4"}},
		}, []int64{1, 2, 3}},
		{"transactional tombstones and duplicates kept", []op{
			{txn: true, kv: []string{"a", "", "a", "x", "b", ""}}, {marker: "abort"}, {kv: []string{"b", "1"}},
		}, []int64{0, 1, 2, 3, 4}},
		{"plain compaction unchanged around transactions", []op{
			{kv: []string{"a", "1", "b", "1"}}, {txn: true, kv: []string{"c", "1"}}, {kv: []string{"a", "2"}},
			{marker: "commit"}, {kv: []string{"b", "2"}},
		}, []int64{2, 3, 4, 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: time.UnixMilli(50_000_000)}
			cfg := compactConfig()
			cfg.DeleteRetention = time.Millisecond // old tombstones go at once, unless kept
			l := openLog(t, vfs.NewMem(), "/d", cfg, clk.now)
			defer l.Close()
			ts := clk.t.UnixMilli()
			seq := int32(0)
			for _, o := range tc.ops {
				var b []byte
				switch {
				case o.marker != "":
					typ := ControlAbort
					if o.marker == "commit" {
						typ = ControlCommit
					}
					b = markerBatch(t, 1, typ, ts, model.CompressionNone)
				case o.txn:
					b = txnDataBatch(t, 1, seq, ts, model.CompressionLZ4, o.kv...)
					seq += int32(len(o.kv) / 2)
				default:
					b = keyedBatch(t, ts, model.CompressionNone, o.kv...)
				}
				if _, err := l.Append(b, AppendOptions{LeaderEpoch: -1, Internal: true}); err != nil {
					t.Fatal(err)
				}
			}
			end := l.EndOffset()
			l.Roll()
			l.SetHighWatermark(end)
			clk.t = clk.t.Add(time.Second)
			if _, err := l.Compact(); err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range readAll(t, l, 0) {
				got = append(got, r.offset)
			}
			if !slices.Equal(got, tc.kept) {
				t.Fatalf("kept %v, want %v", got, tc.kept)
			}
			if l.EndOffset() != end {
				t.Fatalf("end moved %d -> %d", end, l.EndOffset())
			}
		})
	}
}
