package log

import (
	"fmt"
	"testing"

	"github.com/strandlog/strand/internal/log/vfs"
)

// A mirror's source epochs: kept beside the log as batches of new source
// epochs are appended (before them), durable at once, cut with the log,
// emptied by a restart, and dropped at open where a crash lost the append
// they were written ahead of.
func TestSourceEpochs(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig()
	cfg.RetentionTime = -1 // the batches' timestamps are 0
	l := openLog(t, mem, "/p", cfg, nil)
	mirror := func(l *Log, base int64, n int, source ...EpochEntry) {
		t.Helper()
		if _, err := l.AppendMirrored(replicatedBatch(t, fmt.Sprint(base), n, base, 3), source); err != nil {
			t.Fatal(err)
		}
	}
	entries := func(l *Log, want string) {
		t.Helper()
		if got := fmt.Sprint(l.SourceEpochs()); got != want {
			t.Fatalf("source epochs %s, want %s", got, want)
		}
	}
	mirror(l, 0, 5, EpochEntry{1, 0})
	mirror(l, 5, 5, EpochEntry{1, 5}) // the same epoch: nothing new
	mirror(l, 10, 5, EpochEntry{1, 10}, EpochEntry{4, 12})
	entries(l, "[{1 0} {4 12}]")
	if own := fmt.Sprint(l.Epochs()); own != "[{3 0}]" {
		t.Fatalf("the log's own epochs %s, want the mirror's leader's only", own)
	}
	for _, c := range []struct {
		offset int64
		want   int32
	}{{0, 1}, {11, 1}, {12, 4}, {14, 4}, {15, -1}} {
		if got := l.SourceEpochAt(c.offset); got != c.want {
			t.Errorf("SourceEpochAt(%d) = %d, want %d", c.offset, got, c.want)
		}
	}
	for _, c := range []struct {
		asked, epoch int32
		end          int64
	}{{0, -1, -1}, {1, 1, 12}, {3, 1, 12}, {4, 4, 15}, {9, 4, 15}} {
		if epoch, end := l.SourceEpochEnd(c.asked); epoch != c.epoch || end != c.end {
			t.Errorf("SourceEpochEnd(%d) = %d, %d, want %d, %d", c.asked, epoch, end, c.epoch, c.end)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}

	// A power loss takes an append that was not synced, not the entry
	// written ahead of it: open drops the entry.
	mirror(l, 15, 5, EpochEntry{6, 15})
	entries(l, "[{1 0} {4 12} {6 15}]")
	crashed := mem.CrashClone(vfs.CrashOptions{})
	l.Close()
	l = openLog(t, crashed, "/p", cfg, nil)
	if l.EndOffset() != 15 {
		t.Fatalf("end %d after the power loss, want 15", l.EndOffset())
	}
	entries(l, "[{1 0} {4 12}]")

	// A cut takes the entries past it, and the file says so.
	if err := l.Truncate(11); err != nil {
		t.Fatal(err)
	}
	entries(l, "[{1 0}]")
	// An epoch below the latest replaces what no longer holds.
	if err := l.ResetSourceEpochs(7, 8); err != nil {
		t.Fatal(err)
	}
	mirror(l, 11, 2, EpochEntry{5, 11})
	entries(l, "[{5 11}]")
	if l.SourceEpochAt(9) != -1 {
		t.Fatalf("SourceEpochAt(9) = %d, unknown below the entries", l.SourceEpochAt(9))
	}
	mirror(l, 13, 2, EpochEntry{6, 13})
	l.Close()
	l = openLog(t, crashed, "/p", cfg, nil)
	entries(l, "[{5 11} {6 13}]")

	// A follower's append drops them: it does not learn the source's
	// epochs of what it copies.
	if _, err := l.AppendReplicated(replicatedBatch(t, "follower", 1, 15, 4)); err != nil {
		t.Fatal(err)
	}
	entries(l, "[]")
	mirror(l, 16, 2, EpochEntry{7, 16})
	entries(l, "[{7 16}]")

	// A restart empties them.
	if err := l.StartAt(100); err != nil {
		t.Fatal(err)
	}
	entries(l, "[]")
	l.Close()
	l = openLog(t, crashed, "/p", cfg, nil)
	defer l.Close()
	entries(l, "[]")
	if l.SourceEpochAt(100) != -1 {
		t.Fatal("an entry after the restart")
	}
}
