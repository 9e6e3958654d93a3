package log

import (
	"fmt"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// ApplyRetention deletes whole segments from the start of the log that are
// below the log start offset, older than retention.ms (by their largest
// timestamp) or beyond retention.bytes, and closes segments retired long
// enough ago. The active segment goes only when retention.ms has expired
// everything: it is rolled first so the log keeps its end offset. It returns
// the number of segments deleted.
func (l *Log) ApplyRetention() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	now := l.now()
	l.reapLocked(now)
	if l.failed != nil {
		return 0, l.failed
	}
	cfg := l.cfg
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	n := 0
	for ; n < len(l.segs); n++ {
		s := l.segs[n]
		expired, err := l.expiredLocked(s, now)
		if err != nil {
			return 0, err
		}
		oversize := cfg.Delete && cfg.RetentionBytes >= 0 && total-s.size >= cfg.RetentionBytes
		below := n+1 < len(l.segs) && l.segs[n+1].base <= l.start
		if !expired && !oversize && !below {
			break
		}
		if n == len(l.segs)-1 {
			if !expired || s.size == 0 {
				break
			}
			if err := l.writableLocked(); err != nil {
				return 0, err
			}
			if err := l.rollLocked(); err != nil {
				return 0, err
			}
		}
		total -= s.size
	}
	if n == 0 {
		return 0, nil
	}
	if err := l.writableLocked(); err != nil {
		return 0, err
	}
	gone := append([]*segment(nil), l.segs[:n]...)
	l.segs = append(l.segs[:0:0], l.segs[n:]...)
	l.start = max(l.start, l.segs[0].base)
	l.hw = max(l.hw, l.start)
	l.logger.Info("retention deleted segments", "segments", n, "log_start_offset", l.start)
	if err := l.retireLocked(gone); err != nil {
		return n, err
	}
	if err := l.epochs.truncateFromStart(l.start); err != nil {
		return n, err
	}
	if err := l.sourceEpochs.truncateFromStart(l.start); err != nil {
		return n, err
	}
	return n, l.writeCheckpointLocked(false)
}

func (l *Log) expiredLocked(s *segment, now time.Time) (bool, error) {
	if !l.cfg.Delete || l.cfg.RetentionTime < 0 || s.size == 0 {
		return false, nil
	}
	_, tidx, err := s.indexes(l.cfg.IndexIntervalBytes)
	if err != nil {
		return false, err
	}
	ts, _, ok := tidx.max()
	return ok && now.UnixMilli()-ts > l.cfg.RetentionTime.Milliseconds(), nil
}

// DeleteRecords moves the log start offset forward to offset (at most the
// high watermark, which the caller checks) and deletes the segments wholly
// below it. It returns the new log start offset.
func (l *Log) DeleteRecords(offset int64) (int64, error) {
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	if offset < 0 || offset > l.next {
		l.mu.Unlock()
		return 0, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, l.start, l.next)
	}
	if offset > l.start {
		l.start = offset
		if err := l.writeCheckpointLocked(false); err != nil {
			l.failLocked(err)
			l.mu.Unlock()
			return 0, l.failed
		}
	}
	start := l.start
	l.mu.Unlock()
	_, err := l.ApplyRetention()
	return start, err
}

// Truncate removes every batch from the one holding offset onward (a
// follower whose log diverged from its leader's). The log end becomes
// offset, or the start of the batch holding it. Compaction relies on data
// below the high watermark never being truncated.
func (l *Log) Truncate(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if offset >= l.next {
		return nil
	}
	if offset < l.start {
		return fmt.Errorf("%w: truncate to %d below log start %d", ErrOffsetOutOfRange, offset, l.start)
	}
	i := l.segmentFor(offset)
	s := l.segs[i]
	interval := l.cfg.IndexIntervalBytes
	pos, err := s.find(offset, s.size, interval)
	if err != nil {
		return err
	}
	newEnd := offset
	if pos < s.size {
		hdr := make([]byte, model.BatchHeaderSize)
		if _, err := s.file.ReadAt(hdr, pos); err != nil {
			return err
		}
		newEnd = min(offset, model.Batch(hdr).BaseOffset())
	}
	if err := l.retireLocked(l.segs[i+1:]); err != nil {
		return err
	}
	l.segs = l.segs[:i+1]
	// Synced at once: truncated data that came back after a power loss
	// would be a diverged history reappearing.
	if err := s.file.Truncate(pos); err == nil {
		err = s.file.Sync()
	}
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err != nil {
		l.failLocked(err)
		return l.failed
	}
	// What is left is synced. Journal records taken before now may hold
	// the truncated batches: the fence keeps them out of any replay, and
	// the checkpoint written below makes it durable before anything new
	// of this log can be journaled (a round reads the log under mu).
	l.truncations++
	l.durableSeg, l.durablePos = s, pos
	if l.journal != nil {
		l.fence.Store(l.journal.next.Load())
	}
	idx, tidx, err := s.indexes(interval)
	if err != nil {
		l.failLocked(err) // the files are cut and the fence is set: nothing may follow
		return l.failed
	}
	idx.truncate(pos)
	tidx.truncate(newEnd)
	s.size, s.next, s.sinceIndex = pos, max(newEnd, s.base), interval
	if pos == 0 {
		s.firstTs = -1
	}
	l.next = s.next
	l.start = min(l.start, l.next) // the batch holding the log start may be gone
	l.hw = min(l.hw, l.next)
	l.synced.Store(min(l.synced.Load(), l.next))
	l.fileSynced.Store(min(l.fileSynced.Load(), l.next))
	if err := l.epochs.truncateFromEnd(l.next); err != nil {
		return err
	}
	if err := l.sourceEpochs.truncateFromEnd(l.next); err != nil {
		return err
	}
	// The recovery point on disk may lie past the new end; recovery would
	// then mistake a later torn tail for lost durable data. And the fence
	// must be durable before the log takes appends again.
	if err := l.writeCheckpointLocked(false); err != nil {
		l.failLocked(err)
		return l.failed
	}
	return nil
}
