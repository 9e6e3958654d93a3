package replica

import (
	"math"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
)

// Throttle caps the bytes a second that replication moves for throttled
// replicas (Kafka's replication quota, which kafka-reassign-partitions.sh
// --throttle sets): the bytes are counted once moved, and while more than
// a second's worth at the rate has moved lately, the throttled replicas
// that are out of sync wait. In-sync replicas are never throttled, so a
// throttle never holds back the high watermark of a partition in sync.
type Throttle struct {
	rate func() int64 // bytes a second now; <= 0 or MaxInt64 for none

	mu     lockrank.Mutex[lockrank.Leaf]
	tokens float64 // bytes that may move now; negative once past the rate
	last   time.Time
	now    func() time.Time
}

// NewThrottle returns a throttle at the rate rate reports (read at every
// use, so a config change applies at once).
func NewThrottle(rate func() int64) *Throttle {
	return &Throttle{rate: rate, now: time.Now}
}

// refill adds what the rate allows since the last use, up to one second's
// worth. t.mu is held.
func (t *Throttle) refill(rate int64) {
	now := t.now()
	if !t.last.IsZero() {
		t.tokens = min(t.tokens+now.Sub(t.last).Seconds()*float64(rate), float64(rate))
	} else {
		t.tokens = float64(rate)
	}
	t.last = now
}

func (t *Throttle) limited() (int64, bool) {
	if t == nil {
		return 0, false
	}
	r := t.rate()
	return r, r > 0 && r < math.MaxInt64
}

// Exceeded reports whether throttled replicas must wait now.
func (t *Throttle) Exceeded() bool {
	rate, ok := t.limited()
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refill(rate)
	return t.tokens < 0
}

// Record counts n bytes moved for throttled replicas.
func (t *Throttle) Record(n int) {
	rate, ok := t.limited()
	if !ok || n <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refill(rate)
	t.tokens -= float64(n)
}

// Wait is how long until throttled replicas may move again: zero when they
// may now.
func (t *Throttle) Wait() time.Duration {
	rate, ok := t.limited()
	if !ok {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refill(rate)
	if t.tokens >= 0 {
		return 0
	}
	return time.Duration(-t.tokens / float64(rate) * float64(time.Second))
}
