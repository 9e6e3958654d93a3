package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/share"
)

// ShareGroupHeartbeat: v1 (KIP-932)
//
// Behaviour: a member of a share group joins (member epoch 0, with its
// topics), stays (its epoch) and leaves (-1) by heartbeating; the member
// makes up its own id. The coordinator assigns every partition of the
// subscribed topics, several members to a partition when there are more
// members than partitions (package share), and answers the assignment
// when the member must learn it: after a join, when it changed, and again
// to a member that comes with its previous epoch (the answer that told it
// the new one was lost). A new group, or one subscribed to a topic it had
// no offsets of, is written to __consumer_offsets (its epoch and topics)
// before the answer; its members are kept in memory, and join again when
// the coordinator moves. Served while share.version is 1.
//
// Errors: INVALID_REQUEST for a malformed request, GROUP_ID_NOT_FOUND for
// a group id a classic or consumer group has, GROUP_MAX_SIZE_REACHED,
// UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, NOT_COORDINATOR on a broker that
// does not coordinate the group, UNSUPPORTED_VERSION while share.version
// is 0.
//
// Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED) and
// DESCRIBE on each subscribed topic (TOPIC_AUTHORIZATION_FAILED).

func init() { register(76, 1, 1, handleShareGroupHeartbeat) }

func handleShareGroupHeartbeat(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(err error) (*Response, error) {
		resp.ErrorCode = errorCode(err)
		msg := err.Error()
		resp.ErrorMessage = &msg
		return reply(resp)
	}
	switch {
	case !b.sharesServed():
		return fail(errSharesOff)
	case !b.allowed(r, acl.Read, acl.Group, req.GroupID):
		return fail(kerr.GroupAuthorizationFailed)
	case slices.ContainsFunc(req.SubscribedTopicNames, func(t string) bool { return !b.topicCheck(r, acl.Describe)(t) }):
		return fail(newAPIError(kerr.TopicAuthorizationFailed, "The group subscribed to topics the principal may not describe."))
	case req.MemberID == "":
		return fail(newAPIError(kerr.InvalidRequest, "MemberId can't be empty."))
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(newAPIError(kerr.InvalidRequest, "SubscribedTopicNames must be set in first request."))
	case !b.coordinatesGroup(req.GroupID):
		return fail(kerr.NotCoordinator)
	case b.isOtherGroup(req.GroupID):
		return fail(newAPIError(kerr.GroupIDNotFound, "Group %s is not a share group.", req.GroupID))
	}
	h := share.Heartbeat{Group: req.GroupID, Member: req.MemberID, Epoch: req.MemberEpoch, Topics: req.SubscribedTopicNames}
	if req.RackID != nil {
		h.Rack = *req.RackID
	}
	a, err := b.Shares.Groups.Heartbeat(h, r.ClientID, r.Client, b.Shares.Now())
	if err == nil && req.MemberEpoch != -1 {
		err = b.persistShareGroup(req.GroupID, false)
	}
	if err != nil {
		return fail(err)
	}
	resp.MemberID = &req.MemberID
	resp.MemberEpoch = a.Epoch
	resp.HeartbeatIntervalMillis = int32(a.Interval.Milliseconds())
	if a.Assignment != nil {
		as := kmsg.NewShareGroupHeartbeatResponseAssignment()
		as.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for id, ps := range a.Assignment {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = id, ps
			as.TopicPartitions = append(as.TopicPartitions, tp)
		}
		slices.SortFunc(as.TopicPartitions, func(x, y kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition) int {
			return slices.Compare(x.TopicID[:], y.TopicID[:])
		})
		resp.Assignment = &as
	}
	return reply(resp)
}

// isOtherGroup reports whether a classic or consumer group has the id: a
// group id names one group, of one type.
func (b *Broker) isOtherGroup(id string) bool {
	return slices.ContainsFunc(b.Groups.List(nil, nil), func(g group.ListedGroup) bool { return g.Group == id })
}
