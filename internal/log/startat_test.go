package log

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// replicatedBatch is makeBatch as a leader stored it: at base offset base,
// written at leader epoch epoch.
func replicatedBatch(t testing.TB, tag string, n int, base int64, epoch int32) []byte {
	t.Helper()
	b := makeBatch(t, tag, n, 0, 0)
	model.Batch(b).SetBaseOffset(base)
	model.Batch(b).SetPartitionLeaderEpoch(epoch)
	return b
}

// segmentFiles lists the segment and index files in dir.
func segmentFiles(t testing.TB, fsys vfs.FS, dir string) []string {
	t.Helper()
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if _, ok := parseSegmentName(e.Name(), suffix); ok {
				names = append(names, e.Name())
			}
		}
	}
	return names
}

// checkRestarted fails unless l is empty at offset: start, end, high
// watermark and synced offset, one segment, no epochs, reads below it
// out of range.
func checkRestarted(t testing.TB, l *Log, offset int64) {
	t.Helper()
	if s, e, hw, synced := l.StartOffset(), l.EndOffset(), l.HighWatermark(), l.SyncedOffset(); s != offset || e != offset || hw != offset || synced != offset {
		t.Fatalf("start %d end %d hw %d synced %d, want all %d", s, e, hw, synced, offset)
	}
	if segs := l.Segments(); !slices.Equal(segs, []int64{offset}) {
		t.Fatalf("segments %v, want [%d]", segs, offset)
	}
	if len(l.Epochs()) != 0 {
		t.Fatalf("epochs %v, want none", l.Epochs())
	}
	for _, below := range []int64{0, offset - 1} {
		if _, err := l.Read(below, 1000, offset); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read at %d below the log start %d: %v", below, offset, err)
		}
	}
	if sec, err := l.Read(offset, 1000, offset); err != nil || sec.Size != 0 {
		t.Fatalf("read at the log start of an empty log: %+v, %v", sec, err)
	}
}

// A log restarted past its end is empty there, takes appends and
// replicated batches at the new offsets, and reopens as such; nothing of
// the old log is left in its directory.
func TestStartAt(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := testConfig()
		l := openLog(t, fsys, dir, cfg, nil)
		for i := range 40 {
			if _, err := l.Append(makeBatch(t, fmt.Sprint(i), 5, 0, 0), AppendOptions{LeaderEpoch: int32(i / 10), Durable: true}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.DeleteRecords(30); err != nil {
			t.Fatal(err)
		}
		before := fmt.Sprint(l.StartOffset(), l.EndOffset(), l.Segments(), l.Epochs())
		if err := l.StartAt(199); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("StartAt below the log end: %v", err)
		}
		if after := fmt.Sprint(l.StartOffset(), l.EndOffset(), l.Segments(), l.Epochs()); after != before {
			t.Fatalf("a refused StartAt changed the log: %s, was %s", after, before)
		}

		if err := l.StartAt(1000); err != nil {
			t.Fatal(err)
		}
		checkRestarted(t, l, 1000)
		if files := segmentFiles(t, fsys, dir); !slices.Equal(files, []string{segmentName(1000, logSuffix)}) {
			t.Fatalf("segment files after StartAt: %v", files)
		}
		if b, err := vfs.ReadFile(fsys, filepath.Join(dir, checkpointFile)); err != nil || !bytes.Contains(b, []byte("log-start-offset 1000\n")) ||
			bytes.Contains(b, []byte("restart-at")) {
			t.Fatalf("checkpoint after StartAt: %q, %v", b, err)
		}
		l.Close()
		l = openLog(t, fsys, dir, cfg, nil)
		checkRestarted(t, l, 1000)

		res, err := l.Append(makeBatch(t, "new", 3, 0, 0), AppendOptions{LeaderEpoch: 7, Durable: true})
		if err != nil || res.BaseOffset != 1000 || res.LogStart != 1000 {
			t.Fatalf("append after StartAt: %+v, %v", res, err)
		}
		// A leader's batch past the end (the leader compacted what lies
		// between).
		if _, err := l.AppendReplicated(replicatedBatch(t, "rep", 2, 1005, 8)); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		wantEpochs := fmt.Sprint([]EpochEntry{{7, 1000}, {8, 1005}})
		check := func(l *Log) {
			t.Helper()
			if fmt.Sprint(l.Epochs()) != wantEpochs || l.StartOffset() != 1000 || l.EndOffset() != 1007 {
				t.Fatalf("start %d end %d epochs %v", l.StartOffset(), l.EndOffset(), l.Epochs())
			}
			var got []string
			for _, r := range readAll(t, l, 1000) {
				got = append(got, fmt.Sprint(r.offset, " ", r.key))
			}
			want := []string{"1000 k-new-0", "1001 k-new-1", "1002 k-new-2", "1005 k-rep-0", "1006 k-rep-1"}
			if !slices.Equal(got, want) {
				t.Fatalf("records %v, want %v", got, want)
			}
		}
		check(l)
		l.Close()
		l = openLog(t, fsys, dir, cfg, nil)
		defer l.Close()
		check(l)
	})
}

