package replica

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// Partition is one partition this broker holds a replica of.
type Partition struct {
	TP      model.TopicPartition
	TopicID [16]byte
	log     *log.Log

	opts *Options

	// role is the leadership this broker has of the partition: the leader
	// epoch in the high 32 bits, 1 in the low bit while it leads. Requests
	// read it without a lock on every produce and fetch; the metadata
	// image sets it (SetRole). One word, so that a reader never sees an
	// epoch with the other epoch's leadership.
	role atomic.Uint64
	// mirror names the cluster link this partition mirrors, nil for an
	// ordinary partition (mirror.go). Read without a lock on every append.
	mirror atomic.Pointer[string]

	appendMu  lockrank.Mutex[lockrank.PartitionAppend]
	producers *producerState // appendMu, but producers.txns: mu (see txn.go)

	snapMu  lockrank.Mutex[lockrank.PartitionSnapshot] // after appendMu when both are held
	snapEnd int64                                      // snapMu: end offset of the newest snapshot written, -1 for none
	// restarts counts the log's restarts (startAtLocked), which change it
	// holding appendMu and snapMu: a snapshot taken under appendMu before
	// one must not be written after it.
	restarts uint64

	mu lockrank.Mutex[lockrank.Partition] // after appendMu when both are held; guards producers.txns too
	hw int64
	// applied is the log end up to which appends have been applied to the
	// producer state (the transactions open and decided); the high
	// watermark never passes it. An append writes the log first and
	// applies its batches after, so without this cap a concurrent
	// advanceHighWatermark could move the last stable offset past a
	// transaction not yet recorded as open, or past a marker not yet
	// recorded as deciding its transaction (which would then hold the last
	// stable offset until the next move). Appends store it under appendMu
	// after recording their transactions under mu, and advanceHighWatermark
	// loads it under mu, so a plain append does not take mu.
	applied atomic.Int64
	waiters map[*Waiter]struct{}

	// Replication (replication.go), guarded by mu: the replica set as the
	// metadata names it, and while leading each follower's state, the log
	// end when this leadership began, and followers about to join the
	// in-sync set.
	set          ReplicaSet
	hasFollowers atomic.Bool // len(set.Replicas) > 1: replicas on other brokers; set under mu, read without
	// minInSync is min.insync.replicas as the config last set it
	// (at least 1): the produce path reads it without the log's lock.
	minInSync atomic.Int32
	// leaderThrottled is leader.replication.throttled.replicas as the
	// config last set it: every follower fetch reads it.
	leaderThrottled atomic.Pointer[string]
	followers       map[int32]*follower
	epochStart      int64
	pendingISR      []int32
}

func newPartition(tp model.TopicPartition, id [16]byte, l *log.Log, cfg Config, opts *Options) (*Partition, error) {
	p := &Partition{TP: tp, TopicID: id, log: l, opts: opts, waiters: map[*Waiter]struct{}{}}
	p.role.Store(1)      // leading at epoch 0
	p.hw = l.EndOffset() // what survived recovery is the log
	p.applied.Store(p.hw)
	p.setReplication(cfg)
	l.SetHighWatermark(p.hw)

	start := time.Now()
	ps, res, err := loadProducerState(l, opts.Now().UnixMilli(), opts.ProducerIDExpiration)
	if err != nil {
		return nil, fmt.Errorf("%s: loading producer state: %w", tp, err)
	}
	p.producers, p.snapEnd = ps, res.snapshot
	ps.txns.onHighWatermark(p.hw) // every marker in the log is below it
	l.SetFirstUnstableOffset(ps.txns.firstUnstable())
	l.SetMarkerRemoval(p.forgetMarkers)
	if res.scanned > 0 || res.snapshot < 0 && len(ps.producers) > 0 {
		opts.Logger.Info("rebuilt producer state", "partition", tp.String(), "snapshot", res.snapshot,
			"batches_scanned", res.scanned, "producers", len(ps.producers), "expired", res.expired,
			"took", time.Since(start).Round(time.Millisecond))
	}
	if res.scanned > 0 {
		// Spare the next open the same scan.
		if err := p.SnapshotProducers(); err != nil {
			opts.Logger.Warn("writing producer snapshot failed", "partition", tp.String(), "err", err)
		}
	}
	return p, nil
}

