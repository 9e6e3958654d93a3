package ledger

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
)

// Partitions is the ledger topic as a broker reaches it; the server
// implements it.
type Partitions interface {
	// Writable returns the topic's partitions in order, creating the
	// topic first if it does not exist. A partition led elsewhere is
	// written through its leader; one without a leader is nil.
	Writable() ([]Appender, error)
}

// Appender writes one record batch to a partition (as
// coordinator.Partition's Append).
type Appender interface {
	Append(batch []byte) (base int64, wait func() error, err error)
}

// queueSize bounds the entries waiting to be written.
const queueSize = 4096

// batchSize bounds the entries of one batch.
const batchSize = 256

// Writer writes entries to the ledger topic in the background.
type Writer struct {
	parts   Partitions
	log     *slog.Logger
	queue   chan Entry
	dropped atomic.Int64
	failed  atomic.Int64
	written atomic.Int64
	done    chan struct{}

	mu     lockrank.RWMutex[lockrank.LedgerWriter] // guards closing the queue against Record
	closed bool

	lastWarn atomic.Int64  // unix ms of the last warning, to rate-limit them
	retry    time.Duration // the first wait before an append is tried again
}

// retryFirst is the wait before a refused append is tried again; it
// doubles for each of the retryAttempts, about 1.6 s of waits in all:
// long enough for a partition's replica to be made on its leader, or a
// new leader elected.
const (
	retryFirst    = 25 * time.Millisecond
	retryAttempts = 7
)

// NewWriter starts a writer over parts.
func NewWriter(parts Partitions, logger *slog.Logger) *Writer {
	return newWriter(parts, logger, retryFirst)
}

func newWriter(parts Partitions, logger *slog.Logger, retry time.Duration) *Writer {
	w := &Writer{parts: parts, log: logger.With("component", "ledger"), queue: make(chan Entry, queueSize), done: make(chan struct{}),
		retry: retry}
	go w.run()
	return w
}

// Record queues e for writing; it never blocks. An entry that finds the
// queue full is dropped and counted.
func (w *Writer) Record(e Entry) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Add(1)
		return
	}
	select {
	case w.queue <- e:
	default:
		w.dropped.Add(1)
		w.warn("hand-off ledger queue full: entry dropped", "group", e.Group, "topic", e.Topic, "partition", e.Partition)
	}
}

// Dropped counts the entries dropped because the queue was full, Failed
// those whose write failed, Written those written.
func (w *Writer) Dropped() int64 { return w.dropped.Load() }
func (w *Writer) Failed() int64  { return w.failed.Load() }
func (w *Writer) Written() int64 { return w.written.Load() }

// Close writes what is queued and stops the writer; entries recorded
// after it are dropped.
func (w *Writer) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	<-w.done
}

func (w *Writer) run() {
	defer close(w.done)
	batch := make([]Entry, 0, batchSize)
	for e := range w.queue {
		batch = append(batch[:0], e)
	more:
		for len(batch) < batchSize {
			select {
			case e, ok := <-w.queue:
				if !ok {
					break more
				}
				batch = append(batch, e)
			default:
				break more
			}
		}
		w.write(batch)
	}
}

// write appends entries, each to its group's partition, else (while that
// one has no leader) to the next partition that has one.
func (w *Writer) write(entries []Entry) {
	parts, err := w.parts.Writable()
	if err != nil || len(parts) == 0 {
		w.fail(len(entries), "hand-off ledger topic unavailable: entries not written", err)
		return
	}
	byPart := map[int]([]model.KeyValue){}
	now := time.Now().UnixMilli()
	for _, e := range entries {
		i := pick(parts, e.Group)
		if i < 0 {
			w.fail(1, "no partition of the hand-off ledger has a leader: entry not written", nil)
			continue
		}
		k, v := e.Encode()
		byPart[i] = append(byPart[i], model.KeyValue{Key: k, Value: v})
	}
	for i, recs := range byPart {
		batch := model.EncodeBatch(recs, now, model.NoProducer)
		err := appendTo(parts[i], batch)
		// A partition just made, or changing leader, refuses for a
		// moment (ErrNotLeader: nothing was appended): tried again, on
		// the partition as it is then. Any other failure may have left
		// the entries in the log, and is not tried again.
		for attempt, backoff := 1, w.retry; errors.Is(err, coordinator.ErrNotLeader) && attempt < retryAttempts; attempt++ {
			time.Sleep(backoff)
			backoff *= 2
			if fresh, ferr := w.parts.Writable(); ferr == nil && i < len(fresh) && fresh[i] != nil {
				parts[i] = fresh[i]
			}
			err = appendTo(parts[i], batch)
		}
		if err != nil {
			w.fail(len(recs), "writing hand-off ledger entries failed", err)
			continue
		}
		w.written.Add(int64(len(recs)))
	}
}

// appendTo appends batch and waits until it is durable.
func appendTo(p Appender, batch []byte) error {
	_, wait, err := p.Append(batch)
	if err == nil && wait != nil {
		err = wait()
	}
	return err
}

// pick is the partition for a group's entries: its own (Kafka's key
// partitioning), else the next writable one; -1 for none.
func pick(parts []Appender, group string) int {
	n := len(parts)
	own := int(model.CoordinatorPartition(group, int32(n)))
	for j := range n {
		if i := (own + j) % n; parts[i] != nil {
			return i
		}
	}
	return -1
}

func (w *Writer) fail(n int, msg string, err error) {
	w.failed.Add(int64(n))
	w.warn(msg, "entries", n, "err", err)
}

// warn logs at most one line every 10 seconds.
func (w *Writer) warn(msg string, args ...any) {
	now := time.Now().UnixMilli()
	last := w.lastWarn.Load()
	if now-last < 10_000 || !w.lastWarn.CompareAndSwap(last, now) {
		return
	}
	w.log.Warn(msg, args...)
}
