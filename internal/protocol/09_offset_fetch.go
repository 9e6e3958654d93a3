package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
)

// OffsetFetch: v1-9 (Kafka 4 dropped v0)
//
// Behaviour:
//   - Returns a group's committed offsets for the partitions named, or
//     (v2+, null topics) all of them. A partition without one, or of a
//     group that does not exist, is offset -1 with no error. Only durable
//     commits are seen.
//   - v2-7: errors of the whole group are the top-level error; v1 has none,
//     so they go on every partition.
//   - v5+: the committed leader epoch (-1 if none).
//   - v7+: RequireStable waits for the group's commits in flight to be
//     durable before reading, and answers a partition with a transactional
//     offset still pending (its transaction not yet ended)
//     UNSTABLE_OFFSET_COMMIT with offset -1; the client retries.
//   - v8+: several groups per request, each answered with its own error.
//   - v9: the member id and epoch (KIP-848) of a consumer group's member
//     are checked (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH as the group's
//     error); not for classic groups, as in Kafka.
//
//   - With an authorizer: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED
//     as its error) and on each topic: a named topic without it is
//     TOPIC_AUTHORIZATION_FAILED on its partitions, and all topics leaves
//     such topics out.
//
//   - A group a cluster link passes through is answered by the link's
//     source's coordinator (passthrough.go).
//
// Not supported: v10 (topic ids, Kafka 4.1).

func init() { register(9, 1, 9, handleOffsetFetch) }

// offsetFetchGroup is one group of the request, in either form.
type offsetFetchGroup struct {
	id          string
	topics      []group.FetchTopic // nil: all
	memberID    string             // v9+
	memberEpoch int32
}

