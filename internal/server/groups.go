package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/replica"
)

// offsetsTopicConfigs are __consumer_offsets' topic configs, as Kafka
// creates it: compacted (the latest record of each key is the state), with
// offsets.topic.segment.bytes' 100 MiB segments so compaction can reach
// old records.
var offsetsTopicConfigs = map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"}

func groupConfig(cfg config.Broker, logger *slog.Logger, topics group.Topics) group.Config {
	g := group.Defaults()
	g.Topics = topics
	g.InitialRebalanceDelay = cfg.GroupInitialRebalanceDelay
	g.MinSessionTimeout, g.MaxSessionTimeout = cfg.GroupMinSessionTimeout, cfg.GroupMaxSessionTimeout
	g.MaxSize = int(cfg.GroupMaxSize)
	g.OffsetsPartitions = cfg.OffsetsTopicPartitions
	g.OffsetsRetention, g.OffsetsRetentionCheck = cfg.OffsetsRetention, cfg.OffsetsRetentionCheck
	g.OffsetMetadataMaxBytes = int(cfg.OffsetMetadataMaxBytes)
	g.ConsumerSessionTimeout, g.ConsumerHeartbeatInterval = cfg.GroupConsumerSessionTimeout, cfg.GroupConsumerHeartbeatInterval
	g.ConsumerMaxSize, g.ConsumerAssignors = int(cfg.GroupConsumerMaxSize), cfg.GroupConsumerAssignors
	g.ConsumerMigrationPolicy = group.MigrationPolicy(cfg.GroupConsumerMigrationPolicy)
	g.DisconnectGrace, g.DisconnectGraceStatic = cfg.GroupMemberDisconnectGrace, cfg.GroupMemberDisconnectGraceStatic
	g.StrictCommitOwnership = cfg.GroupCommitOwnershipStrict
	g.Logger = logger
	return g
}

