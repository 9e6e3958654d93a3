package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/share"
)

// WriteShareGroupState: v0-1 (KIP-932)
//
// Behaviour: between brokers: a share-partition leader writes the state of
// a share-partition (its start offset and in-flight batches) to the broker
// that leads the state's partition of __share_group_state, and is
// answered once it is durable there. Served while share.version is 1.
//
// Errors, per partition: FENCED_LEADER_EPOCH for a write from a leader of
// an older epoch than the state's, FENCED_STATE_EPOCH for one of a state
// since started over (InitializeShareGroupState), NOT_COORDINATOR when the state's
// partition is led elsewhere, COORDINATOR_NOT_AVAILABLE when it cannot be
// written, CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION while
// share.version is 0.
//
// Authorization: CLUSTER_ACTION on the cluster.

func init() { register(85, 0, 1, handleWriteShareGroupState) }

func handleWriteShareGroupState(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.WriteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	refused := b.stateRefusal(r)
	for _, t := range req.Topics {
		rt := kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			err := refused
			if err == nil {
				batches := make([]share.StateBatch, 0, len(p.StateBatches))
				for _, sb := range p.StateBatches {
					batches = append(batches, share.StateBatch{First: sb.FirstOffset, Last: sb.LastOffset,
						State: share.State(sb.DeliveryState), Deliveries: sb.DeliveryCount})
				}
				err = b.Shares.State.ChangeLocal(share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition},
					share.Change{Kind: share.ChangeWrite, StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch,
						Start: p.StartOffset, Batches: batches})
			}
			rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}
