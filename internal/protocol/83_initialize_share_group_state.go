package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/share"
)

// InitializeShareGroupState: v0 (KIP-932)
//
// Behaviour: between brokers: the group coordinator starts a
// share-partition's state over at an offset, under a new state epoch
// (AlterShareGroupOffsets), on the broker that leads the state's
// partition of __share_group_state; answered once it is durable there.
// The share-partition's leader, whose writes then carry an older state
// epoch, is refused and reads the state again.
//
// Errors, per partition: FENCED_STATE_EPOCH for a state epoch older than
// the state's, NOT_COORDINATOR when the state's partition is led
// elsewhere, COORDINATOR_NOT_AVAILABLE when it cannot be written,
// CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION while share.version is
// 0.
//
// Authorization: CLUSTER_ACTION on the cluster.

func init() { register(83, 0, 0, handleInitializeShareGroupState) }

func handleInitializeShareGroupState(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.InitializeShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	refused := b.stateRefusal(r)
	for _, t := range req.Topics {
		rt := kmsg.NewInitializeShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			err := refused
			if err == nil {
				err = b.Shares.State.ChangeLocal(share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition},
					share.Change{Kind: share.ChangeInitialize, StateEpoch: p.StateEpoch, Start: p.StartOffset})
			}
			rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}