func handleOffsetFetch(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.OffsetFetchRequest)
	var groups []offsetFetchGroup
	if req.Version < 8 {
		g := offsetFetchGroup{id: req.Group, memberEpoch: -1}
		if req.Topics != nil || req.Version < 2 {
			g.topics = []group.FetchTopic{}
			for _, t := range req.Topics {
				g.topics = append(g.topics, group.FetchTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		groups = append(groups, g)
	}
	for _, rg := range req.Groups {
		g := offsetFetchGroup{id: rg.Group, memberEpoch: -1}
		if rg.MemberID != nil {
			g.memberID, g.memberEpoch = *rg.MemberID, rg.MemberEpoch
		}
		if rg.Topics != nil {
			g.topics = []group.FetchTopic{}
			for _, t := range rg.Topics {
				g.topics = append(g.topics, group.FetchTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		groups = append(groups, g)
	}
	for _, g := range groups {
		if b.passesThrough(r, g.id) {
			// Off the read path: the source's coordinator answers.
			return &Response{Defer: func(ctx context.Context) (*Response, error) {
				return reply(b.offsetFetchResponse(ctx, r, req, groups))
			}}, nil
		}
	}
	if !req.RequireStable {
		return reply(b.offsetFetchResponse(context.Background(), r, req, groups))
	}
	// Stable as of the request: the commits written before it.
	var waits []<-chan struct{}
	for _, g := range groups {
		waits = append(waits, b.Groups.AwaitStable(g.id))
	}
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		for _, w := range waits {
			select {
			case <-w:
			case <-ctx.Done():
			}
		}
		return reply(b.offsetFetchResponse(ctx, r, req, groups))
	}}, nil
}

func (b *Broker) offsetFetchResponse(ctx context.Context, r *Request, req *kmsg.OffsetFetchRequest, groups []offsetFetchGroup) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	may := b.topicCheck(r, acl.Describe)
	for _, g := range groups {
		var err error
		if !b.allowed(r, acl.Describe, acl.Group, g.id) {
			err = kerr.GroupAuthorizationFailed
		}
		fetch := b.Groups.FetchOffsets
		if b.passesThrough(r, g.id) {
			fetch = func(id string, topics []group.FetchTopic, requireStable bool) ([]group.FetchedOffset, error) {
				return b.sourceOffsets(ctx, r, g, topics, requireStable)
			}
		} else if err == nil {
			err = b.Groups.CheckFetchMember(g.id, g.memberID, g.memberEpoch)
		}
		var offsets []group.FetchedOffset
		if err == nil {
			offsets, err = b.fetchAllowedOffsets(g, req.RequireStable, may, fetch)
		}
		if req.Version < 8 {
			resp.ErrorCode = errorCode(err)
			resp.Topics = offsetFetchTopics(req.Version, g.topics, offsets, err)
			continue
		}
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.id, errorCode(err)
		for _, t := range offsetFetchTopics(req.Version, g.topics, offsets, err) {
			gt := kmsg.NewOffsetFetchResponseGroupTopic()
			gt.Topic = t.Topic
			for _, p := range t.Partitions {
				gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
				gp.ErrorCode = p.ErrorCode
				gt.Partitions = append(gt.Partitions, gp)
			}
			rg.Topics = append(rg.Topics, gt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// fetchAllowedOffsets fetches a group's offsets of the topics may allows:
// the others named are TOPIC_AUTHORIZATION_FAILED, and left out of all.
func (b *Broker) fetchAllowedOffsets(g offsetFetchGroup, requireStable bool, may func(string) bool,
	fetch func(string, []group.FetchTopic, bool) ([]group.FetchedOffset, error)) ([]group.FetchedOffset, error) {
	if g.topics == nil {
		offsets, err := fetch(g.id, nil, requireStable)
		return slices.DeleteFunc(offsets, func(o group.FetchedOffset) bool { return !may(o.Topic) }), err
	}
	var allowed, denied []group.FetchTopic
	for _, t := range g.topics {
		if may(t.Topic) {
			allowed = append(allowed, t)
		} else {
			denied = append(denied, t)
		}
	}
	if allowed == nil {
		allowed = []group.FetchTopic{}
	}
	offsets, err := fetch(g.id, allowed, requireStable)
	for _, t := range denied {
		for _, p := range t.Partitions {
			offsets = append(offsets, group.FetchedOffset{Topic: t.Topic, Partition: p, Offset: -1, LeaderEpoch: -1,
				Err: kerr.TopicAuthorizationFailed})
		}
	}
	return offsets, err
}

// sourceOffsets fetches a passed-through group's offsets from its source's
// coordinator (topics nil: all), as a member of version 8 or later asks.
func (b *Broker) sourceOffsets(ctx context.Context, r *Request, g offsetFetchGroup, topics []group.FetchTopic,
	requireStable bool) ([]group.FetchedOffset, error) {
	fwd := kmsg.NewPtrOffsetFetchRequest()
	fwd.RequireStable = requireStable
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = g.id
	if g.memberID != "" {
		rg.MemberID, rg.MemberEpoch = &g.memberID, g.memberEpoch
	}
	if topics != nil {
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = t.Topic, t.Partitions
			rg.Topics = append(rg.Topics, rt)
		}
	}
	fwd.Groups = append(fwd.Groups, rg)
	kresp, err := b.Links.ForwardGroup(ctx, groupRequest(r, g.id, g.memberID, fwd))
	if err != nil {
		return nil, kerr.ErrorForCode(forwardErrorCode(err))
	}
	var out []group.FetchedOffset
	for _, sg := range kresp.(*kmsg.OffsetFetchResponse).Groups {
		if err := kerr.ErrorForCode(sg.ErrorCode); err != nil {
			return nil, err
		}
		for _, t := range sg.Topics {
			for _, p := range t.Partitions {
				o := group.FetchedOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch,
					Err: kerr.ErrorForCode(p.ErrorCode)}
				if p.Metadata != nil {
					o.Metadata = *p.Metadata
				}
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// offsetFetchTopics groups the offsets by topic, in the order given. A
// group error leaves only v1's per-partition errors.
func offsetFetchTopics(version int16, asked []group.FetchTopic, offsets []group.FetchedOffset, err error) []kmsg.OffsetFetchResponseTopic {
	var out []kmsg.OffsetFetchResponseTopic
	if err != nil {
		if version >= 2 {
			return nil
		}
		for _, t := range asked {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.Metadata, rp.ErrorCode = p, -1, kmsg.StringPtr(""), errorCode(err)
				rt.Partitions = append(rt.Partitions, rp)
			}
			out = append(out, rt)
		}
		return out
	}
	for _, o := range offsets {
		if len(out) == 0 || out[len(out)-1].Topic != o.Topic {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = o.Topic
			out = append(out, rt)
		}
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Partition, o.Offset, o.LeaderEpoch, kmsg.StringPtr(o.Metadata)
		if o.Err != nil {
			rp.Offset, rp.LeaderEpoch, rp.ErrorCode = -1, -1, errorCode(o.Err)
		}
		t := &out[len(out)-1]
		t.Partitions = append(t.Partitions, rp)
	}
	return out
}
