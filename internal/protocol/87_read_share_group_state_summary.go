package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/share"
)

// ReadShareGroupStateSummary: v0-1 (KIP-932)
//
// Behaviour: between brokers: a share-partition's state epoch, leader
// epoch and start offset, without its batches, from the broker that leads
// the state's partition of __share_group_state. A key without state is
// answered StateEpoch and StartOffset -1.
//   - v1 (KIP-1226): the count of offsets from the start offset whose
//     delivery is complete (acknowledged or given up).
//
// Errors, per partition: NOT_COORDINATOR when the state's partition is led
// elsewhere, COORDINATOR_NOT_AVAILABLE when it cannot be read,
// CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION while share.version is
// 0.
//
// Authorization: CLUSTER_ACTION on the cluster.

func init() { register(87, 0, 1, handleReadShareGroupStateSummary) }

func handleReadShareGroupStateSummary(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ReadShareGroupStateSummaryRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	refused := b.stateRefusal(r)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.DeliveryCompleteCount = p.Partition, -1, -1, -1, -1
			err := refused
			if err == nil {
				var saved share.Saved
				var found bool
				saved, found, err = b.Shares.State.ReadLocal(share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition})
				if err == nil && found {
					rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = saved.StateEpoch, saved.LeaderEpoch, saved.Start
					rp.DeliveryCompleteCount = int32(saved.Completed())
				}
			}
			rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}
