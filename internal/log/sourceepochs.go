package log

import (
	"sort"
)

// sourceEpochFile is, for the mirror of a cluster link, the source's leader
// epochs of the batches mirrored, in epochFile's format. The batches carry
// this cluster's epochs (the mirror's leader stamps its own), so the
// source's are kept here, for the link to find where the source truncated
// what the mirror copied (OffsetForLeaderEpoch, as KIP-320's consumers ask).
//
// The entries describe every batch from the first entry's offset to the
// log end: the file is written before a batch of a new source epoch is
// appended (an entry at or past the log end, whose append a crash lost, is
// dropped at open), entries go where the log is cut or restarted, and a
// follower, which does not learn the source's epochs of what it copies,
// drops them all at its first append.
const sourceEpochFile = "source-leader-epoch-checkpoint"

// AppendMirrored is AppendReplicated for the leader of a mirror: source
// holds the source's leader epochs of data's batches where they change,
// recorded (and stored when new) before the batches are written.
func (l *Log) AppendMirrored(data []byte, source []EpochEntry) (AppendResult, error) {
	return l.appendReplicated(data, source, false)
}

// assignSourceLocked records, before an append, that the source's epoch
// e.Epoch starts at e.StartOffset. An epoch below the latest recorded
// (entries the mirror's data no longer matches) replaces those at or above
// it. mu is held.
func (l *Log) assignSourceLocked(entries []EpochEntry) error {
	c := l.sourceEpochs
	changed := false
	for _, e := range entries {
		if e.Epoch < 0 || e.Epoch == c.latest() {
			continue
		}
		if e.Epoch < c.latest() {
			i := sort.Search(len(c.entries), func(i int) bool {
				return c.entries[i].Epoch >= e.Epoch || c.entries[i].StartOffset >= e.StartOffset
			})
			c.entries = c.entries[:i]
		}
		c.entries = append(c.entries, e)
		changed = true
	}
	if !changed {
		return nil
	}
	return c.store()
}

// SourceEpochAt returns the source's leader epoch of the batch at offset,
// or -1 when no entry covers it.
func (l *Log) SourceEpochAt(offset int64) int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if offset >= l.next {
		return -1
	}
	es := l.sourceEpochs.entries
	i := sort.Search(len(es), func(i int) bool { return es[i].StartOffset > offset })
	if i == 0 {
		return -1
	}
	return es[i-1].Epoch
}

// SourceEpochEnd is EpochEndOffset for the source's epochs: the largest
// source epoch at or below epoch that the entries know and where it ends
// in this log, or -1, -1.
func (l *Log) SourceEpochEnd(epoch int32) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.sourceEpochs.endOffset(epoch, l.next)
}

// SourceEpochs returns the source-epoch entries.
func (l *Log) SourceEpochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]EpochEntry(nil), l.sourceEpochs.entries...)
}

// ResetSourceEpochs replaces the entries with one: the source's batch at
// offset, checked against the mirror's, has epoch. Offsets below it are
// then unknown.
func (l *Log) ResetSourceEpochs(epoch int32, offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	c := l.sourceEpochs
	if len(c.entries) == 1 && c.entries[0] == (EpochEntry{Epoch: epoch, StartOffset: offset}) {
		return nil
	}
	c.entries = []EpochEntry{{Epoch: epoch, StartOffset: offset}}
	return c.store()
}
