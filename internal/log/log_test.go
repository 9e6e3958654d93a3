package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// fileSystems runs a test over the real file system and the in-memory one.
func fileSystems(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Run("os", func(t *testing.T) { fn(t, vfs.OS, t.TempDir()) })
	t.Run("mem", func(t *testing.T) { fn(t, vfs.NewMem(), "/data/topic-0") })
}

// padding makes records about 80 bytes, so a few dozen batches fill
// several test segments.
const padding = "...................................................."

// makeBatch builds a batch of n records whose values say which batch and
// record they are, so a read can be checked against what was written.
func makeBatch(t testing.TB, tag string, n int, ts int64, codec model.Compression) []byte {
	t.Helper()
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			OffsetDelta:    int32(i),
			TimestampDelta: int64(i),
			Key:            []byte(fmt.Sprintf("k-%s-%d", tag, i)),
			Value:          []byte(fmt.Sprintf("v-%s-%d%s", tag, i, padding)),
		}
	}
	return makeBatchOf(t, recs, ts, codec)
}

func makeBatchOf(t testing.TB, recs []Record, ts int64, codec model.Compression) []byte {
	t.Helper()
	maxTs := ts
	for _, r := range recs {
		maxTs = max(maxTs, ts+r.TimestampDelta)
	}
	b, err := appendBatch(nil, batchHeader{
		BaseOffset: 0, PartitionLeaderEpoch: -1, Attributes: int16(codec),
		LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: ts, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testConfig is Defaults with small segments and a fixed clock-friendly
// retention, so tests exercise rolls.
func testConfig() Config {
	c := Defaults()
	c.SegmentBytes = 4 << 10
	c.IndexIntervalBytes = 256
	c.FileDeleteDelay = 0
	return c
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func openLog(t testing.TB, fsys vfs.FS, dir string, cfg Config, now func() time.Time) *Log {
	t.Helper()
	l, err := Open(dir, cfg, Options{FS: fsys, Now: now})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, data []byte) AppendResult {
	t.Helper()
	res, err := l.Append(data, AppendOptions{LeaderEpoch: -1, Durable: true})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

// readAll reads the whole log from offset and returns every record with its
// offset and value, checking that offsets increase.
func readAll(t testing.TB, l *Log, from int64) []storedRecord {
	t.Helper()
	var out []storedRecord
	next := from
	for next < l.EndOffset() {
		sec, err := l.Read(next, 1000, l.EndOffset())
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		if sec.Size == 0 {
			break
		}
		data, err := sec.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		for len(data) > 0 {
			b := model.Batch(data[:model.Batch(data).Size()])
			if err := checkCRC(b); err != nil {
				t.Fatalf("batch at %d: %v", b.BaseOffset(), err)
			}
			err := forEachRecord(b, func(r *Record) error {
				o := b.BaseOffset() + int64(r.OffsetDelta)
				if o >= next {
					out = append(out, storedRecord{offset: o, key: string(r.Key), value: string(r.Value), null: r.Value == nil})
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			next = b.LastOffset() + 1
			data = data[len(b):]
		}
	}
	for i := 1; i < len(out); i++ {
		if out[i].offset <= out[i-1].offset {
			t.Fatalf("offsets do not increase: %d after %d", out[i].offset, out[i-1].offset)
		}
	}
	return out
}

type storedRecord struct {
	offset     int64
	key, value string
	null       bool
}

func TestAppendAssignsOffsetsAndReadsBack(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openLog(t, fsys, dir, testConfig(), nil)
		defer l.Close()
		want := 0
		for i, codec := range []model.Compression{0, 1, 2, 3, 4, 0, 0, 3} {
			n := 1 + i*3
			res := mustAppend(t, l, makeBatch(t, fmt.Sprint(i), n, 1000, codec))
			if res.BaseOffset != int64(want) || res.LastOffset != int64(want+n-1) {
				t.Fatalf("batch %d: offsets %d..%d, want %d..%d", i, res.BaseOffset, res.LastOffset, want, want+n-1)
			}
			want += n
		}
		if l.EndOffset() != int64(want) {
			t.Fatalf("end offset %d, want %d", l.EndOffset(), want)
		}
		recs := readAll(t, l, 0)
		if len(recs) != want {
			t.Fatalf("read %d records, want %d", len(recs), want)
		}
		for i, r := range recs {
			if r.offset != int64(i) {
				t.Fatalf("record %d has offset %d", i, r.offset)
			}
		}
		if recs[1].value != "v-1-0"+padding || recs[5].value != "v-2-0"+padding {
			t.Fatalf("unexpected values %q %q", recs[1].value, recs[4].value)
		}
	})
}

func TestReadBounds(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "/d", testConfig(), nil)
	defer l.Close()
	var sizes []int
	for i := range 5 {
		b := makeBatch(t, fmt.Sprint(i), 10, 0, 0)
		sizes = append(sizes, len(b))
		mustAppend(t, l, b) // offsets 10*i .. 10*i+9
	}
	tests := []struct {
		name            string
		offset          int64
		maxBytes        int
		maxOffset       int64
		wantFirst       int64 // base offset of first batch, -1 for none
		wantBatches     int
		wantErrOutRange bool
	}{
		{"from start, all", 0, 1 << 20, 50, 0, 5, false},
		{"middle of a batch returns that batch", 15, 1 << 20, 50, 10, 4, false},
		{"first batch even when over the limit", 20, 1, 50, 20, 1, false},
		{"limit of exactly two batches", 0, sizes[0] + sizes[1], 50, 0, 2, false},
		{"limit one byte short of two batches", 0, sizes[0] + sizes[1] - 1, 50, 0, 1, false},
		{"bounded by high watermark", 0, 1 << 20, 30, 0, 3, false},
		{"high watermark inside a batch excludes it", 0, 1 << 20, 35, 0, 3, false},
		{"at the high watermark", 30, 1 << 20, 30, -1, 0, false},
		{"at the log end", 50, 1 << 20, 50, -1, 0, false},
		{"past the log end", 51, 1 << 20, 50, -1, 0, true},
		{"negative", -1, 1 << 20, 50, -1, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sec, err := l.Read(tc.offset, tc.maxBytes, tc.maxOffset)
			if tc.wantErrOutRange {
				if !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("err %v, want offset out of range", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := sec.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			var bases []int64
			next := int64(-1)
			for len(data) > 0 {
				b := model.Batch(data)
				bases = append(bases, b.BaseOffset())
				next = b.LastOffset() + 1
				data = data[b.Size():]
			}
			if len(bases) != tc.wantBatches || (len(bases) > 0 && bases[0] != tc.wantFirst) {
				t.Fatalf("batches %v, want %d starting at %d", bases, tc.wantBatches, tc.wantFirst)
			}
			// Next is where a reader that got the section goes on from.
			if len(bases) > 0 && sec.Next != next {
				t.Fatalf("section's next offset %d, want %d", sec.Next, next)
			}
		})
	}
}

func TestRollAndCleanReopen(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openLog(t, fsys, dir, testConfig(), nil)
		for i := range 40 {
			mustAppend(t, l, makeBatch(t, fmt.Sprint(i), 5, 1000, 0))
		}
		segs := l.Segments()
		if len(segs) < 5 {
			t.Fatalf("only %d segments after 40 appends of ~400 bytes into 4 KiB segments", len(segs))
		}
		before := readAll(t, l, 0)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, base := range segs {
			for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
				if _, err := fsys.Stat(filepath.Join(dir, segmentName(base, suffix))); err != nil {
					t.Fatalf("after close: %v", err)
				}
			}
		}
		ck, err := readCheckpoint(fsys, dir)
		if err != nil || !ck.clean || ck.recoveryPoint != 200 {
			t.Fatalf("checkpoint %+v, %v; want clean at 200", ck, err)
		}
		l = openLog(t, fsys, dir, testConfig(), nil)
		defer l.Close()
		if l.EndOffset() != 200 {
			t.Fatalf("end offset after reopen %d", l.EndOffset())
		}
		after := readAll(t, l, 0)
		if fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatal("records differ after reopen")
		}
		mustAppend(t, l, makeBatch(t, "more", 3, 1000, 0))
		if l.EndOffset() != 203 {
			t.Fatalf("end offset %d after appending 3 to 200", l.EndOffset())
		}
		ck, _ = readCheckpoint(fsys, dir)
		if ck.clean {
			t.Fatal("checkpoint still says clean after an append")
		}
	})
}

func TestRollBySegmentTime(t *testing.T) {
	clk := &clock{t: time.UnixMilli(1_000_000)}
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.SegmentTime = time.Hour
	l := openLog(t, vfs.NewMem(), "/d", cfg, clk.now)
	defer l.Close()
	mustAppend(t, l, makeBatch(t, "a", 1, clk.t.UnixMilli(), 0))
	clk.t = clk.t.Add(30 * time.Minute)
	mustAppend(t, l, makeBatch(t, "b", 1, clk.t.UnixMilli(), 0))
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments before segment.ms passed", n)
	}
	clk.t = clk.t.Add(31 * time.Minute)
	mustAppend(t, l, makeBatch(t, "c", 1, clk.t.UnixMilli(), 0))
	if segs := l.Segments(); len(segs) != 2 || segs[1] != 2 {
		t.Fatalf("segments %v, want a roll at offset 2", segs)
	}
}

func TestRejectedBatchWritesNothing(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "/d", testConfig(), nil)
	defer l.Close()
	mustAppend(t, l, makeBatch(t, "ok", 3, 0, 0))
	good := makeBatch(t, "g", 2, 0, 0)
	bad := makeBatch(t, "b", 2, 0, 0)
	bad[len(bad)-1] ^= 0xff
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"bad CRC after a good batch", append(append([]byte{}, good...), bad...), ErrCorruptMessage},
		{"truncated batch", good[:len(good)-3], ErrCorruptMessage},
		{"trailing bytes", append(append([]byte{}, good...), 1, 2, 3), ErrCorruptMessage},
	} {
		if _, err := l.Append(tc.data, AppendOptions{LeaderEpoch: -1}); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	if l.EndOffset() != 3 || l.Size() != int64(len(makeBatch(t, "ok", 3, 0, 0))) {
		t.Fatalf("end %d size %d after rejected appends", l.EndOffset(), l.Size())
	}
	cfg := testConfig()
	cfg.MaxMessageBytes = 100
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(makeBatch(t, "big", 20, 0, 0), AppendOptions{}); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("err %v, want too large", err)
	}
}

