package log

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// syncCounts counts the segment fsyncs and file system syncs of an error FS,
// and can fail either.
type syncCounts struct {
	fileSyncs, allSyncs, journalSyncs atomic.Int64
	failAll                           atomic.Int64 // file system syncs left to fail
	failJournal                       atomic.Int64 // journal syncs left to fail
	failFile                          atomic.Value // a segment path fragment whose fsyncs fail
	delay                             time.Duration
}

func (c *syncCounts) inject(op vfs.Op, name string) error {
	switch {
	case op == vfs.OpSync && strings.HasSuffix(name, logSuffix):
		c.fileSyncs.Add(1)
		time.Sleep(c.delay)
		if frag, _ := c.failFile.Load().(string); frag != "" && strings.Contains(name, frag) {
			return syscall.EIO
		}
	case op == vfs.OpSync && strings.HasSuffix(name, journalSuffix):
		c.journalSyncs.Add(1)
		time.Sleep(c.delay)
		if c.failJournal.Add(-1) >= 0 {
			return syscall.EIO
		}
	case op == vfs.OpSyncAll:
		c.allSyncs.Add(1)
		time.Sleep(c.delay)
		if c.failAll.Add(-1) >= 0 {
			return syscall.EIO
		}
	}
	return nil
}

// testSyncAllMin keeps the tests' rounds small.
const testSyncAllMin = 4

