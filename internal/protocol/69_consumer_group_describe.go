package protocol

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
)

// ConsumerGroupDescribe: v0-1 (KIP-848)
//
// Behaviour: each consumer group's state (Empty, Assigning, Reconciling,
// Stable), group and assignment epochs, assignor, and each member with its
// subscription, current and target assignment. A classic group, or one
// that does not exist, is GROUP_ID_NOT_FOUND, as Kafka answers it (the
// admin client then describes it with DescribeGroups).
//   - v1: the member type, always 1 (a member of the consumer protocol).
//   - With an authorizer, a group needs DESCRIBE (GROUP_AUTHORIZATION_FAILED);
//     its authorized operations are given when asked.

func init() { register(69, 0, 1, handleConsumerGroupDescribe) }

// ConsumerGroupDescribe v1's MemberType: a member of the classic protocol
// (in a group being migrated) or of the consumer protocol.
const (
	classicMemberType  = 0
	consumerMemberType = 1
)

func handleConsumerGroupDescribe(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	if !b.consumerGroupsServed() {
		// group.version 0, as Kafka answers it: every group refused.
		for _, id := range req.Groups {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.AuthorizedOperations, rg.ErrorCode = id, math.MinInt32, kerr.UnsupportedVersion.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return reply(resp)
	}
	var allowed []string
	for _, id := range req.Groups {
		if b.allowed(r, acl.Describe, acl.Group, id) {
			allowed = append(allowed, id)
			continue
		}
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.AuthorizedOperations, rg.ErrorCode = id, math.MinInt32, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, rg)
	}
	for _, d := range b.Groups.DescribeConsumerGroups(allowed) {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.AuthorizedOperations = d.Group, math.MinInt32
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = b.authorizedOperations(r, acl.Group, d.Group)
		}
		if d.Err != nil {
			rg.ErrorCode = errorCode(d.Err)
			msg := d.Err.Error()
			rg.ErrorMessage = &msg
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.State, rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			rm.MemberID, rm.InstanceID, rm.RackID, rm.MemberEpoch = m.MemberID, m.InstanceID, m.RackID, m.MemberEpoch
			rm.ClientID, rm.ClientHost = m.ClientID, m.ClientHost
			rm.SubscribedTopics, rm.SubscribedTopicRegex = m.TopicNames, m.TopicRegex
			rm.Assignment.TopicPartitions = describedTopics(m.Assignment)
			rm.TargetAssignment.TopicPartitions = describedTopics(m.Target)
			rm.MemberType = consumerMemberType
			if m.Classic {
				rm.MemberType = classicMemberType
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return reply(resp)
}

func describedTopics(ts []group.DescribedTopic) []kmsg.AssignmentTopicPartition {
	out := make([]kmsg.AssignmentTopicPartition, 0, len(ts))
	for _, t := range ts {
		p := kmsg.AssignmentTopicPartition{TopicID: t.ID, Topic: t.Name, Partitions: t.Partitions}
		out = append(out, p)
	}
	return out
}
