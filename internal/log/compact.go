package log

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"

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
// below the cleanable limit whose data is older than min.compaction.lag.ms,
// it keeps only the latest record of each key, and drops tombstones (null
// values) older than delete.retention.ms and records without a key. Offsets
// never change: a batch that loses records keeps its base and last offset
// (so gaps appear), a batch that loses all of them disappears. The active
// segment is never touched, and appends and reads go on meanwhile.
//
// The cleanable limit is the high watermark, or the first unstable offset
// when lower: the first offset of the oldest transaction that is open or
// whose marker is not yet below the high watermark. The replica layer
// reports it (SetFirstUnstableOffset); the pass also finds it in the log
// itself (the oldest transactional batch with no marker below the high
// watermark after it), so a log whose replica has not said yet, or a
// transaction the replica has not registered yet, is safe as well. Nothing
// at or past the limit is cleaned, or enters the key map: a consumer held
// at the last stable offset still finds the latest value of each key below
// it.
//
// Transactions (Kafka's LogCleaner with CleanedTransactionMetadata, KIP-98):
//
//   - A transactional batch's fate comes from replaying the markers in
//     offset order, per producer: a transactional batch opens its
//     producer's transaction when none is open, and the next commit or
//     abort marker of that producer (below the high watermark) decides
//     it. The replay reads from the first segment, so every marker of a
//     batch below the limit is seen.
//   - Records of aborted transactions never enter the key map and are
//     removed. Records of committed transactions are ordinary records: they
//     enter the key map, supersede earlier records of their keys and are
//     superseded by later ones.
//   - A marker is kept while its transaction has data batches in the log:
//     it is removable only in a pass that read none of them (the pass
//     after the one that removed the last, as in Kafka), and then only
//     once it is older than delete.retention.ms, measured as for
//     tombstones (by the batch's max timestamp). Without its marker a
//     remaining batch would look open (holding the last stable offset
//     back forever after a rebuild) or committed when it aborted.
//   - Markers are removed only when the replica layer has registered
//     SetMarkerRemoval, and only after it has been told: the aborted
//     transactions it hands to read_committed fetches must not name a
//     marker that is gone (a consumer would skip the producer's later
//     committed batches waiting for it), and no producer snapshot it
//     could rebuild from may predate a removed marker (the rebuild
//     replays only the log after the snapshot, so a transaction the
//     snapshot saw open would stay open for good). Control records of
//     other types are always kept.
//
// Batches left empty are dropped, markers included. Kafka instead keeps
// the last batch of each live producer, emptied, because its producer
// state is rebuilt from the log and that batch carries the last sequence
// and epoch. Strand's replica keeps the whole producer table (epochs,
// five batches, open and aborted transactions) in snapshots written every
// few thousand appends, after a rebuild and on close, and a rebuild replays
// only the log after the newest snapshot, which the cleaning of older
// batches does not change. What a crash can cost is the state a producer
// gained after that snapshot when every one of its batches since has been
// cleaned (superseded, aborted, or an old marker): the rebuild then knows
// it as of the snapshot, or not at all. Duplicates of cleaned batches can
// no longer arrive (they are older than min.compaction.lag.ms and below
// the high watermark), an unknown producer may start at any sequence, and
// coordinator batches (__consumer_offsets) skip the sequence checks; a
// stale sequence for an idempotent producer that kept writing is answered
// OUT_OF_ORDER_SEQUENCE_NUMBER, from which clients recover by bumping the
// epoch.
//
// Steps: (1) under the shared lock, choose the segments and take the size
// of every segment (the active one may grow; sealed segments do not change
// and retired ones stay open); (2) without the lock, replay the markers
// over the whole log (headers and markers only) and lower the limit to the
// oldest undecided transaction; (3) map each key to its latest offset
// below the limit; (4) rewrite each segment that loses records into
// <segment>.log.cleaned and sync it; (5) under the lock, swap it in by
// renaming over the segment, provided the segment is still part of the log.
// A crash before the rename leaves a .cleaned file that Open deletes; after
// it, the new segment is complete and its indexes are rebuilt if they were
// not yet written. Segments are swapped in offset order, so a crash never
// leaves a marker removed while data it decides remains.
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
	hw := l.hw
	limit := hw
	if l.firstUnstable >= 0 {
		limit = min(limit, l.firstUnstable)
	}
	markerRemoval := l.markerRemoval
	// Keys written later, up to the limit, also supersede: the map covers
	// every segment without cleaning the later ones.
	parts := make([]segmentPart, len(l.segs))
	for i, s := range l.segs {
		parts[i] = segmentPart{s, s.size}
	}
	n := 0 // parts[:n] are cleaned
	for _, s := range l.segs[:len(l.segs)-1] {
		_, tidx, err := s.indexes(cfg.IndexIntervalBytes)
		if err != nil {
			l.mu.RUnlock()
			return stats, err
		}
		maxTs, _, _ := tidx.max()
		if s.next > limit || now-maxTs < cfg.MinCompactionLag.Milliseconds() {
			break
		}
		n++
	}
	l.mu.RUnlock()
	if !cfg.Compact || n == 0 {
		return stats, nil
	}

	txns, err := replayTxns(parts, hw)
	if err != nil {
		return stats, err
	}
	limit = min(limit, txns.firstUndecided)
	for n > 0 && parts[n-1].seg.next > limit {
		n--
	}
	if n == 0 {
		return stats, nil
	}

	latest := map[string]int64{}
	for _, p := range parts {
		if p.seg.base >= limit {
			break
		}
		err := forEachStoredBatch(p.seg, p.size, func(b model.Batch) error {
			if b.IsControl() || b.LastOffset() >= limit {
				return nil
			}
			if b.IsTransactional() {
				if decided, commit := txns.fate(b.ProducerID(), b.BaseOffset()); !decided || !commit {
					return nil
				}
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

	c := &cleaner{latest: latest, txns: txns, horizon: now - cfg.DeleteRetention.Milliseconds(),
		removeMarkers: markerRemoval != nil, traversed: map[int64]bool{}}
	for _, p := range parts[:n] {
		s := p.seg
		out, removed, markers, err := c.clean(s)
		if err != nil {
			return stats, err
		}
		if removed == 0 {
			continue
		}
		if len(markers) > 0 {
			if err := markerRemoval(markers); err != nil {
				return stats, fmt.Errorf("before removing transaction markers of %s: %w", s.file.Name(), err)
			}
		}
		if err := l.swapSegment(s, out); err != nil {
			return stats, err
		}
		stats.Segments++
		stats.RecordsRemoved += removed
		stats.BytesBefore += s.size
		stats.BytesAfter += int64(len(out))
	}
	return stats, nil
}

// SetFirstUnstableOffset tells compaction the first offset of the oldest
// transaction that is open or whose marker is not yet below the high
// watermark, or -1 (the default) when there is none. The replica layer
// calls it whenever that changes; compaction cleans nothing at or past it.
func (l *Log) SetFirstUnstableOffset(offset int64) {
	l.mu.Lock()
	l.firstUnstable = max(offset, -1)
	l.mu.Unlock()
}

// RemovedMarker names a transaction marker that compaction is about to
// remove.
type RemovedMarker struct {
	ProducerID int64
	Offset     int64
	Commit     bool // false: an abort marker
}

// SetMarkerRemoval lets compaction remove transaction markers whose
// transactions have no data left: fn is called with the markers of a
// segment before the segment without them is swapped in (and before any
// reader can miss them), and an error keeps them. The replica layer uses
// it to forget those aborted transactions and to replace its producer
// snapshots with one taken after the markers. Until it is set, markers are
// kept. fn runs on the compacting goroutine holding no lock of the log but
// the compaction's own, so it may call the log (Sync, StartOffset).
func (l *Log) SetMarkerRemoval(fn func([]RemovedMarker) error) {
	l.mu.Lock()
	l.markerRemoval = fn
	l.mu.Unlock()
}

// segmentPart is a segment and how much of it a compaction pass reads.
type segmentPart struct {
	seg  *segment
	size int64
}

// txnSpan is a decided transaction of one producer: its data batches lie
// in [first, marker).
type txnSpan struct {
	first, marker int64
	commit        bool
}

// txnOutcomes is what the markers say of the transactional batches.
type txnOutcomes struct {
	spans          map[int64][]txnSpan // by producer id, in offset order
	firstUndecided int64               // oldest undecided transaction's first offset; MaxInt64 for none
}

// replayTxns replays the markers below hw over parts (the whole log, in
// order), reading batch headers and whole markers only.
func replayTxns(parts []segmentPart, hw int64) (*txnOutcomes, error) {
	t := &txnOutcomes{spans: map[int64][]txnSpan{}, firstUndecided: math.MaxInt64}
	open := map[int64]int64{} // producer id -> first offset of its open transaction
	buf := make([]byte, scanChunk)
	for _, p := range parts {
		var ferr error
		more, err := scanChunked(p.seg.file, 0, p.size, buf, func(b model.Batch) bool {
			if b.BaseOffset() >= hw {
				return false
			}
			pid := b.ProducerID()
			switch {
			case b.IsControl():
				typ, err := ControlRecordType(b)
				if err != nil {
					ferr = fmt.Errorf("marker at offset %d of %s: %w", b.BaseOffset(), p.seg.file.Name(), err)
					return false
				}
				if first, ok := open[pid]; ok && (typ == ControlAbort || typ == ControlCommit) {
					t.spans[pid] = append(t.spans[pid], txnSpan{first: first, marker: b.BaseOffset(), commit: typ == ControlCommit})
					delete(open, pid)
				}
			case b.IsTransactional():
				if _, ok := open[pid]; !ok {
					open[pid] = b.BaseOffset()
				}
			}
			return true
		})
		if ferr != nil {
			return nil, ferr
		}
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	for _, first := range open {
		t.firstUndecided = min(t.firstUndecided, first)
	}
	return t, nil
}

// fate says whether the transactional batch of pid at base is decided and
// whether it committed.
func (t *txnOutcomes) fate(pid, base int64) (decided, commit bool) {
	spans := t.spans[pid]
	i := sort.Search(len(spans), func(i int) bool { return spans[i].marker > base })
	if i == len(spans) || spans[i].first > base {
		return false, false
	}
	return true, spans[i].commit
}

// cleaner filters the cleaned segments of one pass, in offset order.
type cleaner struct {
	latest        map[string]int64
	txns          *txnOutcomes
	horizon       int64 // tombstones and markers with older max timestamps may go
	removeMarkers bool
	traversed     map[int64]bool // producer id -> a data batch of its current transaction was read
}

// clean returns s without the records compaction drops, the number of
// records removed and the transaction markers among them.
func (c *cleaner) clean(s *segment) ([]byte, int, []RemovedMarker, error) {
	var out []byte
	var kept []Record
	var markers []RemovedMarker
	removed := 0
	err := forEachStoredBatch(s, s.size, func(b model.Batch) error {
		pid := b.ProducerID()
		if b.IsControl() {
			typ, err := ControlRecordType(b)
			if err != nil {
				return fmt.Errorf("marker at offset %d of %s: %w", b.BaseOffset(), s.file.Name(), err)
			}
			if typ == ControlAbort || typ == ControlCommit {
				traversed := c.traversed[pid]
				delete(c.traversed, pid)
				if !traversed && b.MaxTimestamp() < c.horizon && c.removeMarkers {
					removed += int(b.RecordCount())
					markers = append(markers, RemovedMarker{ProducerID: pid, Offset: b.BaseOffset(), Commit: typ == ControlCommit})
					return nil
				}
			}
			out = append(out, b...)
			return nil
		}
		if b.IsTransactional() {
			c.traversed[pid] = true
			switch decided, commit := c.txns.fate(pid, b.BaseOffset()); {
			case !decided: // never below the limit; kept whole all the same
				out = append(out, b...)
				return nil
			case !commit:
				removed += int(b.RecordCount())
				return nil
			}
		}
		kept = kept[:0]
		var dropped int
		err := forEachRecord(b, func(r *Record) error {
			offset := b.BaseOffset() + int64(r.OffsetDelta)
			tombstoneGone := r.Value == nil && b.MaxTimestamp() < c.horizon
			if r.Key == nil || c.latest[string(r.Key)] != offset || tombstoneGone {
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
	if err != nil {
		return nil, 0, nil, err
	}
	return out, removed, markers, nil
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
