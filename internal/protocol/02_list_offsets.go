package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/model"
)

// ListOffsets: v1-9
//
// Behaviour:
//   - Timestamp -1: the high watermark (read_uncommitted) or last stable
//     offset (read_committed); -2 and -4: the log start offset; -3 (v7+):
//     the first record with the largest timestamp; -5 (v9+): no tiered
//     storage, so offset -1; a timestamp t >= 0: the first offset whose
//     record timestamp is at least t, or -1 when none is (or none is yet
//     visible below the high watermark).
//   - A CurrentLeaderEpoch (v4+) other than ours is fenced as in Fetch.
//   - A partition named twice in one request is INVALID_REQUEST.
//   - With an authorizer, each topic needs DESCRIBE
//     (TOPIC_AUTHORIZATION_FAILED).

func init() { register(2, 1, 9, handleListOffsets) }

func handleListOffsets(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	seen := map[model.TopicPartition]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[model.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]++
		}
	}
	may := b.topicCheck(r, acl.Describe)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Offset, sp.Timestamp = -1, -1
			tp := model.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			switch {
			case !may(rt.Topic):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case seen[tp] > 1:
				sp.ErrorCode = kerr.InvalidRequest.Code
			default:
				sp.ErrorCode = errorCode(b.listOffset(tp, rp, req.IsolationLevel == 1, &sp))
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}

func (b *Broker) listOffset(tp model.TopicPartition, rp kmsg.ListOffsetsRequestTopicPartition, readCommitted bool,
	sp *kmsg.ListOffsetsResponseTopicPartition) error {
	p, err := b.leading(tp)
	if err != nil {
		return err
	}
	if err := p.CheckLeaderEpoch(rp.CurrentLeaderEpoch); err != nil {
		return err
	}
	sp.LeaderEpoch = p.LeaderEpoch()
	sp.Offset, sp.Timestamp, err = p.ListOffset(rp.Timestamp, readCommitted)
	return err
}
