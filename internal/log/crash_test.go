package log

// Crash tests: a real process killed with SIGKILL (TestCrashKill9), power
// losses simulated with MemFS.CrashClone (TestPowerLoss), damaged files
// (TestTornTailIsTruncated, TestCorruptionIsReported) and a fuzzer over
// damage to a recovering log (FuzzRecover).
//
// Every batch written by these tests is built by crashBatch: its records'
// keys say which generation (process or round), writer, sequence number and
// record they are, and their values are derived from the key, so any record
// read back can be checked against the offset it was written at.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

var crashLogger = slog.New(slog.DiscardHandler)

// crashID names one batch: generation (a child process or a power-loss
// round), writer goroutine and the writer's sequence number.
type crashID struct{ gen, writer, seq int }

func (id crashID) String() string { return fmt.Sprintf("g%d-w%d-s%d", id.gen, id.writer, id.seq) }

// crashPlace is where a batch is in the log.
type crashPlace struct{ base, last int64 }

// crashRecords and crashCodec vary the batch shape by writer and sequence.
func crashRecords(id crashID) int { return 1 + (id.writer+id.seq)%4 }

func crashCodec(id crashID) model.Compression {
	return model.Compression((id.writer + id.seq + id.gen) % 5)
}

func crashKey(id crashID, r int) string {
	b := make([]byte, 0, 32)
	for i, n := range [4]int{id.gen, id.writer, id.seq, r} {
		b = append(b, "gwsr"[i])
		b = strconv.AppendInt(b, int64(n), 10)
		if i < 3 {
			b = append(b, '-')
		}
	}
	return string(b)
}

// parseCrashKey inverts crashKey.
func parseCrashKey(key string) (crashID, int, bool) {
	var n [4]int
	rest := key
	for i := range n {
		var part string
		var found bool
		if part, rest, found = strings.Cut(rest, "-"); found != (i < 3) || len(part) < 2 || part[0] != "gwsr"[i] {
			return crashID{}, 0, false
		}
		v, err := strconv.Atoi(part[1:])
		if err != nil {
			return crashID{}, 0, false
		}
		n[i] = v
	}
	id := crashID{n[0], n[1], n[2]}
	return id, n[3], crashKey(id, n[3]) == key
}

func crashValue(id crashID, r int) string {
	return crashKey(id, r) + "/" + padding[:(id.seq*7+r*3)%len(padding)]
}

// crashBatch builds the batch id: crashRecords(id) records with crashKey
// keys and crashValue values, compressed with crashCodec(id). It is safe to
// call from any goroutine.
func crashBatch(id crashID) ([]byte, error) {
	n := crashRecords(id)
	recs := make([]Record, n)
	for r := range recs {
		recs[r] = Record{
			OffsetDelta: int32(r), TimestampDelta: int64(r),
			Key: []byte(crashKey(id, r)), Value: []byte(crashValue(id, r)),
		}
	}
	ts := time.Now().UnixMilli()
	return appendBatch(nil, batchHeader{
		BaseOffset: 0, PartitionLeaderEpoch: -1, Attributes: int16(crashCodec(id)),
		LastOffsetDelta: int32(n - 1), BaseTimestamp: ts, MaxTimestamp: ts + int64(n-1),
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}, recs)
}

// crashReadRecords is readAll without testing.TB: it reads the log from offset
// to its end, checks every batch's framing and CRC and that offsets
// increase, and returns the records.
func crashReadRecords(l *Log, from int64) ([]storedRecord, error) {
	var out []storedRecord
	next := from
	end := l.EndOffset()
	for next < end {
		sec, err := l.Read(next, 1<<10, end)
		if err != nil {
			return out, fmt.Errorf("read at %d: %w", next, err)
		}
		if sec.Size == 0 {
			break
		}
		data, err := sec.ReadAll()
		if err != nil {
			return out, fmt.Errorf("read section at %d: %w", next, err)
		}
		for len(data) > 0 {
			if len(data) < model.BatchHeaderSize || model.Batch(data).Size() > len(data) ||
				model.Batch(data).Size() < model.BatchHeaderSize {
				return out, fmt.Errorf("read at %d: section holds a partial batch (%d bytes left)", next, len(data))
			}
			b := model.Batch(data[:model.Batch(data).Size()])
			if err := checkCRC(b); err != nil {
				return out, fmt.Errorf("batch at %d: %w", b.BaseOffset(), err)
			}
			if b.LastOffset() < next {
				return out, fmt.Errorf("read at %d returned batch %d..%d", next, b.BaseOffset(), b.LastOffset())
			}
			err := forEachRecord(b, func(r *Record) error {
				o := b.BaseOffset() + int64(r.OffsetDelta)
				if o >= next {
					out = append(out, storedRecord{offset: o, key: string(r.Key), value: string(r.Value), null: r.Value == nil})
				}
				return nil
			})
			if err != nil {
				return out, fmt.Errorf("batch at %d: %w", b.BaseOffset(), err)
			}
			next = b.LastOffset() + 1
			data = data[len(b):]
		}
	}
	for i := 1; i < len(out); i++ {
		if out[i].offset <= out[i-1].offset {
			return out, fmt.Errorf("offsets do not increase: %d after %d", out[i].offset, out[i-1].offset)
		}
	}
	return out, nil
}

