package log

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// appendJournalRecord encodes a record, as a round lays it out.
func appendJournalRecord(buf []byte, seq int64, dir string, batches []byte) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, journalRecordLen(dir, int64(len(batches))))...)
	copy(buf[start+journalBodyAt(dir):], batches)
	sealJournalRecord(buf[start:], seq, dir)
	return buf
}

// journaledManager opens a manager over n logs on mem and makes one
// journaled round of two records each, tagged "a".
func journaledManager(t *testing.T, n int) (*vfs.MemFS, *Manager, []*Log) {
	t.Helper()
	mem := vfs.NewMem()
	m, logs := openManagerLogs(t, mem, n)
	t.Cleanup(func() { m.Close() })
	syncAll(t, appendEach(t, logs, "a"))
	return mem, m, logs
}

// keysOf is the keys of a log's records, in offset order.
func keysOf(t *testing.T, l *Log) []string {
	t.Helper()
	var keys []string
	for _, r := range readAll(t, l, 0) {
		keys = append(keys, r.key)
	}
	return keys
}

func syncAll(t *testing.T, targets []SyncTarget) {
	t.Helper()
	for i, err := range SyncMany(targets) {
		if err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
	}
}

// crashedLogKeys opens the logs of a power-loss clone of mem through a
// manager and returns each one's keys.
func crashedLogKeys(t *testing.T, crashed vfs.FS, n int) [][]string {
	t.Helper()
	m, logs := openManagerLogs(t, crashed, n)
	defer m.Close()
	out := make([][]string, n)
	for i, l := range logs {
		out[i] = keysOf(t, l)
	}
	return out
}

// TestJournalFenceKeepsTruncatedBatchesOut: a log's journaled batches that
// a truncation removed must not come back, even when the log's newer
// batches were synced in its own file and the journal has nothing newer.
func TestJournalFenceKeepsTruncatedBatchesOut(t *testing.T) {
	mem := vfs.NewMem()
	m, logs := openManagerLogs(t, mem, testSyncAllMin)
	defer m.Close()
	syncAll(t, appendEach(t, logs, "old")) // two records each, journaled

	l := logs[0]
	if err := l.Truncate(0); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, makeBatch(t, "new", 1, 0, 0)) // one log: its own fsync

	got := crashedLogKeys(t, mem.CrashClone(vfs.CrashOptions{}), len(logs))
	if want := []string{"k-new-0"}; fmt.Sprint(got[0]) != fmt.Sprint(want) {
		t.Fatalf("truncated log after a power loss: %v, want %v", got[0], want)
	}
	for i := 1; i < len(logs); i++ {
		if want := []string{fmt.Sprintf("k-old%d-0", i), fmt.Sprintf("k-old%d-1", i)}; fmt.Sprint(got[i]) != fmt.Sprint(want) {
			t.Fatalf("log %d after a power loss: %v, want %v", i, got[i], want)
		}
	}
}

// TestJournalSkipsADeletedLogsRecords: a log made in the directory of a
// deleted one never receives the deleted one's journaled batches.
func TestJournalSkipsADeletedLogsRecords(t *testing.T) {
	mem := vfs.NewMem()
	m, logs := openManagerLogs(t, mem, testSyncAllMin)
	defer m.Close()
	syncAll(t, appendEach(t, logs, "old"))

	tp := model.TopicPartition{Topic: "t", Partition: 0}
	if err := m.Delete(tp); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 30
	if _, err := m.Open(tp, cfg); err != nil {
		t.Fatal(err)
	}
	got := crashedLogKeys(t, mem.CrashClone(vfs.CrashOptions{}), len(logs))
	if len(got[0]) != 0 {
		t.Fatalf("a new log in a deleted one's directory holds %v after a power loss, want nothing", got[0])
	}
	if len(got[1]) != 2 {
		t.Fatalf("log 1 after a power loss: %v, want 2 records", got[1])
	}
}

