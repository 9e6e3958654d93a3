package fetchpos

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/lockrank"
)

// Source reads Topic's partitions for a follower.
type Source interface {
	// Partitions is how many partitions Topic has; 0 before it exists.
	Partitions() int32
	// End is the offset after a partition's last record.
	End(ctx context.Context, partition int32) (int64, error)
	// Read waits a little for the records of a partition from offset on
	// and calls fn with each record's key and value; it returns the
	// offset to read next, with an error too (-1: from the end).
	Read(ctx context.Context, partition int32, offset int64, fn func(key, value []byte)) (int64, error)
}

// Follower gives the spans other brokers publish to apply.
type Follower struct {
	src    Source
	self   string // this broker's key
	apply  func([]group.Span)
	logger *slog.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup

	warnMu   lockrank.Mutex[lockrank.Leaf]
	lastWarn time.Time
}

// NewFollower follows src from its end, skipping the records of node self.
func NewFollower(src Source, self int32, apply func([]group.Span), logger *slog.Logger) *Follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Follower{src: src, self: strconv.Itoa(int(self)), apply: apply, logger: logger, cancel: cancel}
	f.wg.Go(func() { f.run(ctx) })
	return f
}

// run waits for the topic, then follows each of its partitions.
func (f *Follower) run(ctx context.Context) {
	var n int32
	for n = f.src.Partitions(); n == 0; n = f.src.Partitions() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	for p := range n {
		f.wg.Go(func() { f.follow(ctx, p) })
	}
}

func (f *Follower) follow(ctx context.Context, partition int32) {
	offset := int64(-1)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		var err error
		if offset < 0 {
			offset, err = f.src.End(ctx, partition)
		} else {
			offset, err = f.src.Read(ctx, partition, offset, f.record)
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		if ctx.Err() != nil {
			return
		}
		f.warn(partition, err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (f *Follower) record(key, value []byte) {
	if string(key) == f.self {
		return // its own coordinator saw these fetches as they were answered
	}
	_, spans, err := Decode(value)
	if err != nil {
		f.warn(-1, err)
		return
	}
	f.apply(spans)
}

func (f *Follower) warn(partition int32, err error) {
	f.warnMu.Lock()
	defer f.warnMu.Unlock()
	if time.Since(f.lastWarn) < 10*time.Second {
		return
	}
	f.lastWarn = time.Now()
	f.logger.Warn("reading fetch positions failed: hand-off figures of groups coordinated here may lack reads answered elsewhere",
		"topic", Topic, "partition", partition, "err", err)
}

// Close stops following.
func (f *Follower) Close() {
	f.cancel()
	f.wg.Wait()
}
