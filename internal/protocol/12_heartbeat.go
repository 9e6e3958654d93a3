package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
)

// Heartbeat: v0-4
//
// Behaviour: restarts the member's session. REBALANCE_IN_PROGRESS tells
// the member to rejoin; ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and (v3+,
// static members) FENCED_INSTANCE_ID that it is no longer in this
// generation or group.
//
// A group a cluster link passes through is answered by the link's source's
// coordinator, as the member's request (passthrough.go).
//
// Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED).

func init() { register(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if !b.allowed(r, acl.Read, acl.Group, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply(resp)
	}
	if b.passesThrough(r, req.Group) {
		return b.forwardGroup(r, req, req.Group, req.MemberID, func(code int16) kmsg.Response {
			resp.ErrorCode = code
			return resp
		}, nil)
	}
	resp.ErrorCode = errorCode(b.Groups.Heartbeat(group.HeartbeatRequest{
		Client: groupClient(r), Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID,
	}))
	return reply(resp)
}
