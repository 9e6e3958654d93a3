package replica

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// Producer state: what makes idempotent producing exact. For every producer
// id that wrote to the partition it keeps the producer's epoch and the
// metadata (sequence range, offsets, timestamp) of its last five batches,
// as Kafka's ProducerStateManager does, and checks each incoming batch
// against it before the batch is written (Partition.Append):
//
//   - A batch of the current epoch whose sequence range equals one of the
//     five cached batches is a retry of a batch already stored: nothing is
//     written and the answer is the original's offsets with no error (Kafka
//     UnifiedLog.analyzeAndValidateProducerState / findDuplicateBatch).
//   - An epoch older than the producer's current one is INVALID_PRODUCER_EPOCH
//     (ProducerAppendInfo.checkProducerEpoch; since Kafka 2.7 not the fatal
//     PRODUCER_FENCED).
//   - A newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER.
//     It drops the cached batches. This is how idempotent producers recover
//     (KIP-360): the Java client bumps its epoch locally and restarts at 0.
//   - The same epoch must continue at the last sequence + 1, with int32
//     wrap-around from MaxInt32 to 0, else OUT_OF_ORDER_SEQUENCE_NUMBER.
//   - A producer the partition does not know (new, expired, or whose state
//     was lost with the log) may start at any sequence and epoch. Kafka 4
//     does the same (ProducerAppendInfo.checkSequence accepts any sequence
//     when the current epoch is NO_PRODUCER_EPOCH), so UNKNOWN_PRODUCER_ID is
//     never returned by Produce.
//
// Sequences of a batch: base sequence for the first record, base +
// lastOffsetDelta (wrapping) for the last, as Kafka's
// DefaultRecordBatch.lastSequence.
//
// Coordinator batches (Partition.AppendInternal, Kafka's
// AppendOrigin.COORDINATOR) skip the duplicate and sequence checks; the
// epoch and transaction rules still apply.
//
// Transactions (Kafka's ProducerAppendInfo; txn.go keeps what readers need):
//
//   - A transactional data batch (attributes bit 0x10) opens its producer's
//     transaction at the batch's base offset when none is open; later
//     batches of the transaction leave that first offset alone.
//   - A non-transactional batch of a producer with an open transaction is
//     INVALID_TXN_STATE (checked after the epoch and sequence).
//   - A marker (WriteMarker: a control batch from the transaction
//     coordinator) is checked for an older producer epoch
//     (INVALID_PRODUCER_EPOCH) and then an older coordinator epoch than the
//     producer's last marker had (TRANSACTION_COORDINATOR_FENCED). It closes
//     the open transaction, if any: an abort is recorded as an aborted
//     transaction [first offset, marker offset], a commit leaves nothing. A
//     marker with no open transaction is written and decides nothing. The
//     marker's epoch becomes the producer's: a higher one (KIP-890 bumps the
//     epoch at every EndTxn, and fencing does) drops the cached batches, so
//     the next data batch starts at sequence 0; the same epoch keeps them,
//     and sequences continue across transactions.
//   - The last stable offset is the high watermark or the first offset of
//     the oldest transaction that is open or whose marker is not yet below
//     the high watermark, whichever is lower.
//   - A producer with an open transaction never expires.
//
// The state is persisted as snapshots beside the segments (see
// snapshotSuffix for the format) and rebuilt on open from the newest usable
// snapshot plus a scan of the log after it: batch headers, and the markers'
// records for their commit or abort. Producers idle for longer than
// Options.ProducerIDExpiration are forgotten, unless a transaction of
// theirs is open.

const (
	// producerBatchesToRetain is Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN:
	// idempotent clients keep at most five requests in flight per
	// connection, so a retry always repeats one of the last five batches.
	producerBatchesToRetain = 5
	noProducerEpoch         = -1 // RecordBatch.NO_PRODUCER_EPOCH
)

// batchMeta is what is remembered of one appended batch.
type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	timestamp               int64 // the stored batch's max timestamp (the append time on LogAppendTime topics)
}

