package fetcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/replica"
)

// Assignment is one partition to follow: from which leader, at which
// leader epoch.
type Assignment struct {
	Partition   *replica.Partition
	TopicID     [16]byte
	Leader      int32
	LeaderEpoch int32
	// Throttled: the topic's follower.replication.throttled.replicas names
	// this replica; out of sync, it copies within Config.Throttle.
	Throttled bool
}

// Config configures a Fetcher.
type Config struct {
	Self int32
	// BrokerEpoch is this broker's registration epoch, sent in every fetch.
	BrokerEpoch func() int64
	// Client reaches the leaders. The fetcher's requests wait on the
	// leader (long polls), so it should have connections of its own.
	Client *peer.Client
	// MaxWait is how long a fetch waits at the leader for new data
	// (replica.fetch.wait.max.ms, default 500 ms).
	MaxWait time.Duration
	// Backoff is the wait after a failed fetch (replica.fetch.backoff.ms,
	// default 1 s).
	Backoff time.Duration
	// Throttle caps what the throttled replicas out of sync copy
	// (follower.replication.throttled.rate); nil for none.
	Throttle *replica.Throttle
	Logger   *slog.Logger
}

// Fetcher runs one loop per leader this broker follows partitions of.
type Fetcher struct {
	cfg Config

	mu     lockrank.Mutex[lockrank.Subsystem]
	loops  map[int32]*leaderLoop
	closed bool
	wg     sync.WaitGroup
}

// New returns a fetcher that follows nothing yet.
func New(cfg Config) *Fetcher {
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Fetcher{cfg: cfg, loops: map[int32]*leaderLoop{}}
}

// Set makes the fetcher follow exactly these partitions. A partition whose
// leader or leader epoch changed starts afresh, with truncation.
func (f *Fetcher) Set(follow []Assignment) {
	byLeader := map[int32]map[model.TopicPartition]Assignment{}
	for _, a := range follow {
		m := byLeader[a.Leader]
		if m == nil {
			m = map[model.TopicPartition]Assignment{}
			byLeader[a.Leader] = m
		}
		m[a.Partition.TP] = a
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	for leader, l := range f.loops {
		if _, ok := byLeader[leader]; !ok {
			l.stop()
			delete(f.loops, leader)
		}
	}
	for leader, parts := range byLeader {
		l := f.loops[leader]
		if l == nil {
			l = newLeaderLoop(f, leader)
			f.loops[leader] = l
			f.wg.Go(l.run)
		}
		l.assign(parts)
	}
}

// Close stops every loop and waits for them.
func (f *Fetcher) Close() {
	f.mu.Lock()
	f.closed = true
	for _, l := range f.loops {
		l.stop()
	}
	f.loops = nil
	f.mu.Unlock()
	f.wg.Wait()
}

// following is one partition's state in its loop.
type following struct {
	Assignment
	truncated bool // truncated to the leader's log at this epoch
}

// leaderLoop fetches every partition followed from one leader.
type leaderLoop struct {
	f      *Fetcher
	leader int32
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	logger *slog.Logger

	mu    lockrank.Mutex[lockrank.Worker]
	parts map[model.TopicPartition]*following

	// The fetch session with the leader (KIP-227), used by run alone: its
	// id, the epoch the next fetch carries (0 opens a session), and what
	// the session holds of each partition, as last sent.
	sessionID    int32
	sessionEpoch int32
	sent         map[model.TopicPartition]sentState
}

// sentState is what a fetch told the leader of one partition. A partition
// whose state is unchanged is left out of an incremental fetch: the
// leader's session still has it.
type sentState struct {
	topicID     [16]byte
	leaderEpoch int32
	offset      int64
	logStart    int64
}

func newLeaderLoop(f *Fetcher, leader int32) *leaderLoop {
	ctx, cancel := context.WithCancel(context.Background())
	return &leaderLoop{f: f, leader: leader, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1),
		logger: f.cfg.Logger.With("component", "fetcher", "leader", leader),
		parts:  map[model.TopicPartition]*following{}}
}

