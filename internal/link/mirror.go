package link

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// mirrorPart is a mirror partition this broker leads, at one leader epoch.
type mirrorPart struct {
	p       *replica.Partition
	topicID [16]byte
	epoch   int32 // this cluster's leader epoch when it was handed over

	// sourceEpoch is the source leader's epoch, as its metadata said: the
	// runner sets it, the loop reads it.
	sourceEpoch atomic.Int32

	mu lockrank.Mutex[lockrank.Worker] // guards what follows: the loop writes, status reads
	// lastSourceEpoch is the source's leader epoch of the last batch
	// mirrored (-1: unknown), sent as LastFetchedEpoch so that the source
	// says when it truncated what was mirrored (KIP-320's check).
	lastSourceEpoch int32
	sourceHW        int64 // -1 until the first answer
	sourceLSO       int64
	sourceStart     int64
	fetchedAt       time.Time // the last answer
	caughtUpAt      time.Time // the last time the mirror held all the source had
	bytesPerRecord  float64   // of what was mirrored, for the bytes behind
	err             error     // the last failure, cleared by a good answer
	errAt           time.Time
	stopped         string // why the mirror stopped, "" while it runs
	// verified: the mirror's last batch is known to be the source's (see
	// verify); cleared when the source's leader epoch changes or the
	// source says its log ends before the mirror's.
	verified   bool
	sourceSeen int32 // the source leader epoch verified at
	// truncations counts the times the mirror was cut to match its
	// source; lastTruncation says the last one.
	truncations    int
	lastTruncation string
}

func (mp *mirrorPart) setErr(err error, now time.Time) {
	mp.mu.Lock()
	mp.err, mp.errAt = err, now
	mp.mu.Unlock()
}

// sourceLoop fetches the mirror partitions led here whose source
// partition one source broker leads.
type sourceLoop struct {
	r      *runner
	node   int32
	ctx    context.Context
	cancel context.CancelFunc
	parts  atomic.Pointer[[]*mirrorPart]
	wake   chan struct{}

	// The fetch session with the source broker (KIP-227), as the replica
	// fetcher keeps one: after a full fetch, each names only the
	// partitions whose fetch changed, and those no longer fetched.
	sessionID, sessionEpoch int32
	sent                    map[sessionKey]sentPartition
}

// sentPartition is a partition's fetch as the session last sent it.
type sentPartition struct {
	topic                   string
	offset                  int64
	currentEpoch, lastEpoch int32
}

