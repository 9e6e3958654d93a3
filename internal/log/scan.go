package log

import (
	"errors"
	"fmt"
	"io"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// scanChunk is how much ScanBatches reads at a time: headers of small batches
// come many to a read; a batch larger than the chunk is skipped by position,
// so its payload is never read.
const scanChunk = 64 << 10

// ScanBatches calls fn with the header of every stored batch whose last
// offset is at least from, in offset order, up to the log end as of the call,
// until fn returns false. Only the fixed headers (model.BatchHeaderSize bytes)
// are read: fn must not look at the records, and must not keep the slice,
// which is reused. The stored framing is trusted (recovery checked it);
// neither CRCs nor records are verified.
//
// The segment list is taken under the shared lock and the files are read
// without it, as Read does: segments retired meanwhile stay readable for
// file.delete.delay.ms. The replica layer rebuilds producer state with it.
func (l *Log) ScanBatches(from int64, fn func(model.Batch) bool) error {
	type part struct {
		file       vfs.File
		start, end int64
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	interval := l.cfg.IndexIntervalBytes
	var parts []part
	for i := l.segmentFor(from); i < len(l.segs); i++ {
		s := l.segs[i]
		size := s.size
		var start int64
		if from > s.base {
			var err error
			if start, err = s.find(from, size, interval); err != nil {
				l.mu.RUnlock()
				return err
			}
		}
		if start < size {
			parts = append(parts, part{file: s.file, start: start, end: size})
		}
	}
	l.mu.RUnlock()

	buf := make([]byte, scanChunk)
	for _, p := range parts {
		more, err := scanChunked(p.file, p.start, p.end, buf, fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// scanChunked walks the batch headers in [start, end) of f, reading a chunk
// at a time. It reports whether fn wants more.
func scanChunked(f vfs.File, start, end int64, buf []byte, fn func(model.Batch) bool) (bool, error) {
	var bufPos int64 // file position of buf[0]
	var bufLen int   // valid bytes in buf
	for pos := start; pos < end; {
		if end-pos < model.BatchHeaderSize {
			return false, &CorruptLogError{File: f.Name(), Pos: pos, Reason: fmt.Sprintf("%d trailing bytes are not a batch", end-pos)}
		}
		if bufLen == 0 || pos < bufPos || pos+model.BatchHeaderSize > bufPos+int64(bufLen) {
			n := int(min(int64(len(buf)), end-pos))
			got, err := f.ReadAt(buf[:n], pos)
			if got < model.BatchHeaderSize {
				if err == nil || errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return false, fmt.Errorf("reading batch header at %d of %s: %w", pos, f.Name(), err)
			}
			bufPos, bufLen = pos, got
		}
		off := int(pos - bufPos)
		hdr := buf[off : off+model.BatchHeaderSize]
		n, err := batchSize(hdr, 0)
		if err != nil {
			return false, &CorruptLogError{File: f.Name(), Pos: pos, Reason: err.Error()}
		}
		if !fn(model.Batch(hdr)) {
			return false, nil
		}
		pos += int64(n)
	}
	return true, nil
}

// FS is the file system the log writes through, for files kept beside the
// segments by other layers (the replica's producer-state snapshots).
func (l *Log) FS() vfs.FS { return l.fs }
