package group

import (
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// CommitRequest is an OffsetCommit request.
type CommitRequest struct {
	Group      string
	Generation int32 // -1: a commit from outside group management
	MemberID   string
	InstanceID *string
	// RetentionTime (v2-4) sets an expiry for these offsets; <0 none.
	RetentionTime time.Duration
	Offsets       []CommitOffset
	// GroupMustExist is v9+: a commit with a generation to a group that
	// does not exist is GROUP_ID_NOT_FOUND rather than ILLEGAL_GENERATION.
	GroupMustExist bool
	// Version is the OffsetCommit version: a consumer group's members
	// commit with v9+, which carries their member epoch.
	Version int16
}

// CommitOffset is one partition's commit.
type CommitOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32 // -1 if not given
	Metadata    *string
}

// Commit serves an OffsetCommit: it checks the committer against the
// group, writes the offsets and answers once they are durable, with one
// error per offset, in order.
func (c *Coordinator) Commit(req CommitRequest) <-chan []error {
	ch := make(chan []error, 1)
	errs := make([]error, len(req.Offsets))
	failAll := func(err error) <-chan []error {
		for i := range errs {
			errs[i] = err
		}
		ch <- errs
		return ch
	}
	if req.Group == "" {
		return failAll(ErrInvalidGroupID)
	}
	if err := c.serves(req.Group); err != nil {
		return failAll(err)
	}
	g, ok := c.lookup(req.Group, false)
	if !ok {
		switch {
		case req.Generation < 0:
			// From the admin client or a consumer that assigns itself
			// partitions: a "simple" group is made for its offsets.
			g, ok = c.lookup(req.Group, true)
			if !ok {
				return failAll(ErrNotCoordinator)
			}
		case req.GroupMustExist:
			return failAll(ErrGroupIDNotFound)
		default:
			return failAll(ErrIllegalGeneration)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	check := plainCommit(req)
	if err := g.validateCommit(check); err != nil {
		return failAll(err)
	}
	g.checkOwnership(check, req.Offsets, errs)
	now := c.clock.Now().UnixMilli()
	expire := int64(-1)
	if req.RetentionTime >= 0 {
		expire = now + req.RetentionTime.Milliseconds()
	}
	b := g.commitBatch(req.Offsets, now, expire, errs)
	recs, keep := b.recs, b.keep
	if len(recs) == 0 {
		ch <- errs
		return ch
	}
	err := g.write(recs, func(base int64, err error) {
		g.offsets.inFlight--
		defer g.offsets.wakeStable()
		if err != nil {
			err = commitError(err)
			for _, i := range keep {
				errs[i] = err
			}
			ch <- errs
			return
		}
		if g.state != stateDead {
			for j, tp := range b.tps {
				v := b.vals[j]
				v.logOffset = base + int64(j)
				g.offsets.set(tp, v)
			}
		}
		ch <- errs
	})
	if err != nil {
		err = commitError(err)
		for _, i := range keep {
			errs[i] = err
		}
		ch <- errs
		return ch
	}
	g.offsets.inFlight++
	return ch
}

// commitBatch is a commit's offsets as records: keep is the request index
// of each record, tps and vals its partition and offset. An offset whose
// metadata is too large gets its error in errs and no record.
type commitBatch struct {
	recs []model.KeyValue
	keep []int
	tps  []model.TopicPartition
	vals []offset
}

func (g *group) commitBatch(offsets []CommitOffset, now, expire int64, errs []error) commitBatch {
	var b commitBatch
	for i, o := range offsets {
		if errs[i] != nil {
			continue // refused already
		}
		meta := ""
		if o.Metadata != nil {
			meta = *o.Metadata
		}
		if len(meta) > g.c.cfg.OffsetMetadataMaxBytes {
			errs[i] = ErrOffsetMetadataTooLarge
			continue
		}
		v := offset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: meta, CommitTime: now, ExpireTime: expire}
		tp := model.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		b.recs = append(b.recs, model.KeyValue{Key: offsetKey(g.id, tp), Value: offsetValue(v)})
		b.keep = append(b.keep, i)
		b.tps = append(b.tps, tp)
		b.vals = append(b.vals, v)
	}
	return b
}

// commitCheck is what a commit's validation looks at: who commits, at
// which generation or member epoch, and which partitions.
type commitCheck struct {
	memberID   string
	instanceID *string
	generation int32
	// transactional: a TxnOffsetCommit, which may carry no member and no
	// generation (v0-2) and is not refused during a rebalance.
	transactional bool
	version       int16 // the OffsetCommit version
	partitions    []model.TopicPartition
}

func plainCommit(req CommitRequest) commitCheck {
	return commitCheck{memberID: req.MemberID, instanceID: req.InstanceID, generation: req.Generation,
		version: req.Version, partitions: commitPartitions(req.Offsets)}
}

func txnCommit(req TxnCommitRequest) commitCheck {
	return commitCheck{memberID: req.MemberID, instanceID: req.InstanceID, generation: req.Generation,
		transactional: true, partitions: commitPartitions(req.Offsets)}
}

// validateCommit checks a commit against the group: one the coordinator
// no longer serves, or a deleted group's, is refused; otherwise the
// group's kind decides.
func (g *group) validateCommit(c commitCheck) error {
	switch {
	case g.unloaded:
		return ErrNotCoordinator
	case g.state == stateDead:
		return ErrCoordinatorNotAvailable
	}
	return g.kind().checkCommit(c)
}

// checkCommit is Kafka's ClassicGroup.validateOffsetCommit. A
// transactional commit differs from a plain one: one without member and
// generation is taken by a group with members (TxnOffsetCommit v0-2 carry
// neither), and a rebalance in progress does not refuse it.
func (cl *classicGroup) checkCommit(c commitCheck) error {
	switch {
	case c.generation < 0 && cl.state == stateEmpty:
		// Outside group management: allowed while no member owns
		// anything.
		return nil
	case c.generation >= 0 || c.memberID != "" || c.instanceID != nil:
		if err := cl.validateMember(c.memberID, c.instanceID); err != nil {
			return err
		}
		if c.generation != cl.generation {
			return ErrIllegalGeneration
		}
	case c.transactional:
		return nil
	default:
		// No member id and no generation: only an empty group takes it.
		return ErrUnknownMemberID
	}
	if cl.state == stateCompletingRebalance && !c.transactional {
		// A member that has its join answer but not its assignment: it
		// should commit after the rebalance.
		return ErrRebalanceInProgress
	}
	return nil
}

// commitError is Kafka's mapping of a failed offset write.
func commitError(err error) error {
	switch {
	case errors.Is(err, ErrRecordTooLarge):
		return fmt.Errorf("%w: %v", ErrInvalidCommitOffsetSize, err)
	case errors.Is(err, ErrNotCoordinator), errors.Is(err, ErrCoordinatorNotAvailable):
		return err
	}
	return fmt.Errorf("%w: %v", ErrNotCoordinator, err)
}

// FetchTopic names partitions whose offsets are asked for.
type FetchTopic struct {
	Topic      string
	Partitions []int32
}

// FetchedOffset is one partition's committed offset; Offset -1 if none.
// Err is set for a partition that cannot be answered: with RequireStable,
// ErrUnstableOffsetCommit while a transaction has an offset of it pending
// (then Offset and LeaderEpoch are -1 and Metadata empty, as Kafka
// answers).
type FetchedOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	Err         error
}

