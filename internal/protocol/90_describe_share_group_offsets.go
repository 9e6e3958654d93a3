package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/share"
)

// DescribeShareGroupOffsets: v0-1 (KIP-932)
//
// Behaviour: a share group's offsets, as its coordinator answers them: for
// each partition named (all those of the topics its members subscribe, or
// subscribed, to when a group names none) whose share-partition has state, the
// share-partition start offset, read where the state is kept. A partition
// read for the first time by nobody yet is left out when none are named,
// and answered StartOffset -1 when named.
//   - v1: the lag: records from the start offset to the high watermark not
//     yet done with (accepted, rejected or given up). The high watermark of
//     a partition led elsewhere is asked of its leader (ListOffsets); -1
//     when it cannot be.
//
// Errors: per group, GROUP_AUTHORIZATION_FAILED, NOT_COORDINATOR,
// GROUP_ID_NOT_FOUND for a group that is not a share group here,
// UNSUPPORTED_VERSION while share.version is 0; per partition,
// TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION,
// COORDINATOR_NOT_AVAILABLE when the state cannot be read.
//
// Authorization: DESCRIBE on the group, DESCRIBE on each topic.

func init() { register(90, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(ctx context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	may := b.topicCheck(r, acl.Describe)
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		var err error
		switch {
		case !b.sharesServed():
			err = errSharesOff
		case !b.allowed(r, acl.Describe, acl.Group, g.GroupID):
			err = kerr.GroupAuthorizationFailed
		case !b.coordinatesGroup(g.GroupID):
			err = kerr.NotCoordinator
		case !b.Shares.Groups.Exists(g.GroupID):
			err = newAPIError(kerr.GroupIDNotFound, "Group %s is not a share group.", g.GroupID)
		}
		if err != nil {
			rg.ErrorCode, rg.ErrorMessage = errorCode(err), errorMessage(err)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		topics, named := g.Topics, g.Topics != nil
		if !named {
			topics = b.subscribedTopics(g.GroupID)
		}
		for _, t := range topics {
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = t.Topic
			ct, found := b.Cluster.Topic(t.Topic)
			if found {
				rt.TopicID = [16]byte(ct.ID)
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
				var err error
				switch {
				case !may(t.Topic):
					err = kerr.TopicAuthorizationFailed
				case !found || p < 0 || int(p) >= len(ct.States):
					err = kerr.UnknownTopicOrPartition
				default:
					var saved share.Saved
					var ok bool
					saved, ok, err = b.Shares.State.Read(share.Key{Group: g.GroupID, TopicID: rt.TopicID, Partition: p})
					if err == nil && !ok && !named {
						continue // never read by the group
					}
					if err == nil && ok {
						rp.StartOffset, rp.LeaderEpoch = saved.Start, saved.LeaderEpoch
						rp.Lag = b.shareLag(ctx, t.Topic, p, saved)
					}
				}
				rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
				rt.Partitions = append(rt.Partitions, rp)
			}
			if len(rt.Partitions) > 0 || named {
				rg.Topics = append(rg.Topics, rt)
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return reply(resp)
}

// subscribedTopics lists every partition of the topics a share group's
// members subscribe to, or did.
func (b *Broker) subscribedTopics(group string) []kmsg.DescribeShareGroupOffsetsRequestGroupTopic {
	var out []kmsg.DescribeShareGroupOffsetsRequestGroupTopic
	for _, name := range b.Shares.Groups.Topics(group) {
		t, ok := b.Cluster.Topic(name)
		if !ok {
			continue
		}
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic = name
		for i := range t.States {
			rt.Partitions = append(rt.Partitions, int32(i))
		}
		out = append(out, rt)
	}
	return out
}

// shareLag is how many records of a share-partition are not yet done
// with: from its start offset to the partition's high watermark, less
// those acknowledged or archived; -1 when the high watermark is not known.
func (b *Broker) shareLag(ctx context.Context, topic string, partition int32, saved share.Saved) int64 {
	hw, ok := b.highWatermark(ctx, topic, partition)
	if !ok {
		return -1
	}
	return max(hw-saved.Start-saved.Completed(), 0)
}

// highWatermark is a partition's high watermark: its own when led here,
// else its leader's answer to ListOffsets (latest, read uncommitted).
func (b *Broker) highWatermark(ctx context.Context, topic string, partition int32) (int64, bool) {
	if p, ok := b.Replicas.Get(model.TopicPartition{Topic: topic, Partition: partition}); ok && p.IsLeader() {
		return p.HighWatermark(), true
	}
	leader, _ := b.shareLeader(topic, partition)
	if leader < 0 || leader == b.Config.NodeID || b.Peers == nil {
		return -1, false
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(4)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kresp, err := b.Peers.Request(ctx, leader, req)
	if err != nil {
		return -1, false
	}
	for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				return p.Offset, true
			}
		}
	}
	return -1, false
}
