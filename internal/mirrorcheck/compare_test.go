package mirrorcheck

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/strandlog/strand/internal/model"
)

// sourceLog is a partition as a source cluster holds it: idempotent
// batches (one gzip, one big), a transaction and its commit marker, an
// aborted transaction and its marker, and a hole the cleaner left at
// 16..19.
func sourceLog() *fakeLog {
	return &fakeLog{start: 0, hw: 40, batches: [][]byte{
		build(spec{base: 0, records: 5, producerID: 1000, sequence: 0}),
		build(spec{base: 5, records: 5, producerID: 1000, sequence: 5, codec: model.CompressionGzip}),
		build(spec{base: 10, records: 5, producerID: 2000, transactional: true}),
		build(spec{base: 15, producerID: 2000, commit: true}),
		build(spec{base: 20, records: 5, producerID: 1000, sequence: 10, valueSize: 300}),
		build(spec{base: 25, records: 5, producerID: 1000, sequence: 15, codec: model.CompressionZstd}),
		build(spec{base: 30, records: 8, producerID: 3000, producerEpoch: 1, transactional: true}),
		build(spec{base: 38, producerID: 3000, producerEpoch: 1, abort: true}),
		build(spec{base: 39, records: 1, producerID: 1000, sequence: 20}),
	}}
}

func cluster(logs ...*fakeLog) *fakeCluster {
	return &fakeCluster{id: [16]byte{1, 2, 3}, logs: logs}
}

