package log

import (
	"encoding/binary"
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
// of data batches are read: fn must not look at their records. Control
// batches (transaction markers: one small record each) are passed whole, so
// that fn can read the marker's type with ControlRecordType. fn must not
// keep the slice, which is reused. The stored framing is trusted (recovery
// checked it); neither CRCs nor records are verified.
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
		b := model.Batch(buf[off : off+model.BatchHeaderSize])
		n, err := batchSize(b, 0)
		if err != nil {
			return false, &CorruptLogError{File: f.Name(), Pos: pos, Reason: err.Error()}
		}
		if b.IsControl() {
			if b, err = wholeBatch(f, pos, end, n, buf, &bufPos, &bufLen); err != nil {
				return false, err
			}
		}
		if !fn(b) {
			return false, nil
		}
		pos += int64(n)
	}
	return true, nil
}

// wholeBatch returns the n-byte batch at pos of f (whose data ends at end)
// for scanChunked: from buf when it holds it, else read into buf (which
// then starts at pos), or into a slice of its own when larger than buf.
func wholeBatch(f vfs.File, pos, end int64, n int, buf []byte, bufPos *int64, bufLen *int) (model.Batch, error) {
	if pos+int64(n) > end {
		return nil, &CorruptLogError{File: f.Name(), Pos: pos, Reason: fmt.Sprintf("batch of %d bytes, %d left", n, end-pos)}
	}
	if off := pos - *bufPos; pos >= *bufPos && off+int64(n) <= int64(*bufLen) {
		return model.Batch(buf[off : off+int64(n)]), nil
	}
	dst := buf
	if n > len(buf) {
		dst = make([]byte, n)
	} else {
		dst = buf[:min(int64(len(buf)), end-pos)]
	}
	got, err := f.ReadAt(dst, pos)
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading batch at %d of %s: %w", pos, f.Name(), err)
	}
	if n <= len(buf) {
		*bufPos, *bufLen = pos, got
	}
	return model.Batch(dst[:n]), nil
}

// ControlType is the type of a control record, from its key (Kafka's
// ControlRecordType).
type ControlType int16

const (
	ControlAbort  ControlType = 0 // a transaction marker: the transaction aborted
	ControlCommit ControlType = 1 // a transaction marker: the transaction committed
)

// ControlRecordType returns the type of the first record of the whole
// control batch b (see ControlRecord).
func ControlRecordType(b model.Batch) (ControlType, error) {
	t, _, err := ControlRecord(b)
	return t, err
}

// ControlRecord reads the first record of the whole control batch b: its
// type, from the key (an int16 version >= 0 followed by the int16 type, as
// Kafka's ControlRecordType.parse reads it), and a copy of its value (for a
// transaction marker: the version and the coordinator epoch). Types other
// than abort and commit (KRaft's, never written to a partition by Strand)
// are returned as they are. A batch it cannot read is ErrCorruptMessage.
func ControlRecord(b model.Batch) (ControlType, []byte, error) {
	if err := checkBatchFraming(b); err != nil {
		return 0, nil, err
	}
	if !b.IsControl() {
		return 0, nil, fmt.Errorf("batch at %d is not a control batch: %w", b.BaseOffset(), ErrInvalidRecord)
	}
	var t ControlType
	var value []byte
	found := false
	err := forEachRecord(b, func(r *Record) error {
		if found {
			return nil
		}
		found = true
		if len(r.Key) < 4 {
			return fmt.Errorf("control record key of %d bytes: %w", len(r.Key), ErrCorruptMessage)
		}
		if v := int16(binary.BigEndian.Uint16(r.Key)); v < 0 {
			return fmt.Errorf("control record key version %d: %w", v, ErrCorruptMessage)
		}
		t = ControlType(binary.BigEndian.Uint16(r.Key[2:]))
		value = append([]byte(nil), r.Value...)
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("control batch at %d has no record: %w", b.BaseOffset(), ErrCorruptMessage)
	}
	if err != nil {
		return 0, nil, err
	}
	return t, value, nil
}

// FS is the file system the log writes through, for files kept beside the
// segments by other layers (the replica's producer-state snapshots).
func (l *Log) FS() vfs.FS { return l.fs }
