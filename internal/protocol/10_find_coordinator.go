package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-6
//
// Behaviour:
//   - Groups (key type 0): this broker coordinates every group. The first
//     request creates __consumer_offsets (internal, compacted,
//     offsets.topic.num.partitions partitions) as Kafka does, and answers
//     at once rather than COORDINATOR_NOT_AVAILABLE first.
//   - Transactions (key type 1): this broker coordinates every
//     transactional id; the first request creates __transaction_state
//     (transaction.state.log.num.partitions partitions), as Kafka does.
//   - v4+: several keys per request, each answered (KIP-699).
//
// Not supported: share groups (key type 2, v6) and unknown key types are
// INVALID_REQUEST.

func init() { register(10, 0, 6, handleFindCoordinator) }

func handleFindCoordinator(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		var err *kerr.Error
		switch req.CoordinatorType {
		case 0:
			if b.Groups.EnsureTopic() != nil {
				err = kerr.CoordinatorNotAvailable
			}
		case 1:
			if b.Txns.EnsureTopic() != nil {
				err = kerr.CoordinatorNotAvailable
			}
		default:
			err = kerr.InvalidRequest
		}
		if err != nil {
			c.ErrorCode, c.ErrorMessage = err.Code, &err.Description
			c.NodeID, c.Port = -1, -1
		} else {
			c.NodeID, c.Host, c.Port = b.Config.NodeID, b.Host, b.Port
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return reply(resp)
}
