package group

import "github.com/strandlog/strand/internal/model"

// offsetStore is one group's committed offsets, the same whichever
// protocol its members speak (a group that migrates between the classic
// and the consumer protocol keeps it as it is): plain commits once they
// are durable, and offsets committed in open transactions, pending per
// producer id from their batch's append until the transaction's marker
// (CompleteTxn), never visible to FetchOffsets. The group's lock guards
// it. The rules of which commit counts are in doc.go.
type offsetStore struct {
	committed map[model.TopicPartition]offset
	pending   map[int64]map[model.TopicPartition]offset
	// inFlight counts commits appended but not yet durable;
	// stableWaiters are OffsetFetch requests with RequireStable waiting
	// for it to reach 0.
	inFlight      int
	stableWaiters []chan struct{}
}

func newOffsetStore() offsetStore {
	return offsetStore{committed: map[model.TopicPartition]offset{}, pending: map[int64]map[model.TopicPartition]offset{}}
}

// set applies a durable commit unless a later write of the partition's
// offset is already applied.
func (s *offsetStore) set(tp model.TopicPartition, v offset) {
	if cur, ok := s.committed[tp]; ok && cur.logOffset > v.logOffset {
		return
	}
	s.committed[tp] = v
}

// wakeStable releases the RequireStable fetches once no commit is in
// flight.
func (s *offsetStore) wakeStable() {
	if s.inFlight > 0 {
		return
	}
	for _, w := range s.stableWaiters {
		close(w)
	}
	s.stableWaiters = nil
}

// dropTxnWrite forgets the pending offsets a failed write at log offsets
// [from, to) added, unless a later write of the producer replaced them.
func (s *offsetStore) dropTxnWrite(producerID, from, to int64) {
	pend := s.pending[producerID]
	for tp, o := range pend {
		if o.logOffset >= from && o.logOffset < to {
			delete(pend, tp)
		}
	}
	if len(pend) == 0 {
		delete(s.pending, producerID)
	}
}

// complete ends producerID's transaction: with apply its pending offsets
// become committed (each unless written earlier in the log than the
// committed one), else they are dropped.
func (s *offsetStore) complete(producerID int64, apply bool) {
	pend, ok := s.pending[producerID]
	if !ok {
		return
	}
	delete(s.pending, producerID)
	if !apply {
		return
	}
	for tp, o := range pend {
		s.set(tp, o)
	}
}

// hasPending reports whether an open transaction has an offset of tp
// pending (Kafka's hasPendingTransactionalOffsets).
func (s *offsetStore) hasPending(tp model.TopicPartition) bool {
	for _, pend := range s.pending {
		if _, ok := pend[tp]; ok {
			return true
		}
	}
	return false
}

// dropPending forgets every open transaction's pending offset of tp: a
// tombstone of the partition is written after them (Kafka's replay of an
// offset tombstone does the same).
func (s *offsetStore) dropPending(tp model.TopicPartition) {
	for pid, pend := range s.pending {
		delete(pend, tp)
		if len(pend) == 0 {
			delete(s.pending, pid)
		}
	}
}