// A restart at the log end itself, whose empty active segment already
// bears that offset's name, replaces that segment too.
func TestStartAtLogEnd(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openLog(t, fsys, dir, testConfig(), nil)
		for i := range 10 {
			if _, err := l.Append(makeBatch(t, fmt.Sprint(i), 5, 0, 0), AppendOptions{LeaderEpoch: 2, Durable: true}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		if segs := l.Segments(); segs[len(segs)-1] != 50 {
			t.Fatalf("segments %v: the active one should start at the end, 50", segs)
		}
		if err := l.StartAt(50); err != nil {
			t.Fatal(err)
		}
		checkRestarted(t, l, 50)
		mustAppend(t, l, makeBatch(t, "new", 2, 0, 0))
		l.Close()
		l = openLog(t, fsys, dir, testConfig(), nil)
		defer l.Close()
		if got := readAll(t, l, 50); len(got) != 2 || got[0].key != "k-new-0" || l.StartOffset() != 50 {
			t.Fatalf("after reopening: start %d, records %v", l.StartOffset(), got)
		}
	})
}

// crashRecorder takes a power-loss clone of mem before every operation
// on the file system while it is on.
type crashRecorder struct {
	mem *vfs.MemFS
	rng *rand.Rand // nil: clones keep exactly what was synced

	mu     sync.Mutex
	on     bool
	clones []*vfs.MemFS
}

func (c *crashRecorder) inject(vfs.Op, string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.on {
		c.clones = append(c.clones, c.mem.CrashClone(vfs.CrashOptions{Rand: c.rng}))
	}
	return nil
}

func (c *crashRecorder) record(on bool) {
	c.mu.Lock()
	c.on = on
	c.mu.Unlock()
}

// restartPending reports whether the checkpoint in dir has StartAt's mark.
func restartPending(t testing.TB, fsys vfs.FS, dir string) bool {
	t.Helper()
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, checkpointFile))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte("restart-at "))
}

