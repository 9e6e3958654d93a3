package log

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

func compactConfig() Config {
	c := testConfig()
	c.Compact, c.Delete = true, false
	c.DeleteRetention = time.Hour
	return c
}

// keyedBatch builds a batch of records with the given keys; a value of "" makes
// a tombstone.
func keyedBatch(t testing.TB, ts int64, codec model.Compression, kv ...string) []byte {
	recs := make([]Record, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		r := Record{OffsetDelta: int32(i / 2), Key: []byte(kv[i])}
		if kv[i+1] != "" {
			r.Value = []byte(kv[i+1] + padding)
		}
		recs = append(recs, r)
	}
	return makeBatchOf(t, recs, ts, codec)
}

func TestCompactionKeepsLatestPerKey(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		clk := &clock{t: time.UnixMilli(50_000_000)}
		l := openLog(t, fsys, dir, compactConfig(), clk.now)
		defer l.Close()
		ts := clk.t.UnixMilli()
		// 30 batches over 10 keys; key i's latest value is written last.
		// Batch 5 also writes a tombstone for "k7" that later values revive,
		// and batch 28 deletes "k3".
		latest := map[string]int64{}
		var offset int64
		for i := range 30 {
			codec := model.Compression(i % 5)
			var kv []string
			for j := range 4 {
				k := fmt.Sprintf("k%d", (i*4+j)%10)
				kv = append(kv, k, fmt.Sprintf("v%d", i*4+j))
			}
			switch i {
			case 5:
				kv = append(kv, "k7", "")
			case 28:
				kv = append(kv, "k3", "")
			}
			res := mustAppend(t, l, keyedBatch(t, ts, codec, kv...))
			for j := 0; j < len(kv); j += 2 {
				latest[kv[j]] = offset + int64(j/2)
			}
			offset = res.LastOffset + 1
		}
		l.SetHighWatermark(l.EndOffset())
		activeBase := l.Segments()[len(l.Segments())-1]
		before := readAll(t, l, 0)

		stats, err := l.Compact()
		if err != nil {
			t.Fatal(err)
		}
		if stats.Segments == 0 || stats.RecordsRemoved == 0 || stats.BytesAfter >= stats.BytesBefore {
			t.Fatalf("compaction did nothing: %+v", stats)
		}
		after := readAll(t, l, 0)
		kept := map[int64]storedRecord{}
		for _, r := range after {
			kept[r.offset] = r
		}
		for _, r := range before {
			got, ok := kept[r.offset]
			switch {
			case r.offset >= activeBase:
				if !ok {
					t.Errorf("offset %d in the active segment was removed", r.offset)
				}
			case latest[r.key] == r.offset:
				if !ok {
					t.Errorf("latest record of %s at %d was removed", r.key, r.offset)
				}
			case ok:
				t.Errorf("superseded record %s at %d kept", r.key, r.offset)
			}
			if ok && got != r {
				t.Errorf("offset %d changed: %+v, was %+v", r.offset, got, r)
			}
		}
		if l.EndOffset() != offset {
			t.Fatalf("end offset moved to %d", l.EndOffset())
		}
		// A second pass changes nothing.
		if stats, err := l.Compact(); err != nil || stats.RecordsRemoved != 0 {
			t.Fatalf("second pass: %+v %v", stats, err)
		}
	})
}

func TestCompactionDropsOldTombstonesOnly(t *testing.T) {
	clk := &clock{t: time.UnixMilli(50_000_000)}
	l := openLog(t, vfs.NewMem(), "/d", compactConfig(), clk.now)
	defer l.Close()
	mustAppend(t, l, keyedBatch(t, clk.t.UnixMilli(), 0, "a", "1", "b", "1"))
	mustAppend(t, l, keyedBatch(t, clk.t.UnixMilli(), 0, "a", ""))
	l.Roll()
	mustAppend(t, l, keyedBatch(t, clk.t.UnixMilli(), 0, "c", "1"))
	l.SetHighWatermark(l.EndOffset())

	if _, err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, l, 0)
	if len(recs) != 3 || !recs[1].null || recs[1].key != "a" {
		t.Fatalf("fresh tombstone must stay: %+v", recs)
	}
	clk.t = clk.t.Add(2 * time.Hour)
	if _, err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	recs = readAll(t, l, 0)
	if len(recs) != 2 || recs[0].key != "b" || recs[1].key != "c" {
		t.Fatalf("after delete.retention.ms: %+v", recs)
	}
}