// producerEntry is one producer's state in one partition.
type producerEntry struct {
	epoch      int16
	lastActive int64       // unix ms of its last append (see expiry in doc of Options)
	batches    []batchMeta // oldest first, at most producerBatchesToRetain, all of epoch
	txnFirst   int64       // first offset of its open transaction, -1 for none
	coordEpoch int32       // coordinator epoch of its last marker, -1 for none
	markers    uint64      // markers applied since the entry was made (TxnGuard); not persisted
}

func newEntry() *producerEntry {
	return &producerEntry{epoch: noProducerEpoch, txnFirst: -1, coordEpoch: -1}
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1 // RecordBatch.NO_SEQUENCE: only sequence 0 follows it
	}
	return e.batches[len(e.batches)-1].lastSeq
}

func (e *producerEntry) clone() *producerEntry {
	c := *e
	c.batches = slices.Clone(e.batches)
	return &c
}

// findDuplicate returns the cached batch of epoch with exactly the sequence
// range [first, last].
func (e *producerEntry) findDuplicate(epoch int16, first, last int32) (batchMeta, bool) {
	if epoch != e.epoch {
		return batchMeta{}, false
	}
	for _, b := range e.batches {
		if b.firstSeq == first && b.lastSeq == last {
			return b, true
		}
	}
	return batchMeta{}, false
}

// add records an appended batch; a new epoch drops the batches of the old.
func (e *producerEntry) add(epoch int16, m batchMeta, active int64) {
	if e.epoch != epoch {
		e.epoch = epoch
		e.batches = e.batches[:0]
	}
	if len(e.batches) == producerBatchesToRetain {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:len(e.batches)-1]
	}
	e.batches = append(e.batches, m)
	e.lastActive = max(e.lastActive, active)
}

// lastSequence is the sequence of the last record of a batch: Kafka's
// DefaultRecordBatch.incrementSequence, wrapping past MaxInt32 to 0.
func lastSequence(base, lastOffsetDelta int32) int32 {
	if base > math.MaxInt32-lastOffsetDelta {
		return lastOffsetDelta - (math.MaxInt32 - base) - 1
	}
	return base + lastOffsetDelta
}

// inSequence reports whether next directly follows last.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || next == 0 && last == math.MaxInt32
}

// checkEpoch fences a batch of an epoch older than the producer's (e: nil
// when unknown).
func checkEpoch(e *producerEntry, pid int64, epoch int16) error {
	if e != nil && epoch < e.epoch {
		return fmt.Errorf("%w: epoch %d of producer %d is older than its current epoch %d",
			ErrInvalidProducerEpoch, epoch, pid, e.epoch)
	}
	return nil
}

// checkTxn applies the transaction rule for a data batch: a plain batch
// while the producer's transaction is open is INVALID_TXN_STATE.
func checkTxn(e *producerEntry, pid int64, transactional bool) error {
	if e != nil && e.txnFirst >= 0 && !transactional {
		return fmt.Errorf("%w: non-transactional batch of producer %d while its transaction from offset %d is open",
			ErrInvalidTxnState, pid, e.txnFirst)
	}
	return nil
}

// checkBatch applies Kafka's rules for a client's data batch (see the top of
// this file) to producer pid, whose entry is e (nil when unknown). It returns
// the cached batch when the batch is a duplicate.
func checkBatch(e *producerEntry, pid int64, epoch int16, firstSeq, lastSeq int32) (batchMeta, bool, error) {
	current := int16(noProducerEpoch)
	if e != nil {
		if d, ok := e.findDuplicate(epoch, firstSeq, lastSeq); ok {
			return d, true, nil
		}
		current = e.epoch
	}
	if err := checkEpoch(e, pid, epoch); err != nil {
		return batchMeta{}, false, err
	}
	if current == noProducerEpoch {
		return batchMeta{}, false, nil // unknown producer: any sequence starts it
	}
	if epoch != current {
		if firstSeq != 0 {
			return batchMeta{}, false, fmt.Errorf("%w: new epoch %d of producer %d starts at sequence %d, not 0 (current epoch %d)",
				ErrOutOfOrderSequence, epoch, pid, firstSeq, current)
		}
		return batchMeta{}, false, nil
	}
	if last := e.lastSeq(); !inSequence(last, firstSeq) {
		return batchMeta{}, false, fmt.Errorf("%w: producer %d epoch %d sent sequence %d after %d",
			ErrOutOfOrderSequence, pid, epoch, firstSeq, last)
	}
	return batchMeta{}, false, nil
}

