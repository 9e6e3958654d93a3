package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/model"
)

// OffsetCommit: v2-9 (Kafka 4 dropped v0-1)
//
// Behaviour:
//   - The commit is checked against the group (internal/group,
//     validateCommit): a member commits in its generation
//     (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID; during
//     CompletingRebalance REBALANCE_IN_PROGRESS); generation -1 with no
//     member id commits to an Empty group, creating it if needed (the admin
//     client, consumers that assign themselves partitions).
//   - Unknown topics and partitions are UNKNOWN_TOPIC_OR_PARTITION, as
//     KafkaApis answers; metadata over offset.metadata.max.bytes is
//     OFFSET_METADATA_TOO_LARGE.
//   - The answer waits until the offsets are durable in __consumer_offsets.
//   - v2-4: a retention time other than -1 sets the offsets' expiry.
//   - v6+: the leader epoch is stored and returned by OffsetFetch.
//   - v7+: group.instance.id is checked.
//   - v9 (the KIP-848 form, same request): a commit with a generation to a
//     group that does not exist is GROUP_ID_NOT_FOUND instead of
//     ILLEGAL_GENERATION. To a consumer group the generation is the member
//     epoch: a member commits at its epoch, and at an older one only the
//     partitions it has held since (KIP-1251); otherwise
//     STALE_MEMBER_EPOCH. Its members must commit with v9
//     (UNSUPPORTED_VERSION before).
//
//   - With an authorizer: READ on the group (GROUP_AUTHORIZATION_FAILED for
//     every partition) and on each topic (TOPIC_AUTHORIZATION_FAILED).
//   - A group a cluster link passes through commits at the link's source's
//     coordinator, as the member, and what the source took is committed
//     here too, outside any generation (passthrough.go).
//
// Not supported: v10 (topic ids, Kafka 4.1).

func init() { register(8, 2, 9, handleOffsetCommit) }

func handleOffsetCommit(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	cr := group.CommitRequest{
		Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID,
		RetentionTime: -1, GroupMustExist: req.Version >= 9, Version: req.Version,
	}
	if req.Version <= 4 && req.RetentionTimeMillis >= 0 {
		cr.RetentionTime = millis64(req.RetentionTimeMillis)
	}
	// Partitions Kafka refuses before the coordinator sees them.
	var early []int16
	var index []int // per request partition: its place in cr.Offsets, or -1
	groupAllowed := b.allowed(r, acl.Read, acl.Group, req.Group)
	may := b.topicCheck(r, acl.Read)
	for _, t := range req.Topics {
		topic, known := b.Cluster.Topic(t.Topic)
		for _, p := range t.Partitions {
			switch {
			case !groupAllowed:
				early = append(early, kerr.GroupAuthorizationFailed.Code)
				index = append(index, -1)
				continue
			case !may(t.Topic):
				early = append(early, kerr.TopicAuthorizationFailed.Code)
				index = append(index, -1)
				continue
			}
			if !known || p.Partition < 0 || p.Partition >= topic.Partitions {
				early = append(early, errorCode(cluster.ErrUnknownTopic))
				index = append(index, -1)
				continue
			}
			epoch := int32(-1)
			if req.Version >= 6 {
				epoch = p.LeaderEpoch
			}
			early = append(early, 0)
			index = append(index, len(cr.Offsets))
			cr.Offsets = append(cr.Offsets, group.CommitOffset{Topic: t.Topic, Partition: p.Partition,
				Offset: p.Offset, LeaderEpoch: epoch, Metadata: p.Metadata})
		}
	}
	answer := func(errs []error) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, early[i]
				if j := index[i]; j >= 0 && errs != nil {
					rp.ErrorCode = errorCode(errs[j])
				}
				rt.Partitions = append(rt.Partitions, rp)
				i++
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if !groupAllowed {
		return reply(answer(nil))
	}
	if b.passesThrough(r, req.Group) {
		return b.forwardCommit(r, req, cr, answer)
	}
	gone := make([]error, len(cr.Offsets))
	for i := range gone {
		gone[i] = group.ErrNotCoordinator
	}
	return await(b.Groups.Commit(cr), answer, gone)
}

// forwardCommit commits at a passed-through group's source coordinator
// the partitions it takes (cr's), as the member; those the source took are
// committed here too, outside any generation, as an admin commits: the
// group's offsets are the same on both clusters.
func (b *Broker) forwardCommit(r *Request, req *kmsg.OffsetCommitRequest, cr group.CommitRequest,
	answer func([]error) kmsg.Response) (*Response, error) {
	if len(cr.Offsets) == 0 {
		return reply(answer(nil))
	}
	fwd := *req
	fwd.Topics = nil
	at := map[model.TopicPartition]int{}
	for i, o := range cr.Offsets {
		tp := model.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		at[tp] = i
		if len(fwd.Topics) == 0 || fwd.Topics[len(fwd.Topics)-1].Topic != o.Topic {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = o.Topic
			fwd.Topics = append(fwd.Topics, t)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = o.Partition, o.Offset, o.LeaderEpoch, o.Metadata
		t := &fwd.Topics[len(fwd.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	gr := groupRequest(r, req.Group, req.MemberID, &fwd)
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		errs := make([]error, len(cr.Offsets))
		kresp, err := b.Links.ForwardGroup(ctx, gr)
		if err != nil {
			for i := range errs {
				errs[i] = kerr.ErrorForCode(forwardErrorCode(err))
			}
			return reply(answer(errs))
		}
		for i := range errs {
			errs[i] = kerr.UnknownServerError // unless the source answered for it
		}
		here := cr
		here.Generation, here.MemberID, here.InstanceID, here.GroupMustExist, here.Offsets = -1, "", nil, false, nil
		for _, t := range kresp.(*kmsg.OffsetCommitResponse).Topics {
			for _, p := range t.Partitions {
				i, ok := at[model.TopicPartition{Topic: t.Topic, Partition: p.Partition}]
				if !ok {
					continue
				}
				errs[i] = kerr.ErrorForCode(p.ErrorCode)
				if p.ErrorCode == 0 {
					here.Offsets = append(here.Offsets, cr.Offsets[i])
				}
			}
		}
		if len(here.Offsets) > 0 {
			select {
			case res := <-b.Groups.Commit(here):
				for _, err := range res {
					if err != nil {
						b.Logger.Debug("a passed-through group's commit at its source was not kept here too (the offset sync copies it)", "group", req.Group, "err", err)
						break
					}
				}
			case <-ctx.Done():
			}
		}
		return reply(answer(errs))
	}}, nil
}

func millis64(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