func TestLogAppendTime(t *testing.T) {
	clk := &clock{t: time.UnixMilli(5_000_000)}
	cfg := testConfig()
	cfg.LogAppendTime = true
	l := openLog(t, vfs.NewMem(), "/d", cfg, clk.now)
	defer l.Close()
	res := mustAppend(t, l, makeBatch(t, "a", 3, 1, model.CompressionLZ4))
	if res.LogAppendTime != clk.t.UnixMilli() {
		t.Fatalf("log append time %d", res.LogAppendTime)
	}
	sec, _ := l.Read(0, 1<<20, 3)
	data, _ := sec.ReadAll()
	b := model.Batch(data)
	if !b.IsLogAppendTime() || b.MaxTimestamp() != clk.t.UnixMilli() || checkCRC(b) != nil {
		t.Fatalf("stored batch: logAppendTime=%v max=%d crc=%v", b.IsLogAppendTime(), b.MaxTimestamp(), checkCRC(b))
	}
	off, ts, found, err := l.OffsetForTimestamp(clk.t.UnixMilli())
	if err != nil || !found || off != 0 || ts != clk.t.UnixMilli() {
		t.Fatalf("offset for time: %d %d %v %v", off, ts, found, err)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openLog(t, fsys, dir, testConfig(), nil)
		defer l.Close()
		// Batch i holds 5 records at timestamps 1000*i + 0..4, except that
		// batch 3 goes back in time (a producer's clock may).
		for i := range 30 {
			ts := int64(1000 * i)
			if i == 3 {
				ts = 500
			}
			mustAppend(t, l, makeBatch(t, fmt.Sprint(i), 5, ts, model.Compression(i%5)))
		}
		tests := []struct {
			ts, wantOffset, wantTs int64
			found                  bool
		}{
			{0, 0, 0, true},
			{2, 2, 2, true},
			{5, 5, 1000, true},     // between batches: first record of the next
			{1003, 8, 1003, true},  // inside batch 1
			{1005, 10, 2000, true}, // batch 3 (ts 500..504) is older; batch 2 wins
			{25_004, 129, 25_004, true},
			{29_004, 149, 29_004, true},
			{29_005, -1, -1, false},
		}
		for _, tc := range tests {
			off, ts, found, err := l.OffsetForTimestamp(tc.ts)
			if err != nil || off != tc.wantOffset || ts != tc.wantTs || found != tc.found {
				t.Errorf("ts %d: got (%d, %d, %v, %v), want (%d, %d, %v)", tc.ts, off, ts, found, err, tc.wantOffset, tc.wantTs, tc.found)
			}
		}
		off, ts, found, err := l.MaxTimestamp()
		if err != nil || !found || off != 149 || ts != 29_004 {
			t.Fatalf("max timestamp: %d %d %v %v", off, ts, found, err)
		}
	})
}