func newSourceLoop(r *runner, node int32) *sourceLoop {
	ctx, cancel := context.WithCancel(r.ctx)
	return &sourceLoop{r: r, node: node, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
}

func (l *sourceLoop) setParts(parts []*mirrorPart) {
	l.parts.Store(&parts)
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *sourceLoop) run() {
	backoff := 100 * time.Millisecond
	for l.ctx.Err() == nil {
		err := l.fetchOnce()
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		if l.ctx.Err() != nil {
			return
		}
		l.r.refresh()
		select {
		case <-l.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// fetchOnce sends one fetch for the loop's partitions and writes what it
// brings.
func (l *sourceLoop) fetchOnce() error {
	r := l.r
	now := r.m.cfg.Now()
	parts := *l.parts.Load()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.ReplicaState.ID = -1
	req.MaxWaitMillis = int32(r.m.cfg.MaxWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = 32 << 20
	req.IsolationLevel = 0 // read uncommitted: aborted data and markers too
	if rate := r.maxBytesPerSec(); rate > 0 {
		req.MaxBytes = int32(min(32<<20, max(rate, 64<<10)))
	}
	incremental := l.sessionEpoch > 0
	req.SessionID, req.SessionEpoch = l.sessionID, l.sessionEpoch
	byKey := map[sessionKey]*mirrorPart{}
	topicAt := map[string]int{}
	fetching := map[sessionKey]sentPartition{}
	for _, mp := range parts {
		if err := l.verify(mp); err != nil {
			mp.setErr(err, now)
			continue
		}
		mp.mu.Lock()
		stopped, lastEpoch := mp.stopped != "", mp.lastSourceEpoch
		mp.mu.Unlock()
		if stopped || mp.p.MirrorOf() == "" {
			continue
		}
		tp := mp.p.TP
		key := sessionKey{id: mp.topicID, partition: tp.Partition}
		byKey[key] = mp
		byKey[sessionKey{name: tp.Topic, partition: tp.Partition}] = mp
		st := sentPartition{topic: tp.Topic, offset: mp.p.Log().EndOffset(), currentEpoch: mp.sourceEpoch.Load(), lastEpoch: lastEpoch}
		fetching[key] = st
		if incremental && l.sent[key] == st {
			continue // the session has it as it is
		}
		i, ok := topicAt[tp.Topic]
		if !ok {
			i = len(req.Topics)
			topicAt[tp.Topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = tp.Topic, mp.topicID
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = tp.Partition
		p.CurrentLeaderEpoch = st.currentEpoch
		p.FetchOffset = st.offset
		p.LastFetchedEpoch = st.lastEpoch
		p.LogStartOffset = -1
		p.PartitionMaxBytes = 4 << 20
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	if incremental {
		forgotten := map[[16]byte]int{}
		for key, st := range l.sent {
			if _, ok := fetching[key]; ok {
				continue
			}
			i, ok := forgotten[key.id]
			if !ok {
				i = len(req.ForgottenTopics)
				forgotten[key.id] = i
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.Topic, ft.TopicID = st.topic, key.id
				req.ForgottenTopics = append(req.ForgottenTopics, ft)
			}
			req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, key.partition)
		}
	}
	if len(fetching) == 0 {
		l.resetSession()
		select {
		case <-l.ctx.Done():
		case <-l.wake:
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(l.ctx, r.m.cfg.MaxWait+15*time.Second)
	defer cancel()
	kresp, err := r.cl.Broker(int(l.node)).Request(ctx, req)
	if err != nil {
		l.resetSession()
		for _, mp := range byKey {
			mp.setErr(err, now)
		}
		return err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		// FETCH_SESSION_ID_NOT_FOUND (the source restarted or evicted
		// it), INVALID_FETCH_SESSION_EPOCH, or another: start afresh.
		l.resetSession()
		for _, mp := range byKey {
			mp.setErr(err, now)
		}
		return err
	}
	if resp.SessionID == 0 {
		l.sessionID, l.sessionEpoch, l.sent = 0, 0, nil // no session: every fetch is full
	} else {
		l.sessionID, l.sent = resp.SessionID, fetching
		if l.sessionEpoch++; l.sessionEpoch <= 0 {
			l.sessionEpoch = 1
		}
	}
	fetched := 0
	now = r.m.cfg.Now()
	var (
		written []*replica.Partition
		ends    []int64
		waits   []func() error
		wparts  []*mirrorPart
		failed  error
	)
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			mp := byKey[sessionKey{id: t.TopicID, partition: rp.Partition}]
			if mp == nil {
				mp = byKey[sessionKey{name: t.Topic, partition: rp.Partition}]
			}
			if mp == nil {
				continue
			}
			fetched += len(rp.RecordBatches)
			end, wait, err := l.apply(mp, rp, now)
			if err != nil {
				mp.setErr(err, now)
				failed = err
				continue
			}
			if wait != nil {
				written, ends, waits, wparts = append(written, mp.p), append(ends, end), append(waits, wait), append(wparts, mp)
			}
		}
	}
	for i, err := range replica.SyncAppends(written, ends) {
		if err == nil {
			err = waits[i]()
		}
		if err != nil {
			wparts[i].setErr(err, now)
			failed = err
		}
	}
	if failed != nil {
		// A partition that failed is fetched again from where it is: the
		// session's view of it may be ahead.
		l.resetSession()
	}
	r.throttle(l.ctx, fetched)
	return failed
}

// resetSession makes the next fetch a full one that opens a new session.
func (l *sourceLoop) resetSession() {
	l.sessionID, l.sessionEpoch, l.sent = 0, 0, nil
}

// sessionKey names a partition in a fetch answer: by topic id (v13+) or
// by name.
type sessionKey struct {
	id        [16]byte
	name      string
	partition int32
}

// apply writes one partition's answer. It returns the new end and the
// wait of an append, or no wait when nothing was written.
func (l *sourceLoop) apply(mp *mirrorPart, rp *kmsg.FetchResponseTopicPartition, now time.Time) (int64, func() error, error) {
	r := l.r
	p := mp.p
	switch err := kerr.ErrorForCode(rp.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.OffsetOutOfRange):
		return -1, nil, l.outOfRange(mp)
	default:
		// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_ID,
		// ...: the source's metadata moved.
		r.refresh()
		return -1, nil, err
	}
	if rp.DivergingEpoch.Epoch >= 0 || rp.DivergingEpoch.EndOffset >= 0 {
		// The source truncated what was mirrored (KIP-320's answer):
		// cut there, where the mirror's part of that epoch ends too,
		// then verify what is left before fetching on.
		at := min(rp.DivergingEpoch.EndOffset, p.Log().EndOffset())
		if mine, mineEnd := p.Log().SourceEpochEnd(rp.DivergingEpoch.Epoch); mine >= 0 {
			at = min(at, mineEnd)
		}
		if err := l.truncate(mp, at, fmt.Sprintf("the source's epoch %d ends at %d", rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset)); err != nil {
			return -1, nil, err
		}
		return -1, nil, nil
	}
	// An empty mirror takes a first batch that holds its start whole (the
	// source's log start may lie inside it): the log keeps the start.
	data := skipBelow(log.WholeBatches(rp.RecordBatches), p.Log().EndOffset())
	var (
		res  replica.MirrorAppend
		wait func() error
	)
	if len(data) > 0 {
		// The source's producer ids are reserved here before their data
		// can be read (and a promotion can follow): a producer of this
		// cluster never gets one of them.
		if err := r.m.reserveProducerIDs(maxProducerID(data)); err != nil {
			return -1, nil, err
		}
		var err error
		res, wait, err = p.AppendMirrored(data)
		if err != nil {
			return -1, nil, err
		}
	}
	if rp.LogStartOffset > p.Log().StartOffset() {
		if _, err := p.MirrorLogStart(rp.LogStartOffset); err != nil && !errors.Is(err, replica.ErrOffsetOutOfRange) {
			return -1, nil, err
		}
	}
	end := p.Log().EndOffset()
	mp.mu.Lock()
	if res.LastSourceEpoch >= 0 {
		mp.lastSourceEpoch = res.LastSourceEpoch
	}
	if len(data) > 0 {
		mp.bytesPerRecord = float64(len(data)) / float64(max(1, res.Records))
	}
	mp.sourceHW, mp.sourceLSO, mp.sourceStart = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
	mp.fetchedAt, mp.err = now, nil
	if end >= rp.HighWatermark {
		mp.caughtUpAt = now
	}
	mp.mu.Unlock()
	if wait == nil {
		return end, nil, nil
	}
	return end, wait, nil
}

// outOfRange handles a fetch past the source's end or below its start.
func (l *sourceLoop) outOfRange(mp *mirrorPart) error {
	ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
	defer cancel()
	start, hw, err := sourceOffsets(ctx, l.r.cl, mp.p.TP)
	if err != nil {
		return err
	}
	end := mp.p.Log().EndOffset()
	switch {
	case end < start:
		// The source deleted what the mirror lacks: the mirror starts
		// again at the source's start.
		l.r.logger.Info("the mirror starts again at the source's log start", "partition", mp.p.TP.String(),
			"end", end, "source_start", start)
		return mp.p.MirrorStartAt(start)
	case end > hw:
		// The source's log ends below the mirror's: it lost what the
		// mirror copied (an unclean leader election there). Verify
		// before the next fetch, which cuts the mirror to what they
		// share.
		mp.mu.Lock()
		mp.verified = false
		mp.mu.Unlock()
	}
	return nil
}

// maxVerifySteps bounds how many times verify cuts before it gives up: an
// unclean election loses little, a mirror of another log loses all.
const maxVerifySteps = 10_000

// verify makes sure, before a mirror fetches on, that its log is a prefix
// of the source's, and cuts it until it is: when this broker starts to
// lead the mirror, when the source's leader epoch has changed, and when
// the source's log ends before the mirror's. It asks as KIP-320's
// consumers do: where does the source epoch of the mirror's last batch
// end at the source (OffsetForLeaderEpoch)? The mirror's log keeps the
// source's epochs of its batches (log.SourceEpochAt). Where they are
// unknown (a follower's copy became the leader) or do not tell, the
// mirror's last batch is compared with the source's batch at that offset
// (same base offset and CRC), and the mirror is cut batch by batch until
// they agree. A batch the source no longer has (retention moved its start
// past it) cannot be checked and is taken as it is. The source epoch of
// the last batch is then sent as LastFetchedEpoch, so that a Kafka source
// says at once when it truncates later.
func (l *sourceLoop) verify(mp *mirrorPart) error {
	epoch := mp.sourceEpoch.Load()
	mp.mu.Lock()
	if mp.verified && mp.sourceSeen == epoch || mp.stopped != "" {
		mp.mu.Unlock()
		return nil
	}
	mp.mu.Unlock()
	p := mp.p
	done := func(last int32) error {
		mp.mu.Lock()
		mp.lastSourceEpoch, mp.verified, mp.sourceSeen = last, true, epoch
		mp.mu.Unlock()
		return nil
	}
	byEpochs := true
	for range maxVerifySteps {
		end := p.Log().EndOffset()
		if end == p.Log().StartOffset() {
			return done(-1) // empty: nothing to check
		}
		if se := p.Log().SourceEpochAt(end - 1); byEpochs && se >= 0 {
			srcEpoch, srcEnd, err := l.sourceEpochEnd(mp, se)
			if err != nil {
				return err
			}
			if srcEpoch == se && srcEnd >= end {
				return done(se)
			}
			// The source's largest epoch up to se, and where it ends
			// there; the mirror keeps what it holds of that epoch
			// below that end, as a Kafka follower truncates.
			at := int64(-1)
			if srcEpoch >= 0 {
				if mine, mineEnd := p.Log().SourceEpochEnd(srcEpoch); mine >= 0 {
					at = min(srcEnd, mineEnd)
				}
			}
			if at < 0 || at >= end {
				byEpochs = false // the epochs do not tell: compare the batches
				continue
			}
			if err := l.truncate(mp, at, fmt.Sprintf("the source's epoch %d ends at %d", srcEpoch, srcEnd)); err != nil {
				return err
			}
			continue
		}
		last, err := lastBatch(p, end)
		if err != nil {
			return err
		}
		src, ok, err := l.sourceBatchAt(mp, last.BaseOffset())
		if err != nil {
			return err
		}
		if !ok {
			return done(-1)
		}
		if len(src) >= model.BatchHeaderSize && src.BaseOffset() == last.BaseOffset() && src.CRC() == last.CRC() {
			se := src.PartitionLeaderEpoch()
			if p.Log().SourceEpochAt(last.BaseOffset()) != se {
				// Unknown, or not the source's: from this batch on
				// they are known again.
				if err := p.Log().ResetSourceEpochs(se, last.BaseOffset()); err != nil {
					return err
				}
			}
			return done(se)
		}
		if err := l.truncate(mp, last.BaseOffset(), "its batch there differs from the mirror's"); err != nil {
			return err
		}
	}
	reason := fmt.Sprintf("the mirror was cut %d times and still differs from the source", maxVerifySteps)
	l.stop(mp, reason)
	return errors.New(reason)
}

// ask sends one request of verify's to the loop's source broker.
func (l *sourceLoop) ask(req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(l.ctx, 15*time.Second)
	defer cancel()
	return l.r.cl.Broker(int(l.node)).Request(ctx, req)
}

// sourceEpochEnd asks the source's leader where its epoch (the largest at
// or below epoch it has) ends: OffsetForLeaderEpoch, as a consumer asks.
// It returns -1, -1 when the source has no such epoch.
func (l *sourceLoop) sourceEpochEnd(mp *mirrorPart, epoch int32) (int32, int64, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	t := kmsg.NewOffsetForLeaderEpochRequestTopic()
	t.Topic = mp.p.TP.Topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = mp.p.TP.Partition, mp.sourceEpoch.Load(), epoch
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	kresp, err := l.ask(req)
	if err != nil {
		return -1, -1, err
	}
	for _, rt := range kresp.(*kmsg.OffsetForLeaderEpochResponse).Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				l.r.refresh()
				return -1, -1, err
			}
			return rp.LeaderEpoch, rp.EndOffset, nil
		}
	}
	return -1, -1, fmt.Errorf("%s: the source's answer names no partition", mp.p.TP)
}

// truncate cuts a mirror to offset, where it and its source agree, and
// says so.
func (l *sourceLoop) truncate(mp *mirrorPart, offset int64, why string) error {
	end := mp.p.Log().EndOffset()
	if offset >= end {
		return nil
	}
	if err := mp.p.MirrorTruncate(offset); err != nil {
		return err
	}
	msg := fmt.Sprintf("cut from %d to %d at %s: the source no longer has what the mirror held (%s)", end, offset,
		l.r.m.cfg.Now().UTC().Format(time.RFC3339), why)
	mp.mu.Lock()
	mp.truncations++
	mp.lastTruncation = msg
	mp.verified, mp.lastSourceEpoch = false, -1
	mp.mu.Unlock()
	l.r.logger.Warn("the source truncated its log (an unclean leader election there): the mirror is cut to match",
		"partition", mp.p.TP.String(), "from", end, "to", offset, "why", why)
	return nil
}

// lastBatch reads the mirror's batch that ends at end.
func lastBatch(p *replica.Partition, end int64) (model.Batch, error) {
	sec, err := p.ReadToLogEnd(end-1, 1<<20)
	if err != nil {
		return nil, err
	}
	data, err := sec.ReadAll()
	if err != nil {
		return nil, err
	}
	var last model.Batch
	r := model.NewBatchReader(data)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		last = b
	}
	if last == nil {
		return nil, fmt.Errorf("%s: no batch ends at %d", p.TP, end)
	}
	return last, nil
}

// sourceBatchAt fetches the source's batch that holds offset: none (and
// ok) when the source's log ends before it; ok is false when the source
// no longer has it (below its log start), so it cannot be checked.
func (l *sourceLoop) sourceBatchAt(mp *mirrorPart, offset int64) (model.Batch, bool, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID = -1, -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
	req.SessionID, req.SessionEpoch = 0, -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = mp.p.TP.Topic, mp.topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = mp.p.TP.Partition, offset,
		mp.sourceEpoch.Load(), -1, -1
	fp.PartitionMaxBytes = 1 << 20
	t.Partitions = append(t.Partitions, fp)
	req.Topics = append(req.Topics, t)
	kresp, err := l.ask(req)
	if err != nil {
		return nil, false, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, false, err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			switch err := kerr.ErrorForCode(rp.ErrorCode); {
			case errors.Is(err, kerr.OffsetOutOfRange):
				ctx, cancel := context.WithTimeout(l.ctx, 15*time.Second)
				start, _, err := sourceOffsets(ctx, l.r.cl, mp.p.TP)
				cancel()
				if err != nil {
					return nil, false, err
				}
				if offset < start {
					return nil, false, nil // gone at the source: cannot be checked
				}
				return nil, true, nil // past the source's end: differs
			case err != nil:
				l.r.refresh()
				return nil, false, err
			}
			b, ok := model.NewBatchReader(rp.RecordBatches).Next()
			if !ok {
				return nil, true, nil // nothing there now: differs
			}
			return b, true, nil
		}
	}
	return nil, false, fmt.Errorf("%s: the source's answer names no partition", mp.p.TP)
}

// stop stops mirroring one partition, and says why.
func (l *sourceLoop) stop(mp *mirrorPart, reason string) {
	mp.mu.Lock()
	first := mp.stopped == ""
	mp.stopped = reason
	mp.mu.Unlock()
	if first {
		l.r.logger.Error("mirroring stopped for a partition", "partition", mp.p.TP.String(), "reason", reason)
	}
}

// sourceOffsets reads a source partition's log start and high watermark.
func sourceOffsets(ctx context.Context, cl *kgo.Client, tp model.TopicPartition) (start, hw int64, err error) {
	offs, err := listOffsets(ctx, cl, map[string][]int32{tp.Topic: {tp.Partition}}, -2, 0)
	if err != nil {
		return 0, 0, err
	}
	ends, err := listOffsets(ctx, cl, map[string][]int32{tp.Topic: {tp.Partition}}, -1, 0)
	if err != nil {
		return 0, 0, err
	}
	return offs[tp], ends[tp], nil
}

// listOffsets asks for the offsets at timestamp (-1 latest, -2 earliest)
// of the partitions, with the isolation level (0 read uncommitted: the
// high watermark; 1 read committed: the last stable offset).
func listOffsets(ctx context.Context, cl *kgo.Client, parts map[string][]int32, ts int64, isolation int8) (map[model.TopicPartition]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	for topic, ps := range parts {
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[model.TopicPartition]int64{}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			tp := model.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", tp, err))
				continue
			}
			out[tp] = p.Offset
		}
	}
	return out, errors.Join(errs...)
}

