package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

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
//   - v3+: the authorized operations, when asked for, are every operation
//     on a group (no authorizer yet: Kafka answers the same without one).
//   - v4+: members' group.instance.id.

func init() { register(15, 0, 5, handleDescribeGroups) }

// groupOperations are Kafka's supported operations on a group resource,
// as a bit field: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
const groupOperations = 1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDelete | 1<<kmsg.ACLOperationDescribe |
	1<<kmsg.ACLOperationDescribeConfigs | 1<<kmsg.ACLOperationAlterConfigs

func handleDescribeGroups(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, d := range b.Groups.Describe(req.Groups) {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = d.Group, errorCode(d.Err)
		if errors.Is(d.Err, group.ErrGroupIDNotFound) {
			rg.ErrorCode = 0 // not a classic group: Dead, as an unknown one
		}
		rg.State, rg.ProtocolType, rg.Protocol = d.State, d.ProtocolType, d.Protocol
		if req.IncludeAuthorizedOperations && d.Err == nil {
			rg.AuthorizedOperations = groupOperations
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
