package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
)

// JoinGroup: v0-9 (Kafka 4 keeps v0-1, deprecated, for old clients)
//
// Behaviour (the state machine is internal/group's):
//   - The answer is parked until the rebalance's join phase completes;
//     the connection keeps reading meanwhile (its later answers wait
//     behind this one, as with Kafka).
//   - v0: the rebalance timeout is the session timeout.
//   - v4+: a dynamic member's first join is answered MEMBER_ID_REQUIRED
//     with the member id to join with (KIP-394).
//   - v5+: group.instance.id makes the member static (KIP-345).
//   - v7+: the protocol type is answered; before v7 a missing protocol
//     name is answered as "".
//   - v9: a static leader rejoining a stable group is told it leads, with
//     SkipAssignment (KIP-814).
//
// A member joining a consumer group (KIP-848) with members is served as
// Kafka serves it during a migration: answered at once at its member epoch,
// with no leader; its SyncGroup returns the server-side assignor's
// partitions (package group, migration.go). With
// group.consumer.migration.policy=disabled it is INCONSISTENT_GROUP_PROTOCOL.
//
// A group a cluster link passes through (package link) is answered by the
// link's source: the request goes to the source's coordinator as this
// member's (passthrough.go), and so do its other group requests.
//
// Not supported: nothing of the classic protocol is left out.
//
// Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED).

func init() { register(11, 0, 9, handleJoinGroup) }

func handleJoinGroup(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.JoinGroupRequest)
	jr := group.JoinRequest{
		Client: groupClient(r), Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID,
		SessionTimeout: millis(req.SessionTimeoutMillis), RebalanceTimeout: millis(req.RebalanceTimeoutMillis),
		ProtocolType:         req.ProtocolType,
		RequireKnownMemberID: req.Version >= 4, SupportsSkipAssignment: req.Version >= 9,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	if req.Reason != nil {
		jr.Reason = *req.Reason
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	answer := func(res group.JoinResult) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = errorCode(res.Err)
		resp.Generation, resp.MemberID, resp.LeaderID = res.Generation, res.MemberID, res.Leader
		resp.ProtocolType, resp.Protocol, resp.SkipAssignment = res.ProtocolType, res.ProtocolName, res.SkipAssignment
		if req.Version < 7 && resp.Protocol == nil {
			resp.Protocol = kmsg.StringPtr("")
		}
		for _, m := range res.Members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, m.InstanceID, m.Metadata
			resp.Members = append(resp.Members, rm)
		}
		return resp
	}
	gone := group.JoinResult{Err: group.ErrNotCoordinator, MemberID: req.MemberID, Generation: -1}
	if !b.allowed(r, acl.Read, acl.Group, req.Group) {
		return reply(answer(group.JoinResult{Err: kerr.GroupAuthorizationFailed, Generation: -1}))
	}
	if b.passesThrough(r, req.Group) {
		return b.forwardGroup(r, req, req.Group, req.MemberID, func(code int16) kmsg.Response {
			res := gone
			res.Err = kerr.ErrorForCode(code)
			return answer(res)
		}, nil)
	}
	return await(b.Groups.Join(jr), answer, gone)
}