// FetchOffsets serves an OffsetFetch of one group: the offsets of the
// partitions named, or with topics nil every committed offset. Only durable
// commits are seen, and offsets of open transactions never are. With
// requireStable, a partition with an offset pending in an open transaction
// (appended, durable or not) has Err ErrUnstableOffsetCommit; the client
// retries. An unknown group has no offsets (no error).
func (c *Coordinator) FetchOffsets(groupID string, topics []FetchTopic, requireStable bool) ([]FetchedOffset, error) {
	if groupID == "" {
		return nil, ErrInvalidGroupID
	}
	if err := c.serves(groupID); err != nil {
		return nil, err
	}
	g, ok := c.lookup(groupID, false)
	var offsets map[model.TopicPartition]offset
	unstable := func(model.TopicPartition) bool { return false }
	if ok {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.unloaded {
			return nil, ErrNotCoordinator
		}
		if g.state != stateDead {
			offsets = g.offsets.committed
			if requireStable {
				unstable = g.offsets.hasPending
			}
		}
	}
	var out []FetchedOffset
	get := func(tp model.TopicPartition) FetchedOffset {
		f := FetchedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: -1, LeaderEpoch: -1}
		if unstable(tp) {
			f.Err = ErrUnstableOffsetCommit
			return f
		}
		if o, ok := offsets[tp]; ok {
			f.Offset, f.LeaderEpoch, f.Metadata = o.Offset, o.LeaderEpoch, o.Metadata
		}
		return f
	}
	if topics == nil {
		// As Kafka: the committed partitions; one with only a pending
		// offset is not listed.
		for _, tp := range sortedPartitions(offsets) {
			out = append(out, get(tp))
		}
		return out, nil
	}
	for _, t := range topics {
		for _, p := range t.Partitions {
			out = append(out, get(model.TopicPartition{Topic: t.Topic, Partition: p}))
		}
	}
	return out, nil
}

