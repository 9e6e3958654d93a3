package log

import (
	"fmt"

	"github.com/strandlog/strand/internal/model"
)

// WholeBatches returns the longest prefix of data made of whole batches: a
// fetch response may end with part of a batch that did not fit.
func WholeBatches(data []byte) []byte {
	r := model.NewBatchReader(data)
	for {
		if _, ok := r.Next(); !ok {
			return data[:r.Pos()]
		}
	}
}

// AppendReplicated writes batches fetched from the partition's leader as
// they are: offsets, leader epochs and timestamps are the leader's, so a
// follower's log is a byte-for-byte copy of its leader's. data holds whole
// batches in offset order, each passing its CRC, the first at or after the
// log end (compaction on the leader leaves gaps). The leader epochs the
// batches carry enter the epoch cache, so that this replica can answer
// OffsetForLeaderEpoch when it leads. Nothing is written unless every
// batch passes.
//
// An empty log (start and end alike: restarted at its leader's log start)
// also takes a first batch that holds its end: a leader's log start may
// fall inside a batch (DeleteRecords), which the leader sends whole. The
// log restarts at the batch's base (StartAt's steps), keeps its log
// start, and stores the batch.
//
// A follower's copy of a mirror does not learn the source's epochs of what
// it appends: its first append drops the ones it kept (sourceepochs.go).
func (l *Log) AppendReplicated(data []byte) (AppendResult, error) {
	return l.appendReplicated(data, nil, true)
}

// appendReplicated appends whole batches: a follower's, a mirror leader's
// (with the source's epochs where they change), or the journal's replay of
// this log's own appends (neither).
func (l *Log) appendReplicated(data []byte, source []EpochEntry, follower bool) (AppendResult, error) {
	res := AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}
	var refs []batchRef
	next := int64(-1)
	r := model.NewBatchReader(data)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		// The batch is whole, so only its magic can be refused here.
		if _, err := batchSize(b, 0); err != nil {
			return res, err
		}
		if err := checkCRC(b); err != nil {
			return res, err
		}
		base, last := b.BaseOffset(), b.LastOffset()
		if last < base || base < next {
			return res, fmt.Errorf("%w: batch [%d, %d] after offset %d", ErrInvalidRecord, base, last, next)
		}
		refs = append(refs, batchRef{pos: r.Pos() - len(b), size: len(b), base: base, last: last, maxTs: b.MaxTimestamp()})
		next = last + 1
	}
	if r.Stop() != model.EndOfBatches {
		rest := r.Rest()
		if len(rest) < model.BatchHeaderSize {
			return res, fmt.Errorf("%w: %d trailing bytes are not a batch", ErrCorruptMessage, len(rest))
		}
		// A length below a header's, then a wrong magic, are named
		// before the bytes that are missing.
		if _, err := batchSize(rest, 0); err != nil {
			return res, err
		}
		return res, fmt.Errorf("%w: batch of %d bytes, only %d present", ErrCorruptMessage, r.Claimed(), len(rest))
	}
	if len(refs) == 0 {
		return res, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return res, err
	}
	if refs[0].base < l.next {
		if refs[0].last < l.next || !l.emptyLocked() {
			return res, fmt.Errorf("%w: replicated batch at %d below the log end %d", ErrInvalidRecord, refs[0].base, l.next)
		}
		// The log was restarted at its leader's log start (StartAt),
		// which falls inside the leader's batch: the log restarts at
		// the batch's base, keeping its start, as Kafka's follower does.
		if err := l.restartLocked(refs[0].base, l.start); err != nil {
			return res, err
		}
	}
	if follower && len(l.sourceEpochs.entries) > 0 {
		l.sourceEpochs.entries = nil
		if err := l.sourceEpochs.store(); err != nil {
			l.failLocked(err)
			return res, l.failed
		}
	}
	if err := l.assignSourceLocked(source); err != nil {
		l.failLocked(err)
		return res, l.failed
	}
	if err := l.appendLocked(data, refs, l.now()); err != nil {
		return res, err
	}
	for _, r := range refs {
		l.epochs.assign(model.Batch(data[r.pos:r.pos+r.size]).PartitionLeaderEpoch(), r.base)
	}
	res.BaseOffset, res.LastOffset, res.LogStart = refs[0].base, l.next-1, l.start
	return res, nil
}

// emptyLocked reports whether the log holds no batch: its start is its
// end, and its only segment is empty. mu is held.
func (l *Log) emptyLocked() bool {
	return l.start == l.next && len(l.segs) == 1 && l.active().size == 0
}
