package replica

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// ReplicaSet is a partition's replicas as the cluster metadata names them.
type ReplicaSet struct {
	Self           int32   // this broker
	Replicas       []int32 // in preference order
	ISR            []int32 // the in-sync replicas
	Leader         int32   // -1 for none
	LeaderEpoch    int32
	PartitionEpoch int32
	// UncleanElections counts the elections of an out-of-sync leader.
	UncleanElections int32
}

// follower is what the leader knows of one follower's replica.
type follower struct {
	// end is the log end the follower last fetched from: it has every
	// offset below, synced when the topic syncs every append. -1 until it
	// fetches under this leadership.
	end                int64
	lastFetch          time.Time
	lastFetchLeaderEnd int64 // the leader's log end at that fetch
	// lastCaughtUp is when the follower last had everything the leader had
	// (Kafka's lastCaughtUpTimeMs).
	lastCaughtUp time.Time
}

// SetReplicaSet records the partition's replicas, in-sync set and leader
// as the metadata names them. Taking the lead at a new epoch starts the
// followers' state afresh: each in-sync follower counts as caught up now
// and must fetch before the high watermark passes what it has. Call it
// before SetRole gives the leadership.
func (p *Partition) SetReplicaSet(rs ReplicaSet) {
	rs.Replicas, rs.ISR = slices.Clone(rs.Replicas), slices.Clone(rs.ISR)
	p.mu.Lock()
	newTerm := rs.Leader == rs.Self && (p.set.Leader != rs.Self || p.set.LeaderEpoch != rs.LeaderEpoch)
	if newTerm || p.followers == nil {
		now := p.opts.Now()
		p.followers = map[int32]*follower{}
		for _, r := range rs.Replicas {
			if r != rs.Self {
				p.followers[r] = &follower{end: -1, lastFetchLeaderEnd: -1, lastCaughtUp: now}
			}
		}
		p.epochStart = p.log.EndOffset()
	}
	for _, r := range rs.Replicas {
		if _, ok := p.followers[r]; !ok && r != rs.Self {
			p.followers[r] = &follower{end: -1, lastFetchLeaderEnd: -1, lastCaughtUp: p.opts.Now()}
		}
	}
	if rs.Leader == rs.Self && rs.UncleanElections > p.set.UncleanElections && p.set.Replicas != nil {
		p.opts.Logger.Warn("leading after an unclean election: what the last in-sync replica had beyond this log is lost",
			"partition", p.TP.String(), "leader_epoch", rs.LeaderEpoch, "unclean_elections", rs.UncleanElections)
	}
	// A join in flight stays pending while the partition epoch it was
	// proposed at holds: until then other records (another partition's
	// change) do not decide it. A new epoch either took it in or refuses
	// the proposal, and the follower qualifies again on its next fetch.
	if newTerm || rs.PartitionEpoch != p.set.PartitionEpoch {
		p.pendingISR = nil
	}
	p.pendingISR = slices.DeleteFunc(p.pendingISR, func(r int32) bool {
		return slices.Contains(rs.ISR, r) || !slices.Contains(rs.Replicas, r)
	})
	p.set = rs
	p.hasFollowers.Store(len(rs.Replicas) > 1)
	p.mu.Unlock()
	p.advanceHighWatermark() // a smaller in-sync set may commit more
}

// ReplicaSet returns the partition's replica set as last recorded.
func (p *Partition) ReplicaSet() ReplicaSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.set
	rs.Replicas, rs.ISR = slices.Clone(rs.Replicas), slices.Clone(rs.ISR)
	return rs
}