func TestRetention(t *testing.T) {
	clk := &clock{t: time.UnixMilli(10_000_000)}
	cfg := testConfig()
	cfg.RetentionTime = time.Hour
	l := openLog(t, vfs.NewMem(), "/d", cfg, clk.now)
	defer l.Close()
	// 20 batches of ~400 bytes, timestamps one minute apart, ending now.
	for i := range 20 {
		ts := clk.t.Add(time.Duration(i-19) * time.Minute).UnixMilli()
		mustAppend(t, l, makeBatch(t, fmt.Sprint(i), 5, ts, 0))
	}
	segsBefore := l.Segments()
	if n, err := l.ApplyRetention(); n != 0 || err != nil {
		t.Fatalf("deleted %d (%v) with nothing expired", n, err)
	}
	clk.t = clk.t.Add(50 * time.Minute) // batches 0..8 are now older than an hour
	n, err := l.ApplyRetention()
	if err != nil || n == 0 {
		t.Fatalf("time retention deleted %d, %v", n, err)
	}
	start := l.StartOffset()
	if start <= 0 || start > 45 || start != l.Segments()[0] {
		t.Fatalf("log start %d after time retention (segments were %v, now %v)", start, segsBefore, l.Segments())
	}
	if _, err := l.Read(0, 100, l.EndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("reading a deleted offset: %v", err)
	}
	if recs := readAll(t, l, start); int64(len(recs)) != 100-start {
		t.Fatalf("%d records left from %d", len(recs), start)
	}

	cfg.RetentionTime = -1
	cfg.RetentionBytes = 4 << 10
	l.SetConfig(cfg)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if size := l.Size(); size > cfg.RetentionBytes+int64(cfg.SegmentBytes) {
		t.Fatalf("size %d after size retention to %d", size, cfg.RetentionBytes)
	}

	// Everything expired: the active segment is rolled and deleted too, and
	// the log keeps its end offset.
	cfg.RetentionTime = time.Minute
	cfg.RetentionBytes = -1
	l.SetConfig(cfg)
	clk.t = clk.t.Add(24 * time.Hour)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 100 || l.EndOffset() != 100 || l.Size() != 0 {
		t.Fatalf("start %d end %d size %d after expiring everything", l.StartOffset(), l.EndOffset(), l.Size())
	}
	if res := mustAppend(t, l, makeBatch(t, "new", 1, clk.t.UnixMilli(), 0)); res.BaseOffset != 100 {
		t.Fatalf("append after full expiry got offset %d", res.BaseOffset)
	}
}