// setConfig applies new settings to the partition.
func (p *Partition) setConfig(cfg Config) error {
	if err := p.log.SetConfig(cfg.Config); err != nil {
		return err
	}
	p.setReplication(cfg)
	return nil
}

// setReplication keeps the replication settings the partition reads
// without the log's lock.
func (p *Partition) setReplication(cfg Config) {
	p.minInSync.Store(int32(max(cfg.MinInSyncReplicas, 1)))
	p.leaderThrottled.Store(&cfg.LeaderThrottledReplicas)
}

// Log returns the partition's log.
func (p *Partition) Log() *log.Log { return p.log }

// LeaderEpoch is the current leader epoch (0 on a single node).
func (p *Partition) LeaderEpoch() int32 { return int32(uint32(p.role.Load() >> 32)) }

// IsLeader reports whether this broker leads the partition.
func (p *Partition) IsLeader() bool { return p.role.Load()&1 == 1 }

// SetRole records this broker's leadership of the partition as the
// metadata names it: leading or not, at a leader epoch. A partition opens
// not leading, at epoch 0, until its role is set.
func (p *Partition) SetRole(leader bool, epoch int32) {
	role := uint64(uint32(epoch)) << 32
	if leader {
		role |= 1
	}
	if p.role.Swap(role) != role {
		// Parked fetches answer under the new role.
		p.mu.Lock()
		for w := range p.waiters {
			w.wake()
		}
		p.mu.Unlock()
	}
}

// CheckLeaderEpoch fences a request by the leader epoch it names; a
// negative epoch names none.
func (p *Partition) CheckLeaderEpoch(seen int32) error {
	switch cur := p.LeaderEpoch(); {
	case seen < 0 || seen == cur:
		return nil
	case seen < cur:
		return ErrFencedLeaderEpoch
	default:
		return ErrUnknownLeaderEpoch
	}
}

// AppendResult says where an append's batches are.
type AppendResult struct {
	log.AppendResult
	// Duplicate: the append repeats a batch its idempotent producer already
	// wrote (a retry). Nothing was written; BaseOffset and LastOffset are the
	// original's, and LogAppendTime is its append time on LogAppendTime
	// topics (-1 otherwise, as the original answer said).
	Duplicate bool
}

// Append writes a produce request's batches (in the caller's order: calls
// for one partition are serialised) and returns a wait function that
// returns once they are acknowledged as the topic's flush policy defines: on
// stable storage for FlushEveryAppend, written otherwise. Waiting apart from
// writing lets pipelined requests share one fsync. acks=0 writes wait too,
// since the high watermark, and so consumers, follow the fsync.
//
// Batches of idempotent producers (producer id >= 0) are first checked
// against the producer state under appendMu (see producer.go): a retry of a
// stored batch is answered with the original's offsets, Duplicate set and
// nothing written, and its wait returns once the original is acknowledged;
// a batch out of sequence or of a fenced epoch fails with
// ErrOutOfOrderSequence or ErrInvalidProducerEpoch, and a plain batch of a
// producer whose transaction is open with ErrInvalidTxnState. A
// transactional batch opens its producer's transaction.
func (p *Partition) Append(data []byte) (AppendResult, func() error, error) {
	return p.append(data, fromClient, nil)
}

