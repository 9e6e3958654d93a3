package log

// Benchmarks of the log on the real file system, in b.TempDir: where /tmp is
// a tmpfs, set TMPDIR to a directory on the data disk.
//
//	go test -run='^$' -bench='Append|RawWriteFsync' -benchtime=2s -count=3 ./internal/log/
//	go test -run='^$' -bench='Read$' ./internal/log/
//
// On a shared or throttled disk, fsync times drift by an order of magnitude
// within minutes: compare a log figure only with the raw baseline run right
// before or after it, over several alternations.
//
// BenchmarkAppend is the log under each flush policy, batch size and number
// of writers; BenchmarkRawWriteFsync is the same bytes written to a plain
// file with one write (and fsync) per op, the ceiling for fsync-per-ack with
// one writer. Their sub-benchmarks are named alike (policy=/size=/writers=)
// so that the two line up. BenchmarkRead compares fetches through the log
// with plain ReadAt of the segment file. Validation cost per codec is
// BenchmarkValidateBatch in validate_test.go.
//
// Disk use is bounded: each append benchmark keeps at most two segments of
// benchSegmentBytes (retention.bytes deletes the older as a third begins),
// and the raw baseline does the same with its files.

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// benchSegmentBytes is segment.bytes for the benchmarks: Kafka's default.
const benchSegmentBytes = 1 << 30

var benchSizes = []struct {
	name string
	n    int
}{
	{"1KiB", 1 << 10},
	{"16KiB", 16 << 10},
	{"1MiB", 1 << 20},
}

// benchBatch builds one uncompressed batch of exactly size bytes, of records
// of about 100 bytes (a 10-byte key and an 80-byte value; the last record's
// value takes up the slack).
func benchBatch(tb testing.TB, size int) []byte {
	tb.Helper()
	const valueLen = 80
	ts := time.Now().UnixMilli()
	value := []byte(strings.Repeat("v", valueLen))
	build := func(n, lastLen int) []byte {
		recs := make([]Record, n)
		for i := range recs {
			recs[i] = Record{OffsetDelta: int32(i), Key: fmt.Appendf(nil, "key-%06d", i%1000000), Value: value}
		}
		recs[n-1].Value = []byte(strings.Repeat("v", lastLen))
		return makeBatchOf(tb, recs, ts, model.CompressionNone)
	}
	n, lastLen := max(1, (size-model.BatchHeaderSize)/100), valueLen
	for range 100 {
		data := build(n, lastLen)
		d := size - len(data)
		switch {
		case d == 0:
			return data
		case lastLen+d >= 0 && lastLen+d <= 4*valueLen:
			lastLen += d
		default: // re-estimate the record count
			per := max(1, (len(data)-model.BatchHeaderSize)/n)
			step := d / per
			if step == 0 && d > 0 {
				step = 1
			} else if step == 0 {
				step = -1
			}
			n, lastLen = max(1, n+step), valueLen
		}
	}
	tb.Fatalf("cannot build a batch of exactly %d bytes", size)
	return nil
}

// benchConfig is Defaults with the given flush policy, 1 GiB segments and
// retention.bytes set so that at most two segments stay on disk.
func benchConfig(policy FlushPolicy) Config {
	cfg := Defaults()
	cfg.SegmentBytes = benchSegmentBytes
	cfg.RetentionBytes = benchSegmentBytes
	cfg.FileDeleteDelay = 0
	cfg.FlushPolicy = policy
	return cfg
}

var benchLogger = slog.New(slog.DiscardHandler)

// countingFS is the OS file system counting the fsyncs of segment files.
// The wrapper adds an interface call and a closure call per file operation,
// nanoseconds against the microseconds of a write system call.
func countingFS() (vfs.FS, *atomic.Int64) {
	var syncs atomic.Int64
	fsys := vfs.NewErrorFS(vfs.OS, func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, logSuffix) {
			syncs.Add(1)
		}
		return nil
	})
	return fsys, &syncs
}

