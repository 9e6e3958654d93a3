package coordinator

import (
	"slices"
	"sync"

	"github.com/strandlog/strand/internal/model"
)

// MemTopic is a coordinator's topic in memory, for tests.
type MemTopic struct {
	mu      sync.Mutex
	parts   []*MemPartition
	led     map[int32]bool // nil: every partition
	created int32
}

// Partitions lists the partitions, nil for those not led (Lead).
func (m *MemTopic) Partitions() ([]Partition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Partition
	for i, p := range m.parts {
		if m.led != nil && !m.led[int32(i)] {
			out = append(out, nil)
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// Create makes n empty partitions unless the topic has some.
func (m *MemTopic) Create(n int32) ([]Partition, bool, error) {
	m.mu.Lock()
	created := m.parts == nil
	if created {
		m.created = n
		for range n {
			m.parts = append(m.parts, &MemPartition{})
		}
	}
	m.mu.Unlock()
	parts, err := m.Partitions()
	return parts, created, err
}

// Created is the partition count Create made the topic with (0: not made).
func (m *MemTopic) Created() int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.created
}

// Partition returns partition i.
func (m *MemTopic) Partition(i int) *MemPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[i]
}

// Len is the number of partitions.
func (m *MemTopic) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.parts)
}

// Lead sets the partitions this broker leads; the others list as nil.
func (m *MemTopic) Lead(parts ...int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.led = map[int32]bool{}
	for _, p := range parts {
		m.led[p] = true
	}
}

// MemPartition keeps a partition's batches in memory, for tests. Gates
// hold its appends, their durability or its reads until they are closed.
type MemPartition struct {
	mu        sync.Mutex
	batches   [][]byte
	next      int64
	admit     chan struct{} // appends wait for it
	durable   chan struct{} // appends' waits wait for it
	readable  chan struct{} // reads wait for it
	appendErr error
	waitErr   error
	epoch     int32
}

// Append keeps batch at the next offset.
func (p *MemPartition) Append(batch []byte) (int64, func() error, error) {
	p.mu.Lock()
	admit := p.admit
	p.mu.Unlock()
	if admit != nil {
		<-admit
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.appendErr != nil {
		return -1, nil, p.appendErr
	}
	b := model.Batch(batch)
	base := p.next
	b.SetBaseOffset(base)
	p.next = b.LastOffset() + 1
	p.batches = append(p.batches, batch)
	durable, waitErr := p.durable, p.waitErr
	return base, func() error {
		if durable != nil {
			<-durable
		}
		return waitErr
	}, nil
}

// Read returns the batches from the one holding offset, about maxBytes.
func (p *MemPartition) Read(offset int64, maxBytes int) ([]byte, error) {
	p.mu.Lock()
	readable := p.readable
	p.mu.Unlock()
	if readable != nil {
		<-readable
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []byte
	for _, b := range p.batches {
		if model.Batch(b).LastOffset() >= offset {
			out = append(out, b...)
			if len(out) >= maxBytes {
				break
			}
		}
	}
	return out, nil
}

func (p *MemPartition) StartOffset() int64 { return 0 }

func (p *MemPartition) LoadEnd() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

func (p *MemPartition) LeaderEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

// SetLeaderEpoch sets the epoch LeaderEpoch returns.
func (p *MemPartition) SetLeaderEpoch(epoch int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epoch = epoch
}

// HoldAppends makes later appends wait until gate is closed (nil: not).
func (p *MemPartition) HoldAppends(gate chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.admit = gate
}

// HoldDurability makes the waits of later appends return only once gate
// is closed (nil: at once).
func (p *MemPartition) HoldDurability(gate chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.durable = gate
}

// HoldReads makes later reads wait until gate is closed (nil: not).
func (p *MemPartition) HoldReads(gate chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readable = gate
}

// FailAppends makes later appends fail with err (nil: succeed).
func (p *MemPartition) FailAppends(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.appendErr = err
}

// FailWaits makes the waits of later appends return err (nil: succeed).
func (p *MemPartition) FailWaits(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitErr = err
}

// Batches returns the batches kept, in order.
func (p *MemPartition) Batches() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.batches)
}

// DropLast loses the last batch, as a crash before it was durable would.
func (p *MemPartition) DropLast() {
	p.mu.Lock()
	defer p.mu.Unlock()
	last := p.batches[len(p.batches)-1]
	p.batches = p.batches[:len(p.batches)-1]
	p.next = model.Batch(last).BaseOffset()
}