func (l *leaderLoop) stop() { l.cancel() }

// assign replaces the loop's partitions, keeping the state of those whose
// assignment is unchanged.
func (l *leaderLoop) assign(parts map[model.TopicPartition]Assignment) {
	l.mu.Lock()
	next := make(map[model.TopicPartition]*following, len(parts))
	for tp, a := range parts {
		if cur := l.parts[tp]; cur != nil && cur.Assignment == a {
			next[tp] = cur
			continue
		}
		next[tp] = &following{Assignment: a}
	}
	l.parts = next
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// snapshot returns the partitions to work on now.
func (l *leaderLoop) snapshot() map[model.TopicPartition]*following {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.parts)
}

// current reports whether fp is still the loop's assignment for its
// partition (Set may have replaced it during a request).
func (l *leaderLoop) current(fp *following) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.parts[fp.Partition.TP] == fp
}

func (l *leaderLoop) run() {
	for l.ctx.Err() == nil {
		parts := l.snapshot()
		var err error
		if len(parts) > 0 {
			err = l.truncate(parts)
			if err == nil {
				err = l.fetch(parts)
			}
		}
		if err == nil && len(parts) > 0 {
			continue
		}
		wait := l.f.cfg.Backoff
		switch {
		case errors.Is(err, errThrottled):
			wait = max(l.f.cfg.Throttle.Wait(), 10*time.Millisecond)
		case err != nil && l.ctx.Err() == nil:
			l.logger.Debug("fetching from the leader failed", "err", err)
		}
		if len(parts) == 0 {
			wait = time.Hour
		}
		select {
		case <-l.ctx.Done():
		case <-l.wake:
		case <-time.After(wait):
		}
	}
}

// truncate brings the partitions that start at a new leader epoch in line
// with the leader's log: each asks where its own latest epoch ends there.
func (l *leaderLoop) truncate(parts map[model.TopicPartition]*following) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 4
	req.ReplicaID = l.f.cfg.Self
	asked := map[model.TopicPartition]int32{}
	byTopic := map[string]int{}
	for tp, fp := range parts {
		if fp.truncated {
			continue
		}
		epochs := fp.Partition.Log().Epochs()
		if len(epochs) == 0 {
			fp.truncated = true // nothing of its own to lose
			continue
		}
		latest := epochs[len(epochs)-1].Epoch
		asked[tp] = latest
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch, p.LeaderEpoch = tp.Partition, fp.LeaderEpoch, latest
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	if len(asked) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
	defer cancel()
	kresp, err := l.f.cfg.Client.Request(ctx, l.leader, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
	var errs []error
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			tp := model.TopicPartition{Topic: t.Topic, Partition: rp.Partition}
			fp, ok := parts[tp]
			if !ok || fp.truncated {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				errs = append(errs, err)
				continue
			}
			target := l.truncationPoint(fp.Partition, asked[tp], rp.LeaderEpoch, rp.EndOffset)
			if !l.current(fp) {
				continue
			}
			if end := fp.Partition.Log().EndOffset(); target < end {
				l.logger.Info("truncating a follower's log to its leader's", "partition", tp.String(),
					"from", end, "to", target, "leader_epoch", fp.LeaderEpoch)
			}
			if err := fp.Partition.TruncateTo(target); err != nil {
				errs = append(errs, err)
				continue
			}
			fp.truncated = true
		}
	}
	return errors.Join(errs...)
}

// truncationPoint is where a follower whose latest epoch is asked cuts its
// log, given the leader's answer (KIP-279): the end of the largest epoch
// both logs have, at most the follower's own end.
func (l *leaderLoop) truncationPoint(p *replica.Partition, asked, leaderEpoch int32, leaderEnd int64) int64 {
	end := p.Log().EndOffset()
	switch {
	case leaderEpoch < 0 || leaderEnd < 0:
		// The leader has no epoch up to ours: keep only what is committed.
		return min(p.HighWatermark(), end)
	case leaderEpoch == asked:
		return min(leaderEnd, end)
	default:
		_, own := p.Log().EpochEndOffset(leaderEpoch)
		if own < 0 {
			own = end
		}
		return min(leaderEnd, own, end)
	}
}

