package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// ListPartitionReassignments: v0
//
// Behaviour (kafka-reassign-partitions.sh --verify and --list,
// AdminClient.listPartitionReassignments):
//   - Each partition being reassigned, with its replicas (the target then
//     those leaving), the replicas being added and those being removed.
//   - Null topics: every partition being reassigned. Named partitions that
//     are not being reassigned, or do not exist, are left out, as Kafka
//     does.
//
// Authorization: DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(46, 0, 0, handleListPartitionReassignments) }

func handleListPartitionReassignments(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !b.allowedCluster(r, acl.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	add := func(topic string, partitions []int32) {
		st := kmsg.NewListPartitionReassignmentsResponseTopic()
		st.Topic = topic
		for _, p := range partitions {
			ps, ok := b.Cluster.Partition(topic, p)
			if !ok || !ps.Reassigning() {
				continue
			}
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = p
			sp.Replicas, sp.AddingReplicas, sp.RemovingReplicas = ps.Replicas, ps.Adding, ps.Removing
			if sp.AddingReplicas == nil {
				sp.AddingReplicas = []int32{}
			}
			if sp.RemovingReplicas == nil {
				sp.RemovingReplicas = []int32{}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	if req.Topics == nil {
		for _, t := range b.Cluster.Topics() {
			var all []int32
			for i := range t.Partitions {
				all = append(all, i)
			}
			add(t.Name, all)
		}
		return reply(resp)
	}
	for _, rt := range req.Topics {
		add(rt.Topic, rt.Partitions)
	}
	return reply(resp)
}
