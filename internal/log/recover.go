package log

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/strandlog/strand/internal/model"
)

// recover checks the segments that may hold data written after the last
// recovery point, from the segment holding that point to the end. A torn
// tail (a crash mid-write, or unsynced pages lost with the power) is cut at
// the last valid batch. Damage that cannot be a torn tail is reported, not
// dropped: a bad batch below the recovery point, in a segment followed by
// non-empty ones, or followed by a valid batch in its own segment.
func (l *Log) recover(recoveryPoint int64) error {
	first := l.segmentFor(recoveryPoint)
	interval := l.cfg.IndexIntervalBytes
	for i := first; i < len(l.segs); i++ {
		s := l.segs[i]
		st, err := s.file.Stat()
		if err != nil {
			return err
		}
		fileSize := st.Size()
		bad, reason, err := s.scan(fileSize, interval)
		if err != nil {
			return err
		}
		if bad < 0 {
			if i+1 < len(l.segs) {
				s.next = l.segs[i+1].base
			}
			continue
		}
		corrupt := &CorruptLogError{File: s.file.Name(), Pos: bad, Reason: reason}
		switch {
		case s.next < recoveryPoint:
			corrupt.Reason += fmt.Sprintf("; offsets up to the recovery point %d were durable", recoveryPoint)
			return corrupt
		case l.hasDataAfter(i):
			corrupt.Reason += "; later segments hold data"
			return corrupt
		}
		if ok, err := hasValidBatchAfter(s, bad, fileSize); err != nil {
			return err
		} else if ok {
			corrupt.Reason += "; valid batches follow it"
			return corrupt
		}
		l.logger.Warn("truncating torn tail of the log", "file", s.file.Name(), "pos", bad,
			"bytes", fileSize-bad, "reason", reason, "end_offset", s.next)
		if err := s.file.Truncate(bad); err != nil {
			return err
		}
		if err := s.file.Sync(); err != nil {
			return err
		}
		// Later segments are empty (checked above): drop them so the log
		// ends at the surviving data.
		for _, e := range l.segs[i+1:] {
			_ = e.close()
			if err := e.removeFiles(); err != nil {
				return err
			}
		}
		l.segs = l.segs[:i+1]
		break
	}
	for i, s := range l.segs[first:] {
		if j := first + i; j+1 < len(l.segs) && s.size > 0 {
			// A sealed segment's indexes must be on disk for the next clean start.
			if err := s.writeIndexes(interval); err != nil {
				return err
			}
		}
	}
	return l.readFirstTimestamp(l.active())
}

func (l *Log) hasDataAfter(i int) bool {
	for _, s := range l.segs[i+1:] {
		if s.size > 0 {
			return true
		}
	}
	return false
}

// scan reads the whole segment, checking each batch's framing, CRC and that
// offsets increase, and rebuilds the indexes. It sets size and next to the
// end of the valid prefix (base when it is empty) and returns the position of the first bad batch,
// or -1.
func (s *segment) scan(fileSize, interval int64) (int64, string, error) {
	idx := &offsetIndex{base: s.base}
	tidx := &timeIndex{base: s.base}
	r := bufio.NewReaderSize(io.NewSectionReader(s.file, 0, fileSize), 1<<20)
	buf := make([]byte, 64<<10)
	var since int64
	pos, next := int64(0), s.base
	bad, reason := int64(-1), ""
	for pos < fileSize {
		if fileSize-pos < model.BatchHeaderSize {
			bad, reason = pos, "incomplete batch header"
			break
		}
		hdr := buf[:model.BatchHeaderSize]
		if _, err := io.ReadFull(r, hdr); err != nil {
			return 0, "", err
		}
		n, err := batchSize(hdr, 0)
		if err != nil {
			bad, reason = pos, err.Error()
			break
		}
		if int64(n) > fileSize-pos {
			bad, reason = pos, fmt.Sprintf("batch of %d bytes runs past the end of the file", n)
			break
		}
		if n > len(buf) {
			buf = append(buf[:model.BatchHeaderSize], make([]byte, n-model.BatchHeaderSize)...)
		}
		b := model.Batch(buf[:n])
		if _, err := io.ReadFull(r, b[model.BatchHeaderSize:]); err != nil {
			return 0, "", err
		}
		if err := checkCRC(b); err != nil {
			bad, reason = pos, err.Error()
			break
		}
		if b.BaseOffset() < next || b.LastOffsetDelta() < 0 {
			bad, reason = pos, fmt.Sprintf("batch offsets %d..%d do not follow %d", b.BaseOffset(), b.LastOffset(), next-1)
			break
		}
		if since >= interval || len(idx.entries) == 0 && pos > 0 {
			idx.add(b.BaseOffset(), pos)
			since = 0
		}
		since += int64(n)
		tidx.maybeAdd(b.MaxTimestamp(), b.BaseOffset())
		next = b.LastOffset() + 1
		pos += int64(n)
	}
	s.size, s.next = pos, next
	s.sinceIndex = since
	s.loadMu.Lock()
	s.idx, s.tidx = idx, tidx
	s.loadMu.Unlock()
	return bad, reason, nil
}

// hasValidBatchAfter searches the bytes after a bad batch for any batch whose
// header and CRC check out. Finding one means the damage is in the middle of
// the data, not a torn tail. Only a corrupt log pays for this search.
func hasValidBatchAfter(s *segment, bad, fileSize int64) (bool, error) {
	const window = 8 << 20
	buf := make([]byte, window+model.BatchHeaderSize)
	for start := bad + 1; start+model.BatchHeaderSize <= fileSize; start += window {
		n, err := s.file.ReadAt(buf[:min(int64(len(buf)), fileSize-start)], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		for q := 0; q+model.BatchHeaderSize <= n && q < window; q++ {
			if buf[q+model.BatchMagicPos] != model.BatchMagic {
				continue
			}
			size, err := batchSize(buf[q:], 0)
			if err != nil || start+int64(q)+int64(size) > fileSize {
				continue
			}
			b := make([]byte, size)
			if _, err := s.file.ReadAt(b, start+int64(q)); err != nil {
				return false, err
			}
			if checkCRC(b) == nil {
				return true, nil
			}
		}
	}
	return false, nil
}
