package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/share"
)

// ShareAcknowledge: v1-2 (KIP-932)
//
// Behaviour: a share group member acknowledges records it acquired with
// ShareFetch, in its share session: each run of offsets accepted,
// released for redelivery, rejected, or (gap) holding no record. Epoch -1
// is the session's last request: once the acknowledgements are applied
// the session ends and the member's other records go back. Served while
// share.version is 1.
//   - v2: IsRenewAck, and renew acknowledgements (KIP-1222) that keep a
//     record with a new lock; AcquisitionLockTimeoutMs in the answer.
//
// Errors: top level: INVALID_REQUEST, SHARE_SESSION_NOT_FOUND,
// INVALID_SHARE_SESSION_EPOCH (epoch 0: a session is opened by ShareFetch
// only), GROUP_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION while
// share.version is 0. Per partition: UNKNOWN_TOPIC_ID,
// UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED,
// NOT_LEADER_OR_FOLLOWER with the current leader, INVALID_RECORD_STATE
// for records the member does not hold (never acquired, another's, its
// lock expired, acknowledged already).
//
// Authorization: READ on the group and READ on each topic.

func init() { register(79, 1, 2, handleShareAcknowledge) }

func handleShareAcknowledge(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := func(err error) (*Response, error) {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return reply(resp)
	}
	group, member := deref(req.GroupID), deref(req.MemberID)
	if err := b.checkShareRequest(r, group, member); err != nil {
		return fail(err)
	}
	if req.ShareSessionEpoch == 0 {
		return fail(share.ErrInvalidSessionEpoch)
	}
	sk := share.SessionKey{Group: group, Member: member}
	if _, err := b.Shares.Leader.Session(sk, req.ShareSessionEpoch, r.Client); err != nil {
		return fail(err)
	}
	if req.Version >= 2 {
		resp.AcquisitionLockTimeoutMillis = int32(b.Shares.Limits(group).LockDuration.Milliseconds())
	}
	named := map[[16]byte][]int32{}
	acks := map[share.Key][]shareAckBatch{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			named[t.TopicID] = append(named[t.TopicID], p.Partition)
			k := share.Key{Group: group, TopicID: t.TopicID, Partition: p.Partition}
			for _, a := range p.AcknowledgementBatches {
				acks[k] = append(acks[k], shareAckBatch{a.FirstOffset, a.LastOffset, a.AcknowledgeTypes})
			}
		}
	}
	out := newShareAnswer(b, r, kmsg.NewPtrShareFetchResponse())
	parts := b.shareParts(r, group, named)
	b.applyShareAcks(parts, acks, member, out)
	if req.ShareSessionEpoch == -1 {
		b.releaseMember(b.Shares.Leader.CloseSession(sk), member)
		b.Shares.Leader.NotifyReleased()
	}
	// The answer is a ShareFetch's without records: the same partitions,
	// said in ShareAcknowledge's shape.
	fetched := out.response()
	for _, t := range fetched.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, p.AcknowledgeErrorCode
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, ep := range fetched.NodeEndpoints {
		e := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
		e.NodeID, e.Host, e.Port, e.Rack = ep.NodeID, ep.Host, ep.Port, ep.Rack
		resp.NodeEndpoints = append(resp.NodeEndpoints, e)
	}
	return reply(resp)
}
