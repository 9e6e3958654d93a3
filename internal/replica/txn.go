package replica

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sort"

	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
)

// Transactions, as a partition sees them (Kafka's ProducerStateManager and
// ProducerAppendInfo; the rules are at the top of producer.go):
//
//   - Each producer entry knows the first offset of its open transaction
//     (producerEntry.txnFirst) and the coordinator epoch of its last marker.
//     Partition.appendMu guards them with the rest of the producer state.
//   - txnState, guarded by Partition.mu, is what readers need: the
//     transactions that hold the last stable offset back (open ones, and
//     decided ones whose marker is not yet below the high watermark), and
//     the aborted transactions that read_committed fetches must be told
//     about. Appends change it with appendMu and mu both held; the high
//     watermark prunes it under mu alone.
//
// Aborted transactions are kept in memory and in the producer snapshot,
// until the log start passes their marker or compaction removes the marker
// (Kafka keeps them in per-segment .txnindex files instead, deleted with
// the segments and rewritten by the cleaner).
//
// Compaction (log.Log.Compact) learns from here where it must stop: every
// change of the oldest unstable transaction is passed on with
// log.SetFirstUnstableOffset, under Partition.mu. Before it removes
// markers it calls Partition.forgetMarkers, which drops the aborted
// transactions among them and replaces the older snapshots, so that no
// fetch names an aborted transaction whose marker is gone (a read_committed
// consumer would skip every later transactional batch of that producer in
// the response, waiting for the marker) and no rebuild starts from a
// snapshot that saw a removed marker's transaction open.

// Marker is a transaction marker (control batch) written by the transaction
// coordinator.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool // false: abort
	CoordinatorEpoch int32
}

// AbortedTxn is an aborted transaction of a partition: read_committed
// consumers skip its producer's records in [FirstOffset, LastOffset].
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64 // the abort marker's offset
}

// unstableTxn is a transaction that holds the last stable offset back.
type unstableTxn struct {
	pid   int64
	first int64
	last  int64 // the marker's offset; -1 while the transaction is open
}

// abortedEntry is an aborted transaction and, as in Kafka's AbortedTxn
// index entry, the last stable offset right after its marker: the first
// offset of the oldest transaction still open then, or the marker's offset
// + 1. No transaction aborted later can start below it, which lets a
// search stop early.
type abortedEntry struct {
	AbortedTxn
	stableAfter int64
}

// txnState is a partition's transactions as readers need them. See the
// top of this file for its locking.
type txnState struct {
	unstable  []unstableTxn  // by first offset
	completed int            // entries of unstable with a marker
	aborted   []abortedEntry // by LastOffset (marker order)
}

// open records a transaction started at first (a new transaction starts
// at the log end, so this is almost always an append).
func (t *txnState) open(pid, first int64) {
	i := sort.Search(len(t.unstable), func(i int) bool { return t.unstable[i].first >= first })
	t.unstable = slices.Insert(t.unstable, i, unstableTxn{pid: pid, first: first, last: -1})
}

// complete records the marker at offset last of the open transaction that
// started at first.
func (t *txnState) complete(pid, first, last int64, commit bool) {
	i := sort.Search(len(t.unstable), func(i int) bool { return t.unstable[i].first >= first })
	if i < len(t.unstable) && t.unstable[i].first == first && t.unstable[i].last < 0 {
		t.unstable[i].last = last
		t.completed++
	}
	if commit {
		return
	}
	stable := last + 1
	for _, u := range t.unstable {
		if u.last < 0 {
			stable = min(stable, u.first)
			break // sorted: the first open one is the oldest
		}
	}
	t.aborted = append(t.aborted, abortedEntry{AbortedTxn{pid, first, last}, stable})
}

// onHighWatermark forgets the decided transactions whose markers are now
// below hw: they no longer hold the last stable offset back.
func (t *txnState) onHighWatermark(hw int64) {
	if t.completed == 0 {
		return
	}
	t.unstable = slices.DeleteFunc(t.unstable, func(u unstableTxn) bool {
		if u.last >= 0 && u.last < hw {
			t.completed--
			return true
		}
		return false
	})
}

// lastStable is the last stable offset given the high watermark hw and the
// log start: a transaction that starts below the log start (DeleteRecords
// moved it past the start of one still open) holds it back only to the log
// start, as Kafka's UnifiedLog.maybeIncrementFirstUnstableOffset does.
func (t *txnState) lastStable(hw, logStart int64) int64 {
	if len(t.unstable) > 0 {
		return min(hw, max(t.unstable[0].first, logStart))
	}
	return hw
}