// TestJournalFilesAreRetired: full journal files are removed once their
// logs are synced, and nothing acknowledged is lost across that.
func TestJournalFilesAreRetired(t *testing.T) {
	defer func(n int64) { journalFileBytes = n }(journalFileBytes)
	journalFileBytes = 2 << 10
	mem := vfs.NewMem()
	m, logs := openManagerLogs(t, mem, 2*testSyncAllMin)
	defer m.Close()
	const rounds = 30
	for r := range rounds {
		syncAll(t, appendEach(t, logs, fmt.Sprint("r", r, "-")))
	}
	dir := filepath.Join("/data", journalDirName)
	var files []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if files, _, err = journalFiles(mem, dir); err != nil {
			t.Fatal(err)
		}
		if len(files) <= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d journal files after %d rounds, want at most 2 once the sealed ones are retired", len(files), rounds)
		}
	}
	for i, n := range survivors(t, mem, len(logs)) {
		if n != 2*rounds {
			t.Fatalf("log %d kept %d records of %d acknowledged", i, n, 2*rounds)
		}
	}
}

// TestJournalTornTail: a record cut short by the crash is ignored, and the
// records before it are replayed.
func TestJournalTornTail(t *testing.T) {
	mem, _, logs := journaledManager(t, testSyncAllMin)

	crashed := mem.CrashClone(vfs.CrashOptions{})
	files, _, err := journalFiles(crashed, filepath.Join("/data", journalDirName))
	if err != nil || len(files) == 0 {
		t.Fatalf("journal files %v: %v", files, err)
	}
	f, err := crashed.OpenFile(files[len(files)-1], os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := appendJournalRecord(nil, 99, "t-1", makeBatch(t, "torn", 2, 0, 0))
	if _, err := f.Write(torn[:len(torn)-5]); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.Close()
	for i, n := range survivorsOf(t, crashed, len(logs)) {
		if n != 2 {
			t.Fatalf("log %d kept %d records of 2 acknowledged", i, n)
		}
	}
}

// TestCleanCloseEmptiesJournal: after a clean close the journal holds no
// records, so the next start opens no log to replay it.
func TestCleanCloseEmptiesJournal(t *testing.T) {
	mem, m, _ := journaledManager(t, testSyncAllMin)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	files, _, err := journalFiles(mem, filepath.Join("/data", journalDirName))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if st, err := mem.Stat(name); err != nil || st.Size() != 0 {
			t.Fatalf("journal file %s after a clean close: %v, %v; want it empty", name, st, err)
		}
	}
	if len(files) != 1 {
		t.Fatalf("journal files after a clean close: %v, want one (holding the sequence number)", files)
	}
}

// TestJournalPowerLossKeepsAcknowledged: rounds of many logs, some of few,
// and a power loss that keeps random parts of what was not synced: every
// acknowledged record is read back, at its offset, with its key.
func TestJournalPowerLossKeepsAcknowledged(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 1))
			mem := vfs.NewMem()
			const n = 3 * testSyncAllMin
			m, logs := openManagerLogs(t, mem, n)
			defer m.Close()
			acked := make([][]string, n)
			for round := range 15 {
				var some []*Log
				var which []int
				for i, l := range logs {
					if r.IntN(3) > 0 {
						some, which = append(some, l), append(which, i)
					}
				}
				if len(some) == 0 {
					continue
				}
				var keys [][]string
				targets := make([]SyncTarget, len(some))
				for k, l := range some {
					tag := fmt.Sprint("r", round, "l", which[k], "-")
					count := 1 + r.IntN(3)
					res, err := l.Append(makeBatch(t, tag, count, 0, 0), AppendOptions{LeaderEpoch: -1})
					if err != nil {
						t.Fatal(err)
					}
					targets[k] = SyncTarget{l, res.LastOffset + 1}
					var ks []string
					for c := range count {
						ks = append(ks, fmt.Sprintf("k-%s-%d", tag, c))
					}
					keys = append(keys, ks)
				}
				syncAll(t, targets)
				for k, i := range which {
					acked[i] = append(acked[i], keys[k]...)
				}
			}
			crashed := mem.CrashClone(vfs.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(seed), 2))})
			for i, got := range crashedLogKeys(t, crashed, n) {
				if len(got) < len(acked[i]) || fmt.Sprint(got[:len(acked[i])]) != fmt.Sprint(acked[i]) {
					t.Fatalf("log %d after a power loss:\n got %v\nwant %v", i, got, acked[i])
				}
			}
		})
	}
}

