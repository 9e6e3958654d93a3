package log

import (
	"errors"
	"os"
	"sync"

	"github.com/strandlog/strand/internal/log/vfs"
)

// Logs that leave fsync to the operating system (flush policy never or
// interval) hand what they append to the disk in the background, a few
// MiB at a time. Left alone, the page cache fills with dirty pages until
// the kernel throttles every writer at once, in bursts: that made
// producing without fsync slower and noisier than with it. Writing back
// early keeps each log's dirty data small. It makes nothing durable and
// moves no recovery point: only fsync does.

// writebackChunk is how many bytes a segment gathers before they are
// handed to the disk.
var writebackChunk int64 = 4 << 20

// writebackQueue bounds the ranges waiting for the writer. When it is
// full a range stays with its log and grows until an append finds room,
// so an append never waits for the disk here.
const writebackQueue = 64

type writebackRange struct {
	log    *Log
	file   vfs.File
	off, n int64
}

var writeback struct {
	once   sync.Once
	ranges chan writebackRange
}

// queueWritebackLocked hands the active segment's bytes not yet handed
// over to the writer once there are writebackChunk of them.
func (l *Log) queueWritebackLocked() {
	s := l.active()
	if l.writebackSeg != s || l.writtenBack > s.size {
		l.writebackSeg, l.writtenBack = s, 0
	}
	if s.size-l.writtenBack < writebackChunk {
		return
	}
	writeback.once.Do(func() {
		writeback.ranges = make(chan writebackRange, writebackQueue)
		go writeBack(writeback.ranges)
	})
	select {
	case writeback.ranges <- writebackRange{log: l, file: untailed(s.file), off: l.writtenBack, n: s.size - l.writtenBack}:
		l.writtenBack = s.size
	default:
	}
}

// writeBack starts each range's writing as it comes and then waits for
// the range before it, so two ranges are on their way to the device at a
// time and no more are dirty than the queue holds.
func writeBack(ranges <-chan writebackRange) {
	var prev writebackRange
	for r := range ranges {
		r.log.writebackDone(vfs.Writeback(r.file, r.off, r.n, false))
		if prev.file != nil {
			prev.log.writebackDone(vfs.Writeback(prev.file, prev.off, prev.n, true))
		}
		prev = r
	}
}

// writebackDone fails the log on a write error: sync_file_range consumes
// the error that a later fsync of the same file would have reported, so
// it must not be dropped. A file closed meanwhile (its segment deleted or
// the log closed) is no error.
func (l *Log) writebackDone(err error) {
	if err == nil || errors.Is(err, os.ErrClosed) {
		return
	}
	l.mu.Lock()
	if !l.closed {
		l.failLocked(err)
	}
	l.mu.Unlock()
}
