package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// startFinish starts the background job that takes t from its Prepare*
// state to Complete*: the markers, then the Complete record. The returned
// channel gets nil once Complete is durable, or the first failure (the job
// then retries every MarkerRetryBackoff until it succeeds or the
// coordinator closes). Caller holds t.mu.
func (c *Coordinator) startFinish(t *txn) <-chan error {
	res := make(chan error, 1)
	if t.finishing {
		res <- nil // a job already runs (cannot happen: one Prepare* at a time)
		return res
	}
	t.finishing = true
	if !c.spawn(func() { c.finish(t, res, 0) }) {
		t.finishing = false
		res <- ErrNotCoordinator
	}
	return res
}

// finish makes attempt number attempt (from 0) at completing t's Prepare*
// state. res, if not nil, gets the outcome.
func (c *Coordinator) finish(t *txn, res chan<- error, attempt int) {
	report := func(err error) {
		if res != nil {
			res <- err
		}
	}
	t.mu.Lock()
	if t.removed || !t.state.preparing() {
		t.finishing = false
		t.mu.Unlock()
		report(nil)
		return
	}
	if t.home.ctx.Err() != nil {
		// Unloaded: the partition's next coordinator finishes it.
		t.mu.Unlock()
		report(fmt.Errorf("%w: %s-%d was unloaded", ErrNotCoordinator, StateTopic, t.home.index))
		return
	}
	m := t.meta
	t.mu.Unlock()

	commit := m.state == statePrepareCommit
	if len(m.parts) > 0 {
		// Without t.mu: the state stays Prepare* meanwhile, since every
		// request answers ErrConcurrentTransactions (or fails) in it.
		if err := c.markers.WriteMarkers(t.home.ctx, m.pid, m.epoch, commit, t.home.epoch, m.parts); err != nil {
			c.retryFinish(t, attempt, "writing markers", err)
			report(err)
			return
		}
	}

	t.mu.Lock()
	if t.removed || t.state != m.state || t.pid != m.pid || t.epoch != m.epoch {
		t.finishing = false
		t.mu.Unlock()
		report(nil)
		return
	}
	next := t.meta.complete(c.nowMs())
	wait, err := c.writeAhead(t, &next)
	if err == nil {
		t.finishing = false
	}
	t.mu.Unlock()
	if err != nil {
		c.retryFinish(t, attempt, "writing the Complete state", err)
		report(err)
		return
	}
	report(nil)
	if err := wait(); err != nil {
		// The Prepare record stays the last durable one: the next Load
		// finishes the transaction again, with the same outcome.
		c.log.Warn("the Complete state of a transaction did not reach the disk", "transactional_id", t.id, "err", err)
	}
}

// retryFinish schedules another attempt at finishing t. The first failure
// is a warning, then one in warnEvery, so a partition that stays offline
// does not flood the log.
func (c *Coordinator) retryFinish(t *txn, attempt int, what string, err error) {
	const warnEvery = 100
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || t.home.ctx.Err() != nil {
		return // the partition's next load resumes it
	}
	level := slog.LevelDebug
	if attempt%warnEvery == 0 {
		level = slog.LevelWarn
	}
	c.log.Log(context.Background(), level, "ending a transaction failed; retrying", "id", t.id, "step", what,
		"attempt", attempt+1, "err", err, "retry_in", c.cfg.MarkerRetryBackoff)
	c.clock.AfterFunc(c.cfg.MarkerRetryBackoff, func() { c.spawn(func() { c.finish(t, nil, attempt+1) }) })
}

// timedOut: an Ongoing transaction older than its timeout (Kafka's
// strict txnStartTimestamp + txnTimeoutMs < now). Caller holds t.mu.
func (t *txn) timedOut(now int64) bool {
	return !t.removed && !t.pending && t.state == stateOngoing && t.startMs >= 0 && t.startMs+int64(t.timeoutMs) < now
}

// expired: an idle id untouched for IDExpiration. Caller holds t.mu.
func (t *txn) expired(now int64, expirationMs int64) bool {
	return !t.removed && !t.pending && t.state.idle() && t.updateMs <= now-expirationMs
}

// abortTimedOut is the timeout check: every timed-out transaction is
// aborted with its epoch bumped, which fences its producer.
func (c *Coordinator) abortTimedOut() {
	now := c.nowMs()
	var due []*txn
	for _, t := range c.snapshot() {
		t.mu.Lock()
		if t.timedOut(now) {
			due = append(due, t)
		}
		t.mu.Unlock()
	}
	if len(due) > 0 {
		c.spawn(func() {
			for _, t := range due {
				c.abortOne(t)
			}
		})
	}
	c.mu.Lock()
	if !c.closed {
		c.abort = c.clock.AfterFunc(c.cfg.AbortCheckInterval, c.abortTimedOut)
	}
	c.mu.Unlock()
}

func (c *Coordinator) abortOne(t *txn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := c.nowMs()
	if !t.timedOut(now) {
		return // it moved on meanwhile
	}
	pid, epoch := t.pid, t.epoch
	if err := c.fence(t, now); err != nil {
		if !errors.Is(err, ErrNotCoordinator) || c.ctx.Err() == nil {
			c.log.Warn("aborting a timed-out transaction failed", "id", t.id, "err", err)
		}
		return
	}
	c.log.Info("aborting a timed-out transaction", "id", t.id, "producer_id", pid, "epoch", epoch,
		"timeout_ms", t.timeoutMs)
}

// expireIDs is the expiry check: idle ids unused for IDExpiration are
// deleted with a tombstone.
func (c *Coordinator) expireIDs() {
	now := c.nowMs()
	exp := c.cfg.IDExpiration.Milliseconds()
	var due []*txn
	for _, t := range c.snapshot() {
		t.mu.Lock()
		if t.expired(now, exp) {
			due = append(due, t)
		}
		t.mu.Unlock()
	}
	if len(due) > 0 {
		c.spawn(func() {
			for _, t := range due {
				c.expireOne(t, exp)
			}
		})
	}
	c.mu.Lock()
	if !c.closed {
		c.expiry = c.clock.AfterFunc(c.cfg.ExpiryCheckInterval, c.expireIDs)
	}
	c.mu.Unlock()
}

func (c *Coordinator) expireOne(t *txn, exp int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.expired(c.nowMs(), exp) {
		return
	}
	if err := c.write(t, nil); err != nil {
		c.log.Warn("removing an expired transactional id failed", "id", t.id, "err", err)
		return
	}
	t.removed = true
	c.mu.Lock()
	if c.txns[t.id] == t {
		delete(c.txns, t.id)
	}
	c.mu.Unlock()
	c.log.Info("removed an expired transactional id", "id", t.id, "producer_id", t.pid)
}