func TestCompactionRespectsHighWatermarkAndLag(t *testing.T) {
	clk := &clock{t: time.UnixMilli(50_000_000)}
	cfg := compactConfig()
	cfg.MinCompactionLag = time.Hour
	l := openLog(t, vfs.NewMem(), "/d", cfg, clk.now)
	defer l.Close()
	for range 20 {
		mustAppend(t, l, keyedBatch(t, clk.t.UnixMilli(), 0, "same", "v"))
	}
	l.Roll()
	mustAppend(t, l, keyedBatch(t, clk.t.UnixMilli(), 0, "same", "v"))
	l.SetHighWatermark(l.EndOffset())
	if st, _ := l.Compact(); st.RecordsRemoved != 0 {
		t.Fatalf("compacted data younger than min.compaction.lag.ms: %+v", st)
	}
	clk.t = clk.t.Add(2 * time.Hour)
	l.SetHighWatermark(0)
	if st, _ := l.Compact(); st.RecordsRemoved != 0 {
		t.Fatalf("compacted above the high watermark: %+v", st)
	}
	l.SetHighWatermark(l.EndOffset())
	if st, _ := l.Compact(); st.RecordsRemoved == 0 {
		t.Fatal("nothing compacted once allowed")
	}
}

func TestCompactionSurvivesReopenAndCrash(t *testing.T) {
	mem := vfs.NewMem()
	clk := &clock{t: time.UnixMilli(50_000_000)}
	l := openLog(t, mem, "/d", compactConfig(), clk.now)
	for i := range 40 {
		mustAppend(t, l, keyedBatch(t, clk.t.UnixMilli(), model.CompressionZstd, fmt.Sprint("k", i%3), fmt.Sprint(i)))
	}
	l.SetHighWatermark(l.EndOffset())
	if _, err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	want := readAll(t, l, 0)
	crashed := mem.CrashClone(vfs.CrashOptions{})
	l.Close()
	for name, fsys := range map[string]vfs.FS{"clean": mem, "crash": crashed} {
		l := openLog(t, fsys, "/d", compactConfig(), clk.now)
		if got := readAll(t, l, 0); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s reopen: records differ\n got %v\nwant %v", name, got, want)
		}
		l.Close()
	}
}

func TestCompactionWhileAppendingAndReading(t *testing.T) {
	clk := &clock{t: time.UnixMilli(50_000_000)}
	l := openLog(t, vfs.NewMem(), "/d", compactConfig(), clk.now)
	defer l.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(2)
	go func() { // appender
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.Append(keyedBatch(t, clk.t.UnixMilli(), 0, fmt.Sprint("k", i%7), fmt.Sprint(i)), AppendOptions{LeaderEpoch: -1}); err != nil {
				t.Error(err)
				return
			}
			l.SetHighWatermark(l.EndOffset())
		}
	}()
	go func() { // reader: every read must return whole, valid batches
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			sec, err := l.Read(l.StartOffset(), 64<<10, l.HighWatermark())
			if err != nil {
				t.Error(err)
				return
			}
			data, err := sec.ReadAll()
			if err != nil {
				t.Error(err)
				return
			}
			for len(data) > 0 {
				b := model.Batch(data)
				if err := checkCRC(b[:b.Size()]); err != nil {
					t.Errorf("read a bad batch during compaction: %v", err)
					return
				}
				data = data[b.Size():]
			}
		}
	}()
	for range 20 {
		if _, err := l.Compact(); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	recs := readAll(t, l, 0)
	last := map[string]int64{}
	for _, r := range recs {
		if prev, ok := last[r.key]; ok && prev > r.offset {
			t.Fatalf("key %s out of order", r.key)
		}
		last[r.key] = r.offset
	}
}