func compare(t *testing.T, source, mirror *fakeCluster, opts Options) TopicReport {
	t.Helper()
	rep, err := CompareLogs(context.Background(), source, mirror, "t", opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestLogsThatDifferOnlyInLeaderEpochAreEqual(t *testing.T) {
	src := sourceLog()
	for _, fetchBytes := range []int32{0, 100, 180, 1000} {
		source, mirror := cluster(src.withEpoch(3)), cluster(src.withEpoch(17))
		mirror.fromBatchBefore = true
		rep := compare(t, source, mirror, Options{FetchBytes: fetchBytes})
		if !rep.Equal() {
			t.Fatalf("fetch size %d: %s", fetchBytes, rep)
		}
		p := rep.Partitions[0]
		if p.Batches != 9 || p.Records != 34 || p.ControlBatches != 2 || p.Gaps != 1 || p.GapOffsets != 4 {
			t.Errorf("fetch size %d: counts %s", fetchBytes, rep)
		}
		want := map[model.Compression]int64{model.CompressionNone: 5, model.CompressionGzip: 1, model.CompressionZstd: 1, model.CompressionLZ4: 0}
		for c, n := range want {
			if p.Codecs[c] != n {
				t.Errorf("fetch size %d: %d batches of %s, want %d", fetchBytes, p.Codecs[c], c, n)
			}
		}
		if fetchBytes == 100 && source.fetches <= 9 {
			t.Errorf("fetch size 100: %d fetches for 9 batches, some bigger than 100 bytes", source.fetches)
		}
	}
}

// A log whose start was moved into the middle of a batch (DeleteRecords)
// is read from the batch that holds the start, which is no gap.
func TestLogStartInsideABatch(t *testing.T) {
	src := sourceLog()
	src.start = 7
	rep := compare(t, cluster(src.withEpoch(0)), cluster(src.withEpoch(1)), Options{FetchBytes: 150})
	if !rep.Equal() {
		t.Fatal(rep)
	}
	if p := rep.Partitions[0]; p.From != 7 || p.Batches != 8 || p.Gaps != 1 {
		t.Errorf("from %d, %d batches, %d gaps; want from 7, 8 batches (the one holding 7 on), 1 gap", p.From, p.Batches, p.Gaps)
	}
}

type wantMismatch struct {
	kind   MismatchKind
	offset int64
	fields []string
	detail string // a part of the detail
}

func TestEachDefectIsReportedAtItsOffset(t *testing.T) {
	// Each case breaks the mirror (or the source) in one way.
	cases := []struct {
		name   string
		mirror func(l *fakeLog)
		source func(l *fakeLog)
		want   []wantMismatch
	}{
		{
			name:   "flipped payload byte",
			mirror: func(l *fakeLog) { l.batches[4][model.BatchHeaderSize+40] ^= 0x10 },
			want:   []wantMismatch{{Differs, 20, []string{"Records"}, "mirror's CRC does not match"}},
		},
		{
			name:   "flipped payload byte on the source",
			source: func(l *fakeLog) { l.batches[1][len(l.batches[1])-1] ^= 1 },
			want:   []wantMismatch{{Differs, 5, []string{"Records"}, "source's CRC does not match"}},
		},
		{
			name:   "flipped CRC",
			mirror: func(l *fakeLog) { l.batches[2][model.BatchCRCPos+3] ^= 0xff },
			want:   []wantMismatch{{Differs, 10, []string{"CRC"}, "mirror's CRC does not match"}},
		},
		{
			name: "different producer id",
			mirror: func(l *fakeLog) {
				binary.BigEndian.PutUint64(l.batches[6][model.BatchProducerIDPos:], 3001)
				reCRC(l.batches[6])
			},
			want: []wantMismatch{{Differs, 30, []string{"CRC", "ProducerID"}, "ProducerID 3000 on the source, 3001 on the mirror"}},
		},
		{
			name: "control batch turned into a data batch",
			mirror: func(l *fakeLog) {
				b := l.batches[3]
				binary.BigEndian.PutUint16(b[model.BatchAttributesPos:], model.AttrTransactional)
				reCRC(b)
			},
			want: []wantMismatch{{Differs, 15, []string{"CRC", "Attributes"}, ""}},
		},
		{
			name:   "missing batch",
			mirror: func(l *fakeLog) { l.batches = slices.Delete(l.batches, 4, 5) },
			want:   []wantMismatch{{Missing, 20, nil, "batch 20..24 (5 records, producer 1000 epoch 0) is not on the mirror"}},
		},
		{
			name:   "missing control batch",
			mirror: func(l *fakeLog) { l.batches = slices.Delete(l.batches, 7, 8) },
			want:   []wantMismatch{{Missing, 38, nil, "control batch 38..38"}},
		},
		{
			name: "extra batch",
			mirror: func(l *fakeLog) {
				l.batches = slices.Insert(l.batches, 4, build(spec{base: 16, records: 4, producerID: 1000}))
			},
			want: []wantMismatch{{Extra, 16, nil, "batch 16..19 (4 records, producer 1000 epoch 0) is not on the source"}},
		},
		{
			name: "gap on the mirror",
			mirror: func(l *fakeLog) {
				// The batch at 25 stored two offsets later, and the log's end with it.
				b := l.batches[5]
				model.Batch(b).SetBaseOffset(27)
				l.batches = slices.Delete(l.batches, 6, len(l.batches))
				l.hw = 32
			},
			want: []wantMismatch{
				{HighWatermark, 32, nil, "the source's high watermark is 40, the mirror's 32"},
				{Missing, 25, nil, ""},
				{Extra, 27, nil, ""},
				{Missing, 30, nil, ""},
				{Missing, 38, nil, ""},
				{Missing, 39, nil, ""},
			},
		},
		{
			name:   "log start",
			mirror: func(l *fakeLog) { l.start = 5; l.batches = l.batches[1:] },
			want:   []wantMismatch{{LogStart, 0, nil, "the source's log starts at 0, the mirror's at 5"}},
		},
		{
			name:   "re-encoded batch",
			mirror: func(l *fakeLog) { l.batches[0] = build(spec{base: 0, records: 5, producerID: 1000, valueSize: 9}) },
			want:   []wantMismatch{{Differs, 0, []string{"Length", "CRC", "Records"}, ""}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, mir := sourceLog().withEpoch(0), sourceLog().withEpoch(4)
			if c.source != nil {
				c.source(src)
			}
			if c.mirror != nil {
				c.mirror(mir)
			}
			rep := compare(t, cluster(src), cluster(mir), Options{FetchBytes: 200})
			if rep.Equal() {
				t.Fatalf("equal: %s", rep)
			}
			checkMismatches(t, rep.Partitions[0], c.want)
		})
	}
}

func checkMismatches(t *testing.T, p PartitionReport, want []wantMismatch) {
	t.Helper()
	if int(p.MismatchCount) != len(want) || len(p.Mismatches) != len(want) {
		t.Fatalf("%d mismatches (%d kept), want %d: %v", p.MismatchCount, len(p.Mismatches), len(want), p.Mismatches)
	}
	for i, w := range want {
		m := p.Mismatches[i]
		if m.Kind != w.kind || m.Offset != w.offset || !slices.Equal(m.Fields, w.fields) || !strings.Contains(m.Detail, w.detail) {
			t.Errorf("mismatch %d: %s; want %s at %d, fields %v, detail with %q", i, m, w.kind, w.offset, w.fields, w.detail)
		}
	}
}

func TestBoundedComparisonOfALaggingMirror(t *testing.T) {
	mir := sourceLog().withEpoch(2)
	mir.batches, mir.hw = mir.batches[:4], 16
	source, mirror := cluster(sourceLog()), cluster(mir)

	rep := compare(t, source, mirror, Options{Ends: map[int32]int64{0: 16}})
	if !rep.Equal() {
		t.Fatalf("bounded at the mirror's end: %s", rep)
	}
	if p := rep.Partitions[0]; p.End != 16 || !p.Bounded || p.Batches != 4 || p.Records != 15 || p.ControlBatches != 1 {
		t.Errorf("bounded counts: %s", rep)
	}

	rep = compare(t, source, mirror, Options{})
	checkMismatches(t, rep.Partitions[0], []wantMismatch{
		{HighWatermark, 16, nil, "high watermark is 40, the mirror's 16"},
		{Missing, 20, nil, ""}, {Missing, 25, nil, ""}, {Missing, 30, nil, ""}, {Missing, 38, nil, ""}, {Missing, 39, nil, ""},
	})

	// A bound past the mirror's end: the mirror has not caught up.
	rep = compare(t, source, mirror, Options{Ends: map[int32]int64{0: 25}})
	checkMismatches(t, rep.Partitions[0], []wantMismatch{
		{HighWatermark, 16, nil, "the mirror's high watermark 16 is below the bound 25"},
		{Missing, 20, nil, ""},
	})
}

func TestTopicIDAndPartitionCount(t *testing.T) {
	source := cluster(sourceLog(), sourceLog())
	mirror := cluster(sourceLog())
	mirror.id = [16]byte{9}
	rep := compare(t, source, mirror, Options{})
	if rep.Equal() {
		t.Fatalf("equal with another id and partition count: %s", rep)
	}
	if len(rep.Partitions) != 1 || rep.Partitions[0].MismatchCount != 0 {
		t.Errorf("the partition both have: %s", rep)
	}
	for _, want := range []string{"topic id 01020300", "2 partitions on the source, 1 on the mirror"} {
		if !strings.Contains(rep.String(), want) {
			t.Errorf("report without %q: %s", want, rep)
		}
	}
	mirror.id = source.id
	mirror.logs = append(mirror.logs, sourceLog())
	if rep := compare(t, source, mirror, Options{}); !rep.Equal() {
		t.Errorf("same id and count: %s", rep)
	}

	if _, err := CompareLogs(context.Background(), source, mirror, "other", Options{}); err == nil {
		t.Error("a topic neither side has compared without error")
	}
}

func TestMismatchesKeptUpToMax(t *testing.T) {
	mir := sourceLog()
	for _, b := range mir.batches {
		binary.BigEndian.PutUint64(b[model.BatchBaseTimestampPos:], 1)
	}
	rep := compare(t, cluster(sourceLog()), cluster(mir), Options{MaxMismatches: 2})
	if p := rep.Partitions[0]; p.MismatchCount != 9 || len(p.Mismatches) != 2 || p.Mismatches[1].Offset != 5 {
		t.Errorf("%d mismatches, %d kept (want 9 and 2): %v", p.MismatchCount, len(p.Mismatches), p.Mismatches)
	}
}

// The cleaner can leave no batch between the last one and the high
// watermark: an empty fetch there ends the walk, counted as a gap.
func TestEmptyTailIsAGap(t *testing.T) {
	src := sourceLog()
	src.hw = 45
	rep := compare(t, cluster(src.withEpoch(0)), cluster(src.withEpoch(1)), Options{})
	if !rep.Equal() {
		t.Fatal(rep)
	}
	if p := rep.Partitions[0]; p.Gaps != 2 || p.GapOffsets != 4+5 {
		t.Errorf("%d gaps of %d offsets, want 2 of 9", p.Gaps, p.GapOffsets)
	}
}

func TestWalkRejectsWhatIsNoV2Batch(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt func(b []byte)
		want    string
	}{
		{"short length", func(b []byte) { binary.BigEndian.PutUint32(b[model.BatchLengthPos:], 20) }, "shorter than a header"},
		{"record format v1", func(b []byte) { b[model.BatchMagicPos] = 1 }, "record format v1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := sourceLog()
			c.corrupt(src.batches[2])
			_, err := CompareLogs(context.Background(), cluster(src), cluster(sourceLog()), "t", Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "source") {
				t.Fatalf("error %v, want one about the source with %q", err, c.want)
			}
		})
	}
}

// A batch bigger than the fetch size is asked for again with a bigger
// size, up to a limit.
func TestWalkGrowsTheFetchForABigBatch(t *testing.T) {
	big := &fakeLog{hw: 3, batches: [][]byte{
		build(spec{base: 0, records: 1}),
		build(spec{base: 1, records: 2, valueSize: 5000}),
	}}
	rep := compare(t, cluster(big.withEpoch(0)), cluster(big.withEpoch(1)), Options{FetchBytes: 64})
	if !rep.Equal() || rep.Partitions[0].Batches != 2 {
		t.Fatal(rep)
	}
	w := newBatchWalk(cluster(big), "t", 0, 0, 3, 64)
	w.limit = 1024
	if _, err := w.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "no whole batch") {
		t.Fatalf("a batch past the limit: %v", err)
	}
}