func (p *Partition) append(data []byte, o origin, guard *TxnGuard) (AppendResult, func() error, error) {
	p.appendMu.Lock()
	if !p.IsLeader() {
		// Checked under appendMu, as a follower's truncation is: an
		// append that passed the caller's leadership check but comes
		// after this broker stopped leading would land past the point
		// the truncation cut, at the old epoch, and stay there.
		p.appendMu.Unlock()
		return AppendResult{AppendResult: log.AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}}, noWait,
			fmt.Errorf("%w: %s is not led here", ErrNotLeader, p.TP)
	}
	if err := p.mirrorErr(); err != nil {
		p.appendMu.Unlock()
		return AppendResult{AppendResult: log.AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}}, noWait, err
	}
	dup, isDup, err := p.producers.check(data, o)
	if err == nil && !isDup {
		err = p.producers.checkGuard(guard)
	}
	if err != nil || isDup {
		p.appendMu.Unlock()
		// The log validates a batch before anything else; on these paths
		// it is never reached, so at least a corrupt batch is still
		// reported as such rather than as a sequence problem.
		if cerr := checkCRCs(data); cerr != nil {
			err = cerr
		}
		if err != nil {
			return AppendResult{AppendResult: log.AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}}, noWait, err
		}
		res := AppendResult{Duplicate: true, AppendResult: log.AppendResult{
			BaseOffset: dup.firstOffset, LastOffset: dup.lastOffset, LogAppendTime: -1, LogStart: p.log.StartOffset(),
		}}
		if p.log.Config().LogAppendTime {
			res.LogAppendTime = dup.timestamp
		}
		return res, p.waitFor(dup.lastOffset + 1), nil
	}
	// Control batches only through WriteMarker: the log refuses them here.
	lres, err := p.log.Append(data, log.AppendOptions{LeaderEpoch: p.LeaderEpoch()})
	if err != nil || lres.BaseOffset < 0 {
		p.appendMu.Unlock()
		return AppendResult{AppendResult: lres}, noWait, err
	}
	now := p.opts.Now().UnixMilli()
	ps := p.producers
	opened := ps.commit(lres.Batches, lres.LogAppendTime, now)
	if len(opened) > 0 {
		p.mu.Lock()
		for _, t := range opened {
			ps.txns.open(t.pid, t.first)
		}
		p.log.SetFirstUnstableOffset(ps.txns.firstUnstable())
		p.mu.Unlock()
	}
	p.applied.Store(lres.LastOffset + 1) // appends are serialised: the log end only grows
	snap, snapEnd := p.afterAppendLocked(now)
	p.appendMu.Unlock()
	p.maybeWriteSnapshot(snap, snapEnd)
	return AppendResult{AppendResult: lres}, p.waitFor(lres.LastOffset + 1), nil
}

// afterAppendLocked does an append's periodic work: the expiry sweep
// (which also forgets aborted transactions below the log start) and taking
// a snapshot every Options.ProducerSnapshotEvery appends, which it returns
// for maybeWriteSnapshot to write once appendMu is released. appendMu is
// held.
func (p *Partition) afterAppendLocked(now int64) ([]byte, int64) {
	ps := p.producers
	if now-ps.lastSweep >= p.opts.ProducerIDExpirationCheck.Milliseconds() {
		ps.expire(now, p.opts.ProducerIDExpiration)
		ps.lastSweep = now
		if start := p.log.StartOffset(); ps.txns.abortedBelow(start) {
			p.mu.Lock()
			ps.txns.dropAbortedBelow(start)
			p.mu.Unlock()
		}
	}
	if ps.appends++; ps.appends >= p.opts.ProducerSnapshotEvery {
		ps.appends = 0
		return ps.encode(p.log.StartOffset()), ps.end
	}
	return nil, 0
}

// maybeWriteSnapshot writes a snapshot afterAppendLocked took, if any.
// appendMu is not held.
func (p *Partition) maybeWriteSnapshot(snap []byte, end int64) {
	if snap == nil {
		return
	}
	if err := p.writeSnapshot(end, snap); err != nil {
		p.opts.Logger.Warn("writing producer snapshot failed", "partition", p.TP.String(), "err", err)
	}
}

func noWait() error { return nil }

// SyncAppends makes durable, together, what several partitions appended
// below ends[i], for those whose flush policy asks for an fsync of every
// append, and returns each one's error. A produce request for a thousand
// partitions then costs one sync of the file system instead of a thousand
// fsyncs; the wait functions of its appends find them durable.
func SyncAppends(ps []*Partition, ends []int64) []error {
	targets := make([]log.SyncTarget, 0, len(ps))
	at := make([]int, 0, len(ps))
	for i, p := range ps {
		if p.log.Config().FlushPolicy == log.FlushEveryAppend {
			targets = append(targets, log.SyncTarget{Log: p.log, UpTo: ends[i]})
			at = append(at, i)
		}
	}
	errs := make([]error, len(ps))
	for k, err := range log.SyncMany(targets) {
		errs[at[k]] = err
	}
	return errs
}

