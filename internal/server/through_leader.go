package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/peer"
)

// throughLeader is a partition of the hand-off ledger's or the fetch
// positions' topic that another broker leads, written there by Produce
// (acks=all unless leaderOnly). A broker that leads none of a topic's partitions (three
// partitions on three brokers are not always one each) still has its
// records written.
type throughLeader struct {
	self     int32
	tp       model.TopicPartition
	metadata *cluster.Store
	peers    *peer.Client
	// leaderOnly asks acks=1: the write is not awaited on the followers,
	// as a local write of the same records is not.
	leaderOnly bool
}

// Append writes batch on the leader and returns once it is acknowledged
// there; the wait it returns is nil. It fails as a coordinator partition
// does: ErrNotLeader when the leader took nothing (none yet, or moved),
// ErrTooLarge, and ErrNotReplicated when the batch may be in the log
// unconfirmed.
func (t throughLeader) Append(batch []byte) (int64, func() error, error) {
	p, ok := t.metadata.Partition(t.tp.Topic, t.tp.Partition)
	if !ok || p.Leader == cluster.NoLeader || p.Leader == t.self {
		// Led here by the metadata but not yet by the replica: the
		// caller's next write finds it.
		return -1, nil, fmt.Errorf("%s: %w: %w", t.tp, coordinator.ErrNotLeader, kerr.LeaderNotAvailable)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	if t.leaderOnly {
		req.Acks = 1
	}
	req.TimeoutMillis = int32(coordinatorWriteTimeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = t.tp.Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = t.tp.Partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 2*coordinatorWriteTimeout)
	defer cancel()
	raw, err := t.peers.Request(ctx, p.Leader, req)
	if err != nil {
		// Sent or not, it may have been appended.
		return -1, nil, fmt.Errorf("%s through broker %d: %w: %w", t.tp, p.Leader, coordinator.ErrNotReplicated, err)
	}
	for _, rt := range raw.(*kmsg.ProduceResponse).Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return -1, nil, fmt.Errorf("%s through broker %d: %w: %w", t.tp, p.Leader, leaderWriteError(err), err)
			}
			return rp.BaseOffset, nil, nil
		}
	}
	return -1, nil, errors.New("Produce answered without the partition")
}

// leaderWriteError is the coordinator runtime's error for a leader's
// refusal of a Produce.
func leaderWriteError(err error) error {
	switch {
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.LeaderNotAvailable),
		errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.FencedLeaderEpoch):
		return coordinator.ErrNotLeader
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return coordinator.ErrTooLarge
	}
	return coordinator.ErrNotReplicated
}

// writable lists t's partitions in order: the replica where this broker
// leads it, else a writer through its leader, nil while it has none
// (ledger.Partitions).
func (s *Server) writable(t cluster.Topic) []ledger.Appender {
	parts := make([]ledger.Appender, t.Partitions)
	for i, p := range leadingPartitions(s.replicas, t) {
		switch {
		case p != nil:
			parts[i] = coordinatorPartition{p}
		case i < len(t.States) && t.States[i].Leader == cluster.NoLeader:
		default:
			parts[i] = throughLeader{self: s.cfg.NodeID, tp: model.TopicPartition{Topic: t.Name, Partition: int32(i)},
				metadata: s.cluster, peers: s.peers}
		}
	}
	return parts
}
