package log

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// segment is one file of record batches with its two indexes. The active
// (last) segment of a log takes appends; the others are sealed and never
// change except by truncation or compaction, which replace them whole.
//
// Fields marked "Log.mu" are read under Log.mu (shared) and written under
// Log.mu (exclusive). The indexes of a sealed segment load lazily under
// loadMu; the active segment's are always loaded.
type segment struct {
	fs   vfs.FS
	dir  string
	base int64
	file vfs.File

	size       int64 // Log.mu: bytes of whole batches
	next       int64 // Log.mu: offset after the last batch (a bound for sealed segments)
	firstTs    int64 // Log.mu: max timestamp of the first batch, -1 when empty; drives segment.ms
	openedAt   time.Time
	sinceIndex int64 // Log.mu: bytes appended since the last offset index entry

	loadMu lockrank.Mutex[lockrank.Segment]
	idx    *offsetIndex // loadMu to load; Log.mu to change
	tidx   *timeIndex
}

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted"
	cleanedSuffix   = ".cleaned"
)

// segmentName is Kafka's: the base offset, 20 digits zero-padded.
func segmentName(base int64, suffix string) string {
	return fmt.Sprintf("%020d%s", base, suffix)
}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentName(s.base, suffix))
}

func createSegment(fsys vfs.FS, dir string, base int64) (*segment, error) {
	s := &segment{fs: fsys, dir: dir, base: base, next: base, firstTs: -1, openedAt: time.Now()}
	f, err := fsys.OpenFile(s.path(logSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s.file = f
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := fsys.Remove(s.path(suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			f.Close()
			return nil, err
		}
	}
	s.idx = &offsetIndex{base: base}
	s.tidx = &timeIndex{base: base}
	return s, nil
}

// openSegment opens an existing segment file; its indexes load later.
func openSegment(fsys vfs.FS, dir string, base int64) (*segment, error) {
	s := &segment{fs: fsys, dir: dir, base: base, next: base, firstTs: -1, openedAt: time.Now()}
	f, err := fsys.OpenFile(s.path(logSuffix), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s.file, s.size = f, st.Size()
	return s, nil
}

// append writes whole batches at the end of the segment. refs describe the
// batches inside data, in order. With a budget, the bytes may stay in the
// segment's tail in memory (tail.go); without, they go to the file.
func (s *segment) append(data []byte, refs []batchRef, interval int64, tails *tailBudget) error {
	var err error
	if tails != nil {
		t, ok := s.file.(*tailFile)
		if !ok {
			t = newTailFile(s.file, s.size, tails)
			s.file = t
		}
		err = t.appendTail(data, s.size)
	} else {
		_, err = s.file.WriteAt(data, s.size)
	}
	if err != nil {
		// Leave no partial batch behind: a later append must not follow garbage.
		_ = s.file.Truncate(s.size)
		return err
	}
	for _, r := range refs {
		pos := s.size + int64(r.pos)
		if s.sinceIndex >= interval || len(s.idx.entries) == 0 && pos > 0 {
			s.idx.add(r.base, pos)
			s.sinceIndex = 0
		}
		s.tidx.maybeAdd(r.maxTs, r.base)
		s.sinceIndex += int64(r.size)
		if s.firstTs < 0 {
			s.firstTs = r.maxTs
		}
	}
	s.size += int64(len(data))
	s.next = refs[len(refs)-1].last + 1
	return nil
}

// batchRef describes one batch of an append.
type batchRef struct {
	pos   int // in the appended bytes
	size  int
	base  int64
	last  int64
	maxTs int64
}

// indexes returns the segment's indexes, loading a sealed segment's from its
// files, or rebuilding them from the log when the files are missing or fail
// their checks.
func (s *segment) indexes(interval int64) (*offsetIndex, *timeIndex, error) {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.idx != nil {
		return s.idx, s.tidx, nil
	}
	idx, tidx, err := s.readIndexFiles()
	if err != nil {
		idx, tidx, _, err = s.buildIndexes(interval)
		if err != nil {
			return nil, nil, err
		}
	}
	s.idx, s.tidx = idx, tidx
	return idx, tidx, nil
}

func (s *segment) readIndexFiles() (*offsetIndex, *timeIndex, error) {
	ib, err := vfs.ReadFile(s.fs, s.path(indexSuffix))
	if err != nil {
		return nil, nil, err
	}
	idx, err := unmarshalOffsetIndex(s.base, ib, s.size)
	if err != nil {
		return nil, nil, err
	}
	tb, err := vfs.ReadFile(s.fs, s.path(timeIndexSuffix))
	if err != nil {
		return nil, nil, err
	}
	tidx, err := unmarshalTimeIndex(s.base, tb, s.next)
	if err != nil {
		return nil, nil, err
	}
	if s.size > 0 && len(tidx.entries) == 0 {
		return nil, nil, errors.New("time index is empty for a non-empty segment")
	}
	return idx, tidx, nil
}

// buildIndexes walks the batch headers of the segment and indexes them. It
// trusts the framing (recovery has checked it) and returns the offset after
// the last batch.
func (s *segment) buildIndexes(interval int64) (*offsetIndex, *timeIndex, int64, error) {
	idx := &offsetIndex{base: s.base}
	tidx := &timeIndex{base: s.base}
	var since int64
	next := s.base
	err := scanHeaders(s.file, 0, s.size, func(pos int64, b model.Batch) bool {
		if since >= interval || len(idx.entries) == 0 && pos > 0 {
			idx.add(b.BaseOffset(), pos)
			since = 0
		}
		since += int64(b.Size())
		tidx.maybeAdd(b.MaxTimestamp(), b.BaseOffset())
		next = b.LastOffset() + 1
		return true
	})
	return idx, tidx, next, err
}

// writeIndexes stores the indexes durably, so that a clean restart or a
// sealed segment needs no scan.
func (s *segment) writeIndexes(interval int64) error {
	idx, tidx, err := s.indexes(interval)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(s.fs, s.path(indexSuffix), idx.marshal()); err != nil {
		return err
	}
	return vfs.WriteFileAtomic(s.fs, s.path(timeIndexSuffix), tidx.marshal())
}

// find returns the byte position of the first batch whose last offset is at
// least offset, or the segment's size when there is none. Caller holds Log.mu
// (shared); size is the snapshot of s.size taken under it.
func (s *segment) find(offset, size, interval int64) (int64, error) {
	pos, _, err := s.findBatch(offset, size, interval)
	return pos, err
}

// findBatch is find, with the base offset of the batch found (the
// segment's next offset when there is none).
func (s *segment) findBatch(offset, size, interval int64) (pos, base int64, err error) {
	idx, _, err := s.indexes(interval)
	if err != nil {
		return 0, 0, err
	}
	_, start := idx.lookup(offset)
	found, base := size, s.next
	err = scanHeaders(s.file, start, size, func(pos int64, b model.Batch) bool {
		if b.LastOffset() >= offset {
			found, base = pos, b.BaseOffset()
			return false
		}
		return true
	})
	return found, base, err
}

// findPos returns the end of the last whole batch that ends at or before
// limit, at least first's end: fetches return whole batches, and the first
// even when it alone exceeds the limit. next is the offset after that
// batch (the base offset of the batch at end), or -1 when nothing was read
// to tell (end is size).
func (s *segment) findPos(first, limit, size, interval int64) (end, next int64, err error) {
	if limit >= size {
		return size, -1, nil
	}
	idx, _, err := s.indexes(interval)
	if err != nil {
		return 0, 0, err
	}
	_, start := idx.lookupPos(limit)
	if start < first {
		start = first
	}
	end, next = start, -1
	err = scanHeaders(s.file, start, size, func(pos int64, b model.Batch) bool {
		e := pos + int64(b.Size())
		if e > limit && pos > first {
			next = b.BaseOffset()
			return false
		}
		end, next = e, b.LastOffset()+1
		return e < limit
	})
	return end, next, err
}

// scanHeaders calls fn with the position and header of each batch in
// [start, end) until fn returns false. Only headers are read; the framing
// of stored data is trusted.
func scanHeaders(f vfs.File, start, end int64, fn func(pos int64, b model.Batch) bool) error {
	bp := scanBufPool.Get().(*[]byte)
	defer scanBufPool.Put(bp)
	buf := *bp
	var bufPos int64
	var bufLen int
	for pos := start; pos+model.BatchHeaderSize <= end; {
		if bufLen == 0 || pos+model.BatchHeaderSize > bufPos+int64(bufLen) {
			// Read from the header on; a batch larger than the buffer is
			// skipped by position, its payload never read.
			n := int(min(int64(len(buf)), end-pos))
			got, err := f.ReadAt(buf[:n], pos)
			if got < model.BatchHeaderSize {
				if err == nil || errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("reading batch header at %d of %s: %w", pos, f.Name(), err)
			}
			bufPos, bufLen = pos, got
		}
		off := int(pos - bufPos)
		hdr := buf[off : off+model.BatchHeaderSize]
		n, err := batchSize(hdr, 0)
		if err != nil {
			return &CorruptLogError{File: f.Name(), Pos: pos, Reason: err.Error()}
		}
		if !fn(pos, model.Batch(hdr)) {
			return nil
		}
		pos += int64(n)
	}
	return nil
}

// scanBufPool holds scanHeaders' buffers: about two index intervals, so a
// lookup's forward scan is one read.
var scanBufPool = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// close closes the segment's file; readers still holding it get errors, so
// deleted segments are closed only after Config.FileDeleteDelay.
func (s *segment) close() error { return s.file.Close() }

// removeFiles deletes the segment's files (the log and both indexes).
func (s *segment) removeFiles() error {
	var first error
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := s.fs.Remove(s.path(suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
			first = err
		}
	}
	return first
}