// producerState is a partition's producer table. Partition.appendMu guards
// it, except txns (see txn.go): Partition.mu guards that, and appends
// change it holding both.
type producerState struct {
	producers map[int64]*producerEntry
	end       int64 // map end offset: every batch below it is reflected
	appends   int   // appends since the last snapshot was taken
	lastSweep int64 // unix ms of the last expiry sweep
	txns      txnState
}

// origin says who appends, which decides the checks (Kafka's AppendOrigin).
type origin int

const (
	fromClient      origin = iota // a produce request: every check
	fromCoordinator               // a coordinator's batch: no duplicate or sequence checks
)

func newProducerState() *producerState {
	return &producerState{producers: map[int64]*producerEntry{}}
}

// check checks the batches of one append (a produce request carries one)
// and returns the original's metadata when the append repeats a stored
// batch. Batches it cannot read are left for the log to reject, as Kafka
// validates a batch before looking at its producer.
func (s *producerState) check(data []byte, o origin) (batchMeta, bool, error) {
	var pending map[int64]*producerEntry // state as of the earlier batches of this append
	// A rest that is not a whole batch ends the walk: the log refuses it.
	r := model.NewBatchReader(data)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		if b.Magic() != model.BatchMagic {
			return batchMeta{}, false, nil
		}
		pid := b.ProducerID()
		if pid < 0 || b.IsControl() {
			continue
		}
		first, delta := b.BaseSequence(), b.LastOffsetDelta()
		if first < 0 || delta < 0 {
			return batchMeta{}, false, nil // INVALID_RECORD from the log
		}
		last := lastSequence(first, delta)
		e := s.producers[pid]
		if p, ok := pending[pid]; ok {
			e = p
		}
		var dup batchMeta
		var isDup bool
		var err error
		if o == fromClient {
			dup, isDup, err = checkBatch(e, pid, b.ProducerEpoch(), first, last)
		} else {
			err = checkEpoch(e, pid, b.ProducerEpoch())
		}
		if err == nil && !isDup {
			err = checkTxn(e, pid, b.IsTransactional())
		}
		if isDup && dup.firstOffset < 0 {
			// A batch repeated inside one append; Kafka never sees this
			// (one batch per partition per request).
			err = fmt.Errorf("%w: producer %d repeats sequence %d within one append", ErrOutOfOrderSequence, pid, first)
		}
		if err != nil || isDup {
			return dup, isDup, err
		}
		if r.Pos() < len(data) {
			if pending == nil {
				pending = map[int64]*producerEntry{}
			}
			c := newEntry()
			if e != nil {
				c = e.clone()
			}
			c.add(b.ProducerEpoch(), batchMeta{firstSeq: first, lastSeq: last, firstOffset: -1, lastOffset: -1}, 0)
			if b.IsTransactional() && c.txnFirst < 0 {
				c.txnFirst = 0 // open; its offset is not known before the write
			}
			pending[pid] = c
		}
	}
	return batchMeta{}, false, nil
}

// commit records the data batches an append wrote. logAppendTime is the
// time the log stamped on them, or -1. It returns the transactions the
// batches opened, for the caller to add to s.txns under Partition.mu.
func (s *producerState) commit(batches []log.BatchInfo, logAppendTime, now int64) []unstableTxn {
	var opened []unstableTxn
	for _, bi := range batches {
		s.end = max(s.end, bi.LastOffset+1)
		if bi.ProducerID < 0 || bi.Control {
			continue
		}
		ts := bi.MaxTimestamp
		if logAppendTime >= 0 {
			ts = logAppendTime
		}
		e := s.entry(bi.ProducerID)
		e.add(bi.ProducerEpoch, batchMeta{
			firstSeq:    bi.BaseSequence,
			lastSeq:     lastSequence(bi.BaseSequence, int32(bi.LastOffset-bi.BaseOffset)),
			firstOffset: bi.BaseOffset,
			lastOffset:  bi.LastOffset,
			timestamp:   ts,
		}, now)
		if bi.Transactional && e.txnFirst < 0 {
			e.txnFirst = bi.BaseOffset
			opened = append(opened, unstableTxn{pid: bi.ProducerID, first: bi.BaseOffset, last: -1})
		}
	}
	return opened
}

