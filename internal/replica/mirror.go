package replica

import (
	"errors"
	"fmt"

	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
)

// ErrMirrorReadOnly: a write to a mirror of a cluster link, which only its
// link writes (Kafka's INVALID_REQUEST, with the link named).
var ErrMirrorReadOnly = errors.New("replica: mirror topic is read-only")

// SetMirror marks the partition as a mirror of link, or (link "") as an
// ordinary partition again: a promoted mirror. A mirror refuses appends
// from clients and coordinators and DeleteRecords; its link writes it
// through AppendMirrored.
func (p *Partition) SetMirror(link string) {
	if link == "" {
		p.mirror.Store(nil)
		return
	}
	if cur := p.mirror.Load(); cur == nil || *cur != link {
		p.mirror.Store(&link)
	}
}

// MirrorOf returns the link the partition mirrors, or "".
func (p *Partition) MirrorOf() string {
	if l := p.mirror.Load(); l != nil {
		return *l
	}
	return ""
}

// mirrorErr returns the refusal of a write to a mirror, or nil.
func (p *Partition) mirrorErr() error {
	if l := p.mirror.Load(); l != nil {
		return fmt.Errorf("%w: topic %s mirrors link %s and takes no writes until it is promoted (strand link promote %s --topic %s)",
			ErrMirrorReadOnly, p.TP.Topic, *l, *l, p.TP.Topic)
	}
	return nil
}

// MirrorAppend is what AppendMirrored wrote.
type MirrorAppend struct {
	End     int64 // the new log end
	Records int64 // records in the batches written
	// LastSourceEpoch is the source's leader epoch of the last batch,
	// before this leader's replaced it; -1 when nothing was written.
	LastSourceEpoch int32
}

// AppendMirrored writes batches fetched from the source partition of the
// mirror this broker leads, as they are but for the partition leader
// epoch: offsets, CRCs, timestamps, producer ids and sequences, control
// batches and compaction's gaps are the source's. The epoch (outside the
// CRC) becomes this leader's, as any Kafka leader stamps on append, so
// truncation and consumers' epoch checks work on this cluster's own
// epochs; the source's are kept beside the log (log.SourceEpochAt), and
// the last is returned. The batches apply to the producer
// state as a replay of the log would. The wait function returns once the
// append is durable and the high watermark may pass it.
func (p *Partition) AppendMirrored(data []byte) (MirrorAppend, func() error, error) {
	res := MirrorAppend{LastSourceEpoch: -1}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.IsLeader() {
		return res, noWait, fmt.Errorf("%w: %s is not led here", ErrNotLeader, p.TP)
	}
	if p.mirror.Load() == nil {
		return res, noWait, fmt.Errorf("%w: %s is not a mirror", ErrNotLeader, p.TP)
	}
	epoch := p.LeaderEpoch()
	var source []log.EpochEntry // where the source's epoch changes
	// The log refuses a rest that is not whole batches.
	r := model.NewBatchReader(data)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		if se := b.PartitionLeaderEpoch(); se != res.LastSourceEpoch {
			source = append(source, log.EpochEntry{Epoch: se, StartOffset: b.BaseOffset()})
			res.LastSourceEpoch = se
		}
		res.Records += int64(b.RecordCount())
		b.SetPartitionLeaderEpoch(epoch)
	}
	lres, err := p.log.AppendMirrored(data, source)
	if err != nil || lres.BaseOffset < 0 {
		res.End = p.log.EndOffset()
		return res, noWait, err
	}
	p.replayLocked(data, "mirrored")
	p.applied.Store(lres.LastOffset + 1)
	res.End = lres.LastOffset + 1
	return res, p.waitFor(res.End), nil
}

// MirrorLogStart moves a mirror's log start up to the source's, as far as
// the mirror holds: data the source deleted (retention, DeleteRecords)
// goes here too. It returns the new log start.
func (p *Partition) MirrorLogStart(offset int64) (int64, error) {
	if p.mirror.Load() == nil {
		return 0, fmt.Errorf("%w: %s is not a mirror", ErrNotLeader, p.TP)
	}
	offset = min(offset, p.HighWatermark())
	if offset <= p.log.StartOffset() {
		return p.log.StartOffset(), nil
	}
	start, err := p.log.DeleteRecords(offset)
	if err == nil {
		p.Truncated()
	}
	return start, err
}

// MirrorStartAt empties a mirror this broker leads and starts its log at
// offset, past its end: the source deleted what the mirror lacks.
func (p *Partition) MirrorStartAt(offset int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.IsLeader() || p.mirror.Load() == nil {
		return fmt.Errorf("%w: %s is not a mirror led here", ErrNotLeader, p.TP)
	}
	return p.startAtLocked(offset)
}

// AbortOrphanTransactions writes an abort marker for every transaction
// open here of a producer whose id is at most pidAtMost: on a promoted
// mirror, the transactions its source left open, which no coordinator of
// this cluster knows and so none would ever end (Kafka's coordinator
// aborts a transaction past its timeout). It returns how many it aborted
// and a wait for their markers.
func (p *Partition) AbortOrphanTransactions(pidAtMost int64) (int, func() error, error) {
	if err := p.mirrorErr(); err != nil {
		return 0, noWait, err
	}
	if !p.IsLeader() {
		return 0, noWait, fmt.Errorf("%w: %s is not led here", ErrNotLeader, p.TP)
	}
	p.appendMu.Lock()
	var open []Marker
	for pid, e := range p.producers.producers {
		if e.txnFirst >= 0 && pid <= pidAtMost {
			open = append(open, Marker{ProducerID: pid, ProducerEpoch: e.epoch, CoordinatorEpoch: max(e.coordEpoch, 0)})
		}
	}
	p.appendMu.Unlock()
	var waits []func() error
	for _, m := range open {
		_, wait, err := p.WriteMarker(m)
		if err != nil {
			return len(waits), noWait, err
		}
		waits = append(waits, wait)
	}
	return len(waits), func() error {
		for _, w := range waits {
			if err := w(); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// MirrorTruncate cuts a mirror this broker leads at offset, where its
// source's log now ends (an unclean leader election there took back what
// the mirror had copied): the mirror holds what its source holds. Its
// followers truncate as they fetch, and consumers past the new end are
// told their offset is out of range, as after an unclean election here.
func (p *Partition) MirrorTruncate(offset int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.IsLeader() || p.mirror.Load() == nil {
		return fmt.Errorf("%w: %s is not a mirror led here", ErrNotLeader, p.TP)
	}
	if offset >= p.log.EndOffset() {
		return nil
	}
	if err := p.truncateLocked(offset); err != nil {
		return err
	}
	p.mu.Lock()
	for w := range p.waiters {
		w.wake()
	}
	p.mu.Unlock()
	return nil
}
