package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/admin"
	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/replica"
	"github.com/strandlog/strand/internal/share"
)

// newShares wires the share groups (KIP-932): their members, assigned
// over the cluster's topics, and the share-partitions of the partitions
// this broker leads, each with its group's settings: the group's share.*
// configs over the broker's group.share.* settings.
func newShares(cfg config.Broker, metadata *cluster.Store, state protocol.ShareState, logger *slog.Logger) *protocol.Shares {
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
	groupString := func(group, name, def string) string {
		if v, ok := metadata.GroupConfig(group, name); ok {
			return v
		}
		return def
	}
	return &protocol.Shares{
		Groups: share.NewCoordinator(share.GroupLimits{MaxSize: int(cfg.GroupShareMaxSize),
			Timings: func(group string) (session, heartbeat time.Duration) {
				return time.Duration(groupInt(group, "share.session.timeout.ms", cfg.GroupShareSessionTimeout.Milliseconds())) * time.Millisecond,
					time.Duration(groupInt(group, "share.heartbeat.interval.ms", cfg.GroupShareHeartbeatInterval.Milliseconds())) * time.Millisecond
			}}, topics, logger.With("component", "share")),
		Leader: share.NewLeader(int(cfg.GroupShareMaxSessions)),
		Limits: func(group string) share.Limits {
			return share.Limits{
				DeliveryLimit: int16(groupInt(group, "share.delivery.count.limit", int64(cfg.GroupShareDeliveryLimit))),
				MaxInFlight:   int(groupInt(group, "share.partition.max.record.locks", int64(cfg.GroupShareRecordLocks))),
				LockDuration: time.Duration(groupInt(group, "share.record.lock.duration.ms",
					cfg.GroupShareRecordLock.Milliseconds())) * time.Millisecond,
			}
		},
		AutoOffsetReset: func(group string) string { return groupString(group, "share.auto.offset.reset", "latest") },
		IsolationLevel:  func(group string) string { return groupString(group, "share.isolation.level", "read_uncommitted") },
		State:           state,
		Now:             time.Now,
	}
}

// shareStateConfigs are __share_group_state's topic configs, as Kafka
// creates it: compacted, with 100 MiB segments.
var shareStateConfigs = map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"}

// shareState keeps the share-partitions' state in __share_group_state
// (protocol.ShareState), as Kafka's share coordinator does: each key's
// latest snapshot, in the partition its key hashes to. A partition led
// here is loaded on first use and again at each new leader epoch; one led
// by another broker is read and written there, with ReadShareGroupState,
// WriteShareGroupState, InitializeShareGroupState and
// DeleteShareGroupState.
//
// Locking: loadMu serialises loads. A key's writes hold one of writeMu
// from the store's fence check to its update after the record is durable,
// so that two writers of a key (its leader and an offsets reset, say)
// leave the store as their records leave the log. Keys share the locks by
// hash. The store's lock is a leaf.
type shareState struct {
	topic      coordinatorTopic
	partitions int32 // of the topic when this broker creates it
	store      *share.Store
	peers      *peer.Client
	self       int32
	loadMu     lockrank.Mutex[lockrank.ShareStateLoad]
	writeMu    [shareStateWriteLocks]lockrank.Mutex[lockrank.ShareStateWrite]
}

// shareStateWriteLocks is how many locks the keys' writes share.
const shareStateWriteLocks = 64

// stateElsewhere: the partition keeping a state is led by another broker.
type stateElsewhere struct {
	partition, leader int32
}

func (e *stateElsewhere) Error() string {
	return fmt.Sprintf("%s partition %d is led by broker %d", share.StateTopic, e.partition, e.leader)
}

func (e *stateElsewhere) Unwrap() error { return kerr.NotCoordinator }

func (s *shareState) Ensure() error {
	parts, err := s.topic.Partitions()
	if err == nil && len(parts) == 0 {
		_, _, err = s.topic.Create(s.partitions)
	}
	return err
}

