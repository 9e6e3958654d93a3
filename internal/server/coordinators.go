package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/replica"
)

// coordinatorTopic is an internal topic a coordinator keeps its state in
// (coordinator.Topic): __consumer_offsets, __transaction_state and the
// hand-off ledger's topic.
type coordinatorTopic struct {
	name    string
	configs map[string]string
	// replicationFactor is the configured one; a cluster of fewer brokers
	// gets fewer (internalReplicationFactor).
	replicationFactor int16
	metadata          *cluster.Store
	admin             *topicAdmin
	replicas          *replica.Manager
}

func (c coordinatorTopic) Partitions() ([]coordinator.Partition, error) {
	t, ok := c.metadata.Topic(c.name)
	if !ok {
		return nil, nil
	}
	return c.partitions(t), nil
}

func (c coordinatorTopic) Create(n int32) ([]coordinator.Partition, bool, error) {
	t, created, err := c.create(n)
	if err != nil {
		return nil, false, err
	}
	return c.partitions(t), created, nil
}

// create makes the topic with n partitions, or returns it if it exists.
func (c coordinatorTopic) create(n int32) (cluster.Topic, bool, error) {
	return c.admin.createInternal(c.name, n, c.configs, c.replicationFactor)
}

// partitionAt is partition i of the topic when this broker leads it (nil
// otherwise), and the topic's partition count; n is 0 when the topic does
// not exist. It looks up the one partition, where Partitions lists all.
func (c coordinatorTopic) partitionAt(key func(n int32) int32) (p coordinator.Partition, i, n int32) {
	t, ok := c.metadata.Topic(c.name)
	if !ok || t.Partitions == 0 {
		return nil, 0, 0
	}
	i = key(t.Partitions)
	if rp, ok := leadingReplica(c.replicas, t.Name, i); ok {
		return coordinatorPartition{rp}, i, t.Partitions
	}
	return nil, i, t.Partitions
}

// partitions lists t's partitions in order: those led here, else nil.
func (c coordinatorTopic) partitions(t cluster.Topic) []coordinator.Partition {
	parts := make([]coordinator.Partition, t.Partitions)
	for i, p := range leadingPartitions(c.replicas, t) {
		if p != nil {
			parts[i] = coordinatorPartition{p}
		}
	}
	return parts
}

// coordinatorPartition is a partition of a coordinator's topic led here
// (coordinator.Partition). Its writes are acknowledged as Kafka's
// coordinators append, with acks=all: a committed offset or transaction
// state survives the loss of this broker.
type coordinatorPartition struct{ p *replica.Partition }

// coordinatorWriteTimeout bounds how long a coordinator's write waits for
// the in-sync replicas (Kafka's offsets.commit.timeout.ms).
const coordinatorWriteTimeout = 5 * time.Second

func (c coordinatorPartition) Append(batch []byte) (int64, func() error, error) {
	if !c.p.IsLeader() {
		return -1, nil, fmt.Errorf("%s: %w", c.p.TP, coordinator.ErrNotLeader)
	}
	// The coordinators' own batches: transactional offset commits carry
	// their producer's id and epoch but no sequence of the producer's.
	res, wait, err := c.p.AppendInternal(batch)
	switch {
	case errors.Is(err, replica.ErrMessageTooLarge):
		return -1, nil, fmt.Errorf("%s: %w: %v", c.p.TP, coordinator.ErrTooLarge, err)
	case errors.Is(err, replica.ErrNotLeader):
		return -1, nil, fmt.Errorf("%s: %w: %v", c.p.TP, coordinator.ErrNotLeader, err)
	case err != nil:
		return -1, nil, err
	}
	end := res.LastOffset + 1
	return res.BaseOffset, func() error {
		if err := wait(); err != nil {
			return err // not durable here: the log's own error
		}
		err := c.p.WaitReplicated(context.Background(), end, coordinatorWriteTimeout)
		switch {
		case errors.Is(err, replica.ErrNotLeader):
			return fmt.Errorf("%s: %w: %v", c.p.TP, coordinator.ErrNotLeader, err)
		case err != nil:
			return fmt.Errorf("%s: %w: %v", c.p.TP, coordinator.ErrNotReplicated, err)
		}
		return nil
	}, nil
}

func (c coordinatorPartition) Read(offset int64, maxBytes int) ([]byte, error) {
	sec, err := c.p.ReadToLogEnd(offset, maxBytes)
	if err != nil {
		return nil, err
	}
	return sec.ReadAll()
}

func (c coordinatorPartition) StartOffset() int64 { return c.p.StartOffset() }
func (c coordinatorPartition) LoadEnd() int64     { return c.p.EndOffset() }
func (c coordinatorPartition) LeaderEpoch() int32 { return c.p.LeaderEpoch() }

// createInternal creates an internal topic (a coordinator's), or returns
// it if it exists; created says whether this call made it.
func (a *topicAdmin) createInternal(name string, partitions int32, configs map[string]string, replicationFactor int16) (cluster.Topic, bool, error) {
	if t, ok := a.s.cluster.Topic(name); ok {
		return t, false, nil
	}
	t, err := a.CreateTopic(cluster.TopicSpec{Name: name, Partitions: partitions, Configs: configs, Internal: true,
		ReplicationFactor: a.s.internalReplicationFactor(name, replicationFactor)}, false)
	if errors.Is(err, cluster.ErrTopicExists) { // made meanwhile
		if t, ok := a.s.cluster.Topic(name); ok {
			return t, false, nil
		}
	}
	return t, err == nil, err
}

// leadingPartitions lists t's partitions in order: the replica where this
// broker leads it, else nil.
func leadingPartitions(replicas *replica.Manager, t cluster.Topic) []*replica.Partition {
	parts := make([]*replica.Partition, t.Partitions)
	for i := range t.Partitions {
		if p, ok := leadingReplica(replicas, t.Name, i); ok {
			parts[i] = p
		}
	}
	return parts
}

// coordinatorTopic is the internal topic name as its coordinator reaches
// it.
func (s *Server) coordinatorTopic(name string, configs map[string]string, replicationFactor int16) coordinatorTopic {
	return coordinatorTopic{name: name, configs: configs, replicationFactor: replicationFactor,
		metadata: s.cluster, admin: s.topics, replicas: s.replicas}
}
