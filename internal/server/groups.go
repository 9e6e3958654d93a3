package server

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/group"
)

// offsetsTopicConfigs are __consumer_offsets' topic configs, as Kafka
// creates it: compacted (the latest record of each key is the state), with
// offsets.topic.segment.bytes' 100 MiB segments so compaction can reach
// old records.
var offsetsTopicConfigs = map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"}

func groupConfig(cfg config.Broker, logger *slog.Logger, topics group.Topics) group.Config {
	var g group.Config
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
type clusterTopics struct{ metadata *cluster.Store }

func (c clusterTopics) Lookup(names []string) map[string]group.TopicInfo {
	out := make(map[string]group.TopicInfo, len(names))
	var racks map[int32]string
	for _, name := range names {
		t, ok := c.metadata.Topic(name)
		if !ok {
			continue
		}
		info := group.TopicInfo{ID: [16]byte(t.ID), Partitions: t.Partitions}
		if racks == nil {
			racks = map[int32]string{}
			for _, b := range c.metadata.Brokers() {
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

func (c clusterTopics) Version() int64 { return c.metadata.Version() }

func (c clusterTopics) Names() []string {
	ts := c.metadata.Topics()
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}
