package log

import (
	"bufio"
	"fmt"
	"io"

	"github.com/strandlog/strand/internal/model"
)

// recover checks the segments that may hold data written after the last
// recovery point, from the segment holding that point to the end, and
// rebuilds their indexes. Rolls sync a segment before the next exists, so
// only the last segment can hold a torn tail (a crash mid-write, or unsynced
// pages lost or written out of order with the power): a bad batch there,
// above the recovery point, ends the log, and whatever follows it is
// dropped with a warning. Anything else is damage to data that was durable,
// and Open fails with a *CorruptLogError instead of dropping it:
//   - a bad batch in a sealed segment, or below the recovery point;
//   - offsets missing: outside the range compaction has cleaned, each batch
//     must start where the previous ended, and each sealed segment where the
//     next begins (the base offset is outside the CRC, so this is how a
//     damaged one shows);
//   - a log that ends below the recovery point.
func (l *Log) recover(ck checkpoint) error {
	first := l.segmentFor(ck.recoveryPoint)
	interval := l.cfg.IndexIntervalBytes
	for i := first; i < len(l.segs); i++ {
		s := l.segs[i]
		last := i == len(l.segs)-1
		st, err := s.file.Stat()
		if err != nil {
			return err
		}
		fileSize := st.Size()
		strict := s.base >= ck.cleanedEnd
		bad, reason, err := s.scan(fileSize, interval, strict)
		if err != nil {
			return err
		}
		corrupt := func(pos int64, why string) error {
			return &CorruptLogError{File: s.file.Name(), Pos: pos, Reason: why}
		}
		switch {
		case bad >= 0 && !last:
			return corrupt(bad, reason+"; in a sealed segment")
		case bad >= 0 && s.next < ck.recoveryPoint:
			return corrupt(bad, fmt.Sprintf("%s; offsets below the recovery point %d were durable", reason, ck.recoveryPoint))
		case bad >= 0:
			l.logger.Warn("truncating torn tail of the log", "file", s.file.Name(), "pos", bad,
				"bytes", fileSize-bad, "reason", reason, "end_offset", s.next)
			if err := s.file.Truncate(bad); err != nil {
				return err
			}
			if err := s.file.Sync(); err != nil {
				return err
			}
		case !last && strict && s.next != l.segs[i+1].base:
			return corrupt(s.size, fmt.Sprintf("offsets %d..%d are missing before the next segment", s.next, l.segs[i+1].base-1))
		}
		if !last {
			s.next = l.segs[i+1].base
		}
	}
	if end := l.active().next; end < ck.recoveryPoint {
		return &CorruptLogError{File: l.active().file.Name(), Pos: l.active().size,
			Reason: fmt.Sprintf("the log ends at offset %d, below the recovery point %d", end, ck.recoveryPoint)}
	}
	for _, s := range l.segs[first : len(l.segs)-1] {
		// A sealed segment's indexes must be on disk for the next clean start.
		if err := s.writeIndexes(interval); err != nil {
			return err
		}
	}
	return l.readFirstTimestamp(l.active())
}

// scan reads the whole segment, checking each batch's framing, CRC and that
// offsets increase (strictly one after another when strict), and rebuilds
// the indexes. It sets size and next to the
// end of the valid prefix (base when it is empty) and returns the position of the first bad batch,
// or -1.
func (s *segment) scan(fileSize, interval int64, strict bool) (int64, string, error) {
	idx := &offsetIndex{base: s.base}
	tidx := &timeIndex{base: s.base}
	r := bufio.NewReaderSize(io.NewSectionReader(s.file, 0, fileSize), 256<<10)
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
		if b.BaseOffset() < next || b.LastOffsetDelta() < 0 || strict && b.BaseOffset() != next {
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