func TestDeleteRecords(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := testConfig()
		cfg.RetentionTime = -1
		l := openLog(t, fsys, dir, cfg, nil)
		for i := range 30 {
			mustAppend(t, l, makeBatch(t, fmt.Sprint(i), 5, 0, 0))
		}
		start, err := l.DeleteRecords(77)
		if err != nil || start != 77 {
			t.Fatalf("delete records: %d %v", start, err)
		}
		if segs := l.Segments(); segs[0] > 77 || len(segs) > 1 && segs[1] <= 77 {
			t.Fatalf("segments %v after deleting below 77", segs)
		}
		if recs := readAll(t, l, 77); len(recs) != 150-77 || recs[0].offset != 77 {
			t.Fatalf("read from 77: %d records", len(recs))
		}
		if _, err := l.Read(76, 100, 150); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read below start: %v", err)
		}
		if _, err := l.DeleteRecords(151); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("delete past end: %v", err)
		}
		l.Close()
		l = openLog(t, fsys, dir, cfg, nil)
		defer l.Close()
		if l.StartOffset() != 77 {
			t.Fatalf("log start after reopen %d", l.StartOffset())
		}
	})
}

func TestLeaderEpochs(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openLog(t, fsys, dir, testConfig(), nil)
		for i, epoch := range []int32{0, 0, 1, 1, 3, 3} {
			if _, err := l.Append(makeBatch(t, fmt.Sprint(i), 10, 0, 0), AppendOptions{LeaderEpoch: epoch}); err != nil {
				t.Fatal(err)
			}
		}
		sec, _ := l.Read(40, 1, 60)
		data, _ := sec.ReadAll()
		if got := model.Batch(data).PartitionLeaderEpoch(); got != 3 {
			t.Fatalf("stored batch has leader epoch %d", got)
		}
		want := []EpochEntry{{0, 0}, {1, 20}, {3, 40}}
		if fmt.Sprint(l.Epochs()) != fmt.Sprint(want) {
			t.Fatalf("epochs %v, want %v", l.Epochs(), want)
		}
		for _, tc := range []struct {
			ask       int32
			wantEpoch int32
			wantEnd   int64
		}{{0, 0, 20}, {1, 1, 40}, {2, 1, 40}, {3, 3, 60}, {7, 3, 60}, {-1, -1, -1}} {
			if e, end := l.EpochEndOffset(tc.ask); e != tc.wantEpoch || end != tc.wantEnd {
				t.Errorf("epoch %d: (%d, %d), want (%d, %d)", tc.ask, e, end, tc.wantEpoch, tc.wantEnd)
			}
		}
		if err := l.Truncate(45); err != nil {
			t.Fatal(err)
		}
		if l.EndOffset() != 40 {
			t.Fatalf("truncate inside a batch: end %d, want its base 40", l.EndOffset())
		}
		l.Close()
		l = openLog(t, fsys, dir, testConfig(), nil)
		defer l.Close()
		if want := []EpochEntry{{0, 0}, {1, 20}}; fmt.Sprint(l.Epochs()) != fmt.Sprint(want) {
			t.Fatalf("epochs after truncate and reopen %v, want %v", l.Epochs(), want)
		}
	})
}

