package group

import (
	"sync"
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
type writer struct {
	part Partition

	mu     sync.Mutex
	queue  []pendingWrite
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

type pendingWrite struct {
	wait func() error
	base int64
	fn   func(base int64, err error)
}

func newWriter(p Partition) *writer {
	w := &writer{part: p, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run()
	return w
}

// write appends recs as one batch stamped ts (ms). On success fn is called
// later, from the writer's goroutine, with the batch's base offset and the
// outcome of making it durable; on failure it is never called.
func (w *writer) write(recs []record, ts int64, fn func(base int64, err error)) error {
	batch := encodeBatch(recs, ts)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrNotCoordinator
	}
	base, wait, err := w.part.Append(batch)
	if err != nil {
		return err
	}
	w.queue = append(w.queue, pendingWrite{wait: wait, base: base, fn: fn})
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return nil
}

func (w *writer) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		q, closed := w.queue, w.closed
		w.queue = nil
		w.mu.Unlock()
		for _, p := range q {
			p.fn(p.base, p.wait())
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
