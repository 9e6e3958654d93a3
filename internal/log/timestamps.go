package log

import (
	"errors"

	"github.com/strandlog/strand/internal/model"
)

// errStop ends a record walk early.
var errStop = errors.New("stop")

// OffsetForTimestamp answers ListOffsets by time: the first offset at or
// after the log start whose record timestamp is at least ts, and that
// timestamp. found is false when every record is older.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	interval := l.cfg.IndexIntervalBytes
	for i := l.segmentFor(l.start); i < len(l.segs); i++ {
		s := l.segs[i]
		_, tidx, err := s.indexes(interval)
		if err != nil {
			return 0, 0, false, err
		}
		if maxTs, _, ok := tidx.max(); !ok || maxTs < ts {
			continue
		}
		pos, err := s.find(max(tidx.lookup(ts), l.start), s.size, interval)
		if err != nil {
			return 0, 0, false, err
		}
		var at int64 = -1
		err = scanHeaders(s.file, pos, s.size, func(p int64, b model.Batch) bool {
			if b.MaxTimestamp() >= ts {
				at = p
				return false
			}
			return true
		})
		if err != nil || at < 0 {
			return 0, 0, false, err
		}
		return l.firstRecordAtLeast(s, at, ts)
	}
	return -1, -1, false, nil
}

// MaxTimestamp answers ListOffsets for the largest timestamp: the offset of
// the first record carrying the log's largest timestamp.
func (l *Log) MaxTimestamp() (offset, timestamp int64, found bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	interval := l.cfg.IndexIntervalBytes
	var best *segment
	var bestTs, bestBase int64 = -1, -1
	for i := l.segmentFor(l.start); i < len(l.segs); i++ {
		s := l.segs[i]
		_, tidx, err := s.indexes(interval)
		if err != nil {
			return 0, 0, false, err
		}
		if ts, base, ok := tidx.max(); ok && ts > bestTs {
			best, bestTs, bestBase = s, ts, base
		}
	}
	if best == nil {
		return -1, -1, false, nil
	}
	pos, err := best.find(bestBase, best.size, interval)
	if err != nil {
		return 0, 0, false, err
	}
	return l.firstRecordAtLeast(best, pos, bestTs)
}

// firstRecordAtLeast reads the batch at pos and returns its first record
// (at or after the log start) whose timestamp is at least ts.
func (l *Log) firstRecordAtLeast(s *segment, pos, ts int64) (int64, int64, bool, error) {
	hdr := make([]byte, model.BatchHeaderSize)
	if _, err := s.file.ReadAt(hdr, pos); err != nil {
		return 0, 0, false, err
	}
	b := make(model.Batch, model.Batch(hdr).Size())
	if _, err := s.file.ReadAt(b, pos); err != nil {
		return 0, 0, false, err
	}
	if b.IsLogAppendTime() {
		return max(b.BaseOffset(), l.start), b.MaxTimestamp(), true, nil
	}
	offset, timestamp := b.LastOffset(), b.MaxTimestamp()
	err := forEachRecord(b, func(r *Record) error {
		o, t := b.BaseOffset()+int64(r.OffsetDelta), b.BaseTimestamp()+r.TimestampDelta
		if o >= l.start && t >= ts {
			offset, timestamp = o, t
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, 0, false, err
	}
	return offset, timestamp, true, nil
}
