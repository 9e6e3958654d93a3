package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
)

// DescribeGroups: v0-5
//
// Behaviour:
//   - Each group's state, protocol type, and members with their client id
//     and host ("/" + address, as Kafka shows it); while Stable also the
//     selected protocol and each member's metadata and assignment.
//   - An unknown group, and a consumer group (KIP-848: it answers
//     ConsumerGroupDescribe), are answered in state Dead with no error, as
//     Kafka does before v6; an empty group id is INVALID_GROUP_ID.
//   - v3+: the authorized operations, when asked for.
//   - With an authorizer, a group needs DESCRIBE (GROUP_AUTHORIZATION_FAILED,
//     and nothing else of it).
//   - v4+: members' group.instance.id.

func init() { register(15, 0, 5, handleDescribeGroups) }

func handleDescribeGroups(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	var allowed []string
	for _, id := range req.Groups {
		if b.allowed(r, acl.Describe, acl.Group, id) {
			allowed = append(allowed, id)
			continue
		}
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, rg)
	}
	for _, d := range b.Groups.Describe(allowed) {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = d.Group, errorCode(d.Err)
		if errors.Is(d.Err, group.ErrGroupIDNotFound) {
			rg.ErrorCode = 0 // not a classic group: Dead, as an unknown one
		}
		rg.State, rg.ProtocolType, rg.Protocol = d.State, d.ProtocolType, d.Protocol
		if req.IncludeAuthorizedOperations && d.Err == nil {
			rg.AuthorizedOperations = b.authorizedOperations(r, acl.Group, d.Group)
		}
		for _, m := range d.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
			rm.ProtocolMetadata, rm.MemberAssignment = orEmpty(m.Metadata), orEmpty(m.Assignment)
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return reply(resp)
}

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