// A power loss at any point of StartAt leaves the old log (as of its last
// sync) or the new empty one, never a mix: crash clones are taken before
// every file operation StartAt makes, some keeping random parts of what
// was not synced. Each clone is opened, checked, appended to, and opened
// again.
func TestStartAtPowerLoss(t *testing.T) {
	const dir, restartAt = "/p", 1000
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rec := &crashRecorder{mem: vfs.NewMem()}
			if seed > 0 {
				rec.rng = rand.New(rand.NewPCG(seed, 7))
			}
			cfg := testConfig()
			cfg.RetentionTime = -1
			l := openLog(t, vfs.NewErrorFS(rec.mem, rec.inject), dir, cfg, nil)
			for i := range 30 {
				if _, err := l.Append(makeBatch(t, fmt.Sprint(i), 5, 0, 0), AppendOptions{LeaderEpoch: int32(i / 10), Durable: true}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.DeleteRecords(12); err != nil {
				t.Fatal(err)
			}
			for i := 30; i < 35; i++ { // not synced: a power loss may take them
				if _, err := l.Append(makeBatch(t, fmt.Sprint(i), 5, 0, 0), AppendOptions{LeaderEpoch: 2}); err != nil {
					t.Fatal(err)
				}
			}
			oldStart, synced := l.StartOffset(), l.SyncedOffset()
			oldRecs := readAll(t, l, oldStart)
			oldEpochs := l.Epochs()

			rec.record(true)
			if err := l.StartAt(restartAt); err != nil {
				t.Fatal(err)
			}
			rec.record(false)
			rec.clones = append(rec.clones, rec.mem.CrashClone(vfs.CrashOptions{Rand: rec.rng}))
			l.Close()

			var olds, news, pending int
			for i, crashed := range rec.clones {
				if restartPending(t, crashed, dir) {
					pending++
				}
				l := openLog(t, crashed, dir, cfg, nil)
				want := int64(-1) // where an append must land
				switch start := l.StartOffset(); start {
				case restartAt:
					news++
					checkRestarted(t, l, restartAt)
					for _, name := range segmentFiles(t, crashed, dir) {
						if fileBase(t, name) < restartAt {
							t.Fatalf("clone %d: %s of the old log is left", i, name)
						}
					}
					want = restartAt
				case oldStart:
					olds++
					got := readAll(t, l, oldStart)
					if int64(len(got)) < synced-oldStart || len(got) > len(oldRecs) ||
						fmt.Sprint(got) != fmt.Sprint(oldRecs[:len(got)]) {
						t.Fatalf("clone %d: the old log holds %d records, not a synced prefix of its %d", i, len(got), len(oldRecs))
					}
					// Those of the batches it kept.
					wantEpochs := slices.DeleteFunc(slices.Clone(oldEpochs), func(e EpochEntry) bool { return e.StartOffset >= l.EndOffset() })
					if fmt.Sprint(l.Epochs()) != fmt.Sprint(wantEpochs) {
						t.Fatalf("clone %d: old log's epochs %v, want %v", i, l.Epochs(), wantEpochs)
					}
					want = l.EndOffset()
				default:
					t.Fatalf("clone %d: log start %d, neither the old %d nor the new %d", i, start, oldStart, restartAt)
				}
				res, err := l.Append(makeBatch(t, "after", 2, 0, 0), AppendOptions{LeaderEpoch: 9, Durable: true})
				if err != nil || res.BaseOffset != want {
					t.Fatalf("clone %d: append after the crash: %+v, %v, want offset %d", i, res, err, want)
				}
				l.Close()
				l = openLog(t, crashed, dir, cfg, nil)
				if got := readAll(t, l, want); len(got) != 2 || got[0].key != "k-after-0" || l.StartOffset() > want {
					t.Fatalf("clone %d reopened: start %d, records at %d: %v", i, l.StartOffset(), want, got)
				}
				l.Close()
			}
			t.Logf("%d clones: %d old, %d new, %d with StartAt unfinished", len(rec.clones), olds, news, pending)
			if olds == 0 || news == 0 || pending == 0 {
				t.Fatalf("of %d clones: %d old, %d new, %d with StartAt unfinished; every kind should occur", len(rec.clones), olds, news, pending)
			}
		})
	}
}

// fileBase is the base offset a segment or index file is named by.
func fileBase(t testing.TB, name string) int64 {
	t.Helper()
	digits, _, _ := strings.Cut(name, ".")
	base, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return base
}