// replicatedHighWatermarkLocked caps hw, the leader's own committed end,
// at what every in-sync follower (and every one about to join) has. It
// reports false when the high watermark may not move at all: this broker
// does not lead, or the in-sync set is below min.insync.replicas (KIP-966).
// p.mu is held.
func (p *Partition) replicatedHighWatermarkLocked(hw int64) (int64, bool) {
	if !p.hasFollowers.Load() {
		return hw, true
	}
	if !p.IsLeader() || p.set.Leader != p.set.Self || len(p.set.ISR) < int(p.minInSync.Load()) {
		return hw, false
	}
	for _, r := range p.set.ISR {
		if r == p.set.Self {
			continue
		}
		f := p.followers[r]
		if f == nil || f.end < 0 {
			return hw, false
		}
		hw = min(hw, f.end)
	}
	// A follower about to join counts already: once it joins, every
	// offset below the high watermark must be on it.
	for _, r := range p.pendingISR {
		if f := p.followers[r]; f != nil && f.end >= 0 {
			hw = min(hw, f.end)
		}
	}
	return hw, true
}

// FollowerFetched records a follower's fetch from offset (its log end: it
// has, and has synced, everything below) and returns the high watermark
// to tell it. A fetch past this log's end is ErrOffsetOutOfRange: the
// follower must truncate first.
func (p *Partition) FollowerFetched(node int32, offset int64) (int64, error) {
	if !p.IsLeader() {
		return -1, ErrNotLeader
	}
	now := p.opts.Now()
	p.mu.Lock()
	f := p.followers[node]
	if f == nil {
		p.mu.Unlock()
		return -1, fmt.Errorf("%w: broker %d for %s", ErrNotReplica, node, p.TP)
	}
	leo := p.log.EndOffset()
	if offset > leo {
		p.mu.Unlock()
		return -1, fmt.Errorf("%w: follower %d fetches at %d past the log end %d", ErrOffsetOutOfRange, node, offset, leo)
	}
	// Kafka's rule: caught up now if it has the leader's whole log, or as
	// of its last fetch if it has what the leader had then.
	switch {
	case offset >= leo:
		f.lastCaughtUp = now
	case offset >= f.lastFetchLeaderEnd && f.lastFetch.After(f.lastCaughtUp):
		f.lastCaughtUp = f.lastFetch
	}
	f.end, f.lastFetch, f.lastFetchLeaderEnd = offset, now, leo
	// A follower out of the in-sync set qualifies to join at the moment it
	// has everything committed and everything of this leadership, and from
	// then on holds the high watermark back (Kafka's maximal ISR). Judged
	// later, a follower a little slower than the others would never be
	// seen at the high watermark while writes go on.
	if p.set.Leader == p.set.Self && offset >= p.hw && offset >= p.epochStart &&
		!slices.Contains(p.set.ISR, node) && !slices.Contains(p.pendingISR, node) {
		p.pendingISR = append(p.pendingISR, node)
	}
	p.mu.Unlock()
	p.advanceHighWatermark()
	return p.HighWatermark(), nil
}

// InSyncChange returns the in-sync set the leader should propose now, if
// it differs from the current one: followers not caught up for lag leave;
// those that qualified to join at a fetch (their log reached the high
// watermark and the start of this leadership) join. The change is
// proposed to the controller, and applies only through the metadata
// (SetReplicaSet); meanwhile a joining follower already holds back the
// high watermark. If the proposal fails, InSyncChangeFailed drops the
// joins.
func (p *Partition) InSyncChange(lag time.Duration) (ReplicaSet, []int32, bool) {
	if !p.IsLeader() {
		return ReplicaSet{}, nil, false
	}
	now := p.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.hasFollowers.Load() || p.set.Leader != p.set.Self {
		return ReplicaSet{}, nil, false
	}
	var isr []int32
	for _, r := range p.set.Replicas {
		f := p.followers[r]
		switch {
		case r == p.set.Self:
			isr = append(isr, r)
		case slices.Contains(p.set.ISR, r):
			if f != nil && now.Sub(f.lastCaughtUp) <= lag {
				isr = append(isr, r)
			}
		case slices.Contains(p.pendingISR, r):
			isr = append(isr, r)
		}
	}
	if slices.Equal(isr, p.set.ISR) {
		return ReplicaSet{}, nil, false
	}
	rs := p.set
	rs.Replicas = slices.Clone(rs.Replicas)
	return rs, isr, true
}

