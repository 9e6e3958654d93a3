package server

import (
	"context"

	"github.com/strandlog/strand/internal/lockrank"
)

// byteBudget bounds the bytes of requests read and not yet answered: a
// reader waits for room before it reads the next frame, as Kafka mutes a
// connection while queued.max.request.bytes are queued. A frame larger
// than the whole budget is let through alone, so that it cannot wait for
// ever; small frames (fetches, heartbeats, joins) are counted but never
// wait, so that the requests big ones wait on (a follower's fetch for an
// acks=all produce, another member's join) are always read.
type byteBudget struct {
	max int64 // 0: no bound

	mu      lockrank.Mutex[lockrank.Leaf]
	used    int64
	waiting int           // readers waiting for room
	changed chan struct{} // closed when bytes are given back to a waiter
}

func newByteBudget(max int64) *byteBudget {
	return &byteBudget{max: max, changed: make(chan struct{})}
}

// smallFrame is the largest frame that never waits for room.
const smallFrame = 64 << 10

// acquire takes n bytes, waiting until they fit; false when ctx ended
// first.
func (b *byteBudget) acquire(ctx context.Context, n int64) bool {
	if b.max <= 0 {
		return true
	}
	for {
		b.mu.Lock()
		if b.used+n <= b.max || b.used == 0 || n <= smallFrame {
			b.used += n
			b.mu.Unlock()
			return true
		}
		ch := b.changed
		b.waiting++
		b.mu.Unlock()
		select {
		case <-ch:
			b.mu.Lock()
			b.waiting--
			b.mu.Unlock()
		case <-ctx.Done():
			b.mu.Lock()
			b.waiting--
			b.mu.Unlock()
			return false
		}
	}
}

// release gives n bytes back.
func (b *byteBudget) release(n int64) {
	if b.max <= 0 || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	// Wake the waiters, if any: without one, a release allocates nothing
	// (it runs once per request).
	if b.waiting > 0 {
		close(b.changed)
		b.changed = make(chan struct{})
	}
	b.mu.Unlock()
}