// waitFor returns a wait function for Append: offsets below upTo
// acknowledged.
func (p *Partition) waitFor(upTo int64) func() error {
	return func() error {
		if p.log.Config().FlushPolicy == log.FlushEveryAppend {
			if err := p.log.Sync(upTo); err != nil {
				return err
			}
		}
		p.advanceHighWatermark()
		p.wakeFollowers()
		return nil
	}
}

// Settled reports whether an append ending at upTo can be acknowledged
// without waiting: the partition has no followers, and with fsync-on-ack
// the log is synced past it. A produce request answers such partitions in
// line rather than on a goroutine each.
func (p *Partition) Settled(upTo int64) bool {
	if p.hasFollowers.Load() {
		return false
	}
	return p.log.Config().FlushPolicy != log.FlushEveryAppend || p.log.SyncedOffset() >= upTo
}

// wakeFollowers wakes parked fetches when the partition has followers:
// theirs read past the high watermark, so new data is news to them even
// when the high watermark stays.
func (p *Partition) wakeFollowers() {
	if !p.hasFollowers.Load() {
		return // the common single-replica case takes no lock
	}
	p.mu.Lock()
	for w := range p.waiters {
		w.wake()
	}
	p.mu.Unlock()
}

// checkCRCs verifies the CRC-32C of each batch in data.
func checkCRCs(data []byte) error {
	r := model.NewBatchReader(data)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		if got := crc32.Checksum(b[model.BatchAttributesPos:], castagnoli); got != b.CRC() {
			return fmt.Errorf("%w: crc %08x, header says %08x", ErrCorruptMessage, got, b.CRC())
		}
	}
	switch rest := r.Rest(); {
	case r.Stop() == model.EndOfBatches:
		return nil
	case len(rest) < model.BatchHeaderSize:
		return fmt.Errorf("%w: %d trailing bytes are not a batch", ErrCorruptMessage, len(rest))
	default:
		return fmt.Errorf("%w: batch of %d bytes, %d present", ErrCorruptMessage, r.Claimed(), len(rest))
	}
}

// SnapshotProducers writes the producer state as of the log end to a
// snapshot file, unless one at that offset exists.
func (p *Partition) SnapshotProducers() error {
	p.appendMu.Lock()
	end := p.producers.end
	p.snapMu.Lock()
	current := end <= p.snapEnd
	p.snapMu.Unlock()
	if current {
		p.appendMu.Unlock()
		return nil
	}
	data := p.producers.encode(p.log.StartOffset())
	p.producers.appends = 0
	p.appendMu.Unlock()
	return p.writeSnapshot(end, data)
}

func (p *Partition) writeSnapshot(end int64, data []byte) error {
	p.snapMu.Lock()
	defer p.snapMu.Unlock()
	if end <= p.snapEnd {
		return nil // a snapshot as new or newer is on disk
	}
	if err := writeSnapshot(p.log.FS(), p.log.Dir(), end, data); err != nil {
		return err
	}
	p.snapEnd = end
	return nil
}