// firstUnstable is the first offset of the oldest transaction that is open
// or whose marker is not yet below the high watermark, -1 for none: where
// compaction must stop (log.SetFirstUnstableOffset). Unlike lastStable it
// is not raised to the log start: compaction then cleans nothing.
func (t *txnState) firstUnstable() int64 {
	if len(t.unstable) > 0 {
		return t.unstable[0].first
	}
	return -1
}

// dropAborted forgets the aborted transactions whose markers compaction
// is about to remove (their data is gone already).
func (t *txnState) dropAborted(markers []log.RemovedMarker) {
	for _, m := range markers {
		if m.Commit {
			continue
		}
		i := sort.Search(len(t.aborted), func(i int) bool { return t.aborted[i].LastOffset >= m.Offset })
		if i < len(t.aborted) && t.aborted[i].LastOffset == m.Offset && t.aborted[i].ProducerID == m.ProducerID {
			t.aborted = slices.Delete(t.aborted, i, i+1)
		}
	}
}

// abortedIn returns the aborted transactions with LastOffset >= from and
// FirstOffset < upTo, by FirstOffset.
func (t *txnState) abortedIn(from, upTo int64) []AbortedTxn {
	i := sort.Search(len(t.aborted), func(i int) bool { return t.aborted[i].LastOffset >= from })
	var out []AbortedTxn
	for _, a := range t.aborted[i:] {
		if a.FirstOffset < upTo {
			out = append(out, a.AbortedTxn)
		}
		if a.stableAfter >= upTo {
			break // every later one starts at or above upTo
		}
	}
	slices.SortFunc(out, func(a, b AbortedTxn) int {
		return cmp.Or(cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(a.LastOffset, b.LastOffset))
	})
	return out
}

// abortedBelow reports whether some aborted transaction ends below start.
func (t *txnState) abortedBelow(start int64) bool {
	return len(t.aborted) > 0 && t.aborted[0].LastOffset < start
}

// dropAbortedBelow forgets the aborted transactions wholly below the log
// start.
func (t *txnState) dropAbortedBelow(start int64) {
	i := sort.Search(len(t.aborted), func(i int) bool { return t.aborted[i].LastOffset >= start })
	t.aborted = slices.Delete(t.aborted, 0, i)
}

// rebuild derives the open transactions from the producer entries (after
// a snapshot is loaded).
func (t *txnState) rebuild(producers map[int64]*producerEntry) {
	t.unstable, t.completed = t.unstable[:0], 0
	for pid, e := range producers {
		if e.txnFirst >= 0 {
			t.unstable = append(t.unstable, unstableTxn{pid: pid, first: e.txnFirst, last: -1})
		}
	}
	slices.SortFunc(t.unstable, func(a, b unstableTxn) int { return cmp.Compare(a.first, b.first) })
}

// checkMarker applies Kafka's checks of a marker from the coordinator
// (ProducerAppendInfo.appendEndTxnMarker): the producer epoch first, then
// the coordinator epoch.
func (s *producerState) checkMarker(m Marker) error {
	e := s.producers[m.ProducerID]
	if e == nil {
		return nil
	}
	if m.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: marker epoch %d of producer %d is older than its current epoch %d",
			ErrInvalidProducerEpoch, m.ProducerEpoch, m.ProducerID, e.epoch)
	}
	if m.CoordinatorEpoch < e.coordEpoch {
		return fmt.Errorf("%w: marker of producer %d from coordinator epoch %d, which is older than %d",
			ErrTransactionCoordinatorFenced, m.ProducerID, m.CoordinatorEpoch, e.coordEpoch)
	}
	return nil
}

// applyMarker records the marker at offset for producer pid: its epoch
// becomes the producer's (a new epoch drops the cached batches, so the next
// data batch starts at sequence 0), and its open transaction, if any, is
// decided. active is the activity time. The caller holds Partition.mu as
// well as appendMu (or owns the state, while loading).
func (s *producerState) applyMarker(pid int64, epoch int16, commit bool, coordEpoch int32, offset, active int64) {
	s.end = max(s.end, offset+1)
	e := s.entry(pid)
	if e.epoch != epoch {
		e.epoch = epoch
		e.batches = e.batches[:0]
	}
	e.coordEpoch = coordEpoch
	e.markers++
	e.lastActive = max(e.lastActive, active)
	if e.txnFirst >= 0 {
		s.txns.complete(pid, e.txnFirst, offset, commit)
		e.txnFirst = -1
	}
}

