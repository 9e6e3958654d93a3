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
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/quota"
	"github.com/strandlog/strand/internal/replica"
)

// Fetch: v4-17
//
// Behaviour:
//   - Returns stored batches from each partition's fetch offset up to the
//     high watermark (read_uncommitted) or last stable offset
//     (read_committed), whole batches only, at most PartitionMaxBytes per
//     partition and MaxBytes (capped at Kafka's fetch.max.bytes default,
//     55 MiB) in all, except that the first batch of the first partition
//     with data is returned whatever its size.
//   - The records are sent from the segment files with sendfile: the
//     response carries markers that the server replaces with file sections.
//   - With less than MinBytes ready (capped at the MaxBytes limit, as Kafka
//     does), the answer waits (off the read path) until data arrives on any
//     partition of the request or MaxWait passes. A request naming no
//     partition, or with a partition error, is answered at once.
//   - Offsets below the log start or above the log end are
//     OFFSET_OUT_OF_RANGE, except on the mirror of a cluster link an offset
//     its source has and it has not copied yet, which waits as at the end;
//     a CurrentLeaderEpoch (v9+) other than ours is
//     FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH (newer).
//   - v13+: topics are named by id; an unknown id is UNKNOWN_TOPIC_ID.
//   - v7+: fetch sessions (KIP-227, fetch_session.go): epoch 0 opens one and
//     the answer names it; later epochs send and get only what changed; -1
//     closes it. An unknown or evicted session is FETCH_SESSION_ID_NOT_FOUND,
//     a wrong epoch INVALID_FETCH_SESSION_EPOCH. Followers' fetches use
//     sessions too: a partition left out of an incremental fetch counts as
//     fetched again at the offset the session holds.
//
// With an authorizer, a consumer's fetch needs READ on each topic and a
// follower's CLUSTER_ACTION on the cluster; without, the partitions are
// TOPIC_AUTHORIZATION_FAILED.
//
// Consumers' fetch offsets are reported to the group coordinator
// (observeFetch) for its rebalance history.
//
// Fetching from the closest replica (KIP-392, v11+): with
// replica.selector.class set to Kafka's RackAwareReplicaSelector, the
// leader answers a consumer whose RackID (client.rack) is another rack
// than its own, and has an in-sync replica there, with that replica as
// PreferredReadReplica and no records; a follower serves consumers up to
// the high watermark it has learnt from its leader.
//
// Follower fetches (a replica id, v15+ in ReplicaState): the follower's
// fetch offset is its log end, which tells the leader what it has (and so
// moves the high watermark); it reads up to the leader's log end, not the
// high watermark, and is answered the high watermark it may expose. A
// follower fetch whose broker epoch is older than the follower's
// registration is STALE_BROKER_EPOCH (a replaced process, KIP-903's fence).

func init() { register(1, 4, 17, handleFetch) }

// maxFetchBytes is Kafka's fetch.max.bytes default (55 MiB): the most a
// fetch response carries whatever the request's MaxBytes, beyond the one
// batch that may always exceed the limits. It also keeps every response
// well within a frame's int32 size.
const maxFetchBytes = 55 << 20

func handleFetch(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.FetchRequest)
	sf := &sessionFetch{request: req, full: true}
	if req.Version >= 7 {
		// Sessions (fetch_session.go): the request to serve is every
		// partition of the session.
		var code int16
		if sf, code = b.beginSession(req); code != 0 {
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = code
			return reply(resp)
		}
	}
	req = sf.request
	at := time.Now()
	may := b.fetchAccess(r, req)
	first := b.fetchOnce(req, may, r.Listener)
	answer := func(res *fetchResult) *Response {
		if throttled := b.fetchThrottled(r, req, sf, res); throttled != nil {
			return throttled
		}
		b.observeFetch(r, res, at)
		b.meterFetch(res)
		return sf.finish(res)
	}
	if first.enough(req) || req.MaxWaitMillis <= 0 || first.failed || first.empty || first.hwMoved {
		return answer(first), nil
	}
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		return answer(b.fetchWait(ctx, req, may, r.Listener, first)), nil
	}}, nil
}

