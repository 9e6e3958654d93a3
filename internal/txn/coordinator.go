package txn

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
)

// StateTopic is the topic the coordinator keeps its state in.
const StateTopic = "__transaction_state"

// ProducerIDs hands out producer ids, unique across the cluster and
// restarts.
type ProducerIDs interface{ NextProducerID() (int64, error) }

// Markers writes transaction markers to data partitions, wherever they are
// led (the server writes those it leads itself, tells the group
// coordinator about __consumer_offsets partitions, and sends the others to
// their leaders). It returns once every marker is durable; partitions that
// no longer exist are skipped. Writing a marker twice is harmless (the
// second finds no open transaction), so the coordinator retries a failed
// call whole. ctx ends when the coordinator stops coordinating the
// transaction.
type Markers interface {
	WriteMarkers(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32,
		partitions []model.TopicPartition) error
}

// Remote reaches the coordinator of a transactional id that another broker
// coordinates, for the checks a partition leader makes before it appends a
// transactional batch (KIP-890). The server implements it with
// AddPartitionsToTxn v5 through the peer client, finding the coordinator
// as FindCoordinator does.
type Remote interface {
	// CheckPartitions adds tps to the producer's transaction (add) or
	// verifies that each is in it, at id's coordinator, and returns one
	// error per partition, in order: the coordinator's answers as this
	// package's errors, and ErrNotCoordinator (or
	// ErrCoordinatorLoadInProgress) when the coordinator cannot be asked.
	CheckPartitions(ctx context.Context, id string, producerID int64, epoch int16, tps []model.TopicPartition,
		add bool) []error
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
	topic   coordinator.Topic
	ids     ProducerIDs
	markers Markers
	remote  Remote // nil: no other broker to ask
	clock   Clock
	log     *slog.Logger

	// ctx is the context of background marker writes; Close cancels it.
	// Each served partition's context derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // background goroutines

	mu   lockrank.Mutex[lockrank.Coordinator]
	txns map[string]*txn // the ids of the served partitions
	// parts has one entry per __transaction_state partition once the
	// topic is known (nil before): the partition while this broker
	// coordinates its ids (loaded and led), else nil.
	parts   []*served
	loading map[int32]bool // partitions being replayed
	loaded  bool           // Load has run
	closed  bool
	abort   Stopper // the timeout check
	expiry  Stopper // the expiry check
}

// served is one __transaction_state partition while this broker
// coordinates its transactional ids: from the end of its load until it is
// unloaded or the coordinator closes. Every txn belongs to the served
// partition it was loaded or created in (txn.home); once that is unloaded
// the txn is dead: it has left the id map, its writes are refused and its
// background work stops, so that nothing of an older leadership reaches
// the log after the partition is loaded again.
type served struct {
	index int32
	p     coordinator.Partition
	// epoch is the coordinator epoch the markers of its transactions
	// carry: the partition's leader epoch when it was loaded.
	epoch int32
	// ctx ends when the partition is unloaded (or the coordinator
	// closes): marker writes for its transactions stop.
	ctx    context.Context
	cancel context.CancelFunc
	// writes counts appends in flight, from the append until they are
	// durable or failed; UnloadPartition waits for them, so that a load
	// after it replays every record this leadership wrote. Add is called
	// under Coordinator.mu while the partition is served.
	writes sync.WaitGroup
}

// newServedLocked starts serving partition i. Caller holds c.mu.
func (c *Coordinator) newServedLocked(i int32, p coordinator.Partition) *served {
	ctx, cancel := context.WithCancel(c.ctx)
	return &served{index: i, p: p, epoch: p.LeaderEpoch(), ctx: ctx, cancel: cancel}
}

// New returns a coordinator that keeps its state in topic and asks remote
// (nil on a single broker) about ids other brokers coordinate. Call Load
// before serving requests.
func New(cfg Config, topic coordinator.Topic, ids ProducerIDs, markers Markers, remote Remote) *Coordinator {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		cfg: cfg, topic: topic, ids: ids, markers: markers, remote: remote, clock: cfg.Clock, log: cfg.Logger,
		ctx: ctx, cancel: cancel, txns: map[string]*txn{}, loading: map[int32]bool{},
	}
}

// Close stops the timers, cancels marker writes in progress, and returns
// once every background goroutine has ended. Requests after Close answer
// ErrNotCoordinator. A transaction left in PrepareCommit or PrepareAbort is
// finished by the next load of its partition. Call it after the
// connections are done and before the logs close.
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
	return c.topicLocked(true)
}