// Control record encoding (Kafka's EndTransactionMarker): the key is
// version 0 and the type, the value version 0 and the coordinator epoch.
const (
	controlKeyLen   = 2 + 2
	controlValueLen = 2 + 4
)

// markerCoordinatorEpoch reads the coordinator epoch from a marker's
// record value (Kafka's EndTransactionMarker: version >= 0, then the epoch;
// later versions may append fields).
func markerCoordinatorEpoch(value []byte) (int32, error) {
	if len(value) < controlValueLen || int16(binary.BigEndian.Uint16(value)) < 0 {
		return 0, fmt.Errorf("%w: marker value of %d bytes", ErrCorruptLog, len(value))
	}
	return int32(binary.BigEndian.Uint32(value[2:])), nil
}

// markerBatch builds the control batch for m, stamped ts: transactional
// and control, the marker's producer id and epoch, no sequence, one record.
func markerBatch(m Marker, ts int64) []byte {
	typ := log.ControlAbort
	if m.Commit {
		typ = log.ControlCommit
	}
	var rec []byte
	rec = append(rec, 0)                          // attributes
	rec = binary.AppendVarint(rec, 0)             // timestamp delta
	rec = binary.AppendVarint(rec, 0)             // offset delta
	rec = binary.AppendVarint(rec, controlKeyLen) // key
	rec = binary.BigEndian.AppendUint16(rec, 0)
	rec = binary.BigEndian.AppendUint16(rec, uint16(typ))
	rec = binary.AppendVarint(rec, controlValueLen) // value
	rec = binary.BigEndian.AppendUint16(rec, 0)
	rec = binary.BigEndian.AppendUint32(rec, uint32(m.CoordinatorEpoch))
	rec = binary.AppendVarint(rec, 0) // headers

	b := make([]byte, model.BatchHeaderSize, model.BatchHeaderSize+binary.MaxVarintLen32+len(rec))
	binary.BigEndian.PutUint32(b[model.BatchLeaderEpochPos:], 0xffffffff) // -1; the log stamps its own
	b[model.BatchMagicPos] = model.BatchMagic
	binary.BigEndian.PutUint16(b[model.BatchAttributesPos:], model.AttrTransactional|model.AttrControl)
	binary.BigEndian.PutUint32(b[model.BatchLastDeltaPos:], 0)
	binary.BigEndian.PutUint64(b[model.BatchBaseTimestampPos:], uint64(ts))
	binary.BigEndian.PutUint64(b[model.BatchMaxTimestampPos:], uint64(ts))
	binary.BigEndian.PutUint64(b[model.BatchProducerIDPos:], uint64(m.ProducerID))
	binary.BigEndian.PutUint16(b[model.BatchProducerEpochPos:], uint16(m.ProducerEpoch))
	binary.BigEndian.PutUint32(b[model.BatchBaseSequencePos:], 0xffffffff) // -1: NO_SEQUENCE
	binary.BigEndian.PutUint32(b[model.BatchRecordCountPos:], 1)
	b = binary.AppendVarint(b, int64(len(rec)))
	b = append(b, rec...)
	binary.BigEndian.PutUint32(b[model.BatchLengthPos:], uint32(len(b)-model.BatchLengthOverhead))
	binary.BigEndian.PutUint32(b[model.BatchCRCPos:], crc32.Checksum(b[model.BatchAttributesPos:], castagnoli))
	return b
}

