package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/share"
)

// DeleteShareGroupOffsets: v0 (KIP-932)
//
// Behaviour: deletes an empty share group's offsets of each topic named
// (kafka-share-groups.sh --delete-offsets): the state of every partition
// of the topic, removed where it is kept before the answer. The group
// then has no offsets of the topic; a member that reads it again starts
// where share.auto.offset.reset says.
//
// Errors: top level: INVALID_GROUP_ID, GROUP_AUTHORIZATION_FAILED,
// NOT_COORDINATOR, GROUP_ID_NOT_FOUND for an unknown group or a classic
// or consumer group's id, NON_EMPTY_GROUP while the group has members,
// UNSUPPORTED_VERSION while share.version is 0. Per topic:
// TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION,
// COORDINATOR_NOT_AVAILABLE when the state cannot be removed.
//
// Authorization: DELETE on the group, READ on each topic.

func init() { register(92, 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if err := b.checkShareGroupAdmin(r, req.GroupID, acl.Delete, true); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return reply(resp)
	}
	may := b.topicCheck(r, acl.Read)
	var deleted []string
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		ct, found := b.Cluster.Topic(t.Topic)
		var err error
		switch {
		case !may(t.Topic):
			err = kerr.TopicAuthorizationFailed
		case !found:
			err = kerr.UnknownTopicOrPartition
		default:
			rt.TopicID = [16]byte(ct.ID)
			err = b.deleteShareState(req.GroupID, rt.TopicID, int32(len(ct.States)))
		}
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = errorCode(err), errorMessage(err)
		} else {
			deleted = append(deleted, t.Topic)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	b.Shares.Groups.OffsetsDeleted(req.GroupID, deleted)
	if err := b.persistShareGroup(req.GroupID, true); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
	}
	return reply(resp)
}

// deleteShareState removes the state of a group's share-partitions of the
// partitions of a topic; the first failure is the answer.
func (b *Broker) deleteShareState(group string, topicID [16]byte, partitions int32) error {
	s := b.Shares.State
	if err := s.Ensure(); err != nil {
		return stateError(err)
	}
	for p := range partitions {
		if err := s.Change(share.Key{Group: group, TopicID: topicID, Partition: p}, share.Change{Kind: share.ChangeDelete}); err != nil {
			return stateError(err)
		}
	}
	return nil
}