// topicLocked makes the coordinator know __transaction_state's partition
// count: a topic that exists (made by another broker, or found since the
// last look) is taken as it is, its partitions served only once loaded
// (LoadPartition), since they may hold ids already; with create, a topic
// that does not exist is created, and the partitions this broker leads of
// a topic it made are served at once, empty. Caller holds c.mu: Topic
// calls back into nothing of the coordinator.
func (c *Coordinator) topicLocked(create bool) error {
	switch {
	case c.closed:
		return ErrNotCoordinator
	case c.parts != nil:
		return nil
	}
	if parts, err := c.topic.Partitions(); err == nil && len(parts) > 0 {
		c.adoptLocked(int32(len(parts)))
		return nil
	}
	if !create {
		return nil
	}
	parts, created, err := c.topic.Create(c.cfg.StatePartitions)
	if err != nil {
		return fmt.Errorf("%w: creating %s: %v", ErrNotCoordinator, StateTopic, err)
	}
	if len(parts) == 0 {
		return fmt.Errorf("%w: %s has no partitions", ErrNotCoordinator, StateTopic)
	}
	c.adoptLocked(int32(len(parts)))
	if created {
		for i, p := range parts {
			if p != nil {
				c.parts[i] = c.newServedLocked(int32(i), p)
			}
		}
	}
	return nil
}

// adoptLocked records the topic's partition count, none of them served
// yet. Caller holds c.mu.
func (c *Coordinator) adoptLocked(n int32) {
	if c.parts != nil {
		return
	}
	c.parts = make([]*served, n)
	if n != c.cfg.StatePartitions {
		c.log.Warn(StateTopic+" keeps the partition count it was created with",
			"partitions", n, "transaction.state.log.num.partitions", c.cfg.StatePartitions)
	}
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

// errElsewhere: the id's partition is not served here, so (unless this
// broker is about to load it) another broker coordinates it.
var errElsewhere = fmt.Errorf("%w: the transactional id's partition is not coordinated by this broker", ErrNotCoordinator)

// homeLocked returns the served partition that holds id. It is nil with
// no error before __transaction_state exists (no id is known anywhere;
// the first write creates the topic). Errors: ErrNotCoordinator after
// Close, ErrCoordinatorLoadInProgress before Load or while the partition
// is being replayed, errElsewhere when it is not served here. Caller holds
// c.mu.
func (c *Coordinator) homeLocked(id string) (*served, error) {
	switch {
	case c.closed:
		return nil, ErrNotCoordinator
	case !c.loaded:
		return nil, ErrCoordinatorLoadInProgress
	}
	if err := c.topicLocked(false); err != nil {
		return nil, err
	}
	if c.parts == nil {
		return nil, nil
	}
	i := model.CoordinatorPartition(id, int32(len(c.parts)))
	switch {
	case c.parts[i] != nil:
		return c.parts[i], nil
	case c.loading[i]:
		return nil, ErrCoordinatorLoadInProgress
	}
	return nil, fmt.Errorf("%w (%s-%d)", errElsewhere, StateTopic, i)
}

// lookup returns a transactional id's entry, or nil when it is unknown.
func (c *Coordinator) lookup(id string) (*txn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.homeLocked(id); err != nil {
		return nil, err
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
	t.settled = make(chan struct{})
	t.mu.Unlock()
	err = wait()
	t.mu.Lock()
	t.pending, t.ending = false, false
	close(t.settled)
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
// partition and returns the wait for its durability, which the caller
// must call once. It refuses a t whose partition is no longer served by
// the leadership t belongs to.
func (c *Coordinator) appendState(t *txn, next *meta) (func() error, error) {
	home := t.home
	c.mu.Lock()
	if c.closed || int(home.index) >= len(c.parts) || c.parts[home.index] != home {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s-%d is no longer coordinated here", ErrNotCoordinator, StateTopic, home.index)
	}
	home.writes.Add(1)
	c.mu.Unlock()
	rec := model.KeyValue{Key: txnKey(t.id)}
	ts := c.nowMs()
	if next != nil {
		rec.Value = txnValue(next)
		ts = next.updateMs
	}
	_, wait, err := home.p.Append(model.EncodeBatch([]model.KeyValue{rec}, ts, model.NoProducer))
	if err != nil {
		home.writes.Done()
		return nil, fmt.Errorf("%w: writing %s: %v", ErrNotCoordinator, StateTopic, err)
	}
	return func() error {
		defer home.writes.Done()
		return wait()
	}, nil
}
