package log

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
)

// TestGroupCommit checks that concurrent durable appends share fsyncs and
// that every one of them is durable when it returns.
func TestGroupCommit(t *testing.T) {
	mem := vfs.NewMem()
	var syncs atomic.Int64
	fsys := vfs.NewErrorFS(mem, func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, logSuffix) {
			syncs.Add(1)
			time.Sleep(2 * time.Millisecond) // a disk's fsync takes time; appends pile up behind it
		}
		return nil
	})
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 30
	l := openLog(t, fsys, "/d", cfg, nil)
	defer l.Close()
	const writers, perWriter = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if _, err := l.Append(makeBatch(t, fmt.Sprint(w, "-", i), 2, 0, 0), AppendOptions{LeaderEpoch: -1, Durable: true}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	appends := int64(writers * perWriter)
	if n := syncs.Load(); n > appends/2 {
		t.Fatalf("%d fsyncs for %d concurrent durable appends: no group commit", n, appends)
	}
	t.Logf("%d fsyncs for %d appends", syncs.Load(), appends)
	if l.SyncedOffset() != l.EndOffset() {
		t.Fatalf("synced %d, end %d", l.SyncedOffset(), l.EndOffset())
	}
	crashed := openLog(t, mem.CrashClone(vfs.CrashOptions{}), "/d", cfg, nil)
	defer crashed.Close()
	if got := len(readAll(t, crashed, 0)); got != int(appends)*2 {
		t.Fatalf("%d records survived a power loss, want %d", got, appends*2)
	}
}

// TestNonDurableAppendsAreNotSynced checks that FlushNever leaves syncing to
// rolls and Close.
func TestNonDurableAppendsAreNotSynced(t *testing.T) {
	var syncs atomic.Int64
	fsys := vfs.NewErrorFS(vfs.NewMem(), func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, logSuffix) {
			syncs.Add(1)
		}
		return nil
	})
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 30
	cfg.FlushPolicy = FlushNever
	l := openLog(t, fsys, "/d", cfg, nil)
	for i := range 20 {
		if _, err := l.Append(makeBatch(t, fmt.Sprint(i), 2, 0, 0), AppendOptions{LeaderEpoch: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if n := syncs.Load(); n != 0 {
		t.Fatalf("%d fsyncs without durability asked", n)
	}
	l.Close()
	if n := syncs.Load(); n != 1 {
		t.Fatalf("%d fsyncs at close, want 1", n)
	}
}