// A log whose syncs went to the manager's journal: a power loss during
// StartAt leaves the old log, with what the journal held of it, or the
// new one, and no journaled batch of the old log ever reaches the new
// one; the new log's own journaled batches are replayed.
func TestStartAtJournalPowerLoss(t *testing.T) {
	rec := &crashRecorder{mem: vfs.NewMem()}
	const n = testSyncAllMin
	m, logs := openManagerLogs(t, vfs.NewErrorFS(rec.mem, rec.inject), n)
	defer m.Close()
	for round := range 3 {
		syncAll(t, appendEach(t, logs, fmt.Sprint("old", round, "-"))) // journaled: a round of many logs
	}
	oldKeys := fmt.Sprint(keysOf(t, logs[0]))
	if logs[0].fileSynced.Load() != 0 {
		t.Fatalf("the old log's batches are in its file (synced to %d), not only in the journal", logs[0].fileSynced.Load())
	}

	rec.record(true)
	if err := logs[0].StartAt(1000); err != nil {
		t.Fatal(err)
	}
	rec.record(false)
	restarted := len(rec.clones)
	syncAll(t, appendEach(t, logs, "new")) // log 0's first batch at 1000, journaled
	rec.clones = append(rec.clones, rec.mem.CrashClone(vfs.CrashOptions{}))

	var olds, news int
	for i, crashed := range rec.clones {
		m, again := openManagerLogs(t, crashed, n)
		l := again[0]
		var keys []string
		for _, r := range readAll(t, l, l.StartOffset()) {
			keys = append(keys, r.key)
		}
		switch {
		case i == restarted:
			if l.StartOffset() != 1000 || fmt.Sprint(keys) != "[k-new0-0 k-new0-1]" {
				t.Fatalf("after the new log's journaled round: start %d, keys %s", l.StartOffset(), keys)
			}
		case l.StartOffset() == 1000:
			news++
			checkRestarted(t, l, 1000)
		case l.StartOffset() == 0 && fmt.Sprint(keys) == oldKeys:
			olds++
		default:
			t.Fatalf("clone %d: start %d end %d, keys %s; want the old log (%s) or an empty one at 1000",
				i, l.StartOffset(), l.EndOffset(), keys, oldKeys)
		}
		for j, other := range again[1:] {
			if got := len(keysOf(t, other)); got < 6 {
				t.Fatalf("clone %d: log %d kept %d records of 6", i, j+1, got)
			}
		}
		m.Close()
	}
	t.Logf("%d clones: %d old, %d new", len(rec.clones), olds, news)
	if olds == 0 || news == 0 {
		t.Fatalf("of %d clones: %d old, %d new; both should occur", len(rec.clones), olds, news)
	}
}

// blockingSync holds the fsync of files named with frag until released.
type blockingSync struct {
	frag    string
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingSync) inject(op vfs.Op, name string) error {
	if op == vfs.OpSync && strings.HasSuffix(name, b.frag) {
		b.once.Do(func() {
			close(b.arrived)
			<-b.release
		})
	}
	return nil
}

