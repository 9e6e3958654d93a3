package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

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

func init() { register(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.OffsetDeleteRequest)
	var topics []group.FetchTopic
	for _, t := range req.Topics {
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
				rp.Partition, rp.ErrorCode = p.Partition, errorCode(res.Errs[i])
				rt.Partitions = append(rt.Partitions, rp)
				i++
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	return await(b.Groups.DeleteOffsets(req.Group, topics), answer, group.DeleteOffsetsResult{Err: group.ErrNotCoordinator})
}