// InSyncChangeFailed drops the joins of a proposal the controller did not
// make, so that a follower it refused (fenced, say) does not hold the high
// watermark back: it qualifies again at its next fetch.
func (p *Partition) InSyncChangeFailed() {
	p.mu.Lock()
	p.pendingISR = nil
	p.mu.Unlock()
	p.advanceHighWatermark()
}

// CheckEnoughReplicas refuses an acks=all write while the in-sync set is
// below min.insync.replicas: a partition of one replica too, as Kafka
// refuses one whose min.insync.replicas is above 1.
func (p *Partition) CheckEnoughReplicas() error {
	n, min := 1, int(p.minInSync.Load())
	if p.hasFollowers.Load() {
		p.mu.Lock()
		n = len(p.set.ISR)
		p.mu.Unlock()
	}
	if n < min {
		return fmt.Errorf("%w: %s has %d in-sync replicas, min.insync.replicas is %d", ErrNotEnoughReplicas, p.TP, n, min)
	}
	return nil
}

// WaitReplicated returns once the high watermark has passed upTo (every
// in-sync replica has the write), the leadership is lost (ErrNotLeader),
// or timeout passes (ErrReplicationTimeout).
func (p *Partition) WaitReplicated(ctx context.Context, upTo int64, timeout time.Duration) error {
	if !p.hasFollowers.Load() {
		return nil
	}
	w := NewWaiter()
	p.Watch(w)
	defer p.Unwatch(w)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		if !p.IsLeader() {
			return fmt.Errorf("%w: %s", ErrNotLeader, p.TP)
		}
		if p.HighWatermark() >= upTo {
			p.mu.Lock()
			n := len(p.set.ISR)
			p.mu.Unlock()
			if n < int(p.minInSync.Load()) {
				return ErrNotEnoughReplicasAfterAppend
			}
			return nil
		}
		select {
		case <-w.C:
		case <-timer.C:
			return ErrReplicationTimeout
		case <-ctx.Done():
			return ErrReplicationTimeout
		}
	}
}

// ReadToLogEnd returns the batches at offset up to the log end, committed
// or not: what a follower copies, and what a coordinator loads when it
// comes to lead the partition.
func (p *Partition) ReadToLogEnd(offset int64, maxBytes int) (Section, error) {
	return p.log.Read(offset, maxBytes, p.log.EndOffset())
}

// AppendReplicated writes batches fetched from the leader (whole ones,
// at or past this log's end) as they are, and applies them to the
// producer state as a replay of the log would, so that this replica can
// lead with the producers' sequences and open transactions known. It
// returns the new log end. The caller syncs (FlushEveryAppend) before it
// fetches again, so that the end it reports is durable.
//
// fetchedAt is the leader epoch the batches were fetched at: an answer
// from a leader of an older epoch is refused (ErrFencedLeaderEpoch). It
// may have been in flight while this replica truncated to the new
// leader's log; written after that truncation, its batches would stay,
// where the new leader may have others. The check and the write hold
// appendMu, as the truncation does.
func (p *Partition) AppendReplicated(data []byte, fetchedAt int32) (int64, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.IsLeader() {
		return -1, fmt.Errorf("%w: %s is led here", ErrNotLeader, p.TP)
	}
	if err := p.CheckLeaderEpoch(fetchedAt); err != nil {
		return -1, fmt.Errorf("%w: %s was fetched at leader epoch %d, now %d", err, p.TP, fetchedAt, p.LeaderEpoch())
	}
	res, err := p.log.AppendReplicated(data)
	if err != nil || res.BaseOffset < 0 {
		return p.log.EndOffset(), err
	}
	p.replayLocked(data, "replicated")
	p.applied.Store(res.LastOffset + 1)
	return res.LastOffset + 1, nil
}

