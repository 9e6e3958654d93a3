package protocol

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
	"github.com/strandlog/strand/internal/share"
)

// ShareFetch: v1-2 (KIP-932)
//
// Behaviour: a share group member's fetch from the partitions this broker
// leads, in a share session (epoch 0 opens it, -1 is its last request,
// any other the session's next epoch). The acknowledgements it carries
// are applied first, per partition. Then records are acquired for the
// member from every partition of its session: each share-partition's
// available records, then new ones, at most MaxRecords (500 when unset)
// in at most MaxBytes, locked for the group's share.record.lock.duration.ms
// (answered as AcquisitionLockTimeoutMs). The answer holds whole batches
// and the runs of offsets acquired in them with their delivery counts;
// the member acknowledges the offsets of a run that hold no record as
// gaps. With nothing to acquire the answer waits for new data, released
// records or an expired lock, up to MaxWaitMs. A share-partition read for
// the first time starts where the group's share.auto.offset.reset says
// (latest unless set). A group with share.isolation.level read_committed
// reads up to the last stable offset, and an aborted transaction's
// records are archived, never delivered. A partition the request forgets
// leaves the session after the partitions it names are added, as Kafka
// updates a session; the member's records there stay acquired until
// acknowledged or their locks run out. Every partition of a session that
// ends gives the member's records back. A session's opening request reads
// again the state of its share-partitions that was started over or
// deleted meanwhile.
// Served while share.version is 1.
//   - v2: IsRenewAck: a request with renew acknowledgements acquires
//     nothing.
//
// Errors: top level: INVALID_REQUEST (no group or member id,
// acknowledgements in the request that opens a session),
// SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
// SHARE_SESSION_LIMIT_REACHED, GROUP_AUTHORIZATION_FAILED,
// UNSUPPORTED_VERSION while share.version is 0. Per partition:
// UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED,
// NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint, and,
// for the acknowledgements, INVALID_RECORD_STATE.
//
// Authorization: READ on the group and READ on each topic.

func init() { register(78, 1, 2, handleShareFetch) }

// defaultShareMaxRecords is max.poll.records' default, for a request that
// sets no bound.
const defaultShareMaxRecords = 500

// sharePart is one partition of a share fetch or acknowledgement.
type sharePart struct {
	key   share.Key
	topic string
	p     Partition // nil when the partition is not led here
	err   error     // why it is not fetched from
	acks  []shareAckBatch
}

// shareParts resolves the request's partitions by topic id: the ones led
// here, or why not.
func (b *Broker) shareParts(r *Request, group string, topics map[[16]byte][]int32) []*sharePart {
	may := b.topicCheck(r, acl.Read)
	var out []*sharePart
	for id, parts := range topics {
		t, found := b.Cluster.TopicByID(cluster.TopicID(id))
		for _, partition := range parts {
			sp := &sharePart{key: share.Key{Group: group, TopicID: id, Partition: partition}, topic: t.Name}
			out = append(out, sp)
			switch {
			case !found:
				sp.err = kerr.UnknownTopicID
			case !may(t.Name):
				sp.err = kerr.TopicAuthorizationFailed
			case partition < 0 || int(partition) >= len(t.States):
				sp.err = kerr.UnknownTopicOrPartition
			default:
				p, ok := b.Replicas.Get(model.TopicPartition{Topic: t.Name, Partition: partition})
				if !ok || !p.IsLeader() {
					sp.err = kerr.NotLeaderForPartition
				} else {
					sp.p = p
				}
			}
		}
	}
	return out
}