// crashContents reads the whole log and checks that it holds whole
// crashBatch batches back to back from the log start to the log end, each
// once, with exactly the values written, and that each writer's batches of
// each generation are a prefix of its sequence (a writer appends its next
// batch only after the previous one returned, and a crash may only lose a
// suffix of the log). It returns where each batch is.
func crashContents(l *Log) (map[crashID]crashPlace, error) {
	start, end := l.StartOffset(), l.EndOffset()
	recs, err := crashReadRecords(l, start)
	if err != nil {
		return nil, err
	}
	got := map[crashID]crashPlace{}
	var cur crashID
	var curN int // records of cur seen so far; 0 before the first batch
	finish := func() error {
		if curN > 0 && curN != crashRecords(cur) {
			return fmt.Errorf("batch %v has %d records, want %d", cur, curN, crashRecords(cur))
		}
		return nil
	}
	for i, rec := range recs {
		if want := start + int64(i); rec.offset != want {
			return nil, fmt.Errorf("record %d of the log has offset %d, want %d (log starts at %d)", i, rec.offset, want, start)
		}
		id, r, ok := parseCrashKey(rec.key)
		if !ok {
			return nil, fmt.Errorf("offset %d: key %q was never written", rec.offset, rec.key)
		}
		if rec.null || rec.value != crashValue(id, r) {
			return nil, fmt.Errorf("offset %d: key %q has value %q, want %q", rec.offset, rec.key, rec.value, crashValue(id, r))
		}
		if r == 0 {
			if err := finish(); err != nil {
				return nil, err
			}
			if p, dup := got[id]; dup {
				return nil, fmt.Errorf("batch %v at %d and again at %d", id, p.base, rec.offset)
			}
			cur, curN = id, 1
			got[id] = crashPlace{base: rec.offset, last: rec.offset}
			continue
		}
		if curN == 0 || id != cur || r != curN {
			return nil, fmt.Errorf("offset %d: record %q does not continue batch %v (record %d)", rec.offset, rec.key, cur, curN)
		}
		curN++
		got[id] = crashPlace{base: got[id].base, last: rec.offset}
	}
	if err := finish(); err != nil {
		return nil, err
	}
	if got := start + int64(len(recs)); got != end {
		return nil, fmt.Errorf("records end at %d, log end offset is %d", got, end)
	}
	seqs := map[[2]int][]int{}
	for id := range got {
		k := [2]int{id.gen, id.writer}
		seqs[k] = append(seqs[k], id.seq)
	}
	for k, s := range seqs {
		sort.Ints(s)
		if s[len(s)-1] != len(s)-1 {
			return nil, fmt.Errorf("generation %d writer %d: sequence numbers %v are not a prefix", k[0], k[1], s)
		}
	}
	return got, nil
}

// crashCheckPresent checks that every batch of want is in got at its offsets.
func crashCheckPresent(got, want map[crashID]crashPlace, what string) error {
	ids := make([]crashID, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return want[ids[i]].base < want[ids[j]].base })
	for _, id := range ids {
		if g, ok := got[id]; !ok {
			return fmt.Errorf("%s batch %v at %d..%d is missing", what, id, want[id].base, want[id].last)
		} else if g != want[id] {
			return fmt.Errorf("%s batch %v at %d..%d is at %d..%d", what, id, want[id].base, want[id].last, g.base, g.last)
		}
	}
	return nil
}

// --- kill -9 -----------------------------------------------------------------

const (
	crashChildDirEnv = "STRAND_CRASH_CHILD_DIR"
	crashChildGenEnv = "STRAND_CRASH_CHILD_GEN"
	crashItersEnv    = "STRAND_CRASH_ITERATIONS"
	crashWriters     = 4
)

func crashKillConfig() Config {
	c := Defaults()
	c.SegmentBytes = 64 << 10
	c.FileDeleteDelay = 0
	return c
}

// TestCrashKill9Child is the process TestCrashKill9 kills: it appends from
// crashWriters goroutines until killed, printing "ack <writer> <seq> <base>
// <last>" for each durable append.
func TestCrashKill9Child(t *testing.T) {
	dir := os.Getenv(crashChildDirEnv)
	if dir == "" {
		t.Skip("run by TestCrashKill9")
	}
	gen, err := strconv.Atoi(os.Getenv(crashChildGenEnv))
	if err != nil {
		fmt.Printf("error: bad %s: %v\n", crashChildGenEnv, err)
		os.Exit(2)
	}
	l, err := Open(dir, crashKillConfig(), Options{FS: vfs.OS})
	if err != nil {
		fmt.Printf("error: open: %v\n", err)
		os.Exit(2)
	}
	var mu sync.Mutex // one line per write(2), never interleaved
	for w := range crashWriters {
		go func() {
			for seq := 0; ; seq++ {
				id := crashID{gen, w, seq}
				data, err := crashBatch(id)
				if err == nil {
					var res AppendResult
					res, err = l.Append(data, AppendOptions{LeaderEpoch: -1, Durable: true})
					if err == nil {
						mu.Lock()
						_, err = fmt.Fprintf(os.Stdout, "ack %d %d %d %d\n", w, seq, res.BaseOffset, res.LastOffset)
						mu.Unlock()
					}
				}
				if err != nil {
					mu.Lock()
					fmt.Printf("error: %v: %v\n", id, err)
					os.Exit(2)
				}
			}
		}()
	}
	// The parent kills us long before this; do not outlive a dead parent.
	time.Sleep(30 * time.Second)
	fmt.Println("error: not killed")
	os.Exit(3)
}