func TestTruncateAcrossSegments(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openLog(t, fsys, dir, testConfig(), nil)
		defer l.Close()
		for i := range 40 {
			mustAppend(t, l, makeBatch(t, fmt.Sprint(i), 5, int64(i), 0))
		}
		if err := l.Truncate(52); err != nil {
			t.Fatal(err)
		}
		if l.EndOffset() != 50 {
			t.Fatalf("end %d", l.EndOffset())
		}
		if recs := readAll(t, l, 0); len(recs) != 50 {
			t.Fatalf("%d records after truncate to 50", len(recs))
		}
		res := mustAppend(t, l, makeBatch(t, "new", 5, 0, 0))
		if res.BaseOffset != 50 {
			t.Fatalf("append after truncate at %d", res.BaseOffset)
		}
		recs := readAll(t, l, 50)
		if len(recs) != 5 || recs[0].value != "v-new-0"+padding {
			t.Fatalf("records after truncate and append: %v", recs)
		}
	})
}

func TestIndexRebuiltWhenMissingOrWrong(t *testing.T) {
	for _, damage := range []string{"remove", "garbage", "stale"} {
		t.Run(damage, func(t *testing.T) {
			fsys := vfs.NewMem()
			l := openLog(t, fsys, "/d", testConfig(), nil)
			for i := range 40 {
				mustAppend(t, l, makeBatch(t, fmt.Sprint(i), 5, int64(1000*i), 0))
			}
			want := readAll(t, l, 0)
			segs := l.Segments()
			l.Close()
			for _, base := range segs {
				for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
					p := filepath.Join("/d", segmentName(base, suffix))
					switch damage {
					case "remove":
						fsys.Remove(p)
					case "garbage":
						vfs.WriteFileAtomic(fsys, p, []byte("not an index at all, twelve..."))
					case "stale":
						vfs.WriteFileAtomic(fsys, p, make([]byte, 48)) // zeros: entries that do not increase
					}
				}
			}
			l = openLog(t, fsys, "/d", testConfig(), nil)
			defer l.Close()
			if got := readAll(t, l, 0); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatal("records differ after index damage")
			}
			if off, _, _, err := l.OffsetForTimestamp(7000); err != nil || off != 35 {
				t.Fatalf("time lookup after index damage: %d %v", off, err)
			}
		})
	}
}