// skipBelow drops the whole batches that end below offset.
func skipBelow(data []byte, offset int64) []byte {
	r := model.NewBatchReader(data)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		if b.LastOffset() >= offset {
			return data[r.Pos()-len(b):]
		}
	}
	return r.Rest()
}

// maxProducerID is the largest producer id of whole batches, -1 for none.
func maxProducerID(data []byte) int64 {
	id := int64(-1)
	r := model.NewBatchReader(data)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		id = max(id, b.ProducerID())
	}
	return id
}

// reserveProducerIDs reserves, in the metadata, every producer id up to
// id, unless it already is.
func (m *Manager) reserveProducerIDs(id int64) error {
	if id <= m.reserved.Load() {
		return nil
	}
	m.reserveMu.Lock()
	defer m.reserveMu.Unlock()
	if id <= m.reserved.Load() {
		return nil
	}
	if err := m.cfg.Store.ReserveProducerIDs(id); err != nil {
		return fmt.Errorf("reserving the source's producer ids: %w", err)
	}
	m.reserved.Store(id)
	return nil
}

// maxBytesPerSec is the link's byte rate limit, 0 for none.
func (r *runner) maxBytesPerSec() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.link.MaxBytesPerSec
}

// throttle holds a loop after a fetch of n bytes for as long as the
// link's byte rate asks, shared by the link's loops on this broker.
func (r *runner) throttle(ctx context.Context, n int) {
	rate := r.maxBytesPerSec()
	if rate <= 0 || n <= 0 {
		return
	}
	now := r.m.cfg.Now()
	r.throttleMu.Lock()
	if r.nextFetch.Before(now) {
		r.nextFetch = now
	}
	r.nextFetch = r.nextFetch.Add(time.Duration(float64(n) / float64(rate) * float64(time.Second)))
	wait := r.nextFetch.Sub(now)
	r.throttleMu.Unlock()
	if wait <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(wait):
	}
}
