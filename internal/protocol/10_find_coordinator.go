package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/share"
	"github.com/strandlog/strand/internal/txn"
)

// FindCoordinator: v0-6
//
// Behaviour:
//   - Groups (key type 0): the coordinator of a group is the leader of its
//     __consumer_offsets partition (Kafka's hash of the group id). The
//     first request creates __consumer_offsets (internal, compacted,
//     offsets.topic.num.partitions partitions) as Kafka does, and answers
//     at once rather than COORDINATOR_NOT_AVAILABLE first.
//   - Transactions (key type 1): likewise with __transaction_state
//     (transaction.state.log.num.partitions partitions).
//   - A partition without a leader is COORDINATOR_NOT_AVAILABLE; clients
//     retry.
//   - v4+: several keys per request, each answered (KIP-699).
//   - With an authorizer: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED)
//     or the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
//
//   - Share-partitions (key type 2, v6+, KIP-932): the share coordinator
//     of "group:topic id:partition" is the leader of its
//     __share_group_state partition, created on the way as for the
//     others. Brokers ask it: CLUSTER_ACTION on the cluster
//     (CLUSTER_AUTHORIZATION_FAILED); a key of another form, or below v6,
//     is INVALID_REQUEST, as Kafka answers; while share.version is 0,
//     COORDINATOR_NOT_AVAILABLE.
//
// Unknown key types are INVALID_REQUEST.

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
		var (
			err   *kerr.Error
			topic string
		)
		switch req.CoordinatorType {
		case 0:
			topic = group.OffsetsTopic
			switch {
			case !b.allowed(r, acl.Describe, acl.Group, key):
				err = kerr.GroupAuthorizationFailed
			case b.Groups.EnsureTopic() != nil:
				err = kerr.CoordinatorNotAvailable
			}
		case 1:
			topic = txn.StateTopic
			switch {
			case !b.allowed(r, acl.Describe, acl.TransactionalID, key):
				err = kerr.TransactionalIDAuthorizationFailed
			case b.Txns.EnsureTopic() != nil:
				err = kerr.CoordinatorNotAvailable
			}
		case 2:
			topic = share.StateTopic
			k, validKey := share.ParseCoordinatorKey(key)
			// The partition is that of the key as Kafka prints it.
			key = share.CoordinatorKey(k)
			switch {
			case req.Version < 6 || !validKey:
				err = kerr.InvalidRequest
			case !b.sharesServed():
				err = kerr.CoordinatorNotAvailable
			case !b.allowedCluster(r, acl.ClusterAction):
				err = kerr.ClusterAuthorizationFailed
			case b.Shares.State.Ensure() != nil:
				err = kerr.CoordinatorNotAvailable
			}
		default:
			err = kerr.InvalidRequest
		}
		var coordinator cluster.Broker
		if err == nil {
			var ok bool
			if coordinator, ok = b.coordinator(topic, key, r.Listener); !ok {
				err = kerr.CoordinatorNotAvailable
			}
		}
		if err != nil {
			c.ErrorCode, c.ErrorMessage = err.Code, &err.Description
			c.NodeID, c.Port = -1, -1
		} else {
			c.NodeID, c.Host, c.Port = coordinator.NodeID, coordinator.Host, coordinator.Port
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

// coordinator returns the broker leading key's partition of a
// coordinator's topic, at its endpoint on listener.
func (b *Broker) coordinator(topic, key, listener string) (cluster.Broker, bool) {
	t, ok := b.Cluster.Topic(topic)
	if !ok {
		return cluster.Broker{}, false
	}
	st := t.States[model.CoordinatorPartition(key, t.Partitions)]
	br, ok := b.Cluster.Broker(st.Leader)
	if !ok || br.Fenced {
		return cluster.Broker{}, false
	}
	ep, ok := br.Endpoint(listener)
	br.Host, br.Port = ep.Host, ep.Port
	return br, ok
}
