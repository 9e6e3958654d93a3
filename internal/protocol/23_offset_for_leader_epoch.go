package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/model"
)

// OffsetForLeaderEpoch: v2-4
//
// Behaviour (consumers validating their position after a leader change, and
// any replica id, which a single node answers alike):
//   - For each partition, the largest leader epoch at or below the one asked
//     and the offset where it ended: the start of the next epoch, or the log
//     end offset for the current epoch (also when nothing was written in it
//     yet, as Kafka's leader records its epoch on election).
//   - An epoch above the current one, or undefined (-1), answers epoch -1,
//     offset -1 with no error, as does an epoch the log has no record of;
//     one below the oldest recorded answers itself with the start of the
//     oldest, as Kafka does.
//   - A CurrentLeaderEpoch other than ours is FENCED_LEADER_EPOCH (older) or
//     UNKNOWN_LEADER_EPOCH (newer), as in Fetch; an unknown partition is
//     UNKNOWN_TOPIC_OR_PARTITION.
//
// Authorization: DESCRIBE on each topic, or CLUSTER_ACTION on the cluster
// for a follower's request (TOPIC_AUTHORIZATION_FAILED).

func init() { register(23, 2, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	may := b.topicCheck(r, acl.Describe)
	if req.Version >= 3 && req.ReplicaID >= 0 {
		ok := b.allowedCluster(r, acl.ClusterAction)
		may = func(string) bool { return ok }
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			err := error(kerr.TopicAuthorizationFailed)
			if may(rt.Topic) {
				err = b.epochEndOffset(model.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}, &rp, &sp)
			}
			sp.ErrorCode = errorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}

func (b *Broker) epochEndOffset(tp model.TopicPartition, rp *kmsg.OffsetForLeaderEpochRequestTopicPartition,
	sp *kmsg.OffsetForLeaderEpochResponseTopicPartition) error {
	p, err := b.leading(tp)
	if err != nil {
		return err
	}
	if err := p.CheckLeaderEpoch(rp.CurrentLeaderEpoch); err != nil {
		return err
	}
	sp.LeaderEpoch, sp.EndOffset = p.OffsetForLeaderEpoch(rp.LeaderEpoch)
	return nil
}