// groupTimings reads a consumer group's own session timeout and heartbeat
// interval from its group configs in the cluster metadata
// (group.Config.GroupTimings).
func (s *Server) groupTimings(group string) (session, heartbeat time.Duration) {
	ms := func(name string) time.Duration {
		v, ok := s.cluster.GroupConfig(group, name)
		if !ok {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n <= 0 {
			return 0
		}
		return time.Duration(n) * time.Millisecond
	}
	return ms(config.GroupConsumerSessionTimeout), ms(config.GroupConsumerHeartbeatInterval)
}

// clusterTopics is the cluster's topics for the consumer groups' assignors
// (group.Topics).
type clusterTopics struct{ s *Server }

func (c clusterTopics) Lookup(names []string) map[string]group.TopicInfo {
	out := make(map[string]group.TopicInfo, len(names))
	var racks map[int32]string
	for _, name := range names {
		t, ok := c.s.cluster.Topic(name)
		if !ok {
			continue
		}
		info := group.TopicInfo{ID: [16]byte(t.ID), Partitions: t.Partitions}
		if racks == nil {
			racks = map[int32]string{}
			for _, b := range c.s.cluster.Brokers() {
				if b.Rack != "" {
					racks[b.NodeID] = b.Rack
				}
			}
		}
		if len(racks) > 0 {
			info.Racks = make([][]string, len(t.States))
			for i, p := range t.States {
				for _, r := range p.Replicas {
					if rack, ok := racks[r]; ok {
						info.Racks[i] = append(info.Racks[i], rack)
					}
				}
			}
		}
		out[name] = info
	}
	return out
}

func (c clusterTopics) Version() int64 { return c.s.cluster.Version() }

func (c clusterTopics) Names() []string {
	ts := c.s.cluster.Topics()
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

// offsetsTopic is __consumer_offsets for the group coordinator
// (group.Topic).
type offsetsTopic struct{ s *Server }

func (o offsetsTopic) Partitions() ([]group.Partition, error) {
	t, ok := o.s.cluster.Topic(group.OffsetsTopic)
	if !ok {
		return nil, nil
	}
	return o.partitions(t)
}

func (o offsetsTopic) Create(n int32) ([]group.Partition, error) {
	t, err := o.s.topics.createInternal(group.OffsetsTopic, n, offsetsTopicConfigs)
	if err != nil {
		return nil, err
	}
	return o.partitions(t)
}

func (o offsetsTopic) partitions(t cluster.Topic) ([]group.Partition, error) {
	parts := make([]group.Partition, t.Partitions)
	for i, p := range o.s.leadingPartitions(t) {
		if p != nil {
			parts[i] = offsetsPartition{p}
		}
	}
	return parts, nil
}

// leadingPartitions lists t's partitions in order: the replica where this
// broker leads it, else nil.
func (s *Server) leadingPartitions(t cluster.Topic) []*replica.Partition {
	parts := make([]*replica.Partition, t.Partitions)
	for i := range t.Partitions {
		if p, ok := s.leadingReplica(t.Name, i); ok {
			parts[i] = p
		}
	}
	return parts
}

// offsetsPartition is one partition of __consumer_offsets (group.Partition).
type offsetsPartition struct{ p *replica.Partition }

func (o offsetsPartition) Append(batch []byte) (int64, func() error, error) {
	// The coordinator's own batches: transactional offset commits carry
	// their producer's id and epoch but no sequence of the producer's.
	res, wait, err := o.p.AppendInternal(batch)
	if errors.Is(err, replica.ErrMessageTooLarge) {
		err = fmt.Errorf("%w: %v", group.ErrRecordTooLarge, err)
	}
	return res.BaseOffset, replicatedWait(o.p, wait, res.LastOffset+1, func(err error) error {
		switch {
		case errors.Is(err, replica.ErrNotLeader):
			return fmt.Errorf("%w: %v", group.ErrNotCoordinator, err)
		case err != nil:
			return fmt.Errorf("%w: %v", group.ErrCoordinatorNotAvailable, err)
		}
		return nil
	}), err
}

// coordinatorWriteTimeout bounds how long a coordinator's write waits for
// the in-sync replicas (Kafka's offsets.commit.timeout.ms).
const coordinatorWriteTimeout = 5 * time.Second

// replicatedWait extends an append's wait (durable here) until every
// in-sync replica has the write, as Kafka's coordinators append with
// acks=all: a committed offset or transaction state survives the loss of
// this broker. mapErr turns a replication failure into the coordinator's
// error.
func replicatedWait(p *replica.Partition, wait func() error, end int64, mapErr func(error) error) func() error {
	if wait == nil {
		return nil
	}
	return func() error {
		if err := wait(); err != nil {
			return err
		}
		return mapErr(p.WaitReplicated(context.Background(), end, coordinatorWriteTimeout))
	}
}

func (o offsetsPartition) Read(offset int64, maxBytes int) ([]byte, error) {
	sec, err := o.p.ReadToLogEnd(offset, maxBytes)
	if err != nil {
		return nil, err
	}
	return sec.ReadAll()
}

func (o offsetsPartition) StartOffset() int64 { return o.p.Log().StartOffset() }
func (o offsetsPartition) LoadEnd() int64     { return o.p.Log().EndOffset() }

// createInternal creates an internal topic (a coordinator's), or returns
// it if it exists.
func (a *topicAdmin) createInternal(name string, partitions int32, configs map[string]string) (cluster.Topic, error) {
	if t, ok := a.s.cluster.Topic(name); ok {
		return t, nil
	}
	t, err := a.CreateTopic(cluster.TopicSpec{Name: name, Partitions: partitions, Configs: configs, Internal: true,
		ReplicationFactor: a.s.internalReplicationFactor(name, a.s.cfg.OffsetsTopicReplicationFactor)}, false)
	if errors.Is(err, cluster.ErrTopicExists) { // made meanwhile
		if t, ok := a.s.cluster.Topic(name); ok {
			return t, nil
		}
	}
	return t, err
}
