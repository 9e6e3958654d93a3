package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/share"
)

// ReadShareGroupState: v0 (KIP-932)
//
// Behaviour: between brokers: a share-partition leader reads the state of
// its share-partitions from the broker that leads their partitions of
// __share_group_state (the share coordinator). A key without state is
// answered StartOffset -1. Served while share.version is 1.
//
// Errors, per partition: NOT_COORDINATOR when the state's partition is led
// elsewhere, COORDINATOR_NOT_AVAILABLE when it cannot be read,
// CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION while share.version is
// 0.
//
// Authorization: CLUSTER_ACTION on the cluster.

func init() { register(84, 0, 0, handleReadShareGroupState) }

func handleReadShareGroupState(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ReadShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	refused := b.stateRefusal(r)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition, rp.StateEpoch, rp.StartOffset = p.Partition, -1, -1
			err := refused
			if err == nil {
				var saved share.Saved
				var found bool
				saved, found, err = b.Shares.State.ReadLocal(share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition})
				if err == nil && found {
					rp.StateEpoch, rp.StartOffset = saved.StateEpoch, saved.Start
					for _, sb := range saved.Batches {
						kb := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
						kb.FirstOffset, kb.LastOffset, kb.DeliveryState, kb.DeliveryCount = sb.First, sb.Last, int8(sb.State), sb.Deliveries
						rp.StateBatches = append(rp.StateBatches, kb)
					}
				}
			}
			rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}

// stateRefusal is why a broker may not read or write the share-group
// state here, nil when it may: share groups on, CLUSTER_ACTION.
func (b *Broker) stateRefusal(r *Request) error {
	switch {
	case !b.sharesServed():
		return errSharesOff
	case !b.allowedCluster(r, acl.ClusterAction):
		return kerr.ClusterAuthorizationFailed
	}
	return nil
}