func openManagerLogs(t *testing.T, fsys vfs.FS, n int) (*Manager, []*Log) {
	t.Helper()
	m, err := NewManager("/data", ManagerOptions{FS: fsys, SyncAllMin: testSyncAllMin})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 30
	logs := make([]*Log, n)
	for i := range logs {
		if logs[i], err = m.Open(model.TopicPartition{Topic: "t", Partition: int32(i)}, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return m, logs
}

// appendEach appends one batch of two records to every log without waiting
// for durability, and returns the targets that make them durable.
func appendEach(t *testing.T, logs []*Log, tag string) []SyncTarget {
	t.Helper()
	targets := make([]SyncTarget, len(logs))
	for i, l := range logs {
		res, err := l.Append(makeBatch(t, fmt.Sprint(tag, i), 2, 0, 0), AppendOptions{LeaderEpoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = SyncTarget{l, res.LastOffset + 1}
	}
	return targets
}

// survivors opens every partition of a power-loss clone of mem through a
// manager (which replays its journal) and counts its records.
func survivors(t *testing.T, mem *vfs.MemFS, n int) []int {
	t.Helper()
	return survivorsOf(t, mem.CrashClone(vfs.CrashOptions{}), n)
}

func survivorsOf(t *testing.T, crashed vfs.FS, n int) []int {
	t.Helper()
	m, logs := openManagerLogs(t, crashed, n)
	defer m.Close()
	out := make([]int, n)
	for i, l := range logs {
		out[i] = len(readAll(t, l, 0))
	}
	return out
}

// TestSyncManyIsOneJournalWrite checks that many logs of a manager are
// made durable by one journal write and its fsync, not an fsync each, and
// that what it acknowledged survives a power loss that keeps nothing of
// their segments but what was synced; a few logs fsync each.
func TestSyncManyIsOneJournalWrite(t *testing.T) {
	mem := vfs.NewMem()
	var c syncCounts
	m, logs := openManagerLogs(t, vfs.NewErrorFS(mem, c.inject), 50)
	defer m.Close()

	for i, err := range SyncMany(appendEach(t, logs, "a")) {
		if err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
	}
	if f, a, j := c.fileSyncs.Load(), c.allSyncs.Load(), c.journalSyncs.Load(); f != 0 || a != 0 || j != 1 {
		t.Fatalf("50 logs: %d fsyncs, %d file system syncs and %d journal syncs, want 0, 0 and 1", f, a, j)
	}
	for i, n := range survivors(t, mem, len(logs)) {
		if n != 2 {
			t.Fatalf("log %d kept %d records of 2 acknowledged", i, n)
		}
	}

	few := logs[:testSyncAllMin-1]
	for _, err := range SyncMany(appendEach(t, few, "b")) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if f, j := c.fileSyncs.Load(), c.journalSyncs.Load(); f != int64(len(few)) || j != 1 {
		t.Fatalf("%d logs: %d fsyncs and %d journal syncs, want %d and none", len(few), f, j-1, len(few))
	}
	for i, n := range survivors(t, mem, len(few)) {
		if n != 4 {
			t.Fatalf("log %d kept %d records of 4 acknowledged", i, n)
		}
	}
}

// TestLogsShareSyncRounds checks that durable appends to different logs of
// a manager, arriving while a sync runs, are covered together by the next.
func TestLogsShareSyncRounds(t *testing.T) {
	mem := vfs.NewMem()
	c := syncCounts{delay: 2 * time.Millisecond} // appends pile up behind a slow disk
	const writers, perWriter = 16, 20
	m, logs := openManagerLogs(t, vfs.NewErrorFS(mem, c.inject), writers)
	defer m.Close()
	var wg sync.WaitGroup
	for w, l := range logs {
		wg.Go(func() {
			for i := range perWriter {
				if _, err := l.Append(makeBatch(t, fmt.Sprint(w, "-", i), 2, 0, 0), AppendOptions{LeaderEpoch: -1, Durable: true}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	appends := int64(writers * perWriter)
	syncs := c.fileSyncs.Load() + c.journalSyncs.Load()
	t.Logf("%d appends: %d fsyncs, %d journal syncs", appends, c.fileSyncs.Load(), c.journalSyncs.Load())
	if syncs > appends/4 || c.journalSyncs.Load() == 0 {
		t.Fatalf("%d syncs (%d of the journal) for %d concurrent durable appends to %d logs: no shared rounds",
			syncs, c.journalSyncs.Load(), appends, writers)
	}
	for i, n := range survivors(t, mem, writers) {
		if n != perWriter*2 {
			t.Fatalf("log %d kept %d records of %d acknowledged", i, n, perWriter*2)
		}
	}
}

// TestFileSystemSyncFailureFallsBackToFsyncs checks that when a journal
// write and then a file system sync fail, each log fsyncs its own files
// from then on, so that a lost write is reported to the log that lost it.
func TestFileSystemSyncFailureFallsBackToFsyncs(t *testing.T) {
	mem := vfs.NewMem()
	var c syncCounts
	c.failJournal.Store(1)
	c.failAll.Store(1)
	m, logs := openManagerLogs(t, vfs.NewErrorFS(mem, c.inject), 10)
	defer m.Close()

	for i, err := range SyncMany(appendEach(t, logs, "a")) {
		if err != nil {
			t.Fatalf("log %d: %v after a failed file system sync and its fsyncs", i, err)
		}
	}
	if f := c.fileSyncs.Load(); f != int64(len(logs)) {
		t.Fatalf("%d fsyncs after a failed file system sync, want %d", f, len(logs))
	}

	c.failFile.Store("t-3/")
	errs := SyncMany(appendEach(t, logs, "b"))
	for i, err := range errs {
		switch {
		case i == 3 && !errors.Is(err, ErrStorage):
			t.Fatalf("the log whose fsync failed: %v, want ErrStorage", err)
		case i != 3 && err != nil:
			t.Fatalf("log %d: %v", i, err)
		}
	}
	if a, j := c.allSyncs.Load(), c.journalSyncs.Load(); a != 1 || j != 1 {
		t.Fatalf("%d file system syncs and %d journal syncs, want none after the failed ones", a-1, j-1)
	}
	if _, err := logs[3].Append(makeBatch(t, "c", 1, 0, 0), AppendOptions{LeaderEpoch: -1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("append to a log whose fsync failed: %v, want ErrStorage", err)
	}
}

// TestCloseWaitsForSharedSync checks that closing a log while its shared
// sync runs waits for the sync, neither failing the log nor closing the
// file under it.
func TestCloseWaitsForSharedSync(t *testing.T) {
	mem := vfs.NewMem()
	var (
		first   atomic.Bool
		started = make(chan struct{})
		release = make(chan struct{})
	)
	fsys := vfs.NewErrorFS(mem, func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.Contains(name, "t-0/") && strings.HasSuffix(name, logSuffix) && first.CompareAndSwap(false, true) {
			close(started)
			<-release // the disk is slow with the first fsync
		}
		return nil
	})
	m, logs := openManagerLogs(t, fsys, 2)
	defer m.Close()
	targets := appendEach(t, logs, "a")
	synced := make(chan []error)
	go func() { synced <- SyncMany(targets) }()
	<-started
	closed := make(chan error)
	go func() { closed <- logs[0].Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a sync of the log was running", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	for i, err := range <-synced {
		if err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatalf("close after a sync: %v", err)
	}
	if err := logs[0].Sync(logs[0].EndOffset() + 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("sync of a closed log: %v, want ErrClosed", err)
	}
}