// TestCrashKill9 runs TestCrashKill9Child on one directory again and again,
// killing it with SIGKILL at a random moment, and checks after each kill
// that every append the child acknowledged is in the log, at its offsets,
// with its values, and that the log is whole and takes appends.
func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	iters := 15
	if s := os.Getenv(crashItersEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", crashItersEnv, s)
		}
		iters = n
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 9))
	t.Logf("seed %d, %d iterations", seed, iters)
	dir := t.TempDir()
	acked := map[crashID]crashPlace{} // every acknowledged batch, all generations
	started := time.Now()
	for gen := range iters {
		delay := time.Duration(20+rng.IntN(281)) * time.Millisecond
		n, err := runKilledChild(t, dir, gen, delay, acked)
		if err != nil {
			t.Fatalf("generation %d (seed %d): %v", gen, seed, err)
		}
		l, err := Open(dir, crashKillConfig(), Options{FS: vfs.OS, Logger: crashLogger})
		if err != nil {
			t.Fatalf("generation %d (seed %d): open after kill -9: %v", gen, seed, err)
		}
		got, err := crashContents(l)
		if err == nil {
			err = crashCheckPresent(got, acked, "acknowledged")
		}
		if err != nil {
			l.Close()
			t.Fatalf("generation %d (seed %d): after kill -9: %v", gen, seed, err)
		}
		// The log takes appends again where it ended.
		end := l.EndOffset()
		probe := crashID{gen, crashWriters, 0}
		data, err := crashBatch(probe)
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Append(data, AppendOptions{LeaderEpoch: -1, Durable: true})
		if err != nil || res.BaseOffset != end {
			l.Close()
			t.Fatalf("generation %d: append after recovery at %d: %+v, %v", gen, end, res, err)
		}
		acked[probe] = crashPlace{res.BaseOffset, res.LastOffset}
		t.Logf("generation %d: killed %v after the first ack, %d acks; log %d..%d in %d segments",
			gen, delay, n, l.StartOffset(), l.EndOffset(), len(l.Segments()))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if gen%2 == 1 {
			// Every other child finds an unclean checkpoint (recovery point
			// at the end) and recovers a log that was already recovered,
			// rather than opening a clean one.
			ck, err := readCheckpoint(vfs.OS, dir)
			if err != nil {
				t.Fatal(err)
			}
			ck.clean = false
			if err := writeCheckpoint(vfs.OS, dir, ck); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d batches acknowledged over %d kills in %v", len(acked), iters, time.Since(started).Round(time.Millisecond))
}

// runKilledChild starts the child on dir, kills it delay after its first
// acknowledgement, adds what it acknowledged to acked and returns how many.
func runKilledChild(t *testing.T, dir string, gen int, delay time.Duration, acked map[crashID]crashPlace) (int, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill9Child$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), crashChildDirEnv+"="+dir, crashChildGenEnv+"="+strconv.Itoa(gen))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	var killed atomic.Bool
	kill := func() {
		killed.Store(true)
		cmd.Process.Kill() // SIGKILL
	}
	watchdog := time.AfterFunc(20*time.Second, kill)
	defer watchdog.Stop()
	waited := false
	defer func() {
		if !waited { // an early return: leave no child behind
			kill()
			io.Copy(io.Discard, stdout)
			cmd.Wait()
		}
	}()
	var timer *time.Timer
	var other []string
	n := 0
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			// EOF once the child is dead; a line without its newline was
			// never completely written, so it was never an ack.
			break
		}
		var w, seq int
		var base, last int64
		if k, err := fmt.Sscanf(line, "ack %d %d %d %d\n", &w, &seq, &base, &last); k != 4 || err != nil {
			other = append(other, strings.TrimSpace(line))
			continue
		}
		id := crashID{gen, w, seq}
		if last-base+1 != int64(crashRecords(id)) {
			return n, fmt.Errorf("child acked %v at %d..%d, but it has %d records", id, base, last, crashRecords(id))
		}
		if _, dup := acked[id]; dup {
			return n, fmt.Errorf("child acked %v twice", id)
		}
		acked[id] = crashPlace{base, last}
		n++
		if timer == nil {
			timer = time.AfterFunc(delay, kill)
			defer timer.Stop()
		}
	}
	err = cmd.Wait()
	waited = true
	switch {
	case !killed.Load():
		return n, fmt.Errorf("child exited by itself (%v) after %d acks: %q\nstderr:\n%s", err, n, other, stderr.String())
	case timer == nil:
		return n, fmt.Errorf("child acknowledged nothing in 20s (%v): %q\nstderr:\n%s", err, other, stderr.String())
	case cmd.ProcessState.ExitCode() != -1:
		return n, fmt.Errorf("child was not killed by the signal (%v): %q\nstderr:\n%s", err, other, stderr.String())
	case len(other) > 0:
		return n, fmt.Errorf("child printed %q\nstderr:\n%s", other, stderr.String())
	}
	return n, nil
}

// --- power loss ----------------------------------------------------------------

type powerLossCase struct {
	name         string
	policy       FlushPolicy
	segmentBytes int64
	seeds        int
	maxAcks      int // the clone is taken after rand(maxAcks) appends returned
}

var powerLossCases = []powerLossCase{
	{"every-append", FlushEveryAppend, 16 << 10, 200, 80},
	{"every-append/tiny-segments", FlushEveryAppend, 2 << 10, 200, 80},
	{"interval", FlushInterval, 8 << 10, 100, 150},
	{"never", FlushNever, 8 << 10, 100, 150},
	{"never/tiny-segments", FlushNever, 2 << 10, 100, 150},
}

const powerLossSeedEnv = "STRAND_POWERLOSS_SEED"

// TestPowerLoss appends from concurrent writers to a MemFS log and takes a
// crash clone at a random moment (keeping random parts of unsynced data,
// sometimes torn), three times in a row per seed, each round continuing on
// the previous clone (or a clean reopen of it), with or without checkpoints
// (recovery points) written meanwhile. The clone must open; it must hold only whole batches that were
// written, at their offsets; and it must hold every batch that was durable
// before the clone was taken: the appends acknowledged as durable,
// everything below SyncedOffset (rolls and flushes), and what the previous
// recovery kept. Setting STRAND_POWERLOSS_SEED runs only that seed.
func TestPowerLoss(t *testing.T) {
	only := uint64(0)
	if s := os.Getenv(powerLossSeedEnv); s != "" {
		var err error
		if only, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", powerLossSeedEnv, s, err)
		}
	}
	for ci, tc := range powerLossCases {
		t.Run(tc.name, func(t *testing.T) {
			seeds := tc.seeds
			if testing.Short() {
				seeds /= 10
			} else if crashRaceEnabled() {
				seeds /= 4 // the race detector makes recovery's large buffers slow
			}
			started := time.Now()
			for i := range seeds {
				seed := uint64(1000*(ci+1) + i)
				if only != 0 && seed != only {
					continue
				}
				if err := powerLossSeed(tc, seed); err != nil {
					t.Fatalf("seed %d (rerun with %s=%d): %v", seed, powerLossSeedEnv, seed, err)
				}
			}
			t.Logf("%d seeds in %v", seeds, time.Since(started).Round(time.Millisecond))
		})
	}
}

