package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/group"
)

// Metadata: v0-12
//
// Behaviour:
//   - Lists the live (unfenced) brokers and the requested topics (all topics
//     for a null list, or an empty one at v0): each partition's leader,
//     leader epoch, replicas, in-sync replicas and offline replicas (those on
//     fenced or unregistered brokers), from this broker's metadata image. A
//     partition without a leader is LEADER_NOT_AVAILABLE with leader -1.
//   - The controller id is this broker's own, as a Kafka broker in KRaft
//     mode names a live broker rather than the quorum's leader: every
//     broker takes admin requests and proposes their changes to the
//     metadata quorum itself, so clients need not find the leader, nor wait
//     for a metadata refresh when it dies. DescribeQuorum names the leader.
//   - Topics unknown by name are created with the default partition count
//     when the broker allows it (auto.create.topics.enable) and the request
//     does too (v4+; always before v4). As Kafka, the answer gives such a
//     topic LEADER_NOT_AVAILABLE and no partitions, and clients ask again.
//     __consumer_offsets is created as the group coordinator makes it.
//   - v10+: topics may be named by id; an unknown id is UNKNOWN_TOPIC_ID.
//   - With an authorizer, as Kafka: all topics lists those the principal
//     may DESCRIBE; a named one it may not is TOPIC_AUTHORIZATION_FAILED
//     (whether or not it exists), and auto-creation needs CREATE on the
//     cluster or the topic (UNKNOWN_TOPIC_OR_PARTITION without it).
//     Authorized operations are given when asked (v8+).

func init() { register(3, 0, 12, handleMetadata) }

func handleMetadata(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	live := map[int32]bool{}
	reachable := map[int32]bool{} // live and serving the request's listener
	for _, cb := range b.Cluster.Brokers() {
		if cb.Fenced {
			continue
		}
		live[cb.NodeID] = true
		ep, ok := cb.Endpoint(r.Listener)
		if !ok {
			continue // a broker without this listener is not reachable through it
		}
		reachable[cb.NodeID] = true
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = cb.NodeID, ep.Host, ep.Port
		if cb.Rack != "" {
			br.Rack = kmsg.StringPtr(cb.Rack)
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	clusterID := b.Cluster.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = b.Config.NodeID

	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = b.authorizedOperations(r, acl.Cluster, acl.ClusterName)
	}
	add := func(t cluster.Topic) {
		mt := metadataTopic(t, live, reachable)
		if req.IncludeTopicAuthorizedOperations {
			mt.AuthorizedOperations = b.authorizedOperations(r, acl.Topic, t.Name)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range b.Cluster.Topics() {
			if b.allowed(r, acl.Describe, acl.Topic, t.Name) {
				add(t)
			}
		}
		return reply(resp)
	}
	autoCreate := b.Config.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var (
			t     cluster.Topic
			found bool
		)
		switch {
		case rt.Topic == nil:
			t, found = b.Cluster.TopicByID(rt.TopicID)
			if !found || !b.allowed(r, acl.Describe, acl.Topic, t.Name) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				if found {
					mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				}
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		default:
			if !b.allowed(r, acl.Describe, acl.Topic, *rt.Topic) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = rt.Topic
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			t, found = b.Cluster.Topic(*rt.Topic)
		}
		// Creating a topic on the way needs CREATE, on the cluster or the
		// topic.
		autoCreate := autoCreate && rt.Topic != nil && (b.allowedCluster(r, acl.Create) || b.allowed(r, acl.Create, acl.Topic, *rt.Topic))
		var err error
		switch {
		case !found && autoCreate:
			// Kafka answers a topic it creates on the way with
			// LEADER_NOT_AVAILABLE and no partitions, its creation
			// being under way, and so does this broker: clients ask
			// again, and see the partitions with their leaders.
			if *rt.Topic == group.OffsetsTopic {
				// Made as the group coordinator needs it (internal,
				// compacted), as Kafka's AutoTopicCreationManager does.
				err = b.Groups.EnsureTopic()
			} else {
				_, err = b.Topics.CreateTopic(cluster.TopicSpec{Name: *rt.Topic, Partitions: b.Config.DefaultPartitions,
					ReplicationFactor: b.defaultReplicationFactor()}, false)
			}
			if err == nil || errors.Is(err, cluster.ErrTopicExists) { // or created meanwhile
				err = kerr.LeaderNotAvailable
			}
		case !found:
			err = cluster.ErrUnknownTopic
			if verr := cluster.ValidateTopicName(*rt.Topic); verr != nil {
				err = verr
			}
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.ErrorCode = errorCode(err)
			mt.IsInternal = *rt.Topic == group.OffsetsTopic
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		add(t)
	}
	return reply(resp)
}

// metadataTopic describes t's partitions. A leader alive but without the
// client's listener is LISTENER_NOT_FOUND with no leader, as Kafka
// answers: the client could not reach it anyway.
func metadataTopic(t cluster.Topic, live, reachable map[int32]bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	for p, st := range t.States {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(p)
		mp.Leader, mp.LeaderEpoch = st.Leader, st.LeaderEpoch
		switch {
		case st.Leader == cluster.NoLeader:
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		case live[st.Leader] && !reachable[st.Leader]:
			mp.ErrorCode, mp.Leader = kerr.ListenerNotFound.Code, cluster.NoLeader
		}
		mp.Replicas, mp.ISR = st.Replicas, st.ISR
		for _, r := range st.Replicas {
			if !live[r] {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
