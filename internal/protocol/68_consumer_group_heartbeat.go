package protocol

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
)

// ConsumerGroupHeartbeat: v0-1 (KIP-848)
//
// Behaviour: a member of a consumer group joins (member epoch 0), stays
// (its epoch) and leaves (-1; -2 for a static member that comes back) by
// heartbeating; the coordinator computes the assignment with a server-side
// assignor and answers each member its part as the previous owners revoke
// it (see package group). The assignment is in the answer when the member
// must learn it: after a join or a full request, and when it changed.
//   - v0: the coordinator makes up a new member's id.
//   - v1: the member makes up its own id (KIP-1082), and may subscribe by
//     regular expression (RE2 syntax, as Kafka's RE2/J, matched against
//     whole topic names).
//
// Errors: INVALID_REQUEST for a malformed request (with Kafka's message),
// UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, GROUP_MAX_SIZE_REACHED,
// UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, FENCED_INSTANCE_ID,
// UNRELEASED_INSTANCE_ID, GROUP_ID_NOT_FOUND for a classic group with
// members that cannot be upgraded (group.consumer.migration.policy, another
// protocol type, too many members; a classic group with members is
// otherwise upgraded to a consumer group), and the coordinator errors. The
// answer is sent once the state it reports is durable in
// __consumer_offsets.
//
// A group a cluster link passes through is answered by the link's source's
// coordinator, as the member's heartbeat (passthrough.go): the mirrors
// have their sources' topic ids, so the assignment means the same here.
//
// Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE
// on each subscribed topic named (TOPIC_AUTHORIZATION_FAILED).

func init() { register(68, 0, 1, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	greq := group.ConsumerHeartbeatRequest{
		Client: groupClient(r), Version: req.Version, Group: req.Group, MemberID: req.MemberID,
		MemberEpoch: req.MemberEpoch, InstanceID: req.InstanceID, RackID: req.RackID,
		RebalanceTimeout: -1, TopicNames: req.SubscribedTopicNames, TopicRegex: req.SubscribedTopicRegex,
		ServerAssignor: req.ServerAssignor,
	}
	if req.RebalanceTimeoutMillis >= 0 {
		greq.RebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.Topics != nil {
		greq.Owned = make([]group.OwnedTopic, len(req.Topics))
		for i, t := range req.Topics {
			greq.Owned[i] = group.OwnedTopic{TopicID: t.TopicID, Partitions: t.Partitions}
		}
	}
	answer := func(res group.ConsumerHeartbeatResult) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		if res.Err != nil {
			resp.ErrorCode = errorCode(res.Err)
			msg := res.Err.Error()
			resp.ErrorMessage = &msg
			return resp
		}
		resp.MemberID = &res.MemberID
		resp.MemberEpoch = res.MemberEpoch
		resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
		if res.Assignment != nil {
			a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
			for _, t := range *res.Assignment {
				at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
				at.TopicID, at.Partitions = t.TopicID, t.Partitions
				a.Topics = append(a.Topics, at)
			}
			if a.Topics == nil {
				a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
			}
			resp.Assignment = &a
		}
		return resp
	}
	gone := group.ConsumerHeartbeatResult{Err: group.ErrNotCoordinator}
	if !b.consumerGroupsServed() {
		// group.version 0, as Kafka answers it.
		return reply(answer(group.ConsumerHeartbeatResult{Err: newAPIError(kerr.UnsupportedVersion,
			"The consumer group protocol is off in this cluster (the group.version feature is 0).")}))
	}
	if !b.allowed(r, acl.Read, acl.Group, req.Group) {
		return reply(answer(group.ConsumerHeartbeatResult{Err: kerr.GroupAuthorizationFailed}))
	}
	may := b.topicCheck(r, acl.Describe)
	if slices.ContainsFunc(req.SubscribedTopicNames, func(t string) bool { return !may(t) }) {
		return reply(answer(group.ConsumerHeartbeatResult{Err: newAPIError(kerr.TopicAuthorizationFailed,
			"The group subscribed to topics the principal may not describe.")}))
	}
	if b.passesThrough(r, req.Group) {
		return b.forwardGroup(r, req, req.Group, req.MemberID, func(code int16) kmsg.Response {
			return answer(group.ConsumerHeartbeatResult{Err: kerr.ErrorForCode(code)})
		}, nil)
	}
	return await(b.Groups.ConsumerHeartbeat(greq), answer, gone)
}
