package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/testutil/poll"
)

// bigBatch is one batch of a 64 KiB record.
func bigBatch(t testing.TB) []byte {
	return makeBatchOf(t, []Record{{Value: make([]byte, 64<<10)}}, 0, 0)
}

// writebacks counts what a log hands to the disk early, per file.
type writebacks struct {
	mu    sync.Mutex
	calls map[string]int
	fail  error
}

func (w *writebacks) inject(op vfs.Op, name string) error {
	if op != vfs.OpWriteback {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.calls == nil {
		w.calls = map[string]int{}
	}
	w.calls[name]++
	return w.fail
}

func (w *writebacks) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for name, c := range w.calls {
		if strings.HasSuffix(name, logSuffix) {
			n += c
		}
	}
	return n
}

func TestWritebackWithoutFsync(t *testing.T) {
	for _, policy := range []FlushPolicy{FlushNever, FlushInterval, FlushEveryAppend} {
		t.Run(policy.String(), func(t *testing.T) {
			var wb writebacks
			cfg := testConfig()
			cfg.SegmentBytes = 1 << 30
			cfg.FlushPolicy = policy
			l := openLog(t, vfs.NewErrorFS(vfs.NewMem(), wb.inject), "/d", cfg, nil)
			defer l.Close()
			const chunks = 5
			for range chunks * writebackChunk / (64 << 10) {
				mustAppend(t, l, bigBatch(t))
			}
			if policy == FlushEveryAppend {
				time.Sleep(50 * time.Millisecond)
				if n := wb.total(); n != 0 {
					t.Fatalf("%d writebacks of a log that fsyncs its appends", n)
				}
				return
			}
			// Each chunk is started, and each but the last waited for.
			want := 2*chunks - 1
			poll.Until(t, 5*time.Second, 5*time.Millisecond, func() error {
				if n := wb.total(); n < want {
					return fmt.Errorf("%d writebacks after %d chunks appended, want at least %d", n, chunks, want)
				}
				return nil
			})
		})
	}
}

// A failed writeback may have taken the error a later fsync would report,
// so it fails the log as a failed fsync does.
func TestWritebackErrorFailsTheLog(t *testing.T) {
	wb := writebacks{fail: errors.New("EIO")}
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 30
	cfg.FlushPolicy = FlushNever
	l := openLog(t, vfs.NewErrorFS(vfs.NewMem(), wb.inject), "/d", cfg, nil)
	defer l.Close()
	// Appends fill the first chunk and go on until the failed writeback
	// of that chunk, which runs in the background, fails the log.
	poll.Until(t, 5*time.Second, 5*time.Millisecond, func() error {
		_, err := l.Append(bigBatch(t), AppendOptions{LeaderEpoch: -1})
		if errors.Is(err, ErrStorage) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return errors.New("appends still succeed after a failed writeback")
	})
}

func TestWritebackOfAnOSFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	for _, wait := range []bool{false, true} {
		if err := vfs.Writeback(f, 0, 1<<20, wait); err != nil {
			t.Fatalf("wait %v: %v", wait, err)
		}
	}
	f.Close()
	if err := vfs.Writeback(f, 0, 1<<20, true); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("writeback of a closed file: %v, want os.ErrClosed", err)
	}
}
