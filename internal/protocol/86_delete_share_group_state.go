package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/share"
)

// DeleteShareGroupState: v0 (KIP-932)
//
// Behaviour: between brokers: the group coordinator removes a
// share-partition's state (DeleteShareGroupOffsets, DeleteGroups) on the
// broker that leads the state's partition of __share_group_state, with a
// tombstone of each of its record keys; answered once they are durable
// there. A key without state is removed all the same.
//
// Errors, per partition: NOT_COORDINATOR when the state's partition is
// led elsewhere, COORDINATOR_NOT_AVAILABLE when it cannot be written,
// CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION while share.version is
// 0.
//
// Authorization: CLUSTER_ACTION on the cluster.

func init() { register(86, 0, 0, handleDeleteShareGroupState) }

func handleDeleteShareGroupState(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DeleteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	refused := b.stateRefusal(r)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			err := refused
			if err == nil {
				err = b.Shares.State.ChangeLocal(share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition},
					share.Change{Kind: share.ChangeDelete})
			}
			rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}