// WriteMarker appends the control batch for m and returns its offset and a
// wait function (as Append's). The marker decides the producer's open
// transaction, if any (an abort is recorded for AbortedTransactions); a
// marker for a producer with no open transaction is written all the same
// and decides nothing, as in Kafka.
//
// Errors: ErrInvalidProducerEpoch when m.ProducerEpoch is older than the
// producer's current epoch; ErrTransactionCoordinatorFenced when
// m.CoordinatorEpoch is older than the last one seen for the producer; the
// log's errors.
func (p *Partition) WriteMarker(m Marker) (int64, func() error, error) {
	if m.ProducerID < 0 {
		return -1, noWait, fmt.Errorf("%w: marker of producer %d", ErrInvalidRecord, m.ProducerID)
	}
	if err := p.mirrorErr(); err != nil {
		return -1, noWait, err
	}
	p.appendMu.Lock()
	ps := p.producers
	if err := ps.checkMarker(m); err != nil {
		p.appendMu.Unlock()
		return -1, noWait, err
	}
	now := p.opts.Now().UnixMilli()
	lres, err := p.log.Append(markerBatch(m, now), log.AppendOptions{LeaderEpoch: p.LeaderEpoch(), Internal: true})
	if err != nil || lres.BaseOffset < 0 {
		p.appendMu.Unlock()
		if err == nil {
			err = fmt.Errorf("%w: marker not written", ErrStorage)
		}
		return -1, noWait, err
	}
	p.mu.Lock()
	ps.applyMarker(m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch, lres.BaseOffset, now)
	p.mu.Unlock()
	p.applied.Store(lres.BaseOffset + 1)
	snap, snapEnd := p.afterAppendLocked(now)
	p.appendMu.Unlock()
	p.maybeWriteSnapshot(snap, snapEnd)
	return lres.BaseOffset, p.waitFor(lres.BaseOffset + 1), nil
}

// AppendInternal appends a coordinator's batches (the group coordinator's
// __consumer_offsets writes, plain or transactional with base sequence 0),
// as Kafka appends with AppendOrigin.COORDINATOR: no sequence or duplicate
// checks, but epoch fencing (an older epoch: ErrInvalidProducerEpoch) and
// transaction tracking as Append (a transactional batch opens its
// producer's transaction; a plain batch of a producer with an open one is
// ErrInvalidTxnState). Control batches are refused (ErrInvalidRecord):
// markers go through WriteMarker.
func (p *Partition) AppendInternal(data []byte) (AppendResult, func() error, error) {
	return p.append(data, fromCoordinator, nil)
}

// TxnGuard is what the partition knew of a producer's transaction when a
// transactional batch of the older protocol was verified with the
// coordinator (Kafka's VerificationGuard, KIP-890 part 1). The coordinator
// said the partition is in the producer's ongoing transaction; if that
// transaction's marker reaches the partition before the batch does, the
// batch would open a transaction the coordinator does not know, which no
// marker would ever end: the last stable offset would hang. The guard lets
// AppendVerified refuse it.
type TxnGuard struct {
	pid     int64
	markers uint64
}

// TxnGuard returns the guard for a batch of producer pid about to be
// verified; take it before asking the coordinator.
func (p *Partition) TxnGuard(pid int64) TxnGuard {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	g := TxnGuard{pid: pid}
	if e := p.producers.producers[pid]; e != nil {
		g.markers = e.markers
	}
	return g
}

// AppendVerified is Append for a transactional batch verified under g: it
// fails with ErrInvalidTxnState when a marker for the producer arrived
// since g was taken and the batch would open a new transaction (with the
// older protocol the epoch stays, so the epoch check cannot catch it).
func (p *Partition) AppendVerified(data []byte, g TxnGuard) (AppendResult, func() error, error) {
	return p.append(data, fromClient, &g)
}

// checkGuard applies g. appendMu is held.
func (s *producerState) checkGuard(g *TxnGuard) error {
	if g == nil {
		return nil
	}
	e := s.producers[g.pid]
	var markers uint64
	if e != nil {
		markers = e.markers
	}
	// No entry: no marker arrived since the guard (a marker makes or
	// refreshes the entry, which then cannot expire in the meantime), or
	// the entry expired between the two, which no marker causes.
	if e != nil && markers != g.markers && e.txnFirst < 0 {
		return fmt.Errorf("%w: the transaction of producer %d ended after the batch was verified", ErrInvalidTxnState, g.pid)
	}
	return nil
}

// AbortedTransactions returns the aborted transactions with LastOffset >=
// from and FirstOffset < upTo, by FirstOffset: what a read_committed fetch
// of [from, upTo) must skip.
func (p *Partition) AbortedTransactions(from, upTo int64) []AbortedTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.txns.abortedIn(from, upTo)
}

// LastStableOffset is the offset below which every transaction is decided
// and its marker committed: the high watermark, or the first offset of the
// oldest transaction that is open or whose marker is not yet below the high
// watermark (but not below the log start), whichever is lower.
// read_committed fetches read up to it; it moves with the high watermark,
// which wakes the waiters.
func (p *Partition) LastStableOffset() int64 {
	start := p.log.StartOffset() // the log's lock taken before mu here, not under it
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.txns.lastStable(p.hw, start)
}
