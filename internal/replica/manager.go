package replica

import (
	"errors"
	"log/slog"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
)

// ErrUnknownPartition: this broker does not serve the partition (Kafka
// UNKNOWN_TOPIC_OR_PARTITION).
var ErrUnknownPartition = errors.New("replica: unknown partition")

// Options are the producer-state settings of the partitions a Manager
// serves; zero fields take Kafka's defaults.
type Options struct {
	// ProducerIDExpiration is producer.id.expiration.ms (default 1 day): a
	// producer that has not appended to a partition for this long is
	// forgotten there. Its next batch is then accepted at any sequence, as
	// from a new producer, and duplicates of its earlier batches are no
	// longer recognised. Idle time is measured on the broker's clock for
	// appends it sees, and from the batch timestamps (capped at now) for
	// batches replayed from the log on open.
	ProducerIDExpiration time.Duration
	// ProducerIDExpirationCheck is producer.id.expiration.check.interval.ms
	// (default 10 minutes): how often appends sweep expired producers.
	ProducerIDExpirationCheck time.Duration
	// ProducerSnapshotEvery is how many appends go between producer-state
	// snapshots (default 10000), which bounds the log scanned on open after
	// a crash. Close writes one too.
	ProducerSnapshotEvery int
	Now                   func() time.Time
	Logger                *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.ProducerIDExpiration <= 0 {
		o.ProducerIDExpiration = 24 * time.Hour
	}
	if o.ProducerIDExpirationCheck <= 0 {
		o.ProducerIDExpirationCheck = 10 * time.Minute
	}
	if o.ProducerSnapshotEvery <= 0 {
		o.ProducerSnapshotEvery = 10000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Logger = o.Logger.With("component", "replica")
	return o
}

// Manager holds the partitions this broker serves.
type Manager struct {
	logs *log.Manager
	opts Options

	mu    lockrank.RWMutex[lockrank.ReplicaManager]
	parts map[model.TopicPartition]*Partition
}

// NewManager serves partitions whose logs live in logs, with the default
// Options.
func NewManager(logs *log.Manager) *Manager { return NewManagerWith(logs, Options{}) }

// NewManagerWith serves partitions whose logs live in logs.
func NewManagerWith(logs *log.Manager, opts Options) *Manager {
	return &Manager{logs: logs, opts: opts.withDefaults(), parts: map[model.TopicPartition]*Partition{}}
}

// Open opens (creating if needed) a partition's log and serves it.
func (m *Manager) Open(tp model.TopicPartition, topicID [16]byte, cfg Config) (*Partition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.parts[tp]; ok {
		return p, nil
	}
	l, err := m.logs.Open(tp, cfg.Config)
	if err != nil {
		return nil, err
	}
	p, err := newPartition(tp, topicID, l, cfg, &m.opts)
	if err != nil {
		return nil, err
	}
	m.parts[tp] = p
	return p, nil
}

// Get returns a served partition.
func (m *Manager) Get(tp model.TopicPartition) (*Partition, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.parts[tp]
	return p, ok
}

// Partitions returns every partition held.
func (m *Manager) Partitions() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p)
	}
	return out
}

// Delete stops serving a partition and removes its data.
func (m *Manager) Delete(tp model.TopicPartition) error {
	m.mu.Lock()
	p, ok := m.parts[tp]
	delete(m.parts, tp)
	m.mu.Unlock()
	if ok {
		p.Truncated() // wake parked fetches so they answer without it
	}
	return m.logs.Delete(tp)
}

// SetConfig applies new settings to every served partition of topic.
func (m *Manager) SetConfig(topic string, cfg Config) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var errs []error
	for tp, p := range m.parts {
		if tp.Topic == topic {
			errs = append(errs, p.setConfig(cfg))
		}
	}
	return errors.Join(errs...)
}

// Close writes every partition's producer-state snapshot, so that the next
// open scans no log. Call it once appends have stopped and before the logs
// close. Partitions stay usable; a later append simply makes the snapshot
// older than the log.
func (m *Manager) Close() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var errs []error
	for _, p := range m.parts {
		errs = append(errs, p.SnapshotProducers())
	}
	return errors.Join(errs...)
}
