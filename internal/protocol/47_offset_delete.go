package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
)

// OffsetDelete: v0
//
// Behaviour: deletes a group's committed offsets for the partitions named,
// answered once the tombstones are durable. Offsets of topics a live
// consumer member subscribes to are GROUP_SUBSCRIBED_TO_TOPIC; a group with
// members that is not a consumer group is NON_EMPTY_GROUP; an unknown group
// GROUP_ID_NOT_FOUND. Partitions without an offset are answered without
// error.
//
// Authorization: DELETE on the group (GROUP_AUTHORIZATION_FAILED), READ on
// each topic (TOPIC_AUTHORIZATION_FAILED).

func init() { register(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.OffsetDeleteRequest)
	// The topics the principal may not read are refused here; the others
	// go to the coordinator.
	may := b.topicCheck(r, acl.Read)
	var topics []group.FetchTopic
	for _, t := range req.Topics {
		if !may(t.Topic) {
			continue
		}
		ft := group.FetchTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			ft.Partitions = append(ft.Partitions, p.Partition)
		}
		topics = append(topics, ft)
	}
	answer := func(res group.DeleteOffsetsResult) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = errorCode(res.Err)
		if res.Err != nil {
			return resp
		}
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition = p.Partition
				if may(t.Topic) {
					rp.ErrorCode = errorCode(res.Errs[i])
					i++
				} else {
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if !b.allowed(r, acl.Delete, acl.Group, req.Group) {
		return reply(answer(group.DeleteOffsetsResult{Err: kerr.GroupAuthorizationFailed}))
	}
	return await(b.Groups.DeleteOffsets(req.Group, topics), answer, group.DeleteOffsetsResult{Err: group.ErrNotCoordinator})
}
