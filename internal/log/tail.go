package log

import (
	"io"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/log/vfs"
)

// A log whose syncs go to the journal keeps the newest bytes of its active
// segment in memory, and writes them to the file in pieces of up to
// tailBufferBytes. Journal rounds copy each log's new bytes from memory,
// and a thousand partitions taking a batch of a few hundred bytes each per
// round cost tens of writes a second instead of tens of thousands of
// writes and reads: on a 2-core machine those system calls were half of
// the broker's CPU.
//
// Nothing acknowledged depends on the file holding these bytes: the
// journal record that made them durable does (journal.go), until the
// journal file is retired, and the retirement writes every tail before it
// syncs the file system. What a kill -9 takes with the memory was never
// synced, so never acknowledged nor below the high watermark.
//
// Logs that fsync their own segments (rounds of a few logs) write through:
// their fsync would write the tail at once anyway. Logs that do not fsync
// every append also write through, so that a process crash leaves their
// acknowledged bytes in the page cache, as Kafka's would be.

// tailBufferBytes is the largest tail a log keeps in memory; a batch of
// half that or more is written directly. A thousand busy partitions hold
// 16 MiB.
const tailBufferBytes = 16 << 10

// tailBuffers keeps the buffers of logs that went idle for the next.
var tailBuffers = sync.Pool{New: func() any { return new([tailBufferBytes]byte) }}

// defaultTailBudget is how much memory the tails of a manager's logs may
// hold together. A log that finds it spent writes through.
const defaultTailBudget = 64 << 20

// tailBudget counts the buffers the tails of a manager's logs hold.
type tailBudget struct {
	held atomic.Int64
	max  int64
}

func (b *tailBudget) take(n int64) bool {
	if b.held.Add(n) > b.max {
		b.held.Add(-n)
		return false
	}
	return true
}

func (b *tailBudget) give(n int64) { b.held.Add(-n) }

// tailFile is an active segment's file with its tail in memory. Reads see
// the tail; Sync, Stat and Flush write it first. Close drops it, as a crash
// would: a clean close syncs first.
type tailFile struct {
	vfs.File
	budget *tailBudget

	mu      lockrank.Mutex[lockrank.Segment]
	written int64  // the file's length
	buf     []byte // the bytes from written on; nil holds no budget
}

func newTailFile(f vfs.File, size int64, budget *tailBudget) *tailFile {
	return &tailFile{File: f, budget: budget, written: size}
}

// appendTail adds p at off, the end of the file and its tail: in memory
// when it fits, in the file otherwise.
func (t *tailFile) appendTail(p []byte, off int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if off != t.written+int64(len(t.buf)) || len(p) >= tailBufferBytes/2 {
		_, err := t.writeThroughLocked(p, off)
		return err
	}
	if t.buf == nil {
		if !t.budget.take(tailBufferBytes) {
			_, err := t.writeThroughLocked(p, off)
			return err
		}
		t.buf = tailBuffers.Get().(*[tailBufferBytes]byte)[:0]
	}
	if len(t.buf)+len(p) > cap(t.buf) {
		if err := t.flushLocked(); err != nil {
			return err
		}
	}
	t.buf = append(t.buf, p...)
	return nil
}

// writeThroughLocked writes the tail, then p at off, to the file.
func (t *tailFile) writeThroughLocked(p []byte, off int64) (int, error) {
	if err := t.flushLocked(); err != nil {
		return 0, err
	}
	n, err := t.File.WriteAt(p, off)
	t.written = max(t.written, off+int64(n))
	return n, err
}

// flushLocked writes the tail to the file, keeping the buffer.
func (t *tailFile) flushLocked() error {
	if len(t.buf) == 0 {
		return nil
	}
	n, err := t.File.WriteAt(t.buf, t.written)
	t.written += int64(n)
	t.buf = t.buf[:copy(t.buf, t.buf[n:])]
	return err
}

