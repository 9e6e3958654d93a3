package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/group"
)

// Metadata: v0-12
//
// Behaviour:
//   - Lists this broker and the requested topics (all topics for a null
//     list, or an empty one at v0), each partition led by this broker with
//     itself as the only replica and in-sync replica.
//   - Topics unknown by name are created with the default partition count
//     when the broker allows it (auto.create.topics.enable) and the request
//     does too (v4+; always before v4). They are created before answering, so
//     the answer already lists them. __consumer_offsets is created as the
//     group coordinator makes it.
//   - v10+: topics may be named by id; an unknown id is UNKNOWN_TOPIC_ID.
//
// Not supported: authorized operations are not computed (no ACLs yet).

func init() { register(3, 0, 12, handleMetadata) }

func handleMetadata(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	br := kmsg.NewMetadataResponseBroker()
	br.NodeID, br.Host, br.Port = b.Config.NodeID, b.Host, b.Port
	resp.Brokers = append(resp.Brokers, br)
	clusterID := b.Cluster.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = b.Config.NodeID

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range b.Cluster.Topics() {
			resp.Topics = append(resp.Topics, b.metadataTopic(t))
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
			if !found {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		default:
			t, found = b.Cluster.Topic(*rt.Topic)
		}
		if !found && autoCreate && rt.Topic != nil && *rt.Topic == group.OffsetsTopic {
			// Made as the group coordinator needs it (internal, compacted),
			// as Kafka's AutoTopicCreationManager does.
			if b.Groups.EnsureTopic() == nil {
				t, found = b.Cluster.Topic(group.OffsetsTopic)
			}
		}
		var err error
		if !found && autoCreate {
			t, err = b.Topics.CreateTopic(*rt.Topic, b.Config.DefaultPartitions, nil, false)
			if errors.Is(err, cluster.ErrTopicExists) { // created meanwhile
				t, found = b.Cluster.Topic(*rt.Topic)
				err = nil
				if !found {
					err = cluster.ErrUnknownTopic
				}
			}
		} else if !found {
			err = cluster.ErrUnknownTopic
			if verr := cluster.ValidateTopicName(*rt.Topic); verr != nil {
				err = verr
			}
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.ErrorCode = errorCode(err)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, b.metadataTopic(t))
	}
	return reply(resp)
}

func (b *Broker) metadataTopic(t cluster.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	for p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		mp.Leader = b.Config.NodeID
		mp.LeaderEpoch = 0
		mp.Replicas = []int32{b.Config.NodeID}
		mp.ISR = []int32{b.Config.NodeID}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