// partition is the loaded partition of the topic that keeps k's state, or
// a *stateElsewhere naming the broker that leads it.
func (s *shareState) partition(k share.Key) (coordinator.Partition, error) {
	// One partition looked up, not the topic's all: this runs for every
	// acknowledgement.
	p, i, n := s.topic.partitionAt(func(n int32) int32 { return share.StatePartition(k, n) })
	if n == 0 {
		return nil, fmt.Errorf("%w: %s does not exist", kerr.CoordinatorNotAvailable, share.StateTopic)
	}
	if p == nil {
		st, ok := s.topic.metadata.Partition(share.StateTopic, i)
		if !ok || st.Leader == cluster.NoLeader || st.Leader == s.self {
			return nil, fmt.Errorf("%w: %s partition %d has no leader", kerr.CoordinatorNotAvailable, share.StateTopic, i)
		}
		return nil, &stateElsewhere{partition: i, leader: st.Leader}
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

// ReadLocal reads k's state from a partition led here.
func (s *shareState) ReadLocal(k share.Key) (share.Saved, bool, error) {
	if _, err := s.partition(k); err != nil {
		return share.Saved{}, false, err
	}
	st, ok := s.store.Get(k)
	return st, ok, nil
}

// ChangeLocal writes c to k's state on a partition led here (a snapshot,
// or tombstones when c deletes it), and returns once it is durable on
// every in-sync replica. The store refuses what is fenced.
func (s *shareState) ChangeLocal(k share.Key, c share.Change) error {
	p, err := s.partition(k)
	if err != nil {
		return err
	}
	mu := &s.writeMu[share.StatePartition(k, shareStateWriteLocks)]
	mu.Lock()
	defer mu.Unlock()
	st, keep, err := s.store.After(k, c)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	recs := share.EncodeTombstones(k)
	if keep {
		key, value := share.EncodeSnapshot(k, st, now)
		recs = []model.KeyValue{{Key: key, Value: value}}
	}
	_, wait, err := p.Append(model.EncodeBatch(recs, now, model.Producer{ID: -1}))
	if err == nil {
		err = wait()
	}
	if err != nil {
		return err
	}
	s.store.Set(k, st, keep)
	return nil
}

// stateTimeout bounds a read or write of the state on another broker
// (share.coordinator.write.timeout.ms).
const stateTimeout = 5 * time.Second

func (s *shareState) Read(k share.Key) (share.Saved, bool, error) {
	st, ok, err := s.ReadLocal(k)
	var there *stateElsewhere
	if !errors.As(err, &there) {
		return st, ok, err
	}
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	kresp, err := s.peers.Request(ctx, there.leader, req)
	if err != nil {
		return share.Saved{}, false, fmt.Errorf("%w: reading the share-group state on broker %d: %v", kerr.CoordinatorNotAvailable, there.leader, err)
	}
	resp := kresp.(*kmsg.ReadShareGroupStateResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return share.Saved{}, false, fmt.Errorf("%w: broker %d answered no state", kerr.CoordinatorNotAvailable, there.leader)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return share.Saved{}, false, err
	}
	if p.StartOffset < 0 {
		return share.Saved{}, false, nil // none kept yet
	}
	// ReadShareGroupState does not carry the leader epoch: unknown here.
	saved := share.Saved{StateEpoch: p.StateEpoch, LeaderEpoch: -1, Start: p.StartOffset}
	for _, b := range p.StateBatches {
		saved.Batches = append(saved.Batches, share.StateBatch{First: b.FirstOffset, Last: b.LastOffset,
			State: share.State(b.DeliveryState), Deliveries: b.DeliveryCount})
	}
	return saved, true, nil
}

// Change writes c to k's state where it is kept: here, or on the broker
// that leads its partition, by WriteShareGroupState,
// InitializeShareGroupState or DeleteShareGroupState.
func (s *shareState) Change(k share.Key, c share.Change) error {
	err := s.ChangeLocal(k, c)
	var there *stateElsewhere
	if !errors.As(err, &there) {
		return err
	}
	var req kmsg.Request
	switch c.Kind {
	case share.ChangeWrite:
		w := kmsg.NewPtrWriteShareGroupStateRequest()
		w.Version = 1
		w.GroupID = k.Group
		rt := kmsg.NewWriteShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.DeliveryCompleteCount = k.Partition, c.StateEpoch, c.LeaderEpoch, c.Start, -1
		for _, b := range c.Batches {
			sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
			sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.First, b.Last, int8(b.State), b.Deliveries
			rp.StateBatches = append(rp.StateBatches, sb)
		}
		rt.Partitions = append(rt.Partitions, rp)
		w.Topics = append(w.Topics, rt)
		req = w
	case share.ChangeInitialize:
		in := kmsg.NewPtrInitializeShareGroupStateRequest()
		in.GroupID = k.Group
		rt := kmsg.NewInitializeShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
		rp.Partition, rp.StateEpoch, rp.StartOffset = k.Partition, c.StateEpoch, c.Start
		rt.Partitions = append(rt.Partitions, rp)
		in.Topics = append(in.Topics, rt)
		req = in
	case share.ChangeDelete:
		del := kmsg.NewPtrDeleteShareGroupStateRequest()
		del.GroupID = k.Group
		rt := kmsg.NewDeleteShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
		rp.Partition = k.Partition
		rt.Partitions = append(rt.Partitions, rp)
		del.Topics = append(del.Topics, rt)
		req = del
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	kresp, err := s.peers.Request(ctx, there.leader, req)
	if err != nil {
		return fmt.Errorf("%w: changing the share-group state on broker %d: %v", kerr.CoordinatorNotAvailable, there.leader, err)
	}
	code, found := int16(0), false
	switch resp := kresp.(type) {
	case *kmsg.WriteShareGroupStateResponse:
		if found = len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1; found {
			code = resp.Topics[0].Partitions[0].ErrorCode
		}
	case *kmsg.InitializeShareGroupStateResponse:
		if found = len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1; found {
			code = resp.Topics[0].Partitions[0].ErrorCode
		}
	case *kmsg.DeleteShareGroupStateResponse:
		if found = len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1; found {
			code = resp.Topics[0].Partitions[0].ErrorCode
		}
	}
	if !found {
		return fmt.Errorf("%w: broker %d answered no change", kerr.CoordinatorNotAvailable, there.leader)
	}
	return stateCodeError(code)
}

// stateCodeError is another broker's answer to a change of the state:
// its fences as the store's own errors, so that a leader tells them
// apart wherever the state is kept.
func stateCodeError(code int16) error {
	switch code {
	case kerr.FencedLeaderEpoch.Code:
		return share.ErrFencedLeaderEpoch
	case kerr.FencedStateEpoch.Code:
		return share.ErrFencedStateEpoch
	}
	return kerr.ErrorForCode(code)
}

// adminShares counts this broker's part of the share groups for /metrics
// (admin.Shares).
type adminShares struct {
	shares   *protocol.Shares
	metadata *cluster.Store
	replicas *replica.Manager
}

func (a adminShares) ShareGroups() []admin.ShareGroupFigures {
	var out []admin.ShareGroupFigures
	for _, name := range a.shares.Groups.Groups() {
		n, ok := a.shares.Groups.Members(name)
		if !ok {
			continue
		}
		state := "Stable"
		if n == 0 {
			state = "Empty"
		}
		out = append(out, admin.ShareGroupFigures{Group: name, State: state, Members: n})
	}
	return out
}

func (a adminShares) SharePartitions() []admin.SharePartitionFigures {
	var out []admin.SharePartitionFigures
	for _, k := range a.shares.Leader.Keys() {
		t, ok := a.metadata.TopicByID(cluster.TopicID(k.TopicID))
		if !ok {
			continue
		}
		p, ok := a.replicas.Get(model.TopicPartition{Topic: t.Name, Partition: k.Partition})
		if !ok || !p.IsLeader() {
			continue
		}
		sp := a.shares.Leader.Get(k)
		if sp == nil {
			continue
		}
		sp.Mu.Lock()
		if sp.P == nil {
			sp.Mu.Unlock()
			continue
		}
		saved := share.Saved{Start: sp.P.Start(), Batches: sp.P.StateBatches()}
		f := admin.SharePartitionFigures{Group: k.Group, Topic: t.Name, Partition: k.Partition,
			Acquired: int64(sp.P.AcquiredCount()), InFlight: int64(sp.P.InFlight())}
		sp.Mu.Unlock()
		f.Lag = max(p.HighWatermark()-saved.Start-saved.Completed(), 0)
		out = append(out, f)
	}
	return out
}
