package txn

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// StateTopic is the topic the coordinator keeps its state in.
const StateTopic = "__transaction_state"

// Topic is __transaction_state as the coordinator reaches it; the server
// implements it over the cluster metadata and the replica manager.
type Topic interface {
	// Partitions returns the topic's partitions in order, or none when it
	// does not exist; a partition this broker does not lead is nil.
	Partitions() ([]Partition, error)
	// Create creates the topic (internal, compacted) with n partitions
	// unless it exists, and returns its partitions.
	Create(n int32) ([]Partition, error)
}

// Partition is one partition of __transaction_state (the same shape as
// group.Partition).
type Partition interface {
	// Append writes one record batch and returns its base offset and a
	// function that returns once the batch is durable.
	Append(batch []byte) (base int64, wait func() error, err error)
	// Read returns whole batches from offset up to the high watermark:
	// about maxBytes, and at least one batch if there is one.
	Read(offset int64, maxBytes int) ([]byte, error)
	StartOffset() int64
	HighWatermark() int64
}

// ProducerIDs hands out producer ids, unique across the cluster and
// restarts.
type ProducerIDs interface{ NextProducerID() (int64, error) }

// Markers writes transaction markers to data partitions (the server
// implements it over replica and tells the group coordinator about
// __consumer_offsets partitions). It returns once every marker is durable;
// partitions that no longer exist are skipped. Writing a marker twice is
// harmless (the second finds no open transaction), so the coordinator
// retries a failed call whole.
type Markers interface {
	WriteMarkers(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32,
		partitions []model.TopicPartition) error
}

// TxnInfo is a transactional id's state as DescribeTransactions and
// ListTransactions show it.
type TxnInfo struct {
	ID string
	// State is Kafka's name: Empty, Ongoing, PrepareCommit, PrepareAbort,
	// CompleteCommit, CompleteAbort.
	State         string
	ProducerID    int64
	ProducerEpoch int16
	Timeout       time.Duration
	Start         time.Time // zero: no transaction started
	LastUpdate    time.Time
	Partitions    []model.TopicPartition // sorted
	// ClientVersion is the transaction version the client last ended a
	// transaction with: 2 for EndTxn v5+ (KIP-890), else 0.
	ClientVersion int16
}

// ListFilter selects transactions for List; the zero value selects all.
type ListFilter struct {
	States      []string // Kafka's state names; empty: any
	ProducerIDs []int64  // empty: any
	// MinDuration keeps transactions running at least this long (Kafka's
	// DurationFilter); 0: no filter. As in Kafka, an id with no
	// transaction started (start -1) passes it.
	MinDuration time.Duration
	// IDPattern must match the whole transactional id (KIP-1152, Java's
	// Matcher.matches); compile it with CompileIDPattern. nil: any.
	IDPattern *regexp.Regexp
}

// CompileIDPattern compiles a ListTransactions id pattern so that it
// matches whole ids only, as Java's Matcher.matches does.
func CompileIDPattern(p string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + p + `)$`)
}

// Coordinator is the transaction coordinator of this broker. See doc.go.
type Coordinator struct {
	cfg     Config
	topic   Topic
	ids     ProducerIDs
	markers Markers
	clock   Clock
	log     *slog.Logger

	// ctx is the context of background marker writes; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // background goroutines

	mu     sync.Mutex
	txns   map[string]*txn
	parts  []Partition // __transaction_state; nil until it exists
	loaded bool
	closed bool
	abort  Stopper // the timeout check
	expiry Stopper // the expiry check
}

// New returns a coordinator that keeps its state in topic. Call Load
// before serving requests.
func New(cfg Config, topic Topic, ids ProducerIDs, markers Markers) *Coordinator {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		cfg: cfg, topic: topic, ids: ids, markers: markers, clock: cfg.Clock, log: cfg.Logger,
		ctx: ctx, cancel: cancel, txns: map[string]*txn{},
	}
}

// Close stops the timers, cancels marker writes in progress, and returns
// once every background goroutine has ended. Requests after Close answer
// ErrNotCoordinator. A transaction left in PrepareCommit or PrepareAbort is
// finished by the next Load. Call it after the connections are done and
// before the logs close.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for _, s := range []Stopper{c.abort, c.expiry} {
		if s != nil {
			s.Stop()
		}
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// spawn runs f in a tracked goroutine unless the coordinator is closed.
func (c *Coordinator) spawn(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// EnsureTopic creates __transaction_state if it does not exist yet
// (FindCoordinator does, as in Kafka).
func (c *Coordinator) EnsureTopic() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.partitionsLocked()
	return err
}

