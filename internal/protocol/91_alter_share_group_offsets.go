package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/share"
)

// AlterShareGroupOffsets: v0 (KIP-932)
//
// Behaviour: sets an empty share group's start offset of each partition
// named (kafka-share-groups.sh --reset-offsets): the share-partition's
// state starts over there, with nothing in flight, under a new state
// epoch, durable where the state is kept before the answer. The
// partition's leader, holding the old state, is refused its next write
// and reads the state again, as does a member opening its share session.
// A share group not known yet is made, as kafka-share-groups.sh resets a
// group before its first member; the group's new epoch and topics are
// written to __consumer_offsets.
//
// Errors: top level: INVALID_GROUP_ID, GROUP_AUTHORIZATION_FAILED,
// NOT_COORDINATOR, GROUP_ID_NOT_FOUND for a classic or consumer group's
// id, NON_EMPTY_GROUP while the group has members, UNSUPPORTED_VERSION
// while share.version is 0. Per partition: TOPIC_AUTHORIZATION_FAILED,
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for a negative offset,
// COORDINATOR_NOT_AVAILABLE when the state cannot be written.
//
// Authorization: READ on the group, READ on each topic.

func init() { register(91, 0, 0, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if err := b.checkShareGroupAdmin(r, req.GroupID, acl.Read, false); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return reply(resp)
	}
	may := b.topicCheck(r, acl.Read)
	var names []string
	for _, t := range req.Topics {
		if ct, ok := b.Cluster.Topic(t.Topic); ok && may(t.Topic) {
			names = append(names, ct.Name)
		}
	}
	epoch := b.Shares.Groups.OffsetsAltered(req.GroupID, names)
	for _, t := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		ct, found := b.Cluster.Topic(t.Topic)
		if found {
			rt.TopicID = [16]byte(ct.ID)
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			var err error
			switch {
			case !may(t.Topic):
				err = kerr.TopicAuthorizationFailed
			case !found || p.Partition < 0 || int(p.Partition) >= len(ct.States):
				err = kerr.UnknownTopicOrPartition
			case p.StartOffset < 0:
				err = newAPIError(kerr.InvalidRequest, "The start offset of partition %d is negative.", p.Partition)
			default:
				err = b.restartShareState(share.Key{Group: req.GroupID, TopicID: rt.TopicID, Partition: p.Partition}, p.StartOffset, epoch)
			}
			rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if err := b.persistShareGroup(req.GroupID, true); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
	}
	return reply(resp)
}

// restartShareState starts a share-partition's state over at start, under
// a state epoch above its last and at least the group's new epoch: a
// state deleted and started again does not take an epoch a leader may
// still hold.
func (b *Broker) restartShareState(k share.Key, start int64, groupEpoch int32) error {
	s := b.Shares.State
	if err := s.Ensure(); err != nil {
		return stateError(err)
	}
	saved, found, err := s.Read(k)
	if err != nil {
		return stateError(err)
	}
	epoch := groupEpoch
	if found {
		epoch = max(epoch, saved.StateEpoch+1)
	}
	if err := s.Change(k, share.Change{Kind: share.ChangeInitialize, StateEpoch: epoch, Start: start}); err != nil {
		return stateError(err)
	}
	return nil
}

// checkShareGroupAdmin is why a request may not change a share group's
// offsets or delete it, nil when it may: share groups on, a group id, op
// on the group, this broker its coordinator, the id not a classic or
// consumer group's, a share group of that id (when known is set), and no
// member.
func (b *Broker) checkShareGroupAdmin(r *Request, group string, op kmsg.ACLOperation, known bool) error {
	switch {
	case !b.sharesServed():
		return errSharesOff
	case group == "":
		return newAPIError(kerr.InvalidGroupID, "The group id is empty.")
	case !b.allowed(r, op, acl.Group, group):
		return kerr.GroupAuthorizationFailed
	case !b.coordinatesGroup(group):
		return kerr.NotCoordinator
	case b.isOtherGroup(group):
		return newAPIError(kerr.GroupIDNotFound, "Group %s is not a share group.", group)
	}
	n, ok := b.Shares.Groups.Members(group)
	switch {
	case !ok && known:
		return newAPIError(kerr.GroupIDNotFound, "Group %s not found.", group)
	case n > 0:
		return newAPIError(kerr.NonEmptyGroup, "The group %s has %d active members; its offsets are changed while it has none.", group, n)
	}
	return nil
}