// Flush writes the tail to the file and gives its buffer back.
func (t *tailFile) Flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.flushLocked(); err != nil {
		return err
	}
	t.releaseLocked()
	return nil
}

func (t *tailFile) releaseLocked() {
	if t.buf != nil {
		t.budget.give(int64(cap(t.buf)))
		tailBuffers.Put((*[tailBufferBytes]byte)(t.buf[:tailBufferBytes]))
		t.buf = nil
	}
}

// writeOut writes the tail to the file, for a sync of the file system. A
// log that appended nothing since its tail was last written gives its
// buffer back; a busy one keeps it.
func (t *tailFile) writeOut() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) == 0 {
		t.releaseLocked()
		return nil
	}
	return t.flushLocked()
}

// sendfileMin is the size of a section from which writing the tail, so
// that sendfile can send the section from the file, costs less than
// copying it.
const sendfileMin = 64 << 10

// sectionFile returns what a reader of [pos, end) reads: the file itself
// when it holds those bytes, or when the section is large enough for
// sendfile to pay for writing the tail first; otherwise the tail file,
// which the reader copies from. Followers and consumers at the log end
// read the few newest batches, and copying them costs less than writing
// them to the file at each fetch.
func (t *tailFile) sectionFile(pos, end int64) (vfs.File, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if end <= t.written {
		return t.File, nil
	}
	if end-pos < sendfileMin {
		return t, nil
	}
	if err := t.flushLocked(); err != nil {
		return nil, err
	}
	return t.File, nil
}

func (t *tailFile) WriteAt(p []byte, off int64) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.writeThroughLocked(p, off)
}

// Write is not used on segment files; it keeps the embedded file's from
// going around the tail.
func (t *tailFile) Write(p []byte) (int, error) {
	if err := t.Flush(); err != nil {
		return 0, err
	}
	return t.File.Write(p)
}

func (t *tailFile) ReadAt(p []byte, off int64) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	if off < t.written {
		var err error
		n, err = t.File.ReadAt(p[:min(int64(len(p)), t.written-off)], off)
		if err != nil && err != io.EOF {
			return n, err
		}
		if n < len(p) && off+int64(n) < t.written {
			return n, io.EOF // the file is shorter than written: truncated under us
		}
	}
	if n < len(p) {
		if at := off + int64(n) - t.written; at >= 0 && at < int64(len(t.buf)) {
			n += copy(p[n:], t.buf[at:])
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (t *tailFile) Sync() error {
	if err := t.Flush(); err != nil {
		return err
	}
	return t.File.Sync()
}

func (t *tailFile) Truncate(size int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if size >= t.written && size <= t.written+int64(len(t.buf)) {
		t.buf = t.buf[:size-t.written]
		return nil
	}
	if size > t.written {
		if err := t.flushLocked(); err != nil {
			return err
		}
	} else {
		t.buf = t.buf[:0]
	}
	if err := t.File.Truncate(size); err != nil {
		return err
	}
	t.written = size
	return nil
}

func (t *tailFile) Stat() (fs.FileInfo, error) {
	if err := t.Flush(); err != nil {
		return nil, err
	}
	return t.File.Stat()
}

// Close drops the tail: a clean close has synced it.
func (t *tailFile) Close() error {
	t.mu.Lock()
	t.buf = t.buf[:0]
	t.releaseLocked()
	t.mu.Unlock()
	return t.File.Close()
}

// sectionFile returns what a reader of [pos, end) of f reads (see
// tailFile.sectionFile).
func sectionFile(f vfs.File, pos, end int64) (vfs.File, error) {
	if t, ok := f.(*tailFile); ok {
		return t.sectionFile(pos, end)
	}
	return f, nil
}

// untailed returns the file under a tail. Only for a file whose tail is
// empty: a log that writes through (writeback.go).
func untailed(f vfs.File) vfs.File {
	if t, ok := f.(*tailFile); ok {
		return t.File
	}
	return f
}
