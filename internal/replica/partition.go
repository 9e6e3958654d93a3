package replica

import (
	"sync"

	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
)

// Partition is one partition this broker leads.
type Partition struct {
	TP      model.TopicPartition
	TopicID [16]byte
	log     *log.Log

	appendMu    sync.Mutex
	leaderEpoch int32

	mu      sync.Mutex
	hw      int64
	waiters map[*Waiter]struct{}
}

func newPartition(tp model.TopicPartition, id [16]byte, l *log.Log) *Partition {
	p := &Partition{TP: tp, TopicID: id, log: l, waiters: map[*Waiter]struct{}{}}
	p.hw = l.EndOffset() // what survived recovery is the log
	l.SetHighWatermark(p.hw)
	return p
}

// Log returns the partition's log.
func (p *Partition) Log() *log.Log { return p.log }

// LeaderEpoch is the current leader epoch (0 on a single node).
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch }

// Append writes a produce request's batches (in the caller's order: calls
// for one partition are serialised) and returns a wait function that
// returns once they are acknowledged as the topic's flush policy defines: on
// stable storage for FlushEveryAppend, written otherwise. Waiting apart from
// writing lets pipelined requests share one fsync. acks=0 writes wait too,
// since the high watermark, and so consumers, follow the fsync.
func (p *Partition) Append(data []byte) (log.AppendResult, func() error, error) {
	p.appendMu.Lock()
	res, err := p.log.Append(data, log.AppendOptions{LeaderEpoch: p.leaderEpoch})
	p.appendMu.Unlock()
	if err != nil || res.BaseOffset < 0 {
		return res, func() error { return nil }, err
	}
	wait := func() error {
		if p.log.Config().FlushPolicy == log.FlushEveryAppend {
			if err := p.log.Sync(res.LastOffset + 1); err != nil {
				return err
			}
		}
		p.advanceHighWatermark()
		return nil
	}
	return res, wait, nil
}

// advanceHighWatermark moves the high watermark to what is now committed and
// wakes the waiters.
func (p *Partition) advanceHighWatermark() {
	hw := p.log.EndOffset()
	if p.log.Config().FlushPolicy == log.FlushEveryAppend {
		hw = min(hw, p.log.SyncedOffset())
	}
	p.mu.Lock()
	if hw <= p.hw {
		p.mu.Unlock()
		return
	}
	p.hw = hw
	p.log.SetHighWatermark(hw)
	for w := range p.waiters {
		w.wake()
	}
	p.mu.Unlock()
}

// HighWatermark is the offset below which records are committed.
func (p *Partition) HighWatermark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hw
}

// LastStableOffset is the offset below which no transaction is open; with no
// transactions it is the high watermark.
func (p *Partition) LastStableOffset() int64 { return p.HighWatermark() }

// Read returns the batches at offset, bounded by the high watermark (or the
// last stable offset for read_committed).
func (p *Partition) Read(offset int64, maxBytes int, readCommitted bool) (log.Section, error) {
	bound := p.HighWatermark()
	if readCommitted {
		bound = p.LastStableOffset()
	}
	return p.log.Read(offset, maxBytes, bound)
}

// DeleteRecords moves the log start offset to offset; -1 means the high
// watermark. Offsets above the high watermark are out of range.
func (p *Partition) DeleteRecords(offset int64) (int64, error) {
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