// fetch sends one fetch for the partitions ready to fetch and writes what
// comes back. Within a fetch session it names only the partitions whose
// fetch state changed since the last fetch, and those to forget; the
// leader fetches the rest as the session holds them and answers only the
// partitions with news.
func (l *leaderLoop) fetch(parts map[model.TopicPartition]*following) error {
	now := map[model.TopicPartition]sentState{}
	byKey := map[sessionKey]model.TopicPartition{}
	throttled := map[model.TopicPartition]bool{}
	held := false
	for tp, fp := range parts {
		if !fp.truncated {
			continue
		}
		if fp.Throttled && !slices.Contains(fp.Partition.ReplicaSet().ISR, l.f.cfg.Self) {
			// Kafka's follower quota: a throttled replica out of sync
			// sits out a fetch while the rate is spent.
			if l.f.cfg.Throttle.Exceeded() {
				held = true
				continue
			}
			throttled[tp] = true
		}
		now[tp] = sentState{topicID: fp.TopicID, leaderEpoch: fp.LeaderEpoch,
			offset: fp.Partition.Log().EndOffset(), logStart: fp.Partition.Log().StartOffset()}
		byKey[sessionKey{fp.TopicID, tp.Partition}] = tp
	}
	if len(now) == 0 {
		if held {
			return errThrottled
		}
		return errors.New("no partition is ready to fetch")
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = 15
	req.ReplicaState.ID = l.f.cfg.Self
	req.ReplicaState.Epoch = l.f.cfg.BrokerEpoch()
	req.MaxWaitMillis = int32(l.f.cfg.MaxWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = 10 << 20
	req.SessionID, req.SessionEpoch = l.sessionID, l.sessionEpoch
	incremental := l.sessionEpoch > 0
	byID := map[[16]byte]int{}
	for tp, st := range now {
		if incremental && l.sent[tp] == st {
			continue
		}
		i, ok := byID[st.topicID]
		if !ok {
			i = len(req.Topics)
			byID[st.topicID] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = tp.Topic, st.topicID
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = tp.Partition
		p.CurrentLeaderEpoch = st.leaderEpoch
		p.FetchOffset = st.offset
		p.LogStartOffset = st.logStart
		p.LastFetchedEpoch = -1
		p.PartitionMaxBytes = 1 << 20
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	if incremental {
		forgotten := map[[16]byte]int{}
		for tp, st := range l.sent {
			if _, ok := now[tp]; ok {
				continue
			}
			i, ok := forgotten[st.topicID]
			if !ok {
				i = len(req.ForgottenTopics)
				forgotten[st.topicID] = i
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.Topic, ft.TopicID = tp.Topic, st.topicID
				req.ForgottenTopics = append(req.ForgottenTopics, ft)
			}
			req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, tp.Partition)
		}
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.f.cfg.MaxWait+10*time.Second)
	defer cancel()
	kresp, err := l.f.cfg.Client.Request(ctx, l.leader, req)
	if err != nil {
		l.resetSession()
		return err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		// FETCH_SESSION_ID_NOT_FOUND (the leader restarted or evicted
		// it), INVALID_FETCH_SESSION_EPOCH, or another: start afresh.
		l.resetSession()
		return err
	}
	if resp.SessionID == 0 {
		l.sessionID, l.sessionEpoch, l.sent = 0, 0, nil // no session: every fetch is full
	} else {
		l.sessionID, l.sent = resp.SessionID, now
		if l.sessionEpoch++; l.sessionEpoch <= 0 {
			l.sessionEpoch = 1
		}
	}
	var (
		errs       []error
		written    []*replica.Partition // appended to, to sync together
		ends       []int64
		hws        []int64
		outOfRange []*following
	)
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			tp, ok := byKey[sessionKey{t.TopicID, rp.Partition}]
			if !ok {
				continue
			}
			fp := parts[tp]
			if !l.current(fp) {
				continue
			}
			if throttled[tp] {
				l.f.cfg.Throttle.Record(len(rp.RecordBatches))
			}
			end, err := l.apply(fp, &rp)
			switch {
			case errors.Is(err, kerr.OffsetOutOfRange):
				outOfRange = append(outOfRange, fp)
			case err != nil:
				errs = append(errs, err)
			case end >= 0:
				written, ends, hws = append(written, fp.Partition), append(ends, end), append(hws, rp.HighWatermark)
			default:
				fp.Partition.SetLeaderHighWatermark(rp.HighWatermark)
			}
		}
	}
	// What was written is durable before the next fetch reports it
	// replicated, and before the high watermark lets consumers read it
	// here.
	for i, err := range replica.SyncAppends(written, ends) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		written[i].SetLeaderHighWatermark(hws[i])
	}
	if len(outOfRange) > 0 {
		errs = append(errs, l.outOfRange(outOfRange))
	}
	return errors.Join(errs...)
}