// An fsync of the old active segment that was under way when StartAt
// removed it (and closed it: file.delete.delay.ms is 0) fails on the
// closed file; that fails nothing, since the log no longer holds it.
func TestSyncOfARemovedSegmentFailsNothing(t *testing.T) {
	block := &blockingSync{frag: segmentName(0, logSuffix), arrived: make(chan struct{}), release: make(chan struct{})}
	l := openLog(t, vfs.NewErrorFS(vfs.NewMem(), block.inject), "/p", testConfig(), nil)
	defer l.Close()
	res, err := l.Append(makeBatch(t, "old", 2, 0, 0), AppendOptions{LeaderEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	synced := make(chan error, 1)
	go func() { synced <- l.Sync(res.LastOffset + 1) }()
	<-block.arrived
	if err := l.StartAt(100); err != nil {
		t.Fatal(err)
	}
	close(block.release)
	if err := <-synced; err != nil {
		t.Fatalf("the sync under way: %v", err)
	}
	if _, err := l.Append(makeBatch(t, "new", 1, 0, 0), AppendOptions{LeaderEpoch: -1, Durable: true}); err != nil {
		t.Fatalf("append after StartAt: %v", err)
	}
	if got := l.SyncedOffset(); got != 101 {
		t.Fatalf("synced offset %d, want 101", got)
	}
}

// A leader's log start may fall inside a batch, which it sends whole: a
// log restarted at that start takes the batch as its first, restarting at
// the batch's base and keeping its start, as Kafka's follower does; a
// batch wholly below the start, or one reaching into a log that holds
// data, is refused.
func TestStartAtInsideABatch(t *testing.T) {
	fileSystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openLog(t, fsys, dir, testConfig(), nil)
		mustAppend(t, l, makeBatch(t, "old", 5, 0, 0))
		if err := l.StartAt(1003); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendReplicated(replicatedBatch(t, "below", 3, 1000, 4)); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("a batch wholly below the log start: %v", err)
		}
		if _, err := l.AppendReplicated(replicatedBatch(t, "rep", 5, 1000, 4)); err != nil {
			t.Fatal(err)
		}
		check := func(l *Log) {
			t.Helper()
			if l.StartOffset() != 1003 || l.EndOffset() != 1005 || !slices.Equal(l.Segments(), []int64{1000}) ||
				fmt.Sprint(l.Epochs()) != fmt.Sprint([]EpochEntry{{4, 1000}}) {
				t.Fatalf("start %d end %d segments %v epochs %v", l.StartOffset(), l.EndOffset(), l.Segments(), l.Epochs())
			}
			if _, err := l.Read(1002, 1000, 1005); !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("read below the log start: %v", err)
			}
			got := readAll(t, l, 1003)
			if len(got) != 2 || got[0].key != "k-rep-3" || got[1].key != "k-rep-4" {
				t.Fatalf("records from the log start: %v", got)
			}
		}
		check(l)
		if _, err := l.AppendReplicated(replicatedBatch(t, "again", 5, 1003, 4)); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("a batch reaching into a log that holds data: %v", err)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		l.Close()
		l = openLog(t, fsys, dir, testConfig(), nil)
		defer l.Close()
		check(l)
	})
}

// A power loss while a restarted log takes a first batch that holds its
// start leaves it empty at its start, empty at the batch's base (its start
// moved back there: nothing below it is readable yet), or holding the
// batch; never anything of the old log.
func TestStartAtInsideABatchPowerLoss(t *testing.T) {
	const dir = "/p"
	rec := &crashRecorder{mem: vfs.NewMem()}
	l := openLog(t, vfs.NewErrorFS(rec.mem, rec.inject), dir, testConfig(), nil)
	for i := range 20 {
		mustAppend(t, l, makeBatch(t, fmt.Sprint("old", i), 5, 0, 0))
	}
	if err := l.StartAt(1003); err != nil {
		t.Fatal(err)
	}
	rec.record(true)
	if _, err := l.AppendReplicated(replicatedBatch(t, "rep", 5, 1000, 4)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	rec.record(false)
	rec.clones = append(rec.clones, rec.mem.CrashClone(vfs.CrashOptions{}))
	l.Close()
	seen := map[string]int{}
	for i, crashed := range rec.clones {
		l := openLog(t, crashed, dir, testConfig(), nil)
		state := fmt.Sprint(l.StartOffset(), " ", l.EndOffset(), " ", l.Segments())
		switch state {
		case "1003 1003 [1003]", "1000 1000 [1000]":
		case "1003 1005 [1000]":
			if got := readAll(t, l, 1003); len(got) != 2 || got[0].key != "k-rep-3" {
				t.Fatalf("clone %d: records %v", i, got)
			}
		default:
			t.Fatalf("clone %d: start, end and segments %s", i, state)
		}
		for _, name := range segmentFiles(t, crashed, dir) {
			if fileBase(t, name) < 1000 {
				t.Fatalf("clone %d: %s of the old log is left", i, name)
			}
		}
		seen[state]++
		l.Close()
	}
	t.Logf("%d clones: %v", len(rec.clones), seen)
	if len(seen) != 3 {
		t.Fatalf("clones by state %v: each should occur", seen)
	}
}
