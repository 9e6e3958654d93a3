package protocol

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
)

// DescribeQuorum: v0-2
//
// Behaviour (what kafka-metadata-quorum.sh shows):
//   - The one partition asked for is __cluster_metadata-0; another is
//     UNKNOWN_TOPIC_OR_PARTITION (v2: with a message).
//   - The leader of the metadata quorum answers from its own view: the
//     leader, the Raft term as leader epoch, the commit index as high
//     watermark, and each voter's and observer's log end and last contact
//     (v1+, in milliseconds since the epoch; -1 when unknown). Any other
//     broker forwards the request to the leader and relays its answer; with
//     no leader it is NOT_LEADER_OR_FOLLOWER, retriable.
//   - A single node answers as the leader and only voter of its own
//     quorum, its log end being the metadata's last applied change.
//   - v2 lists each voter's controller listener (Nodes), as the metadata
//     log knows it (a single node has none).
//
// Not supported: replica directory ids (v2) are zero.
//
// Authorization: DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(55, 0, 2, handleDescribeQuorum) }

func handleDescribeQuorum(ctx context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if !b.allowedCluster(r, acl.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 ||
		req.Topics[0].Topic != "__cluster_metadata" || req.Topics[0].Partitions[0].Partition != 0 {
		resp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		resp.ErrorMessage = kmsg.StringPtr("The quorum is __cluster_metadata-0")
		return reply(resp)
	}
	q, clustered := b.Cluster.Quorum()
	if !clustered {
		q = cluster.QuorumStatus{Leader: b.Config.NodeID, Epoch: 1, HighWater: b.Cluster.Applied(),
			Voters: []cluster.ReplicaStatus{{NodeID: b.Config.NodeID, LogEnd: b.Cluster.Applied()}}}
	}
	if q.Leader != b.Config.NodeID {
		if q.Leader >= 0 && b.Peers != nil {
			fwd, err := b.Peers.Request(ctx, q.Leader, req)
			if err == nil {
				return reply(fwd)
			}
			b.Logger.Debug("forwarding DescribeQuorum failed", "leader", q.Leader, "err", err)
		}
		tp := kmsg.NewDescribeQuorumResponseTopicPartition()
		tp.ErrorCode, tp.LeaderID, tp.LeaderEpoch = kerr.NotLeaderForPartition.Code, q.Leader, int32(q.Epoch)
		tp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("broker %d does not lead the metadata quorum", b.Config.NodeID))
		resp.Topics = []kmsg.DescribeQuorumResponseTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumResponseTopicPartition{tp}}}
		return reply(resp)
	}
	tp := kmsg.NewDescribeQuorumResponseTopicPartition()
	tp.LeaderID, tp.LeaderEpoch, tp.HighWatermark = q.Leader, int32(q.Epoch), q.HighWater
	state := func(rs cluster.ReplicaStatus) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		s.ReplicaID, s.LogEndOffset = rs.NodeID, rs.LogEnd
		if !rs.LastContact.IsZero() {
			s.LastFetchTimestamp = rs.LastContact.UnixMilli()
			s.LastCaughtUpTimestamp = s.LastFetchTimestamp
		}
		return s
	}
	for _, v := range q.Voters {
		tp.CurrentVoters = append(tp.CurrentVoters, state(v))
	}
	for _, o := range q.Observers {
		tp.Observers = append(tp.Observers, state(o))
	}
	resp.Topics = []kmsg.DescribeQuorumResponseTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumResponseTopicPartition{tp}}}
	for _, v := range q.Voters {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = v.NodeID
		if host, port, ok := splitAddr(v.Addr); ok {
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name, l.Host, l.Port = "CONTROLLER", host, port
			n.Listeners = append(n.Listeners, l)
		}
		resp.Nodes = append(resp.Nodes, n)
	}
	return reply(resp)
}

// splitAddr splits host:port.
func splitAddr(addr string) (string, uint16, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	return host, uint16(p), err == nil
}