// forgetMarkers is the log's hook before compaction removes transaction
// markers (log.SetMarkerRemoval; see txn.go). The aborted transactions of
// abort markers are dropped, and a snapshot taken now (after every removed
// marker, which is below the high watermark) replaces every older snapshot
// on disk: a rebuild replays only the log after its snapshot, so one taken
// while a removed marker's transaction was open would see that transaction
// open forever. The log is synced up to the snapshot first, so that a
// crash cannot leave it past the log end (and discarded for an older one);
// newer snapshots are kept. An error keeps the markers.
func (p *Partition) forgetMarkers(markers []log.RemovedMarker) error {
	p.appendMu.Lock()
	ps := p.producers
	p.mu.Lock()
	ps.txns.dropAborted(markers)
	p.mu.Unlock()
	end := ps.end
	data := ps.encode(p.log.StartOffset())
	ps.appends = 0
	restarts := p.restarts
	p.appendMu.Unlock()
	if err := p.log.Sync(end); err != nil {
		return err
	}
	p.snapMu.Lock()
	defer p.snapMu.Unlock()
	if p.restarts != restarts {
		// The log restarted since: the snapshot is of a log that is gone,
		// and so are the markers.
		return fmt.Errorf("%s: the log restarted during compaction", p.TP)
	}
	fsys, dir := p.log.FS(), p.log.Dir()
	// Written over one at the same offset, which may have been taken
	// before the drop.
	if err := vfs.WriteFileAtomic(fsys, filepath.Join(dir, snapshotName(end)), data); err != nil {
		return err
	}
	p.snapEnd = max(p.snapEnd, end)
	offs, err := listSnapshots(fsys, dir)
	if err != nil {
		return err
	}
	for _, off := range offs {
		if off < end {
			if err := fsys.Remove(filepath.Join(dir, snapshotName(off))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// Producers describes the idempotent and transactional producers the
// partition knows, by id.
func (p *Partition) Producers() []ProducerInfo {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.producers.infos()
}

// advanceHighWatermark moves the high watermark to what is now committed,
// and with it the last stable offset (transactions whose markers fall below
// it no longer hold it back), and wakes the waiters: parked fetches of
// both isolation levels.
func (p *Partition) advanceHighWatermark() {
	hw := p.log.EndOffset()
	if p.log.Config().FlushPolicy == log.FlushEveryAppend {
		hw = min(hw, p.log.SyncedOffset())
	}
	p.mu.Lock()
	hw = min(hw, p.applied.Load())
	hw, ok := p.replicatedHighWatermarkLocked(hw)
	if !ok || hw <= p.hw {
		p.mu.Unlock()
		return
	}
	p.setHighWatermarkLocked(hw)
	p.mu.Unlock()
}

// setHighWatermarkLocked moves the high watermark to hw, and with it the
// last stable offset, and wakes the waiters. p.mu is held.
func (p *Partition) setHighWatermarkLocked(hw int64) {
	p.hw = hw
	p.log.SetHighWatermark(hw)
	p.producers.txns.onHighWatermark(hw)
	p.log.SetFirstUnstableOffset(p.producers.txns.firstUnstable())
	for w := range p.waiters {
		w.wake()
	}
}

// HighWatermark is the offset below which records are committed.
func (p *Partition) HighWatermark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hw
}

// Read returns the batches at offset, bounded by the high watermark (or the
// last stable offset for read_committed).
func (p *Partition) Read(offset int64, maxBytes int, readCommitted bool) (log.Section, error) {
	var bound int64
	if readCommitted {
		bound = p.LastStableOffset()
	} else {
		bound = p.HighWatermark()
	}
	return p.log.Read(offset, maxBytes, bound)
}

// DeleteRecords moves the log start offset to offset; -1 means the high
// watermark. Offsets above the high watermark are out of range.
func (p *Partition) DeleteRecords(offset int64) (int64, error) {
	if err := p.mirrorErr(); err != nil {
		return 0, err
	}
	hw := p.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return 0, log.ErrOffsetOutOfRange
	}
	return p.log.DeleteRecords(offset)
}

// Truncated reports changes that can move the high watermark backwards or
// the log start forwards to the waiters, so that they re-check their reads.
func (p *Partition) Truncated() {
	p.mu.Lock()
	p.hw = min(p.hw, p.log.EndOffset())
	p.applied.Store(min(p.applied.Load(), p.log.EndOffset()))
	for w := range p.waiters {
		w.wake()
	}
	p.mu.Unlock()
}

// Waiter is a parked fetch: registered with the partitions it reads, woken
// by any of them when its high watermark moves.
type Waiter struct {
	C chan struct{}
}

// NewWaiter returns a waiter whose channel receives at most one pending
// wake-up.
func NewWaiter() *Waiter { return &Waiter{C: make(chan struct{}, 1)} }

func (w *Waiter) wake() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// Watch registers w for wake-ups from p until Unwatch.
func (p *Partition) Watch(w *Waiter) {
	p.mu.Lock()
	p.waiters[w] = struct{}{}
	p.mu.Unlock()
}

// Unwatch ends Watch.
func (p *Partition) Unwatch(w *Waiter) {
	p.mu.Lock()
	delete(p.waiters, w)
	p.mu.Unlock()
}
