package group

import (
	"errors"
	"fmt"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
)

// writer appends the coordinator's records to one __consumer_offsets
// partition and reports each write once it is durable, in log order, from
// its own goroutine.
//
// Appends happen in the caller (under the group's lock, so a group's
// records reach the log in the order its state changed); the wait for
// durability does not, so the reader of a connection never blocks on an
// fsync. The callbacks run with no lock held and take the group's lock
// themselves; since they run one after another in log order, a later
// commit of a partition is never overwritten by an earlier one.
//
// A design that waited in the protocol handler's deferred part was
// rejected: a connection that fails skips its deferred parts, and a
// leader's SyncGroup would then never complete the group's rebalance.
//
// The writer also indexes the partition's open transactions: which groups
// have pending offsets of which producer (txnoffsets.go). A transactional
// batch is appended and indexed in one critical section under mu, so a
// marker that follows the batch in the log, once durable, always finds
// the group (CompleteTxn takes mu to read the index).
type writer struct {
	part coordinator.Partition

	mu     lockrank.Mutex[lockrank.GroupWriter]
	queue  []pendingWrite
	closed bool
	wake   chan struct{}
	done   chan struct{}
	// txns: producer id -> groups that may have offsets pending in its
	// transaction (a superset: a group's own map is the truth).
	txns map[int64]map[*group]struct{}
}

type pendingWrite struct {
	wait func() error
	base int64
	fn   func(base int64, err error)
}

func newWriter(p coordinator.Partition) *writer {
	w := &writer{part: p, wake: make(chan struct{}, 1), done: make(chan struct{}), txns: map[int64]map[*group]struct{}{}}
	go w.run()
	return w
}

// write appends recs as one batch stamped ts (ms). On success fn is called
// later, from the writer's goroutine, with the batch's base offset and the
// outcome of making it durable; on failure it is never called.
func (w *writer) write(recs []model.KeyValue, ts int64, fn func(base int64, err error)) error {
	return w.writeAs(model.NoProducer, nil, recs, ts, nil, fn)
}

// writeTxn appends recs as one transactional batch of producer p for group
// g: once appended (before write returns), g is indexed under the producer
// and appended runs with the base offset, both under w.mu.
func (w *writer) writeTxn(p model.Producer, g *group, recs []model.KeyValue, ts int64, appended func(base int64), fn func(base int64, err error)) error {
	return w.writeAs(p, g, recs, ts, appended, fn)
}

func (w *writer) writeAs(p model.Producer, g *group, recs []model.KeyValue, ts int64, appended func(base int64), fn func(base int64, err error)) error {
	batch := model.EncodeBatch(recs, ts, p)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrNotCoordinator
	}
	base, wait, err := w.part.Append(batch)
	if err != nil {
		return writeError(err)
	}
	if p.ID >= 0 {
		w.indexTxnLocked(p.ID, g)
		appended(base)
	}
	w.queue = append(w.queue, pendingWrite{wait: wait, base: base, fn: fn})
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return nil
}

// indexTxnLocked notes that g may have offsets pending in producerID's
// transaction. Caller holds w.mu.
func (w *writer) indexTxnLocked(producerID int64, g *group) {
	gs := w.txns[producerID]
	if gs == nil {
		gs = map[*group]struct{}{}
		w.txns[producerID] = gs
	}
	gs[g] = struct{}{}
}

// indexTxn is indexTxnLocked for Load.
func (w *writer) indexTxn(producerID int64, g *group) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.indexTxnLocked(producerID, g)
}

// takeTxn removes and returns the groups indexed under producerID: its
// transaction's marker is durable.
func (w *writer) takeTxn(producerID int64) []*group {
	w.mu.Lock()
	defer w.mu.Unlock()
	gs := make([]*group, 0, len(w.txns[producerID]))
	for g := range w.txns[producerID] {
		gs = append(gs, g)
	}
	delete(w.txns, producerID)
	return gs
}

// writeError turns a failed write of __consumer_offsets into the group
// coordinator's error: the client learns to find the coordinator again
// (NOT_COORDINATOR), to retry (COORDINATOR_NOT_AVAILABLE), or that its
// commit is too large.
func writeError(err error) error {
	switch {
	case errors.Is(err, coordinator.ErrTooLarge):
		return fmt.Errorf("%w: %v", ErrRecordTooLarge, err)
	case errors.Is(err, coordinator.ErrNotLeader):
		return fmt.Errorf("%w: %v", ErrNotCoordinator, err)
	case errors.Is(err, coordinator.ErrNotReplicated):
		return fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
	}
	return err
}

func (w *writer) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		q, closed := w.queue, w.closed
		w.queue = nil
		w.mu.Unlock()
		for _, p := range q {
			p.fn(p.base, writeError(p.wait()))
		}
		if len(q) == 0 {
			if closed {
				return
			}
			<-w.wake
		}
	}
}

// close stops taking writes and returns once the queued ones are reported.
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
}
