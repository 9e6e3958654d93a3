package log

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// TestAgainstModel runs random sequences of appends, reads, rolls, retention,
// DeleteRecords, truncation, compaction, clean reopens and power losses, and
// checks the log after each step against a plain map of offset to record.
func TestAgainstModel(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 5
	}
	if v, err := strconv.Atoi(os.Getenv("STRAND_MODEL_SEEDS")); err == nil {
		seeds = v
	}
	for seed := range uint64(seeds) {
		compacted := seed%4 == 3
		t.Run(fmt.Sprintf("seed=%d/compacted=%v", seed, compacted), func(t *testing.T) {
			runModel(t, seed, compacted, 150)
		})
	}
}

type modelLog struct {
	records map[int64]storedRecord
	start   int64
	next    int64
}

func runModel(t *testing.T, seed uint64, compacted bool, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	clk := &clock{t: time.UnixMilli(100_000_000)}
	cfg := testConfig()
	cfg.SegmentBytes = 1024 + int64(rng.IntN(4096))
	cfg.IndexIntervalBytes = int64(rng.IntN(1024))
	cfg.RetentionTime = -1
	if compacted {
		cfg.Compact, cfg.Delete = true, false
	}
	mem := vfs.NewMem()
	var fsys vfs.FS = mem
	l := openLog(t, fsys, "/p", cfg, clk.now)
	defer func() { l.Close() }()
	m := &modelLog{records: map[int64]storedRecord{}}

	for step := range steps {
		op := rng.IntN(100)
		var what string
		switch {
		case op < 50:
			n := 1 + rng.IntN(6)
			recs := make([]Record, n)
			for i := range recs {
				key := fmt.Sprintf("key-%d-%d", step, i)
				if compacted {
					key = fmt.Sprintf("key-%d", rng.IntN(12))
				}
				recs[i] = Record{OffsetDelta: int32(i), Key: []byte(key), Value: []byte(fmt.Sprintf("val-%d-%d%s", step, i, padding))}
			}
			res := mustAppend(t, l, makeBatchOf(t, recs, clk.t.UnixMilli(), model.Compression(rng.IntN(5))))
			if res.BaseOffset != m.next {
				t.Fatalf("step %d: append at %d, model end %d", step, res.BaseOffset, m.next)
			}
			for i, r := range recs {
				m.records[m.next+int64(i)] = storedRecord{offset: m.next + int64(i), key: string(r.Key), value: string(r.Value)}
			}
			m.next += int64(n)
			l.SetHighWatermark(m.next)
			what = fmt.Sprintf("append %d", n)
		case op < 60:
			from := m.start + rng.Int64N(m.next-m.start+1)
			checkRead(t, l, m, from, compacted)
			what = fmt.Sprintf("read from %d", from)
		case op < 65:
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			what = "roll"
		case op < 70 && !compacted:
			c := l.Config()
			c.RetentionBytes = rng.Int64N(8 << 10)
			l.SetConfig(c)
			if _, err := l.ApplyRetention(); err != nil {
				t.Fatal(err)
			}
			c.RetentionBytes = -1
			l.SetConfig(c)
			if l.StartOffset() < m.start {
				t.Fatalf("retention moved the log start back")
			}
			m.start = l.StartOffset()
			what = "retention"
		case op < 75:
			to := m.start + rng.Int64N(m.next-m.start+1)
			if _, err := l.DeleteRecords(to); err != nil {
				t.Fatal(err)
			}
			m.start = max(m.start, to)
			if l.StartOffset() != m.start {
				t.Fatalf("step %d: log start %d after DeleteRecords(%d), want %d", step, l.StartOffset(), to, m.start)
			}
			what = fmt.Sprintf("delete records to %d", to)
		case op < 80 && !compacted: // compaction assumes the high watermark is never truncated
			to := m.start + rng.Int64N(m.next-m.start+1)
			if err := l.Truncate(to); err != nil {
				t.Fatal(err)
			}
			end := l.EndOffset()
			if end > to {
				t.Fatalf("step %d: truncate to %d left end %d", step, to, end)
			}
			for o := end; o < m.next; o++ {
				delete(m.records, o)
			}
			m.next = end
			m.start = min(m.start, end)
			l.SetHighWatermark(m.next)
			what = fmt.Sprintf("truncate to %d (end %d)", to, end)
		case op < 85 && compacted:
			clk.t = clk.t.Add(time.Duration(rng.IntN(3)) * time.Hour)
			if _, err := l.Compact(); err != nil {
				t.Fatal(err)
			}
			what = "compact"
		case op < 92:
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, fsys, "/p", cfg, clk.now)
			l.SetHighWatermark(m.next)
			what = "clean reopen"
		default:
			// Power loss: every append was durable, so all of it survives.
			crashed := mem.CrashClone(vfs.CrashOptions{})
			l.Close()
			mem, fsys = crashed, crashed
			l = openLog(t, fsys, "/p", cfg, clk.now)
			l.SetHighWatermark(m.next)
			what = "power loss"
		}
		if l.EndOffset() != m.next || l.StartOffset() != m.start {
			t.Fatalf("step %d (%s): log [%d, %d), model [%d, %d)", step, what, l.StartOffset(), l.EndOffset(), m.start, m.next)
		}
		checkRead(t, l, m, m.start, compacted)
	}
}

// checkRead compares the log from offset on with the model: every record
// read is the model's record at that offset; without compaction none is
// missing; with it, the latest record of each key is there.
func checkRead(t *testing.T, l *Log, m *modelLog, from int64, compacted bool) {
	t.Helper()
	got := readAll(t, l, from)
	for _, r := range got {
		if want, ok := m.records[r.offset]; !ok || want != r {
			t.Fatalf("read %+v at %d, model has %+v", r, r.offset, want)
		}
	}
	if !compacted {
		if int64(len(got)) != m.next-from {
			t.Fatalf("read %d records from %d, model has %d", len(got), from, m.next-from)
		}
		return
	}
	latest := map[string]int64{}
	for o := m.start; o < m.next; o++ {
		latest[m.records[o].key] = o
	}
	present := map[int64]bool{}
	for _, r := range got {
		present[r.offset] = true
	}
	for key, o := range latest {
		if o >= from && !present[o] {
			t.Fatalf("latest record of %s at %d is missing", key, o)
		}
	}
}
