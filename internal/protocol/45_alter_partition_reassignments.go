package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
)

// AlterPartitionReassignments: v0
//
// Behaviour (kafka-reassign-partitions.sh --execute and --cancel,
// AdminClient.alterPartitionReassignments):
//   - A partition with replicas is moved onto them, in that preference
//     order: the new replicas are added at once and copy the partition;
//     once every replica of the target is in sync, the others leave (and
//     the leader hands over if it is one of them). A new target replaces
//     a reassignment in progress.
//   - Null replicas cancel the partition's reassignment, back to the
//     replicas it started from; NO_REASSIGNMENT_IN_PROGRESS when there is
//     none.
//   - An empty list, a broker named twice or one not registered is
//     INVALID_REPLICA_ASSIGNMENT; an unknown topic or partition is
//     UNKNOWN_TOPIC_OR_PARTITION. Each change goes through the metadata
//     quorum; any broker takes the request.
//   - The copying may be throttled (topic configs
//     follower.replication.throttled.replicas with the broker config
//     follower.replication.throttled.rate), as kafka-reassign-partitions.sh
//     --throttle sets them.
//
// Authorization: ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(45, 0, 0, handleAlterPartitionReassignments) }

func handleAlterPartitionReassignments(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if !b.allowedCluster(r, acl.Alter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			var err error
			if _, ok := b.Cluster.Partition(rt.Topic, rp.Partition); !ok {
				err = fmt.Errorf("%w: %s-%d", cluster.ErrUnknownTopic, rt.Topic, rp.Partition)
			} else {
				_, err = b.Cluster.ReassignPartition(rt.Topic, rp.Partition, rp.Replicas)
			}
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode, sp.ErrorMessage = errorCode(err), errorMessage(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
