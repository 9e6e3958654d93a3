package log

import (
	"errors"
	"fmt"
	"os"

	"github.com/strandlog/strand/internal/model"
)

// CompactStats reports one compaction pass.
type CompactStats struct {
	Segments       int // segments rewritten
	RecordsRemoved int
	BytesBefore    int64
	BytesAfter     int64
}

// Compact cleans the log for cleanup.policy=compact: in the sealed segments
// below the high watermark whose data is older than min.compaction.lag.ms,
// it keeps only the latest record of each key, and drops tombstones (null
// values) older than delete.retention.ms and records without a key. Offsets
// never change: a batch that loses records keeps its base and last offset
// (so gaps appear), a batch that loses all of them disappears. The active
// segment is never touched, and appends and reads go on meanwhile.
//
// Steps: (1) under the shared lock, choose the segments; (2) without the
// lock (sealed segments do not change, retired ones stay open, and the
// active segment is read only up to a size taken under the lock) map each
// key to its latest offset below the high watermark; (3) rewrite each segment that loses
// records into <segment>.log.cleaned and sync it; (4) under the lock, swap it
// in by renaming over the segment, provided the segment is still part of
// the log. A crash before the rename leaves a .cleaned file that Open
// deletes; after it, the new segment is complete and its indexes are
// rebuilt if they were not yet written.
//
// Transactions: records of transactional batches never enter the key map,
// and transactional batches (like control batches, the markers) are always
// kept whole. Otherwise a record of an aborted transaction, which
// read_committed consumers never see, would hide the earlier committed
// record of its key, and a record of a transaction still open could hide
// one before the transaction decides. Kafka's cleaner instead tracks each
// transaction's outcome and removes aborted records and, later, the
// markers; keeping them costs space (transactional records are never
// cleaned, and do not supersede earlier records of their keys, which a
// later non-transactional record still does) but never loses a value a
// consumer should see.
//
// The key map spans every cleanable segment, so memory grows with the number
// of distinct keys; Kafka's fixed-size map over the dirty range only would
// bound that, at the cost of more passes.
func (l *Log) Compact() (CompactStats, error) {
	l.compactMu.Lock()
	defer l.compactMu.Unlock()
	var stats CompactStats
	l.mu.RLock()
	cfg := l.cfg
	if l.closed {
		l.mu.RUnlock()
		return stats, ErrClosed
	}
	now := l.now().UnixMilli()
	var segs []*segment
	for _, s := range l.segs[:len(l.segs)-1] {
		_, tidx, err := s.indexes(cfg.IndexIntervalBytes)
		if err != nil {
			l.mu.RUnlock()
			return stats, err
		}
		maxTs, _, _ := tidx.max()
		if s.next > l.hw || now-maxTs < cfg.MinCompactionLag.Milliseconds() {
			break
		}
		segs = append(segs, s)
	}
	// Keys written later, up to the high watermark, also supersede: the
	// map covers them without cleaning their segments.
	hw := l.hw
	mapped := l.segs[len(segs):]
	sizes := make([]int64, len(mapped))
	for i, s := range mapped {
		sizes[i] = s.size
	}
	l.mu.RUnlock()
	if !cfg.Compact || len(segs) == 0 {
		return stats, nil
	}

	latest := map[string]int64{}
	for i, s := range append(segs, mapped...) {
		size := s.size
		if i >= len(segs) {
			size = sizes[i-len(segs)]
		}
		err := forEachStoredBatch(s, size, func(b model.Batch) error {
			if b.IsControl() || b.IsTransactional() || b.LastOffset() >= hw {
				return nil
			}
			return forEachRecord(b, func(r *Record) error {
				if r.Key != nil {
					latest[string(r.Key)] = b.BaseOffset() + int64(r.OffsetDelta)
				}
				return nil
			})
		})
		if err != nil {
			return stats, err
		}
	}

	horizon := now - cfg.DeleteRetention.Milliseconds()
	for _, s := range segs {
		cleaned, removed, err := l.cleanSegment(s, latest, horizon)
		if err != nil {
			return stats, err
		}
		if removed == 0 {
			continue
		}
		stats.Segments++
		stats.RecordsRemoved += removed
		stats.BytesBefore += s.size
		stats.BytesAfter += cleaned
	}
	return stats, nil
}