// outOfRange handles the partitions whose fetch offset the leader found
// out of range. Its answer carries no log start (Kafka's leader answers
// an error with unknown offsets), so the follower asks for it (ListOffsets,
// earliest), as Kafka's ReplicaFetcherThread does. A follower whose log
// ends before the leader's start (it was away while retention or
// DeleteRecords moved the start past its end) restarts its log empty at
// the leader's start and fetches on from there (truncateFullyAndStartAt).
// Any other fetched past the leader's end: it truncates again, by leader
// epoch, before it fetches.
func (l *leaderLoop) outOfRange(parts []*following) error {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(4)
	req.ReplicaID = l.f.cfg.Self
	asked := map[model.TopicPartition]*following{}
	byTopic := map[string]int{}
	for _, fp := range parts {
		tp := fp.Partition.TP
		asked[tp] = fp
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp, p.CurrentLeaderEpoch = tp.Partition, -2, fp.LeaderEpoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
	defer cancel()
	kresp, err := l.f.cfg.Client.Request(ctx, l.leader, req)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		for _, rp := range t.Partitions {
			tp := model.TopicPartition{Topic: t.Topic, Partition: rp.Partition}
			fp, ok := asked[tp]
			if !ok || !l.current(fp) {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s: the leader's log start: %w", tp, err))
				continue
			}
			p, leaderStart := fp.Partition, rp.Offset
			end := p.Log().EndOffset()
			if end >= leaderStart {
				fp.truncated = false
				errs = append(errs, fmt.Errorf("%s: fetch at %d: %w", tp, end, kerr.OffsetOutOfRange))
				continue
			}
			l.logger.Info("a follower's log ends before its leader's starts; restarting it empty at the leader's start",
				"partition", tp.String(), "end", end, "leader_start", leaderStart)
			if err := p.StartAt(leaderStart); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// errThrottled: every partition ready to fetch is throttled and the rate
// is spent.
var errThrottled = errors.New("the replication throttle holds every partition ready to fetch")

// sessionKey names a partition in a fetch answer.
type sessionKey struct {
	topicID   [16]byte
	partition int32
}

// resetSession makes the next fetch open a new session and name every
// partition. The leader drops the old one (named with epoch 0) or lets it
// expire.
func (l *leaderLoop) resetSession() {
	l.sessionEpoch, l.sent = 0, nil
}

// apply writes one partition's fetched batches and returns the new log
// end, or -1 when it wrote nothing. The caller syncs what was written and
// then takes the high watermark; on OFFSET_OUT_OF_RANGE it asks the leader
// where its log starts (outOfRange).
func (l *leaderLoop) apply(fp *following, rp *kmsg.FetchResponseTopicPartition) (int64, error) {
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return -1, err
	}
	data := log.WholeBatches(rp.RecordBatches)
	if len(data) == 0 {
		return -1, nil
	}
	return fp.Partition.AppendReplicated(data, fp.LeaderEpoch)
}