// crashRaceEnabled says whether the test binary was built with -race.
func crashRaceEnabled() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" {
				return s.Value == "true"
			}
		}
	}
	return false
}

func powerLossSeed(tc powerLossCase, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0xc0ffee))
	cfg := Defaults()
	cfg.SegmentBytes = tc.segmentBytes
	cfg.IndexIntervalBytes = 512
	cfg.FileDeleteDelay = 0
	cfg.FlushPolicy = tc.policy
	cfg.FlushInterval = time.Millisecond
	const dir = "/data/topic-0"
	opts := Options{Logger: crashLogger}
	mem := vfs.NewMem()
	opts.FS = mem
	l, err := Open(dir, cfg, opts)
	if err != nil {
		return err
	}
	durable := map[crashID]crashPlace{} // on disk for sure: recovered or probed
	for round := range 3 {
		if rng.IntN(2) == 0 {
			// Start the round from a clean shutdown: the first append
			// must retract "clean" before anything can be lost.
			if err := l.Close(); err != nil {
				return fmt.Errorf("round %d: close: %w", round, err)
			}
			if l, err = Open(dir, cfg, opts); err != nil {
				return fmt.Errorf("round %d: clean reopen: %w", round, err)
			}
		}
		r, err := powerLossRound(l, mem, rng, tc, round)
		if cerr := l.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close: %w", cerr)
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		written := r.written
		for id, p := range durable {
			written[id] = p
		}
		mustHave := map[crashID]crashPlace{}
		for id, p := range durable {
			mustHave[id] = p
		}
		for id, p := range r.acked {
			mustHave[id] = p
		}
		for id, p := range written {
			if p.last < r.synced {
				mustHave[id] = p
			}
		}

		mem = r.clone
		opts.FS = mem
		if l, err = Open(dir, cfg, opts); err != nil {
			return fmt.Errorf("round %d: open after power loss: %w", round, err)
		}
		fail := func(err error) error {
			l.Close()
			return fmt.Errorf("round %d: after power loss (synced offset was %d, log end now %d): %w",
				round, r.synced, l.EndOffset(), err)
		}
		got, err := crashContents(l)
		if err != nil {
			return fail(err)
		}
		for id, p := range got {
			if w, ok := written[id]; !ok || w != p {
				return fail(fmt.Errorf("batch %v at %d..%d was written at %d..%d (written: %v)", id, p.base, p.last, w.base, w.last, ok))
			}
		}
		if err := crashCheckPresent(got, mustHave, "durable"); err != nil {
			return fail(err)
		}
		if end := l.EndOffset(); end < r.synced {
			return fail(fmt.Errorf("log ends at %d, below the synced offset %d", end, r.synced))
		}
		end := l.EndOffset()
		probe := crashID{round, 9, 0}
		data, err := crashBatch(probe)
		if err != nil {
			return fail(err)
		}
		res, err := l.Append(data, AppendOptions{LeaderEpoch: -1, Durable: true})
		if err != nil || res.BaseOffset != end {
			return fail(fmt.Errorf("append after recovery at %d: %+v, %v", end, res, err))
		}
		got[probe] = crashPlace{res.BaseOffset, res.LastOffset}
		durable = got
	}
	return l.Close()
}

// powerLossResult is what one round of writing and a power loss leave.
type powerLossResult struct {
	written map[crashID]crashPlace // every batch appended
	acked   map[crashID]crashPlace // acknowledged as durable before the clone
	synced  int64                  // SyncedOffset before the clone
	clone   *vfs.MemFS             // what the power loss left
}