// fetchThrottled counts a consumer's fetch against its byte-rate quota.
// A consumer already over it is answered empty with the time it owes, as
// Kafka answers, its session unchanged; otherwise the answer is counted,
// and nil returned. Asking first, rather than counting the answer and then
// dropping it as Kafka does, holds the consumer at its quota rather than
// below it.
func (b *Broker) fetchThrottled(r *Request, req *kmsg.FetchRequest, sf *sessionFetch, res *fetchResult) *Response {
	if !b.Quotas.Active() || fetchingReplica(req) >= 0 || res.bytes == 0 {
		return nil
	}
	d := b.Quotas.Owed(quota.Fetch, r.QuotaUser(), r.ClientID, time.Now())
	if d <= 0 {
		b.throttle(r, quota.Fetch, float64(res.bytes))
		return nil
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if sf.s != nil {
		resp.SessionID = sf.s.id
	}
	SetThrottle(resp, d)
	return &Response{Body: resp}
}

// fetchLimit is the request's MaxBytes capped as Kafka caps it.
func fetchLimit(req *kmsg.FetchRequest) int64 {
	return min(max(int64(req.MaxBytes), 0), maxFetchBytes)
}

// enough reports whether the result holds MinBytes, which Kafka caps at
// the response limit (so a MinBytes above MaxBytes cannot park the fetch
// for the whole MaxWait, and MinBytes 0 answers at once).
func (f *fetchResult) enough(req *kmsg.FetchRequest) bool {
	return f.bytes >= min(int64(req.MinBytes), fetchLimit(req))
}

// fetchWait parks until MinBytes are ready, MaxWait passes or the server
// shuts down, then answers with what there is. A follower's fetch is also
// answered once a high watermark it was told in first moves, so that
// followers learn the high watermark (and a new leader among them starts
// from it) without waiting for new data.
func (b *Broker) fetchWait(ctx context.Context, req *kmsg.FetchRequest, may func(topic string) bool, listener string, first *fetchResult) *fetchResult {
	deadline := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	defer deadline.Stop()
	w := replica.NewWaiter()
	var watched []Partition
	watching := false
	defer func() {
		for _, p := range watched {
			p.Unwatch(w)
		}
	}()
	for {
		res := b.fetchOnce(req, may, listener)
		if res.enough(req) || res.failed || res.empty || res.hwMoved || !slices.Equal(res.followerHWs, first.followerHWs) {
			return res
		}
		if !watching {
			// Data that arrived between the read above and the Watch
			// would wake no one: watch, then read again at once.
			watching = true
			for _, p := range res.partitions {
				p.Watch(w)
				watched = append(watched, p)
			}
			continue
		}
		select {
		case <-w.C:
		case <-deadline.C:
			return b.fetchOnce(req, may, listener)
		case <-ctx.Done():
			return b.fetchOnce(req, may, listener)
		}
	}
}

type fetchResult struct {
	resp       *kmsg.FetchResponse
	splices    []Splice
	bytes      int64
	records    int64 // offsets sent past the fetch offsets, for the meter
	partitions []Partition
	failed     bool // a partition has an error: answer at once, as Kafka does
	empty      bool // no partitions asked for: answer at once, as Kafka does
	// A follower's fetch: the high watermark of each partition as
	// answered, and whether this fetch moved one (answer at once).
	followerHWs []int64
	hwMoved     bool
	// topicBytes is what each topic of the answer holds, for the meter.
	topicBytes []topicBytes
	// read is each partition of a consumer's fetch that was read, for
	// the group coordinator (observeFetch); kept only with an observer,
	// sized for the want partitions of the request.
	read []group.FetchReport
	want int
}

func (f *fetchResult) response() *Response {
	return &Response{Body: f.resp, Splices: f.splices}
}

// fetchAccess returns whether the request's principal may fetch a topic:
// a follower's fetch needs CLUSTER_ACTION on the cluster, a consumer's
// READ on the topic. Answers are kept for the request's later reads.
func (b *Broker) fetchAccess(r *Request, req *kmsg.FetchRequest) func(topic string) bool {
	if fetchingReplica(req) >= 0 {
		ok := b.allowedCluster(r, acl.ClusterAction)
		return func(string) bool { return ok }
	}
	return b.topicCheck(r, acl.Read)
}

// fetchOnce reads every requested partition once, of the topics may
// allows.
func (b *Broker) fetchOnce(req *kmsg.FetchRequest, may func(topic string) bool, listener string) *fetchResult {
	res := &fetchResult{resp: req.ResponseKind().(*kmsg.FetchResponse), empty: true}
	var leaders endpoints
	budget := fetchLimit(req)
	readCommitted := req.IsolationLevel == 1
	follower := fetchingReplica(req)
	if b.FetchObserver != nil && follower < 0 {
		for _, rt := range req.Topics {
			res.want += len(rt.Partitions)
		}
	}
	if follower >= 0 && req.Version >= 15 && b.staleReplica(follower, req.ReplicaState.Epoch) {
		// A stale process of a follower (an older broker epoch than its
		// node's registration) must not count as the follower.
		res.resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		res.failed = true
		return res
	}
	metered := b.Meter != nil && follower < 0
	for _, rt := range req.Topics {
		before, recordsBefore := res.bytes, res.records
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var (
			t     cluster.Topic
			found bool
		)
		if req.Version >= 13 {
			t, found = b.Cluster.TopicByID(rt.TopicID)
		} else {
			t, found = b.Cluster.Topic(rt.Topic)
		}
		for _, rp := range rt.Partitions {
			res.empty = false
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			// An empty record set, never null: librdkafka rejects a whole
			// response with a -1 size (kmsg's encoding of nil before v12).
			sp.RecordBatches = []byte{}
			if readCommitted {
				sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			var err error
			switch {
			case !found && req.Version >= 13:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case !may(fetchedName(rt.Topic, t, found)):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !found:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				err = b.fetchPartition(res, t.Name, &rp, &sp, &budget, readCommitted, follower, req)
				sp.ErrorCode = errorCode(err)
				if err != nil {
					// Kafka answers a partition error with unknown offsets.
					sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				}
				if leader, epoch, ok := leaderHint(err); ok && req.Version >= 12 {
					sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
					if leaders == nil {
						leaders = endpoints{}
					}
					b.addEndpoint(leaders, leader, listener)
				}
			}
			if sp.ErrorCode != 0 {
				res.failed = true
			}
			st.Partitions = append(st.Partitions, sp)
		}
		res.resp.Topics = append(res.resp.Topics, st)
		if metered && found && res.bytes > before {
			res.topicBytes = append(res.topicBytes, topicBytes{t.Name, res.bytes - before, res.records - recordsBefore})
		}
	}
	if req.Version >= 16 {
		res.resp.Brokers = leaders.fetch()
	}
	return res
}

// fetchedName is the name of a fetched topic: its own when it is known (a
// v13+ fetch names it by id), else the one the request gives.
func fetchedName(asked string, t cluster.Topic, found bool) string {
	if found {
		return t.Name
	}
	return asked
}

// staleReplica reports whether a follower fetch names a broker epoch older
// than its node's registration: it comes from a process that has been
// replaced. A newer epoch is this broker's image lagging, and is served.
func (b *Broker) staleReplica(node int32, epoch int64) bool {
	reg, ok := b.Cluster.Broker(node)
	return epoch >= 0 && ok && epoch < reg.Epoch
}

// fetchingReplica is the broker a follower fetch comes from, or -1 for a
// consumer's fetch.
func fetchingReplica(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 {
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

func (b *Broker) fetchPartition(res *fetchResult, topic string, rp *kmsg.FetchRequestTopicPartition,
	sp *kmsg.FetchResponseTopicPartition, budget *int64, readCommitted bool, follower int32, req *kmsg.FetchRequest) error {
	tp := model.TopicPartition{Topic: topic, Partition: rp.Partition}
	p, err := b.leading(tp)
	if err != nil && follower < 0 && req.Version >= 11 {
		// KIP-392: a consumer may read from a follower, up to the high
		// watermark the follower has learnt.
		if fp, ok := b.Replicas.Get(tp); ok && fp.MirrorOf() == "" {
			p, err = fp, nil
		}
	}
	if err != nil {
		return err
	}
	res.partitions = append(res.partitions, p)
	if err := p.CheckLeaderEpoch(rp.CurrentLeaderEpoch); err != nil {
		return err
	}
	if follower >= 0 {
		return b.fetchForFollower(res, p, follower, rp, sp, budget)
	}
	// One reading of each bound serves the answer, the read and the
	// aborted transactions: the last stable offset first, so it is never
	// above the high watermark read after it.
	sp.LastStableOffset = p.LastStableOffset()
	sp.HighWatermark = p.HighWatermark()
	sp.LogStartOffset = p.StartOffset()
	if p.IsLeader() && req.Version >= 11 {
		if preferred := b.preferredReadReplica(tp, req.Rack); preferred >= 0 {
			// The consumer goes there; this answer carries no records,
			// as Kafka's leader answers.
			sp.PreferredReadReplica = preferred
			return nil
		}
	}
	bound := sp.HighWatermark
	if readCommitted {
		bound = sp.LastStableOffset
	}
	var read *group.FetchReport
	if b.FetchObserver != nil {
		if res.read == nil {
			res.read = make([]group.FetchReport, 0, res.want)
		}
		res.read = append(res.read, group.FetchReport{Topic: topic, Partition: rp.Partition,
			Offset: rp.FetchOffset, SentEnd: rp.FetchOffset, LogStart: sp.LogStartOffset})
		read = &res.read[len(res.read)-1]
	}
	limit := min(int64(rp.PartitionMaxBytes), *budget)
	if limit <= 0 && res.bytes > 0 {
		return nil
	}
	sec, err := p.ReadUpTo(rp.FetchOffset, int(max(limit, 0)), bound)
	if err != nil {
		if read != nil {
			res.read = res.read[:len(res.read)-1]
		}
		if b.awaitsMirror(p, rp.FetchOffset, err) {
			return nil // nothing yet: the fetch waits as at the end
		}
		return err
	}
	// Only the first partition with data may exceed the limits.
	if sec.Size == 0 || (sec.Size > limit && res.bytes > 0) {
		return nil
	}
	if readCommitted {
		// The aborted transactions the data may hold, so the client drops
		// their records; bounded by the last stable offset, which bounds
		// the read.
		for _, a := range p.AbortedTransactions(rp.FetchOffset, bound) {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
			sp.AbortedTransactions = append(sp.AbortedTransactions, at)
		}
	}
	res.add(sp, sec, budget)
	res.records += max(0, sec.Next-rp.FetchOffset)
	if read != nil {
		read.SentEnd = sec.Next
	}
	return nil
}

// preferredReadReplica is the replica a consumer in rack should read tp
// from, when this broker leads it and replica.selector.class is the
// rack-aware selector: an in-sync replica in the consumer's rack, unless
// this broker is in it; -1 for this broker.
func (b *Broker) preferredReadReplica(tp model.TopicPartition, rack string) int32 {
	if rack == "" || b.Config.ReplicaSelector != config.RackAwareSelector || b.Config.Rack == rack {
		return -1
	}
	st, ok := b.Cluster.Partition(tp.Topic, tp.Partition)
	if !ok {
		return -1
	}
	for _, r := range st.ISR {
		if r == b.Config.NodeID {
			continue
		}
		if br, ok := b.Cluster.Broker(r); ok && br.Rack == rack {
			return r
		}
	}
	return -1
}

// awaitsMirror reports whether a fetch past a mirror's end is of what its
// source has and the mirror has not copied yet (a member of a group on the
// source committed there): it is answered as a fetch at the end, not
// OFFSET_OUT_OF_RANGE, so that the consumer waits instead of resetting its
// position.
func (b *Broker) awaitsMirror(p Partition, offset int64, err error) bool {
	if b.Links == nil || p.MirrorOf() == "" || !errors.Is(err, replica.ErrOffsetOutOfRange) || offset < p.EndOffset() {
		return false
	}
	hw, ok := b.Links.SourceHighWatermark(p.TopicPartition())
	return ok && offset <= hw
}

// add puts a read section into the answer for sp, sent from its file, and
// counts it against the request's budget.
func (f *fetchResult) add(sp *kmsg.FetchResponseTopicPartition, sec replica.Section, budget *int64) {
	s := NewSplice(sec)
	sp.RecordBatches = s.Marker
	f.splices = append(f.splices, s)
	f.bytes += sec.Size
	*budget -= sec.Size
}

// fetchForFollower serves one partition of a follower's fetch.
func (b *Broker) fetchForFollower(res *fetchResult, p Partition, follower int32, rp *kmsg.FetchRequestTopicPartition,
	sp *kmsg.FetchResponseTopicPartition, budget *int64) error {
	before := p.HighWatermark()
	hw, err := p.FollowerFetched(follower, rp.FetchOffset)
	if err != nil {
		return err
	}
	res.followerHWs = append(res.followerHWs, hw)
	res.hwMoved = res.hwMoved || hw != before
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, p.LastStableOffset(), p.StartOffset()
	// Kafka's leader quota: a throttled replica out of sync gets no
	// records while the rate is spent.
	throttled := p.LeaderThrottled(follower)
	if throttled && b.LeaderThrottle.Exceeded() {
		return nil
	}
	limit := min(int64(rp.PartitionMaxBytes), *budget)
	if limit <= 0 && res.bytes > 0 {
		return nil
	}
	sec, err := p.ReadToLogEnd(rp.FetchOffset, int(max(limit, 0)))
	if err != nil || sec.Size == 0 || (sec.Size > limit && res.bytes > 0) {
		return err
	}
	res.add(sp, sec, budget)
	if throttled {
		b.LeaderThrottle.Record(int(sec.Size))
	}
	return nil
}

type topicBytes struct {
	topic   string
	bytes   int64
	records int64
}

// meterFetch counts the bytes and records of a consumer's answer per
// topic.
func (b *Broker) meterFetch(res *fetchResult) {
	for _, tb := range res.topicBytes {
		b.Meter.Fetched(tb.topic, tb.bytes, tb.records)
	}
}

// observeFetch tells the group coordinator where a consumer reads, for
// its hand-off history (group.FetchObserver): once per answer, with each
// partition read, the offset asked for and the offset after the last
// record sent; arrived is when the request arrived.
func (b *Broker) observeFetch(r *Request, res *fetchResult, arrived time.Time) {
	if len(res.read) > 0 {
		b.FetchObserver.Fetched(r.Client, r.ClientID, arrived, time.Now(), res.read)
	}
}