// AwaitStable returns a channel closed once the group's commits written so
// far are durable and applied (OffsetFetch with RequireStable).
func (c *Coordinator) AwaitStable(groupID string) <-chan struct{} {
	ch := make(chan struct{})
	g, ok := c.lookup(groupID, false)
	if !ok {
		close(ch)
		return ch
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.offsets.inFlight == 0 {
		close(ch)
		return ch
	}
	g.offsets.stableWaiters = append(g.offsets.stableWaiters, ch)
	return ch
}

// DeleteOffsetsResult is the answer to an OffsetDelete: Err for the
// request, else an error (or nil) per partition, in order.
type DeleteOffsetsResult struct {
	Err  error
	Errs []error
}

// DeleteOffsets serves an OffsetDelete: the offsets of topics the group
// does not subscribe to are deleted (tombstones), answered once durable.
func (c *Coordinator) DeleteOffsets(groupID string, topics []FetchTopic) <-chan DeleteOffsetsResult {
	ch := make(chan DeleteOffsetsResult, 1)
	if groupID == "" {
		ch <- DeleteOffsetsResult{Err: ErrInvalidGroupID}
		return ch
	}
	if err := c.serves(groupID); err != nil {
		ch <- DeleteOffsetsResult{Err: err}
		return ch
	}
	g, ok := c.lookup(groupID, false)
	if !ok {
		ch <- DeleteOffsetsResult{Err: ErrGroupIDNotFound}
		return ch
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.unloaded:
		ch <- DeleteOffsetsResult{Err: ErrNotCoordinator}
		return ch
	case g.state == stateDead:
		ch <- DeleteOffsetsResult{Err: ErrGroupIDNotFound}
		return ch
	case g.hasMembers() && g.protocolType != consumerProtocolType:
		ch <- DeleteOffsetsResult{Err: ErrNonEmptyGroup}
		return ch
	}
	var res DeleteOffsetsResult
	var recs []model.KeyValue
	var gone []model.TopicPartition
	for _, t := range topics {
		subscribed := g.subscribedToTopic(t.Topic)
		for _, p := range t.Partitions {
			tp := model.TopicPartition{Topic: t.Topic, Partition: p}
			if subscribed {
				res.Errs = append(res.Errs, ErrGroupSubscribedToTopic)
				continue
			}
			res.Errs = append(res.Errs, nil)
			if _, ok := g.offsets.committed[tp]; ok {
				recs = append(recs, model.KeyValue{Key: offsetKey(g.id, tp)})
				gone = append(gone, tp)
			}
		}
	}
	if len(recs) == 0 {
		ch <- res
		return ch
	}
	// Gone at once, as in Kafka: a fetch after this answer must not see
	// them, and a commit after it must not be undone. The tombstones end
	// the partitions' pending transactional offsets too (as Kafka's replay
	// of a tombstone does): a commit marker must not bring them back.
	for _, tp := range gone {
		delete(g.offsets.committed, tp)
		g.offsets.dropPending(tp)
	}
	g.hist.event(Event{Time: c.clock.Now(), Kind: EventOffsetsDeleted, Generation: g.generation, Reason: fmt.Sprint(gone)})
	err := g.write(recs, func(_ int64, err error) {
		if err != nil {
			ch <- DeleteOffsetsResult{Err: commitError(err)}
			return
		}
		ch <- res
	})
	if err != nil {
		ch <- DeleteOffsetsResult{Err: commitError(err)}
	}
	return ch
}

// expire deletes what offsets.retention.minutes has made stale: offsets
// of topics no live subscription covers, and then groups that are empty
// and have no offsets left. Runs every OffsetsRetentionCheck.
func (c *Coordinator) expire() {
	now := c.clock.Now()
	for _, g := range c.snapshot() {
		g.mu.Lock()
		g.expire(now)
		g.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.expiry = c.clock.AfterFunc(c.cfg.OffsetsRetentionCheck, c.expire)
	}
}

// expire is Kafka's cleanupExpiredOffsets and cleanupGroupMetadata for one
// group. Caller holds g.mu.
func (g *group) expire(now time.Time) {
	if g.unloaded || g.state == stateDead {
		return
	}
	base, ok := g.expiryBase()
	var recs []model.KeyValue
	var gone []model.TopicPartition
	if ok {
		ms := now.UnixMilli()
		retention := g.c.cfg.OffsetsRetention.Milliseconds()
		for tp, o := range g.offsets.committed {
			// An offset with a transactional one pending is kept until
			// the transaction ends, as in Kafka.
			if g.subscribedToTopic(tp.Topic) || g.offsets.hasPending(tp) {
				continue
			}
			expired := o.ExpireTime >= 0 && ms >= o.ExpireTime ||
				o.ExpireTime < 0 && ms-base(o) >= retention
			if expired {
				recs = append(recs, model.KeyValue{Key: offsetKey(g.id, tp)})
				gone = append(gone, tp)
			}
		}
	}
	for _, tp := range gone {
		delete(g.offsets.committed, tp)
	}
	if len(gone) > 0 {
		g.hist.event(Event{Time: now, Kind: EventOffsetsExpired, Generation: g.generation, Reason: fmt.Sprint(gone)})
	}
	deleteGroup := !g.hasMembers() && len(g.offsets.committed) == 0 && len(g.offsets.pending) == 0 &&
		len(g.pending) == 0 && g.offsets.inFlight == 0
	if deleteGroup {
		recs = append(recs, model.KeyValue{Key: groupKey(g.id)})
		g.die()
		g.c.log.Info("deleted an empty group without offsets", "group", g.id)
	}
	if len(recs) == 0 {
		return
	}
	if err := g.write(recs, func(_ int64, err error) {
		if err != nil {
			g.c.log.Warn("writing expired offsets failed", "group", g.id, "err", err)
		}
	}); err != nil {
		g.c.log.Warn("writing expired offsets failed", "group", g.id, "err", err)
	}
}

// expiryBase says from when an offset's retention counts, or false when
// the group's offsets do not expire now; the group's kind decides.
func (g *group) expiryBase() (func(offset) int64, bool) {
	return g.kind().expiryBase(g.stateTime)
}

// fromCommit: an offset's retention counts from its commit.
func fromCommit(o offset) int64 { return o.CommitTime }

// fromEmpty: the offsets of a group without members expire from when it
// became empty, or from their commit when that is unknown.
func fromEmpty(since time.Time) func(offset) int64 {
	if since.IsZero() {
		return fromCommit
	}
	ms := since.UnixMilli()
	return func(offset) int64 { return ms }
}

// expiryBase of a classic group: from when it became empty (or the
// commit, if unknown) for a group with a protocol; from the commit for a
// stable consumer group's unsubscribed topics and for a group that only
// commits.
func (cl *classicGroup) expiryBase(emptySince time.Time) (func(offset) int64, bool) {
	switch {
	case cl.protocolType == "":
		return fromCommit, true
	case cl.state == stateEmpty:
		return fromEmpty(emptySince), true
	case cl.protocolType == consumerProtocolType && cl.subscribed != nil && cl.state == stateStable:
		return fromCommit, true
	}
	return nil, false
}

// expiryBase of a consumer group: offsets of unsubscribed topics expire
// from their commit while it has members (subscribedTo keeps the others),
// and from when it became empty once it has none.
func (cg *consumerGroup) expiryBase(emptySince time.Time) (func(offset) int64, bool) {
	if len(cg.members) > 0 {
		return fromCommit, true
	}
	return fromEmpty(emptySince), true
}

// die turns the group Dead and forgets it. Caller holds g.mu.
func (g *group) die() {
	g.transition(stateDead)
	g.joinTimer.stop()
	g.syncTimer.stop()
	for id := range g.pending {
		g.remove(id)
	}
	g.hist.event(Event{Time: g.stateTime, Kind: EventGroupDeleted, Generation: g.generation})
	g.c.drop(g)
}
