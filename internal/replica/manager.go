package replica

import (
	"errors"
	"sync"

	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
)

// ErrUnknownPartition: this broker does not serve the partition (Kafka
// UNKNOWN_TOPIC_OR_PARTITION).
var ErrUnknownPartition = errors.New("replica: unknown partition")

// Manager holds the partitions this broker serves.
type Manager struct {
	logs *log.Manager

	mu    sync.RWMutex
	parts map[model.TopicPartition]*Partition
}

// NewManager serves partitions whose logs live in logs.
func NewManager(logs *log.Manager) *Manager {
	return &Manager{logs: logs, parts: map[model.TopicPartition]*Partition{}}
}

// Open opens (creating if needed) a partition's log and serves it.
func (m *Manager) Open(tp model.TopicPartition, topicID [16]byte, cfg log.Config) (*Partition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.parts[tp]; ok {
		return p, nil
	}
	l, err := m.logs.Open(tp, cfg)
	if err != nil {
		return nil, err
	}
	p := newPartition(tp, topicID, l)
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
func (m *Manager) SetConfig(topic string, cfg log.Config) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var errs []error
	for tp, p := range m.parts {
		if tp.Topic == topic {
			errs = append(errs, p.log.SetConfig(cfg))
		}
	}
	return errors.Join(errs...)
}