// cleanSegment rewrites s without the records compaction drops and swaps
// the result in. It returns the new size and the number of records removed.
func (l *Log) cleanSegment(s *segment, latest map[string]int64, horizon int64) (int64, int, error) {
	var out []byte
	var kept []Record
	removed := 0
	err := forEachStoredBatch(s, s.size, func(b model.Batch) error {
		if b.IsControl() || b.IsTransactional() {
			out = append(out, b...) // see Compact on transactions
			return nil
		}
		kept = kept[:0]
		var dropped int
		err := forEachRecord(b, func(r *Record) error {
			offset := b.BaseOffset() + int64(r.OffsetDelta)
			tombstoneGone := r.Value == nil && b.MaxTimestamp() < horizon
			if r.Key == nil || latest[string(r.Key)] != offset || tombstoneGone {
				dropped++
				return nil
			}
			kept = append(kept, cloneRecord(r))
			return nil
		})
		if err != nil {
			return err
		}
		switch {
		case dropped == 0:
			out = append(out, b...)
		case len(kept) > 0:
			out, err = appendBatch(out, headerOf(b), kept)
		}
		removed += dropped
		return err
	})
	if err != nil || removed == 0 {
		return s.size, 0, err
	}
	return int64(len(out)), removed, l.swapSegment(s, out)
}

func cloneRecord(r *Record) Record {
	c := *r
	c.Key = append([]byte(nil), r.Key...)
	if r.Value != nil {
		c.Value = append([]byte{}, r.Value...)
	}
	c.Headers = nil
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, RecordHeader{Key: h.Key, Value: append([]byte(nil), h.Value...)})
	}
	return c
}

func headerOf(b model.Batch) batchHeader {
	return batchHeader{
		BaseOffset: b.BaseOffset(), PartitionLeaderEpoch: b.PartitionLeaderEpoch(),
		Attributes: b.Attributes(), LastOffsetDelta: b.LastOffsetDelta(),
		BaseTimestamp: b.BaseTimestamp(), MaxTimestamp: b.MaxTimestamp(),
		ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence(),
	}
}

// swapSegment replaces old's data with data: written and synced beside it,
// then renamed over it while the log is locked.
func (l *Log) swapSegment(old *segment, data []byte) error {
	tmp := old.path(logSuffix + cleanedSuffix)
	f, err := l.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		_ = l.fs.Remove(tmp)
		return err
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	i := l.indexOf(old)
	if err := l.writableLocked(); err != nil || i < 0 {
		f.Close()
		_ = l.fs.Remove(tmp)
		if err == nil {
			err = errors.New("segment left the log during compaction")
		}
		return err
	}
	n := &segment{fs: l.fs, dir: l.dir, base: old.base, file: f, size: int64(len(data)),
		next: old.next, firstTs: old.firstTs, openedAt: old.openedAt}
	idx, tidx, _, err := n.buildIndexes(l.cfg.IndexIntervalBytes)
	if err != nil {
		f.Close()
		return err
	}
	n.idx, n.tidx = idx, tidx
	// Recovery must know the cleaned range may have gaps before any gap
	// exists on disk.
	if old.next > l.cleaned {
		l.cleaned = old.next
		if err := l.writeCheckpointLocked(false); err != nil {
			f.Close()
			l.failLocked(err)
			return l.failed
		}
	}
	// Old indexes go first: a crash after the rename then finds none, and
	// rebuilds them, rather than finding positions into the old data.
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := l.fs.Remove(old.path(suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			f.Close()
			return err
		}
	}
	if err := l.fs.Rename(tmp, old.path(logSuffix)); err != nil {
		f.Close()
		return fmt.Errorf("swapping in cleaned segment: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		l.failLocked(err)
		return l.failed
	}
	l.segs[i] = n
	l.retired = append(l.retired, retiredSegment{seg: old, closeAt: l.now().Add(l.cfg.FileDeleteDelay)})
	return n.writeIndexes(l.cfg.IndexIntervalBytes)
}

func (l *Log) indexOf(s *segment) int {
	for i, x := range l.segs {
		if x == s {
			return i
		}
	}
	return -1
}

// forEachStoredBatch calls fn with each whole batch in the first size bytes
// of a segment (its size, or a snapshot of it taken under Log.mu).
func forEachStoredBatch(s *segment, size int64, fn func(b model.Batch) error) error {
	var buf []byte
	var ferr error
	err := scanHeaders(s.file, 0, size, func(pos int64, hdr model.Batch) bool {
		n := hdr.Size()
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		b := model.Batch(buf[:n])
		if _, ferr = s.file.ReadAt(b, pos); ferr != nil {
			return false
		}
		ferr = fn(b)
		return ferr == nil
	})
	if ferr != nil {
		return ferr
	}
	return err
}