func (c *Coordinator) partitionsLocked() ([]Partition, error) {
	if c.closed {
		return nil, ErrNotCoordinator
	}
	if c.parts != nil {
		return c.parts, nil
	}
	parts, err := c.topic.Create(c.cfg.StatePartitions)
	if err != nil {
		return nil, fmt.Errorf("%w: creating %s: %v", ErrNotCoordinator, StateTopic, err)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: %s has no partitions", ErrNotCoordinator, StateTopic)
	}
	c.parts = parts
	return parts, nil
}

// PartitionFor is the __transaction_state partition that holds a
// transactional id.
func (c *Coordinator) PartitionFor(id string) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.cfg.StatePartitions
	if c.parts != nil {
		n = int32(len(c.parts))
	}
	return model.CoordinatorPartition(id, n)
}

// lookup returns a transactional id's entry, or nil when it is unknown.
func (c *Coordinator) lookup(id string) (*txn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return nil, ErrNotCoordinator
	case !c.loaded:
		return nil, ErrCoordinatorLoadInProgress
	}
	return c.txns[id], nil
}

// lockTxn returns id's entry locked, or nil when it is unknown. The
// caller unlocks it.
func (c *Coordinator) lockTxn(id string) (*txn, error) {
	for {
		t, err := c.lookup(id)
		if t == nil || err != nil {
			return nil, err
		}
		t.mu.Lock()
		if !t.removed {
			return t, nil
		}
		t.mu.Unlock() // it expired meanwhile: look again
	}
}

// snapshot lists the entries.
func (c *Coordinator) snapshot() []*txn {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := make([]*txn, 0, len(c.txns))
	for _, t := range c.txns {
		ts = append(ts, t)
	}
	return ts
}

func (c *Coordinator) nowMs() int64 { return c.clock.Now().UnixMilli() }

// write appends next as t's record (nil: a tombstone), waits until it is
// durable, and then makes next t's state. Caller holds t.mu; it is released
// during the wait (t.pending keeps other transitions out, so t's records
// reach the log in the order of its states) and held again on return. On
// failure t keeps its state.
func (c *Coordinator) write(t *txn, next *meta) error {
	wait, err := c.appendState(t, next)
	if err != nil {
		return err
	}
	t.pending, t.ending = true, next != nil && next.state.preparing()
	t.mu.Unlock()
	err = wait()
	t.mu.Lock()
	t.pending, t.ending = false, false
	if err != nil {
		return fmt.Errorf("%w: writing %s: %v", ErrNotCoordinator, StateTopic, err)
	}
	if next != nil {
		t.meta = *next
	}
	return nil
}

// writeAhead appends t's next state and applies it at once, returning the
// wait for its durability. Only the Complete record is written this way:
// its durability decides nothing (a Prepare* found at Load is finished
// again, and markers written twice decide nothing more), and any later
// record of t lands after it in the same partition, so that record's
// durability covers it. The transaction's answer and its next transaction
// so skip one fsync. Caller holds t.mu.
func (c *Coordinator) writeAhead(t *txn, next *meta) (func() error, error) {
	wait, err := c.appendState(t, next)
	if err != nil {
		return nil, err
	}
	t.meta = *next
	return wait, nil
}

// appendState appends next as t's record (nil: a tombstone) to its
// partition and returns the wait for its durability.
func (c *Coordinator) appendState(t *txn, next *meta) (func() error, error) {
	c.mu.Lock()
	parts, err := c.partitionsLocked()
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	p := parts[model.CoordinatorPartition(t.id, int32(len(parts)))]
	if p == nil {
		return nil, fmt.Errorf("%w: %s's partition is led by another broker", ErrNotCoordinator, t.id)
	}
	rec := model.KeyValue{Key: txnKey(t.id)}
	ts := c.nowMs()
	if next != nil {
		rec.Value = txnValue(next)
		ts = next.updateMs
	}
	_, wait, err := p.Append(model.EncodeBatch([]model.KeyValue{rec}, ts, model.NoProducer))
	if err != nil {
		return nil, fmt.Errorf("%w: writing %s: %v", ErrNotCoordinator, StateTopic, err)
	}
	return wait, nil
}