// replayLocked applies batches written as they came (replicated or
// mirrored) to the producer state, as a replay of the log would: their
// producers' sequences, and the transactions they open and end. appendMu
// is held.
func (p *Partition) replayLocked(data []byte, what string) {
	now := p.opts.Now().UnixMilli()
	p.mu.Lock()
	defer p.mu.Unlock()
	r := model.NewBatchReader(data)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		if err := p.producers.replay(b, now); err != nil {
			p.opts.Logger.Warn(what+" batch not applied to the producer state", "partition", p.TP.String(), "err", err)
		}
	}
	p.log.SetFirstUnstableOffset(p.producers.txns.firstUnstable())
}

// SetLeaderHighWatermark takes the high watermark a follower learns from
// its leader, capped at its own log end.
func (p *Partition) SetLeaderHighWatermark(hw int64) {
	hw = min(hw, p.log.EndOffset())
	p.mu.Lock()
	defer p.mu.Unlock()
	if hw != p.hw {
		p.setHighWatermarkLocked(hw)
	}
}

// TruncateTo cuts a follower's log at offset (where it diverges from its
// new leader's) and rebuilds the producer state from what is left.
func (p *Partition) TruncateTo(offset int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if offset >= p.log.EndOffset() {
		return nil
	}
	if p.IsLeader() {
		return fmt.Errorf("%w: %s is led here", ErrNotLeader, p.TP)
	}
	return p.truncateLocked(offset)
}

// truncateLocked cuts the log at offset and rebuilds the producer state
// from what is left; the high watermark follows the end down. appendMu is
// held.
func (p *Partition) truncateLocked(offset int64) error {
	if err := p.log.Truncate(offset); err != nil {
		return err
	}
	ps, _, err := loadProducerState(p.log, p.opts.Now().UnixMilli(), p.opts.ProducerIDExpiration)
	if err != nil {
		return fmt.Errorf("%s: rebuilding producer state after truncation: %w", p.TP, err)
	}
	p.mu.Lock()
	p.producers = ps
	end := p.log.EndOffset()
	p.applied.Store(end)
	p.setHighWatermarkLocked(min(p.hw, end))
	p.mu.Unlock()
	p.snapMu.Lock()
	p.snapEnd = min(p.snapEnd, end)
	p.snapMu.Unlock()
	return nil
}

// StartAt empties a follower's log and restarts it at offset, at or past
// its end: the leader's log start, when this log ends before it (the
// leader deleted what this replica lacks, Kafka's truncateFullyAndStartAt).
// Nothing of the old log remains: the producer state is empty, and the
// high watermark and the applied end are offset.
func (p *Partition) StartAt(offset int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.IsLeader() {
		return fmt.Errorf("%w: %s is led here", ErrNotLeader, p.TP)
	}
	return p.startAtLocked(offset)
}

// startAtLocked restarts the log at offset and resets what depended on
// the old one. The producer snapshots go first: a crash before the log
// restarts leaves the old log, whose producer state the next open rebuilds
// by a scan; the log's restart then syncs the directory, so no snapshot of
// the old log survives a crash after it to be taken for the new log's
// state. Snapshots of the old log taken before and written after are kept
// out by snapEnd and restarts. appendMu is held.
func (p *Partition) startAtLocked(offset int64) error {
	if end := p.log.EndOffset(); offset < end {
		return fmt.Errorf("%w: %s: start at %d below the log end %d", ErrOffsetOutOfRange, p.TP, offset, end)
	}
	p.snapMu.Lock()
	defer p.snapMu.Unlock()
	p.restarts++
	if err := removeSnapshots(p.log.FS(), p.log.Dir()); err != nil {
		return fmt.Errorf("%s: removing producer snapshots: %w", p.TP, err)
	}
	p.snapEnd = offset // the empty state needs none
	if err := p.log.StartAt(offset); err != nil {
		return err
	}
	ps := newProducerState()
	ps.end, ps.lastSweep = offset, p.opts.Now().UnixMilli()
	p.mu.Lock()
	p.producers = ps
	p.applied.Store(offset)
	p.setHighWatermarkLocked(offset)
	p.mu.Unlock()
	return nil
}
