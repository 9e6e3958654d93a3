package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// DeleteRecords: v0-2
//
// Behaviour:
//   - Moves each partition's log start offset forward to the offset asked
//     (-1: the high watermark) and deletes the segments wholly below it;
//     answers the new log start offset as the low watermark. An offset at or
//     below the current log start changes nothing and answers it.
//   - An offset above the high watermark, or below -1, is
//     OFFSET_OUT_OF_RANGE; a topic whose cleanup.policy does not include
//     delete is POLICY_VIOLATION, as in Kafka; an unknown partition is
//     UNKNOWN_TOPIC_OR_PARTITION. Errors answer low watermark -1.
//   - Parked fetches are woken, so that they see the new log start.
//
// Not supported: nothing beyond the single node (there are no followers
// whose log start the answer would wait for, so TimeoutMillis is not used).
//
// Authorization: DELETE on the topic (TOPIC_AUTHORIZATION_FAILED).

func init() { register(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	may := b.topicCheck(r, acl.Delete)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			var low int64
			err := error(kerr.TopicAuthorizationFailed)
			if may(rt.Topic) {
				low, err = b.deleteRecords(model.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}, rp.Offset)
			}
			sp.LowWatermark, sp.ErrorCode = low, errorCode(err)
			if err != nil {
				sp.LowWatermark = -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}

func (b *Broker) deleteRecords(tp model.TopicPartition, offset int64) (int64, error) {
	p, err := b.leading(tp)
	if err != nil {
		return -1, err
	}
	if !p.RecordsDeletable() {
		return -1, newAPIError(errPolicyViolation,
			"Records of partition %s can not be deleted due to the configured policy", tp)
	}
	if offset < -1 {
		return -1, newAPIError(replica.ErrOffsetOutOfRange, "The offset %d for partition %s is not valid", offset, tp)
	}
	low, err := p.DeleteRecords(offset)
	if err != nil {
		return -1, err
	}
	p.Truncated() // parked fetches re-check their offsets
	return low, nil
}
