package protocol

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// Fetch: v4-17
//
// Behaviour:
//   - Returns stored batches from each partition's fetch offset up to the
//     high watermark (read_uncommitted) or last stable offset
//     (read_committed), whole batches only, at most PartitionMaxBytes per
//     partition and MaxBytes in all, except that the first batch of the
//     first partition with data is returned whatever its size.
//   - The records are sent from the segment files with sendfile: the
//     response carries markers that the server replaces with file sections.
//   - With less than MinBytes ready, the answer waits (off the read path)
//     until data arrives on any partition of the request or MaxWait passes.
//   - Offsets below the log start or above the log end are
//     OFFSET_OUT_OF_RANGE; a CurrentLeaderEpoch (v9+) other than ours is
//     FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH (newer).
//   - v13+: topics are named by id; an unknown id is UNKNOWN_TOPIC_ID.
//
// Not supported: fetch sessions (KIP-227). Every answer has session id 0,
// which tells clients to send full fetch requests; an incremental request
// for a session id we never gave is FETCH_SESSION_ID_NOT_FOUND. Follower
// fetches (replication) and rack-aware preferred read replicas come later.

func init() { register(1, 4, 17, handleFetch) }

func handleFetch(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.FetchRequest)
	if req.Version >= 7 && req.SessionID != 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return reply(resp)
	}
	first := b.fetchOnce(req)
	if first.bytes >= int64(max(req.MinBytes, 1)) || req.MaxWaitMillis <= 0 || first.failed {
		return first.response(), nil
	}
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		return b.fetchWait(ctx, req).response(), nil
	}}, nil
}

// fetchWait parks until MinBytes are ready, MaxWait passes or the server
// shuts down, then answers with what there is.
func (b *Broker) fetchWait(ctx context.Context, req *kmsg.FetchRequest) *fetchResult {
	deadline := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	defer deadline.Stop()
	w := replica.NewWaiter()
	var watched []*replica.Partition
	defer func() {
		for _, p := range watched {
			p.Unwatch(w)
		}
	}()
	for {
		res := b.fetchOnce(req)
		if res.bytes >= int64(max(req.MinBytes, 1)) || res.failed {
			return res
		}
		if watched == nil {
			for _, p := range res.partitions {
				p.Watch(w)
				watched = append(watched, p)
			}
		}
		select {
		case <-w.C:
		case <-deadline.C:
			return b.fetchOnce(req)
		case <-ctx.Done():
			return b.fetchOnce(req)
		}
	}
}

type fetchResult struct {
	resp       *kmsg.FetchResponse
	splices    []Splice
	bytes      int64
	partitions []*replica.Partition
	failed     bool // a partition has an error: answer at once, as Kafka does
}

func (f *fetchResult) response() *Response {
	return &Response{Body: f.resp, Splices: f.splices}
}

// fetchOnce reads every requested partition once.
func (b *Broker) fetchOnce(req *kmsg.FetchRequest) *fetchResult {
	res := &fetchResult{resp: req.ResponseKind().(*kmsg.FetchResponse)}
	budget := int64(req.MaxBytes)
	if req.Version < 3 || budget <= 0 {
		budget = 1 << 62
	}
	readCommitted := req.IsolationLevel == 1
	for _, rt := range req.Topics {
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
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			if readCommitted {
				sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			var err error
			switch {
			case !found && req.Version >= 13:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case !found:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				err = b.fetchPartition(res, t.Name, &rp, &sp, &budget, readCommitted)
				sp.ErrorCode = errorCode(err)
			}
			if sp.ErrorCode != 0 {
				res.failed = true
			}
			st.Partitions = append(st.Partitions, sp)
		}
		res.resp.Topics = append(res.resp.Topics, st)
	}
	return res
}

func (b *Broker) fetchPartition(res *fetchResult, topic string, rp *kmsg.FetchRequestTopicPartition,
	sp *kmsg.FetchResponseTopicPartition, budget *int64, readCommitted bool) error {
	p, ok := b.Replicas.Get(model.TopicPartition{Topic: topic, Partition: rp.Partition})
	if !ok {
		return replica.ErrUnknownPartition
	}
	res.partitions = append(res.partitions, p)
	if e := rp.CurrentLeaderEpoch; e >= 0 && e != p.LeaderEpoch() {
		if e < p.LeaderEpoch() {
			return errFencedLeaderEpoch
		}
		return errUnknownLeaderEpoch
	}
	sp.HighWatermark = p.HighWatermark()
	sp.LastStableOffset = p.LastStableOffset()
	sp.LogStartOffset = p.Log().StartOffset()
	limit := min(int64(rp.PartitionMaxBytes), *budget)
	if limit <= 0 && res.bytes > 0 {
		return nil
	}
	sec, err := p.Read(rp.FetchOffset, int(max(limit, 0)), readCommitted)
	if err != nil {
		return err
	}
	// Only the first partition with data may exceed the limits.
	if sec.Size == 0 || (sec.Size > limit && res.bytes > 0) {
		return nil
	}
	s := NewSplice(sec)
	sp.RecordBatches = s.Marker
	res.splices = append(res.splices, s)
	res.bytes += sec.Size
	*budget -= sec.Size
	return nil
}

var (
	errFencedLeaderEpoch  = errors.New("fenced leader epoch")
	errUnknownLeaderEpoch = errors.New("unknown leader epoch")
)
