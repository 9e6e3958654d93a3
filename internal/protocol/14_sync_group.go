package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
)

// SyncGroup: v0-5
//
// Behaviour:
//   - A member's SyncGroup is parked until the leader's assignment is
//     stored durably in __consumer_offsets; then every member gets its own
//     (members the leader left out get an empty one). In a stable group
//     the current assignment is answered at once.
//   - v3+: group.instance.id is checked (FENCED_INSTANCE_ID).
//   - v5+: the protocol type and name must be given, as Kafka requires
//     (KIP-559), and be the group's (INCONSISTENT_GROUP_PROTOCOL); they are
//     answered.
//
// A group a cluster link passes through is answered by the link's source's
// coordinator, as the member's request (passthrough.go).
//
// Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED).

func init() { register(14, 0, 5, handleSyncGroup) }

func handleSyncGroup(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.SyncGroupRequest)
	sr := group.SyncRequest{
		Client: groupClient(r), Group: req.Group, Generation: req.Generation, MemberID: req.MemberID,
		InstanceID: req.InstanceID, ProtocolType: req.ProtocolType, ProtocolName: req.Protocol,
	}
	for _, a := range req.GroupAssignment {
		sr.Assignments = append(sr.Assignments, group.Assignment{MemberID: a.MemberID, Data: a.MemberAssignment})
	}
	answer := func(res group.SyncResult) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = errorCode(res.Err)
		resp.ProtocolType, resp.Protocol, resp.MemberAssignment = res.ProtocolType, res.ProtocolName, res.Assignment
		if resp.MemberAssignment == nil {
			resp.MemberAssignment = []byte{}
		}
		return resp
	}
	if !b.allowed(r, acl.Read, acl.Group, req.Group) {
		return reply(answer(group.SyncResult{Err: kerr.GroupAuthorizationFailed}))
	}
	if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		return reply(answer(group.SyncResult{Err: kerr.InconsistentGroupProtocol}))
	}
	if b.passesThrough(r, req.Group) {
		return b.forwardGroup(r, req, req.Group, req.MemberID, func(code int16) kmsg.Response {
			return answer(group.SyncResult{Err: kerr.ErrorForCode(code)})
		}, nil)
	}
	return await(b.Groups.Sync(sr), answer, group.SyncResult{Err: group.ErrNotCoordinator})
}