func handleShareFetch(ctx context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	fail := func(err error) (*Response, error) {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return reply(resp)
	}
	group, member := deref(req.GroupID), deref(req.MemberID)
	if err := b.checkShareRequest(r, group, member); err != nil {
		return fail(err)
	}
	named := map[[16]byte][]int32{}
	acks := map[share.Key][]shareAckBatch{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			named[t.TopicID] = append(named[t.TopicID], p.Partition)
			for _, a := range p.AcknowledgementBatches {
				k := share.Key{Group: group, TopicID: t.TopicID, Partition: p.Partition}
				acks[k] = append(acks[k], shareAckBatch{a.FirstOffset, a.LastOffset, a.AcknowledgeTypes})
			}
		}
	}
	if req.ShareSessionEpoch == 0 && len(acks) > 0 {
		return fail(newAPIError(kerr.InvalidRequest, "Acknowledge data present on initial share fetch request."))
	}
	sk := share.SessionKey{Group: group, Member: member}
	if _, err := b.Shares.Leader.Session(sk, req.ShareSessionEpoch, r.Client); err != nil {
		return fail(err)
	}
	limits := b.Shares.Limits(group)
	resp.AcquisitionLockTimeoutMillis = int32(limits.LockDuration.Milliseconds())

	out := newShareAnswer(b, r, resp)
	parts := b.shareParts(r, group, named)
	if req.ShareSessionEpoch == 0 {
		b.recheckShareState(parts)
	}
	b.applyShareAcks(parts, acks, member, out)

	var forget []share.Key
	for _, f := range req.ForgottenTopicsData {
		for _, p := range f.Partitions {
			forget = append(forget, share.Key{Group: group, TopicID: f.TopicID, Partition: p})
		}
	}
	if req.ShareSessionEpoch == -1 {
		b.releaseMember(b.Shares.Leader.CloseSession(sk), member)
		b.Shares.Leader.NotifyReleased()
		return reply(out.response())
	}
	var add []share.Key
	for _, sp := range parts {
		if sp.err == nil {
			add = append(add, sp.key)
		} else {
			out.part(sp).err = sp.err // answered, not kept in the session
		}
	}
	// A forgotten partition leaves the session only: the member's records
	// there stay acquired until it acknowledges them (its client may hold
	// them still) or their locks run out, as in Kafka.
	keys := b.Shares.Leader.SetPartitions(sk, add, forget)
	if req.IsRenewAck {
		return reply(out.response())
	}
	fetch := b.shareParts(r, group, byTopic(keys))
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = defaultShareMaxRecords
	}
	failed := slices.ContainsFunc(parts, func(sp *sharePart) bool { return sp.err != nil })
	if b.shareAcquireAll(fetch, member, maxRecords, int(req.MaxBytes), out) || failed || req.MaxWaitMillis <= 0 {
		return reply(out.response())
	}
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		b.shareWait(ctx, fetch, member, maxRecords, int(req.MaxBytes), time.Duration(req.MaxWaitMillis)*time.Millisecond, out)
		return reply(out.response())
	}}, nil
}

// recheckShareState drops what is held of the share-partitions of parts
// whose state was started over or deleted since it was read
// (AlterShareGroupOffsets, DeleteShareGroupOffsets, which need the group
// empty): a member opening its session reads them anew. A state that
// cannot be read now is checked by the fence of the next write.
func (b *Broker) recheckShareState(parts []*sharePart) {
	for _, part := range parts {
		sp := b.Shares.Leader.Get(part.key)
		if part.err != nil || sp == nil {
			continue
		}
		sp.Mu.Lock()
		if sp.P != nil {
			saved, found, err := b.Shares.State.Read(part.key)
			if err == nil && (!found || saved.StateEpoch != sp.StateEpoch) {
				sp.P = nil
			}
		}
		sp.Mu.Unlock()
	}
}

// byTopic groups share-partition keys by topic id.
func byTopic(keys []share.Key) map[[16]byte][]int32 {
	out := map[[16]byte][]int32{}
	for _, k := range keys {
		out[k.TopicID] = append(out[k.TopicID], k.Partition)
	}
	return out
}

// applyShareAcks applies the acknowledgements of each partition, and
// answers their outcome.
func (b *Broker) applyShareAcks(parts []*sharePart, acks map[share.Key][]shareAckBatch, member string, out *shareAnswer) {
	released := false
	for _, sp := range parts {
		batches, ok := acks[sp.key]
		if !ok {
			continue
		}
		err := sp.err
		if err == nil {
			err = b.shareAcknowledge(sp.key, member, batches)
		}
		for _, a := range batches {
			for _, t := range a.types {
				released = released || share.AckType(t) == share.AckRelease
			}
		}
		a := out.part(sp)
		a.err, a.ack = sp.err, err
	}
	if released {
		b.Shares.Leader.NotifyReleased()
	}
}

// shareAcquireAll acquires for member from every partition of fetch, the
// records and bytes shared between them; it reports whether any record
// was acquired or a partition failed (answered at once).
func (b *Broker) shareAcquireAll(fetch []*sharePart, member string, maxRecords, maxBytes int, out *shareAnswer) bool {
	got := false
	for _, sp := range fetch {
		if sp.err != nil {
			out.part(sp).err = sp.err
			got = true
			continue
		}
		if maxRecords <= 0 || maxBytes <= 0 {
			break
		}
		data, acquired, err := b.shareAcquire(sp.key, sp.p, member, maxRecords, maxBytes)
		if err != nil {
			out.part(sp).err = err
			got = true
			continue
		}
		if len(acquired) == 0 {
			continue
		}
		a := out.part(sp)
		a.records = append(a.records, data...)
		a.acquired = append(a.acquired, acquired...)
		for _, run := range acquired {
			maxRecords -= int(run.Last - run.First + 1)
		}
		maxBytes -= len(data)
		got = true
	}
	return got
}