func (s *producerState) entry(pid int64) *producerEntry {
	e := s.producers[pid]
	if e == nil {
		e = newEntry()
		s.producers[pid] = e
	}
	return e
}

// replay applies a stored batch without checks, as Kafka loads its log
// (the batch was checked when it was appended). A stored batch tells its
// client's timestamp, not when it arrived, so its activity time is that
// timestamp, capped at now. A control batch must be whole (ScanBatches
// passes them so): its record says commit or abort.
func (s *producerState) replay(b model.Batch, now int64) error {
	s.end = max(s.end, b.LastOffset()+1)
	pid := b.ProducerID()
	if pid < 0 {
		return nil
	}
	active := min(b.MaxTimestamp(), now)
	if b.IsControl() {
		typ, value, err := log.ControlRecord(b)
		if err != nil {
			return fmt.Errorf("marker at offset %d: %w", b.BaseOffset(), err)
		}
		if typ != log.ControlAbort && typ != log.ControlCommit {
			return nil // not a transaction marker
		}
		coordEpoch, err := markerCoordinatorEpoch(value)
		if err != nil {
			return fmt.Errorf("marker at offset %d: %w", b.BaseOffset(), err)
		}
		s.applyMarker(pid, b.ProducerEpoch(), typ == log.ControlCommit, coordEpoch, b.BaseOffset(), active)
		return nil
	}
	e := s.entry(pid)
	e.add(b.ProducerEpoch(), batchMeta{
		firstSeq:    b.BaseSequence(),
		lastSeq:     lastSequence(b.BaseSequence(), b.LastOffsetDelta()),
		firstOffset: b.BaseOffset(),
		lastOffset:  b.LastOffset(),
		timestamp:   b.MaxTimestamp(),
	}, active)
	if b.IsTransactional() && e.txnFirst < 0 {
		e.txnFirst = b.BaseOffset()
		s.txns.open(pid, e.txnFirst)
	}
	return nil
}

// expire forgets producers idle for at least expiration, unless their
// transaction is open (Kafka's isProducerExpired). It returns how many it
// removed.
func (s *producerState) expire(now int64, expiration time.Duration) int {
	n := 0
	for pid, e := range s.producers {
		if e.txnFirst < 0 && now-e.lastActive >= expiration.Milliseconds() {
			delete(s.producers, pid)
			n++
		}
	}
	return n
}

// ProducerInfo describes one producer's state in a partition (what Kafka's
// DescribeProducers reports).
type ProducerInfo struct {
	ProducerID            int64
	Epoch                 int16
	LastSequence          int32
	LastOffset            int64 // -1 when no batch of the current epoch is cached
	LastTimestamp         int64 // max timestamp of its last batch
	LastActive            time.Time
	Batches               int   // cached batches, at most 5
	CurrentTxnStartOffset int64 // first offset of its open transaction, -1 for none
	CoordinatorEpoch      int32 // coordinator epoch of its last marker, -1 for none
}