// BenchmarkAppend measures appends of one batch per op: Durable (fsync
// before the ack, group commit across writers) with every-append, not
// durable with interval (a background flush every Config.FlushInterval,
// Defaults' 1s, as Manager does) and never. It reports fsyncs/op, the fsyncs of segment files
// (including those of rolls and interval flushes) per append, and the
// median, 99th percentile and largest latency of one append.
func BenchmarkAppend(b *testing.B) {
	for _, policy := range []FlushPolicy{FlushEveryAppend, FlushInterval, FlushNever} {
		for _, sz := range benchSizes {
			for _, writers := range []int{1, 8} {
				name := fmt.Sprintf("policy=%s/size=%s/writers=%d", policy, sz.name, writers)
				b.Run(name, func(b *testing.B) { benchAppend(b, policy, sz.n, writers) })
			}
		}
	}
}

func benchAppend(b *testing.B, policy FlushPolicy, size, writers int) {
	batch := benchBatch(b, size)
	cfg := benchConfig(policy)
	fsys, syncs := countingFS()
	l, err := Open(b.TempDir(), cfg, Options{FS: fsys, Logger: benchLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	opts := AppendOptions{LeaderEpoch: -1, Durable: policy == FlushEveryAppend}

	stopFlusher := func() {}
	if policy == FlushInterval {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(cfg.FlushInterval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if err := l.Flush(); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
		stopFlusher = func() { close(stop); <-done }
	}

	var (
		next    atomic.Int64 // ops taken
		written atomic.Int64 // bytes appended
		wg      sync.WaitGroup
		errOnce sync.Once
		firstEr error
	)
	fail := func(err error) { errOnce.Do(func() { firstEr = err }) }
	lat := make([]time.Duration, b.N) // of each append, by op number
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	syncs.Store(0)
	for range writers {
		wg.Go(func() {
			// Append writes the base offset into the batch in place, which
			// leaves the CRC valid: one private copy serves every append.
			buf := append([]byte(nil), batch...)
			for op := next.Add(1) - 1; op < int64(b.N); op = next.Add(1) - 1 {
				t0 := time.Now()
				if _, err := l.Append(buf, opts); err != nil {
					fail(err)
					return
				}
				lat[op] = time.Since(t0)
				// Bound the disk: past each segment's worth, drop the
				// segments beyond retention.bytes.
				w := written.Add(int64(len(buf)))
				if w/benchSegmentBytes != (w-int64(len(buf)))/benchSegmentBytes {
					if _, err := l.ApplyRetention(); err != nil {
						fail(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	stopFlusher()
	if firstEr != nil {
		b.Fatal(firstEr)
	}
	b.ReportMetric(float64(syncs.Load())/float64(b.N), "fsyncs/op")
	reportLatency(b, lat)
}

// BenchmarkAppendWriteback measures appends without fsync with and without
// the background writeback (writeback.go), in one run: 64 KiB batches from
// 8 writers. Run it long enough to pass the kernel's dirty thresholds
// (e.g. -benchtime 60000x, 3.9 GB) to see the stalls writeback avoids, in
// max-µs and in throughput.
func BenchmarkAppendWriteback(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("writeback=%v", on), func(b *testing.B) {
			if !on {
				defer func(chunk int64) { writebackChunk = chunk }(writebackChunk)
				writebackChunk = math.MaxInt64
			}
			benchAppend(b, FlushNever, 64<<10, 8)
		})
	}
}

// reportLatency reports the median, 99th percentile and largest latency of
// one append (ns/op is the inverse of throughput, which with several writers
// is not the latency).
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.5), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(at(1), "max-µs")
}

// BenchmarkRawWriteFsync is the baseline for BenchmarkAppend: the same
// batch written sequentially to a plain *os.File, one write and (for
// every-append) one fsync per op, by one writer. Like the log it starts a
// new file every benchSegmentBytes (syncing the full one) and keeps two.
func BenchmarkRawWriteFsync(b *testing.B) {
	for _, policy := range []FlushPolicy{FlushEveryAppend, FlushNever} {
		for _, sz := range benchSizes {
			name := fmt.Sprintf("policy=%s/size=%s/writers=1", policy, sz.name)
			b.Run(name, func(b *testing.B) { benchRawWrite(b, sz.n, policy == FlushEveryAppend) })
		}
	}
}

func benchRawWrite(b *testing.B, size int, fsync bool) {
	batch := benchBatch(b, size)
	dir := b.TempDir()
	var files []*os.File
	create := func() *os.File {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%d.log", len(files))), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		files = append(files, f)
		return f
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	f := create()
	var written int64
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if written+int64(len(batch)) > benchSegmentBytes {
			// Roll: sync the full file, start the next, delete the one
			// before the full one.
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			f, written = create(), 0
			if n := len(files); n > 2 {
				old := files[n-3]
				old.Close()
				if err := os.Remove(old.Name()); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, err := f.Write(batch); err != nil {
			b.Fatal(err)
		}
		written += int64(len(batch))
		if fsync {
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
}

// readSection reads sec into buf, grown when too small, and returns the
// bytes: Section.ReadAll without an allocation per fetch.
func readSection(sec Section, buf []byte) ([]byte, error) {
	if int64(cap(buf)) < sec.Size {
		buf = make([]byte, sec.Size)
	}
	buf = buf[:sec.Size]
	if sec.Size == 0 {
		return buf, nil
	}
	n, err := sec.File.ReadAt(buf, sec.Pos)
	if n == len(buf) {
		err = nil
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return buf, err
}

// readFixture is a log of benchReadLogBytes of equal batches, in one
// segment, and that segment's file opened on its own.
type readFixture struct {
	l    *Log
	end  int64 // log end offset
	raw  *os.File
	size int64
}

const benchReadLogBytes = 64 << 20

func newReadFixture(b *testing.B, batchSize int) *readFixture {
	batch := benchBatch(b, batchSize)
	dir := b.TempDir()
	cfg := benchConfig(FlushNever)
	l, err := Open(dir, cfg, Options{Logger: benchLogger})
	if err != nil {
		b.Fatal(err)
	}
	for range benchReadLogBytes / len(batch) {
		if _, err := l.Append(batch, AppendOptions{LeaderEpoch: -1}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	raw, err := os.Open(filepath.Join(dir, segmentName(0, logSuffix)))
	if err != nil {
		b.Fatal(err)
	}
	fx := &readFixture{l: l, end: l.EndOffset(), raw: raw, size: l.Size()}
	b.Cleanup(func() {
		raw.Close()
		l.Close()
	})
	if len(l.Segments()) != 1 || fx.size != benchReadLogBytes {
		b.Fatalf("fixture: %d segments, %d bytes", len(l.Segments()), fx.size)
	}
	return fx
}

// BenchmarkRead reads a 64 MiB log (hot in the page cache) through Log.Read
// and readSection, against plain ReadAt of its segment file: sequentially
// in 1 MiB fetches, as a consumer catching up, and at random offsets in
// 16 KiB fetches, which exercises the index lookup and header scan.
func BenchmarkRead(b *testing.B) {
	for _, bs := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"16KiB", 16 << 10}} {
		b.Run("batch="+bs.name, func(b *testing.B) {
			fx := newReadFixture(b, bs.n)
			b.Run("seq/fetch=1MiB/src=log", func(b *testing.B) { benchReadSeqLog(b, fx, 1<<20) })
			b.Run("seq/fetch=1MiB/src=raw", func(b *testing.B) { benchReadSeqRaw(b, fx, 1<<20) })
			b.Run("random/fetch=16KiB/src=log", func(b *testing.B) { benchReadRandomLog(b, fx, 16<<10) })
			b.Run("random/fetch=16KiB/src=raw", func(b *testing.B) { benchReadRandomRaw(b, fx, 16<<10) })
		})
	}
}

func benchReadSeqLog(b *testing.B, fx *readFixture, fetch int) {
	buf := make([]byte, fetch)
	var next int64
	b.SetBytes(int64(fetch))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		sec, err := fx.l.Read(next, fetch, fx.end)
		if err != nil {
			b.Fatal(err)
		}
		if buf, err = readSection(sec, buf); err != nil {
			b.Fatal(err)
		}
		// Find the next offset as a consumer does: from the last batch.
		var last model.Batch
		for data := buf; len(data) > 0; data = data[last.Size():] {
			last = model.Batch(data)
		}
		if next = last.LastOffset() + 1; next >= fx.end {
			next = 0
		}
	}
}

func benchReadSeqRaw(b *testing.B, fx *readFixture, fetch int) {
	buf := make([]byte, fetch)
	var pos int64
	b.SetBytes(int64(fetch))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		n, err := fx.raw.ReadAt(buf, pos)
		if n < len(buf) {
			b.Fatalf("read %d at %d: %v", n, pos, err)
		}
		if pos += int64(n); pos >= fx.size {
			pos = 0
		}
	}
}

func benchReadRandomLog(b *testing.B, fx *readFixture, fetch int) {
	buf := make([]byte, fetch)
	rng := rand.New(rand.NewPCG(1, 2))
	b.SetBytes(int64(fetch))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		sec, err := fx.l.Read(rng.Int64N(fx.end), fetch, fx.end)
		if err != nil {
			b.Fatal(err)
		}
		if buf, err = readSection(sec, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func benchReadRandomRaw(b *testing.B, fx *readFixture, fetch int) {
	buf := make([]byte, fetch)
	rng := rand.New(rand.NewPCG(1, 2))
	b.SetBytes(int64(fetch))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		pos := rng.Int64N(fx.size - int64(fetch))
		if n, err := fx.raw.ReadAt(buf, pos); n < len(buf) {
			b.Fatalf("read %d at %d: %v", n, pos, err)
		}
	}
}

// BenchmarkJournalRound measures a sync round of 1000 logs that each
// appended one 1 KiB batch, as a produce request to 1000 partitions makes
// them, on the OS's file system: with the logs' tails kept in memory
// (tail.go) and with every append written through and read back by the
// round, in one run. ns/op is one round, appends included.
func BenchmarkJournalRound(b *testing.B) {
	for _, inMemory := range []bool{true, false} {
		b.Run(map[bool]string{true: "tails-in-memory", false: "write-through"}[inMemory], func(b *testing.B) {
			benchJournalRound(b, 1000, inMemory)
		})
	}
}

func benchJournalRound(b *testing.B, n int, inMemory bool) {
	m, err := NewManager(b.TempDir(), ManagerOptions{Logger: benchLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if !inMemory {
		m.syncer.journal.tails.max = 0
	}
	cfg := benchConfig(FlushEveryAppend)
	cfg.RetentionBytes = -1
	batch := benchBatch(b, 1<<10)
	bufs := make([][]byte, n)
	logs := make([]*Log, n)
	for i := range logs {
		if logs[i], err = m.Open(model.TopicPartition{Topic: "round", Partition: int32(i)}, cfg); err != nil {
			b.Fatal(err)
		}
		bufs[i] = append([]byte(nil), batch...)
	}
	targets := make([]SyncTarget, n)
	round := func() {
		for i, l := range logs {
			res, err := l.Append(bufs[i], AppendOptions{LeaderEpoch: -1})
			if err != nil {
				b.Fatal(err)
			}
			targets[i] = SyncTarget{l, res.LastOffset + 1}
		}
		for _, err := range SyncMany(targets) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	round() // the first round is journaled from the files
	b.SetBytes(int64(n * len(batch)))
	cpu0 := processCPU(b)
	b.ResetTimer()
	for range b.N {
		round()
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the user and system time of this process so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