// shareWait waits for something to acquire, then acquires it: new data on
// a partition, records released by any member, or a lock of the session's
// share-partitions running out, until maxWait passes.
func (b *Broker) shareWait(ctx context.Context, fetch []*sharePart, member string, maxRecords, maxBytes int, maxWait time.Duration, out *shareAnswer) {
	deadline := time.NewTimer(maxWait)
	defer deadline.Stop()
	w := replica.NewWaiter()
	for _, sp := range fetch {
		if sp.p != nil {
			sp.p.Watch(w)
			defer sp.p.Unwatch(w)
		}
	}
	for {
		released := b.Shares.Leader.Released()
		// Data that arrived before the watch began is read now.
		if b.shareAcquireAll(fetch, member, maxRecords, maxBytes, out) {
			return
		}
		expiry := time.NewTimer(maxWait)
		if d, ok := b.nextShareDeadline(fetch); ok {
			expiry.Reset(time.Until(d))
		}
		select {
		case <-w.C:
		case <-released:
		case <-expiry.C:
		case <-deadline.C:
			expiry.Stop()
			return
		case <-ctx.Done():
			expiry.Stop()
			return
		}
		expiry.Stop()
	}
}

// nextShareDeadline is when the first lock held on the share-partitions
// of fetch runs out.
func (b *Broker) nextShareDeadline(fetch []*sharePart) (time.Time, bool) {
	var first time.Time
	found := false
	for _, sp := range fetch {
		s := b.Shares.Leader.Get(sp.key)
		if s == nil {
			continue
		}
		s.Mu.Lock()
		var d time.Time
		ok := false
		if s.P != nil {
			d, ok = s.P.NextDeadline()
		}
		s.Mu.Unlock()
		if ok && (!found || d.Before(first)) {
			first, found = d, true
		}
	}
	return first, found
}

// shareAnswer builds a ShareFetch answer partition by partition.
type shareAnswer struct {
	b     *Broker
	r     *Request
	resp  *kmsg.ShareFetchResponse
	parts map[share.Key]*shareAnswerPart
	order []*shareAnswerPart
}

type shareAnswerPart struct {
	sp       *sharePart
	err      error // the fetch's
	ack      error // the acknowledgements'
	records  []byte
	acquired []share.AcquiredRecords
}

func newShareAnswer(b *Broker, r *Request, resp *kmsg.ShareFetchResponse) *shareAnswer {
	return &shareAnswer{b: b, r: r, resp: resp, parts: map[share.Key]*shareAnswerPart{}}
}

func (a *shareAnswer) part(sp *sharePart) *shareAnswerPart {
	p := a.parts[sp.key]
	if p == nil {
		p = &shareAnswerPart{sp: sp}
		a.parts[sp.key] = p
		a.order = append(a.order, p)
	}
	return p
}

// response is the answer: every partition with records, an error or
// acknowledgements, and the endpoints of leaders it points to.
func (a *shareAnswer) response() *kmsg.ShareFetchResponse {
	topics := map[[16]byte]int{}
	leaders := map[int32]bool{}
	for _, p := range a.order {
		i, ok := topics[p.sp.key.TopicID]
		if !ok {
			i = len(a.resp.Topics)
			topics[p.sp.key.TopicID] = i
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = p.sp.key.TopicID
			a.resp.Topics = append(a.resp.Topics, t)
		}
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition = p.sp.key.Partition
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		if p.err != nil {
			rp.ErrorCode = errorCode(p.err)
			if errors.Is(p.err, kerr.NotLeaderForPartition) {
				id, epoch := a.b.shareLeader(p.sp.topic, p.sp.key.Partition)
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = id, epoch
				leaders[id] = true
			}
		}
		if p.ack != nil {
			rp.AcknowledgeErrorCode = errorCode(p.ack)
		}
		rp.Records = p.records
		for _, run := range p.acquired {
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = run.First, run.Last, run.Deliveries
			rp.AcquiredRecords = append(rp.AcquiredRecords, ar)
		}
		a.resp.Topics[i].Partitions = append(a.resp.Topics[i].Partitions, rp)
	}
	if len(leaders) > 0 {
		a.resp.NodeEndpoints = a.b.nodeEndpoints(a.r, leaders)
	}
	return a.resp
}

// checkShareRequest is what ShareFetch and ShareAcknowledge check first:
// share groups on, the group and member named, READ on the group.
func (b *Broker) checkShareRequest(r *Request, group, member string) error {
	switch {
	case !b.sharesServed():
		return errSharesOff
	case group == "" || member == "":
		return newAPIError(kerr.InvalidRequest, "The request names no group or no member.")
	case !b.allowed(r, acl.Read, acl.Group, group):
		return kerr.GroupAuthorizationFailed
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