func TestStorageErrorFailsTheLog(t *testing.T) {
	var failSync bool
	fsys := vfs.NewErrorFS(vfs.NewMem(), func(op vfs.Op, name string) error {
		if failSync && op == vfs.OpSync {
			return errors.New("injected EIO")
		}
		return nil
	})
	l := openLog(t, fsys, "/d", testConfig(), nil)
	defer l.Close()
	mustAppend(t, l, makeBatch(t, "a", 1, 0, 0))
	failSync = true
	if _, err := l.Append(makeBatch(t, "b", 1, 0, 0), AppendOptions{Durable: true}); !errors.Is(err, ErrStorage) {
		t.Fatalf("append with failing fsync: %v", err)
	}
	failSync = false
	// After a failed fsync the page cache state is unknown: stay failed.
	if _, err := l.Append(makeBatch(t, "c", 1, 0, 0), AppendOptions{}); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after a failed fsync: %v", err)
	}
}

func TestOpenCreatesDirectoryAndTidiesLeftovers(t *testing.T) {
	fsys := vfs.NewMem()
	l := openLog(t, fsys, "/d", testConfig(), nil)
	mustAppend(t, l, makeBatch(t, "a", 1, 0, 0))
	l.Close()
	for _, name := range []string{"00000000000000000099.index", "partition.checkpoint.tmp", "00000000000000000000.log.cleaned", "00000000000000000007.log.deleted"} {
		f, err := fsys.OpenFile(filepath.Join("/d", name), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	l = openLog(t, fsys, "/d", testConfig(), nil)
	defer l.Close()
	entries, _ := fsys.ReadDir("/d")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := "[00000000000000000000.index 00000000000000000000.log 00000000000000000000.timeindex partition.checkpoint]"
	if fmt.Sprint(names) != want {
		t.Fatalf("files %v, want %s", names, want)
	}
}
