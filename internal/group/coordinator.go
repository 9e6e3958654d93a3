package group

import (
	"fmt"
	"log/slog"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
)

// OffsetsTopic is the topic the coordinator keeps its state in.
const OffsetsTopic = "__consumer_offsets"

// Coordinator is the group coordinator of this broker: every group's
// state machine and committed offsets. See doc.go.
type Coordinator struct {
	cfg      Config
	topic    coordinator.Topic
	topics   Topics // the cluster's topics, for consumer groups; nil without
	clock    Clock
	log      *slog.Logger
	fetchers fetchIndex
	conns    connIndex

	mu     lockrank.Mutex[lockrank.Coordinator]
	groups map[string]*group
	// writers has one entry per __consumer_offsets partition (nil until
	// the topic exists): the partition's writer while this broker leads it
	// and has loaded it, else nil.
	writers []*writer
	loading map[int32]bool // partitions being loaded
	closed  bool
	expiry  Stopper
}

// New returns a coordinator that keeps its state in topic. Call Load
// before serving requests.
func New(cfg Config, topic coordinator.Topic) *Coordinator {
	cfg = cfg.withDefaults()
	return &Coordinator{cfg: cfg, topic: topic, topics: cfg.Topics, clock: cfg.Clock, log: cfg.Logger, groups: map[string]*group{},
		loading: map[int32]bool{}}
}

// Close answers parked requests with NOT_COORDINATOR (as Kafka does when a
// coordinator unloads its groups), stops the timers, and returns once every
// write is durable and reported. Call it after the connections are done
// and before the logs close.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if c.expiry != nil {
		c.expiry.Stop()
	}
	groups := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		groups = append(groups, g)
	}
	writers := c.writers
	c.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		g.unload()
		g.mu.Unlock()
	}
	for _, w := range writers {
		if w != nil {
			w.close()
		}
	}
}

// EnsureTopic creates __consumer_offsets if it does not exist yet
// (FindCoordinator does, as in Kafka).
func (c *Coordinator) EnsureTopic() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ensureTopicLocked()
}

func (c *Coordinator) ensureTopicLocked() error {
	if c.writers != nil {
		return nil
	}
	if c.closed {
		return ErrNotCoordinator
	}
	// Made meanwhile by another broker: its partitions may hold groups
	// already, so those this broker leads are loaded (LoadPartition), not
	// started empty.
	if parts, err := c.topic.Partitions(); err == nil && len(parts) > 0 {
		c.writers = make([]*writer, len(parts))
		return nil
	}
	parts, _, err := c.topic.Create(c.cfg.OffsetsPartitions)
	if err != nil {
		return fmt.Errorf("%w: creating __consumer_offsets: %v", ErrCoordinatorNotAvailable, err)
	}
	c.startWriters(parts)
	return nil
}

// startWriters serves the partitions of a topic just created: empty, they
// need no loading. Those led elsewhere stay nil.
func (c *Coordinator) startWriters(parts []coordinator.Partition) {
	c.writers = make([]*writer, len(parts))
	for i, p := range parts {
		if p != nil {
			c.writers[i] = newWriter(p)
		}
	}
}

// serves checks that this broker coordinates groupID now: its partition is
// led and loaded here. Before __consumer_offsets exists every group is
// served, the first write creating the topic.
func (c *Coordinator) serves(groupID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrNotCoordinator
	case c.writers == nil:
		return nil
	}
	i := model.CoordinatorPartition(groupID, int32(len(c.writers)))
	switch {
	case c.writers[i] != nil:
		return nil
	case c.loading[i]:
		return ErrCoordinatorLoadInProgress
	}
	return ErrNotCoordinator
}

// PartitionFor is the __consumer_offsets partition that holds a group.
func (c *Coordinator) PartitionFor(groupID string) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return model.CoordinatorPartition(groupID, c.partitionsLocked())
}

func (c *Coordinator) partitionsLocked() int32 {
	if c.writers != nil {
		return int32(len(c.writers))
	}
	return c.cfg.OffsetsPartitions
}

// writerFor returns the writer of a group's partition, creating the topic
// on first use.
func (c *Coordinator) writerFor(groupID string) (*writer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ensureTopicLocked(); err != nil {
		return nil, err
	}
	if w := c.writers[model.CoordinatorPartition(groupID, int32(len(c.writers)))]; w != nil {
		return w, nil
	}
	return nil, ErrNotCoordinator
}

// lookup returns a group, creating an empty one if create is set. A group
// found here may turn Dead before its lock is taken; callers check.
func (c *Coordinator) lookup(id string, create bool) (*group, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[id]
	if !ok && create && !c.closed {
		g = c.newGroup(id)
		c.groups[id] = g
		ok = true
	}
	return g, ok
}

// drop removes a group that turned Dead. Caller holds g.mu.
func (c *Coordinator) drop(g *group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
}

// snapshot lists the groups.
func (c *Coordinator) snapshot() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	return gs
}
