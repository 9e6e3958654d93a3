package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
)

// LeaveGroup: v0-5
//
// Behaviour:
//   - v0-2: one member leaves; its error is the answer's.
//   - v3+: a batch of members, each answered; a member may be named by its
//     group.instance.id alone (administrative removal of a static member).
//     Errors of the whole group (an unknown group is UNKNOWN_MEMBER_ID, as
//     in Kafka) are the top-level error.
//   - The members left are gone at once; the group rebalances.
//   - v5: the reason is kept in the group's rebalance history.
//
// A group a cluster link passes through is answered by the link's source's
// coordinator, as the member's request (passthrough.go).
//
// Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED).

func init() { register(13, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	lr := group.LeaveRequest{Group: req.Group}
	if req.Version < 3 {
		lr.Members = []group.LeavingMember{{MemberID: req.MemberID}}
	}
	for _, m := range req.Members {
		lm := group.LeavingMember{MemberID: m.MemberID, InstanceID: m.InstanceID}
		if m.Reason != nil {
			lm.Reason = *m.Reason
		}
		lr.Members = append(lr.Members, lm)
	}
	answer := func(res group.LeaveResult) kmsg.Response {
		if res.Err != nil {
			resp.ErrorCode = errorCode(res.Err)
			return resp
		}
		if req.Version < 3 {
			resp.ErrorCode = errorCode(res.Members[0])
			return resp
		}
		for i, m := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, errorCode(res.Members[i])
			resp.Members = append(resp.Members, rm)
		}
		return resp
	}
	if !b.allowed(r, acl.Read, acl.Group, req.Group) {
		return reply(answer(group.LeaveResult{Err: kerr.GroupAuthorizationFailed}))
	}
	if b.passesThrough(r, req.Group) {
		return b.forwardGroup(r, req, req.Group, "", func(code int16) kmsg.Response {
			return answer(group.LeaveResult{Err: kerr.ErrorForCode(code)})
		}, nil)
	}
	return await(b.Groups.Leave(lr), answer, group.LeaveResult{Err: group.ErrNotCoordinator})
}