// powerLossRound runs writers on l (on mem) until rand(tc.maxAcks) appends
// have returned, takes a crash clone and stops the writers.
func powerLossRound(l *Log, mem *vfs.MemFS, rng *rand.Rand, tc powerLossCase, round int) (powerLossResult, error) {
	durable := tc.policy == FlushEveryAppend
	var (
		mu       sync.Mutex
		acks     []crashID // in order of completion
		places   = map[crashID]crashPlace{}
		firstErr error
		count    atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	setErr := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	writers := 2 + rng.IntN(3)
	target := int64(rng.IntN(tc.maxAcks + 1))
	// Writers stop a little after the target, so that appends are in flight
	// when the clone is taken but the log stays small.
	limit := target + int64(2*writers)
	for w := range writers {
		wg.Go(func() {
			for seq := 0; !stop.Load() && count.Load() < limit; seq++ {
				id := crashID{round, w, seq}
				data, err := crashBatch(id)
				var res AppendResult
				if err == nil {
					res, err = l.Append(data, AppendOptions{LeaderEpoch: -1, Durable: durable})
				}
				if err != nil {
					setErr(fmt.Errorf("append %v: %w", id, err))
					return
				}
				mu.Lock()
				places[id] = crashPlace{res.BaseOffset, res.LastOffset}
				acks = append(acks, id)
				mu.Unlock()
				count.Add(1)
			}
		})
	}
	// What the broker does in the background: flushes (FlushInterval) and
	// checkpoints of the recovery point.
	background := func(what string, fn func() error) {
		wg.Go(func() {
			for !stop.Load() {
				if err := fn(); err != nil {
					setErr(fmt.Errorf("%s: %w", what, err))
					return
				}
				time.Sleep(200 * time.Microsecond)
			}
		})
	}
	if tc.policy == FlushInterval {
		background("flush", l.Flush)
	}
	if rng.IntN(2) == 0 {
		background("checkpoint", l.Checkpoint)
	}
	for count.Load() < target {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed {
			break
		}
		time.Sleep(20 * time.Microsecond)
	}
	// Only what completed before the clone starts must survive it.
	r := powerLossResult{synced: l.SyncedOffset(), acked: map[crashID]crashPlace{}}
	mu.Lock()
	if durable {
		for _, id := range acks {
			r.acked[id] = places[id]
		}
	}
	mu.Unlock()
	r.clone = mem.CrashClone(vfs.CrashOptions{Rand: rng})
	stop.Store(true)
	wg.Wait()
	r.written = places
	return r, firstErr
}

// --- damaged files ---------------------------------------------------------------

// crashTestBatch is one batch of the log crashDamageLog writes, and where it is.
type crashTestBatch struct {
	base, last int64
	file       string // segment file name
	pos, size  int64
	seg        int // index of its segment
}

// crashDamageLog writes 45 batches of 5 records into 4 KiB segments (so
// three or more segments, the last holding several batches), closes the log
// and returns the batches, the records and the configuration.
func crashDamageLog(t *testing.T, fsys vfs.FS, dir string) ([]crashTestBatch, []storedRecord, Config) {
	t.Helper()
	cfg := testConfig()
	l := openLog(t, fsys, dir, cfg, nil)
	var batches []crashTestBatch
	for i := range 45 {
		res := mustAppend(t, l, makeBatch(t, fmt.Sprint(i), 5, 1000+int64(i), model.Compression(i%5)))
		batches = append(batches, crashTestBatch{base: res.BaseOffset, last: res.LastOffset})
	}
	segs := l.Segments()
	for i := range batches {
		b := &batches[i]
		sec, err := l.Read(b.base, 1, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		data, err := sec.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if model.Batch(data).BaseOffset() != b.base || int64(model.Batch(data).Size()) != sec.Size {
			t.Fatalf("batch %d: read %d bytes at %d", i, sec.Size, sec.Pos)
		}
		b.file, b.pos, b.size = filepath.Base(sec.File.Name()), sec.Pos, sec.Size
		b.seg = sort.Search(len(segs), func(j int) bool { return segs[j] > b.base }) - 1
		if b.file != segmentName(segs[b.seg], logSuffix) {
			t.Fatalf("batch %d is in %s, segments %v", i, b.file, segs)
		}
	}
	want := readAll(t, l, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	last := batches[len(batches)-1]
	if len(segs) < 3 || last.pos == 0 || batches[len(batches)-2].seg != last.seg {
		t.Fatalf("want 3+ segments and 2+ batches in the last; segments %v, last batch at %d", segs, last.pos)
	}
	return batches, want, cfg
}

// crashSetUnclean rewrites the checkpoint as if the log had not been closed,
// with the given recovery point.
func crashSetUnclean(t *testing.T, fsys vfs.FS, dir string, recoveryPoint int64) {
	t.Helper()
	if err := writeCheckpoint(fsys, dir, checkpoint{recoveryPoint: recoveryPoint}); err != nil {
		t.Fatal(err)
	}
}

// crashDamageFile rewrites dir/name with what fn makes of its bytes.
func crashDamageFile(t *testing.T, fsys vfs.FS, dir, name string, fn func(b []byte) []byte) {
	t.Helper()
	p := filepath.Join(dir, name)
	b, err := vfs.ReadFile(fsys, p)
	if err != nil {
		t.Fatal(err)
	}
	b = fn(bytes.Clone(b))
	f, err := fsys.OpenFile(p, os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// crashCopyDir copies the files of from into a new directory to.
func crashCopyDir(t *testing.T, fsys vfs.FS, from, to string) {
	t.Helper()
	if err := fsys.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range crashDirFiles(t, fsys, from) {
		if err := vfs.WriteFileAtomic(fsys, filepath.Join(to, name), b); err != nil {
			t.Fatal(err)
		}
	}
}

// crashDirFiles returns every file of dir and its bytes.
func crashDirFiles(t *testing.T, fsys vfs.FS, dir string) map[string][]byte {
	t.Helper()
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		b, err := vfs.ReadFile(fsys, filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

func crashFileSize(t *testing.T, fsys vfs.FS, dir, name string) int64 {
	t.Helper()
	st, err := fsys.Stat(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func crashGarbage(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestTornTailIsTruncated damages the last segment the ways a crash can,
// above the recovery point: a cut anywhere in the last batch, zeros or
// garbage where the file was extended but not written, a damaged batch
// (possibly followed by batches that reached the disk out of order), a
// damaged base offset. Open must cut exactly there, keep every earlier
// batch and append where the valid data ends. Two cases start from a clean
// shutdown, whose Open does not scan, with bytes after the last batch.
func TestTornTailIsTruncated(t *testing.T) {
	type tornCase struct {
		name string
		// target picks the first damaged batch (nil: the last one); the
		// recovery point is its base offset, so it was never durable.
		target func(bs []crashTestBatch) crashTestBatch
		damage func(b []byte, at crashTestBatch) []byte
		keep   bool // the target survives: only bytes after it are bad
		clean  bool // keep the clean checkpoint of the close
		os     bool // run on the OS too (the rest is logic: spare the fsyncs)
	}
	secondLast := func(bs []crashTestBatch) crashTestBatch { return bs[len(bs)-2] }
	cases := []tornCase{
		{name: "cut in the middle of the last batch", os: true, damage: func(b []byte, at crashTestBatch) []byte {
			return b[:at.pos+at.size/2]
		}},
		{name: "last byte of the last batch missing", os: true, damage: func(b []byte, at crashTestBatch) []byte {
			return b[:at.pos+at.size-1]
		}},
		{name: "cut at the end of the last batch's header", damage: func(b []byte, at crashTestBatch) []byte {
			return b[:at.pos+model.BatchHeaderSize]
		}},
		{name: "zeros after the last batch", keep: true, os: true, damage: func(b []byte, at crashTestBatch) []byte {
			return append(b, make([]byte, 4096)...)
		}},
		{name: "zeros after the last batch, fewer than a header", keep: true, damage: func(b []byte, at crashTestBatch) []byte {
			return append(b, make([]byte, 7)...)
		}},
		{name: "last batch zeroed from its middle, file extended to 8 KiB", os: true, damage: func(b []byte, at crashTestBatch) []byte {
			clear(b[at.pos+at.size/2:])
			return append(b, make([]byte, 8192-len(b))...)
		}},
		{name: "whole last batch zeroed", damage: func(b []byte, at crashTestBatch) []byte {
			clear(b[at.pos:])
			return b
		}},
		{name: "garbage after the last batch", keep: true, os: true, damage: func(b []byte, at crashTestBatch) []byte {
			return append(b, crashGarbage(1, 3000)...)
		}},
		{name: "garbage over the end of the last batch", damage: func(b []byte, at crashTestBatch) []byte {
			return append(b[:at.pos+20], crashGarbage(2, 500)...)
		}},
		{name: "byte flipped in the last batch's records", os: true, damage: func(b []byte, at crashTestBatch) []byte {
			b[at.pos+at.size-3] ^= 0x10
			return b
		}},
		{name: "last batch's CRC flipped", damage: func(b []byte, at crashTestBatch) []byte {
			b[at.pos+model.BatchCRCPos] ^= 0x01
			return b
		}},
		{name: "last batch's length too large", damage: func(b []byte, at crashTestBatch) []byte {
			binary.BigEndian.PutUint32(b[at.pos+model.BatchLengthPos:], 1<<30)
			return b
		}},
		{name: "last batch's base offset raised", damage: func(b []byte, at crashTestBatch) []byte {
			binary.BigEndian.PutUint64(b[at.pos+model.BatchBaseOffsetPos:], uint64(at.base+1000))
			return b
		}},
		{name: "last batch's base offset lowered", damage: func(b []byte, at crashTestBatch) []byte {
			binary.BigEndian.PutUint64(b[at.pos+model.BatchBaseOffsetPos:], uint64(at.base-1))
			return b
		}},
		{name: "batch zeroed before a batch that reached the disk", target: secondLast, os: true,
			damage: func(b []byte, at crashTestBatch) []byte {
				clear(b[at.pos : at.pos+at.size])
				return b
			}},
		{name: "byte flipped in a batch before a valid one", target: secondLast, damage: func(b []byte, at crashTestBatch) []byte {
			b[at.pos+at.size/2] ^= 0x80
			return b
		}},
		{name: "clean shutdown, then zeros after the last batch, fewer than a header", keep: true, clean: true, os: true,
			damage: func(b []byte, at crashTestBatch) []byte { return append(b, make([]byte, 7)...) }},
		{name: "clean shutdown, then zeros after the last batch", keep: true, clean: true,
			damage: func(b []byte, at crashTestBatch) []byte { return append(b, make([]byte, 4096)...) }},
	}
	for k := 0; k <= model.BatchHeaderSize; k++ {
		cases = append(cases, tornCase{name: fmt.Sprintf("%d bytes of the last batch's header left", k),
			damage: func(b []byte, at crashTestBatch) []byte { return b[:at.pos+int64(k)] },
			os:     k%12 == 1 || k == model.BatchMagicPos+1})
	}
	fileSystems(t, func(t *testing.T, fsys vfs.FS, root string) {
		tmpl := filepath.Join(root, "template")
		batches, all, cfg := crashDamageLog(t, fsys, tmpl)
		for i, tc := range cases {
			if _, isMem := fsys.(*vfs.MemFS); !tc.os && !isMem {
				continue
			}
			t.Run(tc.name, func(t *testing.T) {
				dir := filepath.Join(root, fmt.Sprint(i))
				crashCopyDir(t, fsys, tmpl, dir)
				last := batches[len(batches)-1]
				at := last
				if tc.target != nil {
					at = tc.target(batches)
				}
				if at.seg != last.seg {
					t.Fatal("the target is not in the last segment")
				}
				if !tc.clean {
					crashSetUnclean(t, fsys, dir, at.base) // nothing says at was durable
				}
				crashDamageFile(t, fsys, dir, at.file, func(b []byte) []byte { return tc.damage(b, at) })

				wantEnd, wantSize := at.base, at.pos
				if tc.keep {
					wantEnd, wantSize = at.last+1, at.pos+at.size
				}
				var want []storedRecord
				for _, r := range all {
					if r.offset < wantEnd {
						want = append(want, r)
					}
				}
				l, err := Open(dir, cfg, Options{FS: fsys, Logger: crashLogger})
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				defer func() { l.Close() }()
				if l.EndOffset() != wantEnd {
					t.Fatalf("end offset %d after recovery, want %d", l.EndOffset(), wantEnd)
				}
				if got := crashFileSize(t, fsys, dir, at.file); got != wantSize {
					t.Fatalf("last segment is %d bytes after recovery, want %d", got, wantSize)
				}
				got, err := crashReadRecords(l, 0)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("after recovery read %d records up to %d, want %d up to %d", len(got), crashLastOffset(got), len(want), wantEnd-1)
				}
				more := makeBatch(t, "more", 3, 5000, model.CompressionSnappy)
				if res := mustAppend(t, l, more); res.BaseOffset != wantEnd {
					t.Fatalf("append after recovery at %d, want %d", res.BaseOffset, wantEnd)
				}
				want = append(want, readAll(t, l, wantEnd)...)
				if len(want) != len(got)+3 {
					t.Fatalf("read back %d records after appending 3 to %d", len(want), len(got))
				}
				// A clean reopen (no scan) finds the same log.
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l = openLog(t, fsys, dir, cfg, nil)
				if got, err := crashReadRecords(l, 0); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("after clean reopen: %d records, %v; want %d", len(got), err, len(want))
				}
			})
		}
	})
}

func crashLastOffset(recs []storedRecord) int64 {
	if len(recs) == 0 {
		return -1
	}
	return recs[len(recs)-1].offset
}

// TestCorruptionIsReported damages data that was durable, so cannot be a
// torn tail: anything in a sealed segment, anything in the last segment below
// the recovery point, whole batches missing from a sealed segment or below
// the recovery point. Open must fail with a *CorruptLogError naming the file
// and the position of the damage, and change no file.
func TestCorruptionIsReported(t *testing.T) {
	type corruptCase struct {
		name string
		// batch picks the damaged batch, whose position is reported
		batch func(bs []crashTestBatch) crashTestBatch
		// recoveryPoint for the unclean checkpoint
		recoveryPoint func(bs []crashTestBatch) int64
		damage        func(b []byte, at crashTestBatch) []byte
	}
	inSeg := func(seg, i int) func(bs []crashTestBatch) crashTestBatch {
		return func(bs []crashTestBatch) crashTestBatch {
			var of []crashTestBatch
			for _, b := range bs {
				if b.seg == seg {
					of = append(of, b)
				}
			}
			if i < 0 {
				i += len(of)
			}
			return of[i]
		}
	}
	lastSeg := func(i int) func(bs []crashTestBatch) crashTestBatch {
		return func(bs []crashTestBatch) crashTestBatch { return inSeg(bs[len(bs)-1].seg, i)(bs) }
	}
	zero := func([]crashTestBatch) int64 { return 0 }
	logEnd := func(bs []crashTestBatch) int64 { return bs[len(bs)-1].last + 1 }
	flip := func(at int64) func(b []byte, tb crashTestBatch) []byte {
		return func(b []byte, tb crashTestBatch) []byte {
			if at < 0 {
				at += tb.size
			}
			b[tb.pos+at] ^= 0x04
			return b
		}
	}
	setBase := func(delta int64) func(b []byte, tb crashTestBatch) []byte {
		return func(b []byte, tb crashTestBatch) []byte {
			binary.BigEndian.PutUint64(b[tb.pos+model.BatchBaseOffsetPos:], uint64(tb.base+delta))
			return b
		}
	}
	cutAt := func(b []byte, tb crashTestBatch) []byte { return b[:tb.pos] }
	cases := []corruptCase{
		{"records byte of an early batch of a sealed segment", inSeg(0, 1), zero, flip(-10)},
		{"CRC of an early batch of a sealed segment", inSeg(0, 1), zero, flip(model.BatchCRCPos + 2)},
		{"attributes of an early batch of a sealed segment", inSeg(0, 1), zero, flip(model.BatchAttributesPos + 1)},
		{"magic of an early batch of a sealed segment", inSeg(0, 1), zero, flip(model.BatchMagicPos)},
		{"length of an early batch of a sealed segment", inSeg(0, 1), zero, func(b []byte, tb crashTestBatch) []byte {
			binary.BigEndian.PutUint32(b[tb.pos+model.BatchLengthPos:], uint32(tb.size-model.BatchLengthOverhead+1))
			return b
		}},
		{"base offset lowered in a sealed segment", inSeg(0, 1), zero, setBase(-1)},
		{"base offset raised in a sealed segment", inSeg(0, 1), zero, setBase(1)},
		{"base offset of the last batch of a sealed segment raised", inSeg(0, -1), zero, setBase(1000)},
		{"base offset of the first batch of a sealed segment raised", inSeg(1, 0), zero, setBase(1)},
		{"first batch of the second segment", inSeg(1, 0), zero, flip(-1)},
		{"last batch of the last sealed segment", func(bs []crashTestBatch) crashTestBatch {
			return inSeg(bs[len(bs)-1].seg-1, -1)(bs)
		}, zero, flip(-1)},
		{"sealed segment cut inside its last batch", inSeg(0, -1), zero, func(b []byte, tb crashTestBatch) []byte {
			return b[:tb.pos+tb.size-1]
		}},
		{"sealed segment cut before its last batch", inSeg(0, -1), zero, cutAt},
		{"sealed segment emptied", inSeg(1, 0), zero, cutAt},
		{"batch of the last segment below the recovery point, followed by valid batches", lastSeg(0), logEnd, flip(-7)},
		{"header of a batch of the last segment below the recovery point", lastSeg(0), logEnd, flip(model.BatchLastDeltaPos + 3)},
		{"base offset raised in the last segment below the recovery point", lastSeg(1), logEnd, setBase(1)},
		{"last batch below the recovery point", lastSeg(-1), logEnd, flip(-2)},
		{"last batch cut below the recovery point", lastSeg(-1), logEnd, func(b []byte, tb crashTestBatch) []byte {
			return b[:tb.pos+tb.size/2]
		}},
		{"last batch cut off whole below the recovery point", lastSeg(-1), logEnd, cutAt},
		{"zeros over the last batch below the recovery point", lastSeg(-1), logEnd, func(b []byte, tb crashTestBatch) []byte {
			clear(b[tb.pos+40:])
			return b
		}},
	}
	fileSystems(t, func(t *testing.T, fsys vfs.FS, root string) {
		tmpl := filepath.Join(root, "template")
		batches, _, cfg := crashDamageLog(t, fsys, tmpl)
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				dir := filepath.Join(root, fmt.Sprint(i))
				crashCopyDir(t, fsys, tmpl, dir)
				at := tc.batch(batches)
				crashSetUnclean(t, fsys, dir, tc.recoveryPoint(batches))
				crashDamageFile(t, fsys, dir, at.file, func(b []byte) []byte { return tc.damage(b, at) })
				before := crashDirFiles(t, fsys, dir)
				l, err := Open(dir, cfg, Options{FS: fsys, Logger: crashLogger})
				if err == nil {
					end := l.EndOffset()
					l.Close()
					t.Fatalf("open succeeded (log end %d) after damage at %s:%d", end, at.file, at.pos)
				}
				var ce *CorruptLogError
				if !errors.Is(err, ErrCorruptLog) || !errors.As(err, &ce) {
					t.Fatalf("open: %v; want a *CorruptLogError", err)
				}
				if filepath.Base(ce.File) != at.file || ce.Pos != at.pos {
					t.Fatalf("open: %v; want it reported at %s byte %d", err, at.file, at.pos)
				}
				after := crashDirFiles(t, fsys, dir)
				if len(after) != len(before) {
					t.Fatalf("files %d before the failed open, %d after", len(before), len(after))
				}
				for name, b := range before {
					if !bytes.Equal(after[name], b) {
						t.Fatalf("the failed open changed %s (%d bytes, now %d)", name, len(b), len(after[name]))
					}
				}
				// The report is stable: opening again says the same.
				if _, err2 := Open(dir, cfg, Options{FS: fsys, Logger: crashLogger}); err2 == nil || err2.Error() != err.Error() {
					t.Fatalf("second open: %v; first said %v", err2, err)
				}
			})
		}
	})
}

// --- fuzzing ---------------------------------------------------------------------

// crashRecoverTemplate is a closed MemFS log of a few batches in three segments
// whose checkpoint says unclean with recovery point 0, so Open scans it all.
type crashRecoverTemplate struct {
	fs    *vfs.MemFS
	cfg   Config
	files []string // segment files, in order
	want  map[int64]storedRecord
}

const crashRecoverDir = "/data/topic-0"

func newCrashRecoverTemplate(tb testing.TB) *crashRecoverTemplate {
	tmpl := &crashRecoverTemplate{fs: vfs.NewMem(), cfg: testConfig(), want: map[int64]storedRecord{}}
	tmpl.cfg.SegmentBytes = 500
	tmpl.cfg.IndexIntervalBytes = 200
	l := openLog(tb, tmpl.fs, crashRecoverDir, tmpl.cfg, nil)
	for i, n := range []int{2, 1, 3, 2, 4, 1, 2, 3, 2} {
		mustAppend(tb, l, makeBatch(tb, fmt.Sprint(i), n, 1000+int64(10*i), model.Compression(i%5)))
	}
	for _, r := range readAll(tb, l, 0) {
		tmpl.want[r.offset] = r
	}
	for _, base := range l.Segments() {
		tmpl.files = append(tmpl.files, segmentName(base, logSuffix))
	}
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := writeCheckpoint(tmpl.fs, crashRecoverDir, checkpoint{}); err != nil {
		tb.Fatal(err)
	}
	if len(tmpl.files) != 3 {
		tb.Fatalf("template has segments %v, want 3", tmpl.files)
	}
	return tmpl
}

// FuzzRecover damages the segment files of a log that must be recovered
// (edits: 4 bytes each, file index, big-endian position, new byte; then an
// optional truncation or zero extension of one file) and opens it. Open must
// fail with ErrCorruptLog, or succeed with a log whose every record is one
// that was written, at its offset, back to back up to the log end, which
// takes appends and reopens cleanly to the same contents.
func FuzzRecover(f *testing.F) {
	tmpl := newCrashRecoverTemplate(f)
	f.Add([]byte{}, uint8(255), uint16(0))
	f.Add([]byte{0, 0, 100, 0xff}, uint8(255), uint16(0))
	f.Add([]byte{2, 0, 10, 0}, uint8(255), uint16(0))
	f.Add([]byte{}, uint8(2), uint16(150))
	f.Add([]byte{}, uint8(2), uint16(5000))
	f.Add([]byte{1, 0, 30, 7, 1, 1, 0, 9}, uint8(1), uint16(400))
	f.Fuzz(func(t *testing.T, edits []byte, truncFile uint8, truncLen uint16) {
		crashRecoverDamaged(t, tmpl, edits, truncFile, truncLen)
	})
}

// crashRecoverDamaged is FuzzRecover's body.
func crashRecoverDamaged(t *testing.T, tmpl *crashRecoverTemplate, edits []byte, truncFile uint8, truncLen uint16) {
	fsys := tmpl.fs.CrashClone(vfs.CrashOptions{})
	files := map[string][]byte{}
	for _, name := range tmpl.files {
		b, err := vfs.ReadFile(fsys, filepath.Join(crashRecoverDir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	for len(edits) >= 4 {
		name := tmpl.files[int(edits[0])%len(tmpl.files)]
		if b := files[name]; len(b) > 0 {
			b[int(binary.BigEndian.Uint16(edits[1:3]))%len(b)] = edits[3]
		}
		edits = edits[4:]
	}
	if int(truncFile) < len(tmpl.files) {
		name := tmpl.files[truncFile]
		b := files[name]
		n := int(truncLen) % (len(b) + 1024)
		if n <= len(b) {
			files[name] = b[:n]
		} else {
			files[name] = append(b, make([]byte, n-len(b))...)
		}
	}
	for name, b := range files {
		f, err := fsys.OpenFile(filepath.Join(crashRecoverDir, name), os.O_RDWR|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	want := maps.Clone(tmpl.want)
	opts := Options{FS: fsys, Logger: crashLogger}
	l, err := Open(crashRecoverDir, tmpl.cfg, opts)
	if err != nil {
		var ce *CorruptLogError
		if !errors.Is(err, ErrCorruptLog) || !errors.As(err, &ce) {
			t.Fatalf("open: %v; want ErrCorruptLog", err)
		}
		return
	}
	defer func() { l.Close() }()
	check := func(when string) []storedRecord {
		recs, err := crashReadRecords(l, l.StartOffset())
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		next := l.StartOffset()
		for _, r := range recs {
			if w, ok := want[r.offset]; !ok || w != r {
				t.Fatalf("%s: offset %d holds %q=%q, written there: %q=%q (%v)", when, r.offset, r.key, r.value, w.key, w.value, ok)
			}
			if r.offset != next {
				t.Fatalf("%s: record at %d, want %d", when, r.offset, next)
			}
			next++
		}
		if next != l.EndOffset() {
			t.Fatalf("%s: records end at %d, log end offset %d", when, next, l.EndOffset())
		}
		return recs
	}
	recs := check("after recovery")
	end := l.EndOffset()
	res, err := l.Append(makeBatch(t, "more", 2, 5000, 0), AppendOptions{LeaderEpoch: -1, Durable: true})
	if err != nil || res.BaseOffset != end {
		t.Fatalf("append after recovery at %d: %+v, %v", end, res, err)
	}
	for i := range int64(2) {
		want[end+i] = storedRecord{offset: end + i, key: fmt.Sprintf("k-more-%d", i), value: fmt.Sprintf("v-more-%d%s", i, padding)}
	}
	recs = append(recs, check("after an append")[len(recs):]...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(crashRecoverDir, tmpl.cfg, opts); err != nil {
		t.Fatalf("clean reopen: %v", err)
	}
	if again := check("after a clean reopen"); fmt.Sprint(again) != fmt.Sprint(recs) {
		t.Fatalf("clean reopen reads %d records, before %d", len(again), len(recs))
	}
}
