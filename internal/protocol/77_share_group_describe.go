package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
)

// ShareGroupDescribe: v1 (KIP-932)
//
// Behaviour: each named share group this broker coordinates: its state
// (Empty or Stable), group and assignment epochs, the assignor (simple),
// and each member with its epoch, client, rack, topics and assignment (by
// topic id and name). Served while share.version is 1.
//
// Errors, per group: GROUP_ID_NOT_FOUND for a group that is not a share
// group here (none by that name, or a classic or consumer group),
// NOT_COORDINATOR on a broker that does not coordinate it,
// GROUP_AUTHORIZATION_FAILED.
//
// Authorization: DESCRIBE on each group.

func init() { register(77, 1, 1, handleShareGroupDescribe) }

func handleShareGroupDescribe(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID, g.AuthorizedOperations = id, -2147483648
		fail := func(err error) {
			g.ErrorCode = errorCode(err)
			msg := err.Error()
			g.ErrorMessage = &msg
		}
		info, found := kmsg.ShareGroupDescribeResponseGroup{}, false
		switch {
		case !b.sharesServed():
			fail(errSharesOff)
		case !b.allowed(r, acl.Describe, acl.Group, id):
			fail(kerr.GroupAuthorizationFailed)
		case !b.coordinatesGroup(id):
			fail(kerr.NotCoordinator)
		default:
			info, found = b.describeShareGroup(id)
			if !found {
				fail(newAPIError(kerr.GroupIDNotFound, "Group %s not found.", id))
			}
		}
		if found {
			info.AuthorizedOperations = g.AuthorizedOperations
			g = info
		}
		resp.Groups = append(resp.Groups, g)
	}
	return reply(resp)
}

// describeShareGroup is a share group as ShareGroupDescribe gives it.
func (b *Broker) describeShareGroup(id string) (kmsg.ShareGroupDescribeResponseGroup, bool) {
	g := kmsg.NewShareGroupDescribeResponseGroup()
	info, ok := b.Shares.Groups.Describe(id)
	if !ok {
		return g, false
	}
	g.GroupID, g.GroupEpoch, g.AssignmentEpoch, g.Assignor = id, info.Epoch, info.AssignmentEpoch, "simple"
	g.GroupState = "Stable"
	if len(info.Members) == 0 {
		g.GroupState = "Empty"
	}
	for _, m := range info.Members {
		gm := kmsg.NewShareGroupDescribeResponseGroupMember()
		gm.MemberID, gm.MemberEpoch, gm.ClientID, gm.ClientHost = m.ID, m.Epoch, m.ClientID, m.ClientHost
		gm.SubscribedTopicNames = m.Topics
		if m.Rack != "" {
			rack := m.Rack
			gm.RackID = &rack
		}
		for topicID, ps := range m.Assignment {
			tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = topicID, slices.Clone(ps)
			if t, ok := b.Cluster.TopicByID(cluster.TopicID(topicID)); ok {
				tp.Topic = t.Name
			}
			gm.Assignment.TopicPartitions = append(gm.Assignment.TopicPartitions, tp)
		}
		slices.SortFunc(gm.Assignment.TopicPartitions, func(x, y kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition) int {
			return slices.Compare(x.TopicID[:], y.TopicID[:])
		})
		g.Members = append(g.Members, gm)
	}
	return g, true
}