func (s *producerState) infos() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(s.producers))
	for pid, e := range s.producers {
		pi := ProducerInfo{ProducerID: pid, Epoch: e.epoch, LastSequence: e.lastSeq(), LastOffset: -1,
			LastTimestamp: -1, LastActive: time.UnixMilli(e.lastActive), Batches: len(e.batches),
			CurrentTxnStartOffset: e.txnFirst, CoordinatorEpoch: e.coordEpoch}
		if n := len(e.batches); n > 0 {
			pi.LastOffset, pi.LastTimestamp = e.batches[n-1].lastOffset, e.batches[n-1].timestamp
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// # Snapshots
//
// A snapshot is the whole producer table as of an offset, in the file
// <offset>.producers of the partition directory (the offset 20 digits
// zero-padded, as segment names): every batch below the offset is reflected
// in it, none at or above. Strand's own format, all integers big-endian:
//
//	version      int16  (2; version 1 files, written before transactions, still load)
//	crc          uint32 CRC-32C of everything after this field
//	end offset   int64  the offset in the file name
//	count        int32  number of producers, each:
//	  producer id        int64
//	  epoch              int16
//	  last active        int64  unix ms
//	  txn first offset   int64  first offset of its open transaction, -1 for none (not in v1)
//	  coordinator epoch  int32  of its last marker, -1 for none (not in v1)
//	  batches            int8   0-5, oldest first, each:
//	    first sequence, last sequence   int32, int32
//	    first offset, last offset       int64, int64
//	    timestamp                       int64
//	aborted      int32  number of aborted transactions, by marker offset (not in v1), each:
//	  producer id, first offset, last offset  int64, int64, int64
//	  stable after                            int64  (see abortedEntry)
//
// Unlike Kafka's snapshot (which keeps only the last batch per producer) it
// keeps all five cached batches, so a retry of any in-flight batch is still
// recognised after a clean restart, and it holds the aborted transactions
// that Kafka keeps in .txnindex files. Files are written atomically
// (temporary file, fsync, rename, directory fsync); the newest two are kept.

const (
	snapshotSuffix   = ".producers"
	snapshotVersion  = 2
	snapshotHeader   = 2 + 4 + 8 + 4
	snapshotEntryV1  = 8 + 2 + 8 + 1
	snapshotEntry    = snapshotEntryV1 + 8 + 4
	snapshotBatch    = 4 + 4 + 8 + 8 + 8
	snapshotAborted  = 8 + 8 + 8 + 8
	snapshotsKept    = 2
	snapshotCRCStart = 6
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func snapshotName(end int64) string { return fmt.Sprintf("%020d%s", end, snapshotSuffix) }

// encode serialises the table as of s.end, without the aborted
// transactions that end below logStart. It reads s.txns.aborted, which
// appendMu alone makes safe (it changes only with appendMu held).
func (s *producerState) encode(logStart int64) []byte {
	pids := make([]int64, 0, len(s.producers))
	size := snapshotHeader + 4
	for pid, e := range s.producers {
		pids = append(pids, pid)
		size += snapshotEntry + len(e.batches)*snapshotBatch
	}
	aborted := s.txns.aborted
	for len(aborted) > 0 && aborted[0].LastOffset < logStart {
		aborted = aborted[1:]
	}
	size += len(aborted) * snapshotAborted
	slices.Sort(pids)
	b := make([]byte, 0, size)
	b = binary.BigEndian.AppendUint16(b, snapshotVersion)
	b = binary.BigEndian.AppendUint32(b, 0) // crc, below
	b = binary.BigEndian.AppendUint64(b, uint64(s.end))
	b = binary.BigEndian.AppendUint32(b, uint32(len(pids)))
	for _, pid := range pids {
		e := s.producers[pid]
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastActive))
		b = binary.BigEndian.AppendUint64(b, uint64(e.txnFirst))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordEpoch))
		b = append(b, byte(len(e.batches)))
		for _, m := range e.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(m.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(m.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(m.firstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.lastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.timestamp))
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(aborted)))
	for _, a := range aborted {
		b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(a.LastOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(a.stableAfter))
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[snapshotCRCStart:], castagnoli))
	return b
}

// errBadSnapshot: a snapshot file failed its checks; it is discarded and
// the state rebuilt from the log.
var errBadSnapshot = errors.New("replica: bad producer snapshot")

// snapshot is a decoded snapshot file.
type snapshot struct {
	producers map[int64]*producerEntry
	aborted   []abortedEntry
	end       int64
}

