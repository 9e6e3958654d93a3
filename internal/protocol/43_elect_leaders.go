package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
)

// ElectLeaders: v0-2
//
// Behaviour (kafka-leader-election.sh, AdminClient.electLeaders):
//   - Preferred (ElectionType 0, the only type before v1): the partition's
//     first replica leads, if it is live and in sync (else
//     PREFERRED_LEADER_NOT_AVAILABLE); ELECTION_NOT_NEEDED when it leads
//     already.
//   - Unclean (1): a partition without a leader gets one, an in-sync
//     replica if one is live, else any live replica (counted as an unclean
//     election); ELECTION_NOT_NEEDED when it has a leader,
//     ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live.
//   - Null topics: every partition, and, as Kafka does, the answer leaves out
//     those that needed no election.
//   - An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION. Each
//     election goes through the metadata quorum; any broker takes the
//     request.
//
// Authorization: ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED, for the
// request and each partition).

func init() { register(43, 0, 2, handleElectLeaders) }

func handleElectLeaders(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	unclean := req.Version >= 1 && req.ElectionType == 1
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = errorCode(errInvalidRequest)
		return reply(resp)
	}
	if !b.allowedCluster(r, acl.Alter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, rt := range req.Topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return reply(resp)
	}
	all := req.Topics == nil
	topics := req.Topics
	if all {
		for _, t := range b.Cluster.Topics() {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic = t.Name
			for i := range t.Partitions {
				rt.Partitions = append(rt.Partitions, i)
			}
			topics = append(topics, rt)
		}
	}
	for _, rt := range topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			var err error
			if _, ok := b.Cluster.Partition(rt.Topic, p); !ok {
				err = fmt.Errorf("%w: %s-%d", cluster.ErrUnknownTopic, rt.Topic, p)
			} else {
				_, err = b.Cluster.ElectLeader(rt.Topic, p, unclean)
			}
			if all && errorCode(err) == errorCode(cluster.ErrElectionNotNeeded) {
				continue
			}
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition = p
			sp.ErrorCode, sp.ErrorMessage = errorCode(err), errorMessage(err)
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 || !all {
			resp.Topics = append(resp.Topics, st)
		}
	}
	return reply(resp)
}
