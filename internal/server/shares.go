package server

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/share"
)

// newShares wires the share groups (KIP-932): their members, assigned
// over the cluster's topics, and the share-partitions of the partitions
// this broker leads, each with its group's settings: the group's share.*
// configs over the broker's group.share.* settings.
func newShares(cfg config.Broker, metadata *cluster.Store, state protocol.ShareState) *protocol.Shares {
	topics := func(names []string) map[string]share.TopicInfo {
		out := make(map[string]share.TopicInfo, len(names))
		for _, n := range names {
			if t, ok := metadata.Topic(n); ok {
				out[n] = share.TopicInfo{ID: [16]byte(t.ID), Partitions: int32(len(t.States))}
			}
		}
		return out
	}
	groupInt := func(group, name string, def int64) int64 {
		if v, ok := metadata.GroupConfig(group, name); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
		return def
	}
	return &protocol.Shares{
		Groups: share.NewCoordinator(share.GroupLimits{SessionTimeout: cfg.GroupShareSessionTimeout,
			HeartbeatInterval: cfg.GroupShareHeartbeatInterval, MaxSize: int(cfg.GroupShareMaxSize)}, topics),
		Leader: share.NewLeader(int(cfg.GroupShareMaxSessions)),
		Limits: func(group string) share.Limits {
			return share.Limits{
				DeliveryLimit: int16(groupInt(group, "share.delivery.count.limit", int64(cfg.GroupShareDeliveryLimit))),
				MaxInFlight:   int(groupInt(group, "share.partition.max.record.locks", int64(cfg.GroupShareRecordLocks))),
				LockDuration: time.Duration(groupInt(group, "share.record.lock.duration.ms",
					cfg.GroupShareRecordLock.Milliseconds())) * time.Millisecond,
			}
		},
		AutoOffsetReset: func(group string) string {
			if v, ok := metadata.GroupConfig(group, "share.auto.offset.reset"); ok {
				return v
			}
			return "latest"
		},
		State: state,
		Now:   time.Now,
	}
}

// shareStateConfigs are __share_group_state's topic configs, as Kafka
// creates it: compacted, with 100 MiB segments.
var shareStateConfigs = map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"}

// shareState keeps the share-partitions' state in __share_group_state
// (protocol.ShareState), as Kafka's share coordinator does: each key's
// latest snapshot, in the partition its key hashes to. The partitions are
// loaded on first use and again at each new leader epoch.
//
// A partition of the topic this broker does not lead cannot be read or
// written yet: the share-group state APIs between brokers are the next
// step, so share groups serve the partitions whose state is kept on the
// broker that leads them.
//
// Locking: loadMu serialises loads; the store's lock is a leaf.
type shareState struct {
	topic      coordinatorTopic
	partitions int32 // of the topic when this broker creates it
	store      *share.Store
	loadMu     lockrank.Mutex[lockrank.ShareStateLoad]
}

func (s *shareState) Ensure() error {
	parts, err := s.topic.Partitions()
	if err == nil && len(parts) == 0 {
		_, _, err = s.topic.Create(s.partitions)
	}
	return err
}

// partition is the loaded partition of the topic that keeps k's state.
func (s *shareState) partition(k share.Key) (coordinator.Partition, error) {
	parts, err := s.topic.Partitions()
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%s does not exist", share.StateTopic)
	}
	n := int32(len(parts))
	i := share.StatePartition(k, n)
	p := parts[i]
	if p == nil {
		return nil, fmt.Errorf("%w: %s partition %d is led by another broker", kerr.NotCoordinator, share.StateTopic, i)
	}
	if !s.store.Loaded(i, p.LeaderEpoch()) {
		s.loadMu.Lock()
		defer s.loadMu.Unlock()
		if !s.store.Loaded(i, p.LeaderEpoch()) {
			if err := s.store.Load(i, p, n); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

func (s *shareState) Read(k share.Key) (share.Saved, bool, error) {
	if _, err := s.partition(k); err != nil {
		return share.Saved{}, false, err
	}
	st, ok := s.store.Get(k)
	return st, ok, nil
}

// Write appends k's new snapshot and returns once it is durable on every
// in-sync replica.
func (s *shareState) Write(k share.Key, start int64, batches []share.StateBatch, leaderEpoch int32) error {
	p, err := s.partition(k)
	if err != nil {
		return err
	}
	st := s.store.Next(k, start, batches, leaderEpoch)
	now := time.Now().UnixMilli()
	key, value := share.EncodeSnapshot(k, st, now)
	_, wait, err := p.Append(model.EncodeBatch([]model.KeyValue{{Key: key, Value: value}}, now, model.Producer{ID: -1}))
	if err == nil {
		err = wait()
	}
	if err != nil {
		return err
	}
	s.store.Put(k, st)
	return nil
}