func decodeSnapshot(b []byte) (snapshot, error) {
	if len(b) < snapshotHeader {
		return snapshot{}, fmt.Errorf("%w: %d bytes", errBadSnapshot, len(b))
	}
	version := int16(binary.BigEndian.Uint16(b))
	entrySize := snapshotEntry
	switch version {
	case 1:
		entrySize = snapshotEntryV1
	case snapshotVersion:
	default:
		return snapshot{}, fmt.Errorf("%w: version %d", errBadSnapshot, version)
	}
	if got, want := crc32.Checksum(b[snapshotCRCStart:], castagnoli), binary.BigEndian.Uint32(b[2:]); got != want {
		return snapshot{}, fmt.Errorf("%w: crc %08x, stored %08x", errBadSnapshot, got, want)
	}
	end := int64(binary.BigEndian.Uint64(b[6:]))
	count := int64(binary.BigEndian.Uint32(b[14:]))
	rest := b[snapshotHeader:]
	if count*int64(entrySize) > int64(len(rest)) {
		return snapshot{}, fmt.Errorf("%w: %d producers cannot fit %d bytes", errBadSnapshot, count, len(rest))
	}
	producers := make(map[int64]*producerEntry, count)
	for range count {
		if len(rest) < entrySize {
			return snapshot{}, fmt.Errorf("%w: truncated", errBadSnapshot)
		}
		pid := int64(binary.BigEndian.Uint64(rest))
		e := newEntry()
		e.epoch = int16(binary.BigEndian.Uint16(rest[8:]))
		e.lastActive = int64(binary.BigEndian.Uint64(rest[10:]))
		p := 18
		if version >= 2 {
			e.txnFirst = int64(binary.BigEndian.Uint64(rest[p:]))
			e.coordEpoch = int32(binary.BigEndian.Uint32(rest[p+8:]))
			p += 12
			if e.txnFirst < -1 || e.txnFirst >= end || e.coordEpoch < -1 {
				return snapshot{}, fmt.Errorf("%w: producer %d with transaction at %d, coordinator epoch %d",
					errBadSnapshot, pid, e.txnFirst, e.coordEpoch)
			}
		}
		n := int(rest[p])
		rest = rest[entrySize:]
		if n > producerBatchesToRetain || len(rest) < n*snapshotBatch {
			return snapshot{}, fmt.Errorf("%w: producer %d with %d batches", errBadSnapshot, pid, n)
		}
		e.batches = make([]batchMeta, n, producerBatchesToRetain)
		for i := range n {
			e.batches[i] = batchMeta{
				firstSeq:    int32(binary.BigEndian.Uint32(rest)),
				lastSeq:     int32(binary.BigEndian.Uint32(rest[4:])),
				firstOffset: int64(binary.BigEndian.Uint64(rest[8:])),
				lastOffset:  int64(binary.BigEndian.Uint64(rest[16:])),
				timestamp:   int64(binary.BigEndian.Uint64(rest[24:])),
			}
			rest = rest[snapshotBatch:]
		}
		producers[pid] = e
	}
	var aborted []abortedEntry
	if version >= 2 {
		if len(rest) < 4 {
			return snapshot{}, fmt.Errorf("%w: no aborted transactions count", errBadSnapshot)
		}
		n := int64(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if n*snapshotAborted != int64(len(rest)) {
			return snapshot{}, fmt.Errorf("%w: %d aborted transactions in %d bytes", errBadSnapshot, n, len(rest))
		}
		aborted = make([]abortedEntry, n)
		for i := range aborted {
			a := &aborted[i]
			a.ProducerID = int64(binary.BigEndian.Uint64(rest))
			a.FirstOffset = int64(binary.BigEndian.Uint64(rest[8:]))
			a.LastOffset = int64(binary.BigEndian.Uint64(rest[16:]))
			a.stableAfter = int64(binary.BigEndian.Uint64(rest[24:]))
			rest = rest[snapshotAborted:]
			if a.FirstOffset < 0 || a.FirstOffset >= a.LastOffset || a.LastOffset >= end ||
				i > 0 && a.LastOffset <= aborted[i-1].LastOffset {
				return snapshot{}, fmt.Errorf("%w: aborted transaction %+v", errBadSnapshot, a.AbortedTxn)
			}
		}
	}
	if len(rest) != 0 {
		return snapshot{}, fmt.Errorf("%w: %d trailing bytes", errBadSnapshot, len(rest))
	}
	return snapshot{producers: producers, aborted: aborted, end: end}, nil
}

// listSnapshots returns the end offsets of the snapshots in dir, ascending.
func listSnapshots(fsys vfs.FS, dir string) ([]int64, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var offs []int64
	for _, e := range entries {
		digits, ok := strings.CutSuffix(e.Name(), snapshotSuffix)
		if !ok || len(digits) != 20 {
			continue
		}
		if off, err := strconv.ParseInt(digits, 10, 64); err == nil {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	return offs, nil
}

// writeSnapshot stores data as the snapshot at end, atomically and
// durably, and removes all but the newest snapshotsKept.
func writeSnapshot(fsys vfs.FS, dir string, end int64, data []byte) error {
	if err := vfs.WriteFileAtomic(fsys, filepath.Join(dir, snapshotName(end)), data); err != nil {
		return err
	}
	offs, err := listSnapshots(fsys, dir)
	if err != nil {
		return err
	}
	for _, off := range offs[:max(len(offs)-snapshotsKept, 0)] {
		if err := fsys.Remove(filepath.Join(dir, snapshotName(off))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// removeSnapshots deletes every producer snapshot in dir.
func removeSnapshots(fsys vfs.FS, dir string) error {
	offs, err := listSnapshots(fsys, dir)
	if err != nil {
		return err
	}
	for _, off := range offs {
		if err := fsys.Remove(filepath.Join(dir, snapshotName(off))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// loadResult says how the state was rebuilt, for the log line and tests.
type loadResult struct {
	snapshot int64 // end offset of the snapshot used, -1 for none
	scanned  int   // batches replayed from the log
	expired  int
}

// loadProducerState rebuilds a partition's producer table: the newest
// snapshot that the log still covers (snapshots above the log end were
// written before a crash took the log's unsynced tail, and are removed;
// unreadable ones too), then every batch from its offset to the log end.
// Without a snapshot the whole log is scanned, reading only batch headers
// (one read per 64 KiB of small batches, one per batch for larger ones)
// and the markers' records. Aborted transactions wholly below the log
// start are dropped. The transactions decided in the log are still in
// s.txns as unstable until the caller applies the high watermark.
func loadProducerState(l *log.Log, now int64, expiration time.Duration) (*producerState, loadResult, error) {
	fsys, dir := l.FS(), l.Dir()
	res := loadResult{snapshot: -1}
	s := newProducerState()
	s.lastSweep = now
	offs, err := listSnapshots(fsys, dir)
	if err != nil {
		return nil, res, err
	}
	end := l.EndOffset()
	for i := len(offs) - 1; i >= 0 && res.snapshot < 0; i-- {
		off := offs[i]
		name := filepath.Join(dir, snapshotName(off))
		var snap snapshot
		data, err := vfs.ReadFile(fsys, name)
		if err == nil {
			snap, err = decodeSnapshot(data)
		}
		switch {
		case err == nil && snap.end != off:
			err = fmt.Errorf("%w: file %s says offset %d", errBadSnapshot, name, snap.end)
		case err == nil && off > end:
			err = fmt.Errorf("snapshot at %d is past the log end %d", off, end)
		}
		if err != nil {
			if rerr := fsys.Remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return nil, res, rerr
			}
			continue
		}
		s.producers, s.end, res.snapshot = snap.producers, off, off
		s.txns.aborted = snap.aborted
		s.txns.rebuild(snap.producers)
	}
	from := s.end
	if from < end {
		var rerr error
		err := l.ScanBatches(from, func(b model.Batch) bool {
			if b.BaseOffset() >= from {
				if rerr = s.replay(b, now); rerr != nil {
					return false
				}
				res.scanned++
			}
			return true
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return nil, res, fmt.Errorf("rebuilding producer state from offset %d: %w", from, err)
		}
	}
	s.end = max(s.end, end)
	s.txns.dropAbortedBelow(l.StartOffset())
	res.expired = s.expire(now, expiration)
	return s, res, nil
}