// TestJournalReplayIsDurable: what a replay restores survives a second
// power loss right after it, before any log is closed; the replay has
// removed the journal files by then.
func TestJournalReplayIsDurable(t *testing.T) {
	mem, _, logs := journaledManager(t, testSyncAllMin)

	once := mem.CrashClone(vfs.CrashOptions{})
	replayed, err := NewManager("/data", ManagerOptions{FS: once, SyncAllMin: testSyncAllMin})
	if err != nil {
		t.Fatal(err)
	}
	defer replayed.Close()
	for i, n := range survivorsOf(t, once.CrashClone(vfs.CrashOptions{}), len(logs)) {
		if n != 2 {
			t.Fatalf("log %d kept %d records of 2 acknowledged after two power losses", i, n)
		}
	}
}

// failingSegmentFS is a memory file system whose op on the segments of
// log t-<partition> (of openManagerLogs) fails with EIO while the returned
// switch is on.
func failingSegmentFS(op vfs.Op, partition int) (*vfs.MemFS, vfs.FS, *atomic.Bool) {
	mem := vfs.NewMem()
	on := new(atomic.Bool)
	dir := fmt.Sprintf("/t-%d/", partition)
	return mem, vfs.NewErrorFS(mem, func(o vfs.Op, name string) error {
		if on.Load() && o == op && strings.Contains(name, dir) && strings.HasSuffix(name, logSuffix) {
			return syscall.EIO
		}
		return nil
	}), on
}

// TestJournalRoundFallsBackForAnUnreadableLog: a log whose new bytes a
// round cannot read back syncs its own file, and its records survive a
// power loss as the others' do.
func TestJournalRoundFallsBackForAnUnreadableLog(t *testing.T) {
	mem, fsys, failReads := failingSegmentFS(vfs.OpRead, 2)
	m, logs := openManagerLogs(t, fsys, testSyncAllMin)
	defer m.Close()
	targets := appendEach(t, logs, "a")
	failReads.Store(true)
	syncAll(t, targets)
	failReads.Store(false)
	for i, n := range survivors(t, mem, len(logs)) {
		if n != 2 {
			t.Fatalf("log %d kept %d records of 2 acknowledged", i, n)
		}
	}
}

// TestFailedCloseKeepsJournal: when a log cannot close cleanly (its last
// fsync fails), the manager reports it and keeps the journal, whose records
// are then all that holds the log's newest batches; the next start replays
// them.
func TestFailedCloseKeepsJournal(t *testing.T) {
	mem, fsys, failing := failingSegmentFS(vfs.OpSync, 1)
	m, logs := openManagerLogs(t, fsys, testSyncAllMin)
	syncAll(t, appendEach(t, logs, "a"))
	syncAll(t, appendEach(t, logs, "b")) // journaled, in memory: not in t-1's file
	failing.Store(true)
	if err := m.Close(); err == nil {
		t.Fatal("Close succeeded though a log's fsync failed")
	}
	for i, keys := range crashedLogKeys(t, mem.CrashClone(vfs.CrashOptions{}), len(logs)) {
		if len(keys) != 4 {
			t.Fatalf("log %d after the failed close and a power loss: %v, want its 4 records", i, keys)
		}
	}
}
