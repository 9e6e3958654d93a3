package txn

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/model"
)

// loadReadBytes is how much of a partition Load reads at a time.
const loadReadBytes = 1 << 20

// Load serves the __transaction_state partitions this broker leads at
// start (LoadPartition for each), if the topic exists, and starts the
// timeout and expiry checks. Requests before Load returns answer
// ErrCoordinatorLoadInProgress. Call Load once, before serving; later
// leadership changes come through LoadPartition and UnloadPartition.
func (c *Coordinator) Load() error {
	parts, err := c.topic.Partitions()
	if err != nil {
		return fmt.Errorf("txn: opening %s: %w", StateTopic, err)
	}
	for i, p := range parts {
		if p == nil {
			continue // led elsewhere
		}
		if err := c.LoadPartition(int32(i), int32(len(parts)), p); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrNotCoordinator
	}
	if len(parts) > 0 {
		c.adoptLocked(int32(len(parts)))
	}
	c.loaded = true
	c.abort = c.clock.AfterFunc(c.cfg.AbortCheckInterval, c.abortTimedOut)
	c.expiry = c.clock.AfterFunc(c.cfg.ExpiryCheckInterval, c.expireIDs)
	return nil
}

// LoadPartition makes this broker the coordinator of the transactional ids
// of __transaction_state partition i (of n), which it now leads: the
// partition is replayed from its start to its high watermark, the last
// record of each id winning and tombstones deleting. A transaction found in
// PrepareCommit or PrepareAbort is finished in the background (markers
// again, then Complete); an Ongoing one stays, and its timeout aborts it if
// its producer is gone. The markers carry the partition's leader epoch as
// read now. Requests for the partition's ids answer
// ErrCoordinatorLoadInProgress until it is done. Loading a partition
// already served does nothing.
func (c *Coordinator) LoadPartition(i, n int32, p coordinator.Partition) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrNotCoordinator
	}
	if i < 0 || i >= n {
		c.mu.Unlock()
		return fmt.Errorf("txn: partition %d of %d", i, n)
	}
	c.adoptLocked(n)
	if int(i) >= len(c.parts) || c.parts[i] != nil || c.loading[i] {
		c.mu.Unlock()
		return nil
	}
	c.loading[i] = true
	c.mu.Unlock()

	start := time.Now()
	loaded := map[string]meta{}
	records, err := c.replay(int(i), p, loaded)
	c.mu.Lock()
	delete(c.loading, i)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("txn: replaying %s-%d: %w", StateTopic, i, err)
	}
	if c.closed {
		c.mu.Unlock()
		return ErrNotCoordinator
	}
	home := c.newServedLocked(i, p)
	c.parts[i] = home
	var resume []*txn
	for id, m := range loaded {
		if model.CoordinatorPartition(id, int32(len(c.parts))) != i {
			c.log.Warn("skipped a transactional id stored in another id's partition", "id", id, "partition", i)
			continue
		}
		t := &txn{id: id, home: home, meta: m}
		c.txns[id] = t
		if m.state.preparing() {
			resume = append(resume, t)
		}
	}
	c.mu.Unlock()

	for _, t := range resume {
		t.mu.Lock()
		c.startFinish(t)
		t.mu.Unlock()
	}
	level := slog.LevelInfo
	if len(loaded) == 0 {
		level = slog.LevelDebug
	}
	c.log.Log(context.Background(), level, "loaded transactional ids", "partition", i, "coordinator_epoch", home.epoch,
		"ids", len(loaded), "resumed", len(resume), "records", records, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// UnloadPartition stops coordinating the ids of __transaction_state
// partition i, which this broker no longer leads: their state is dropped
// (the new leader loads it from the partition), requests for them answer
// ErrNotCoordinator, and their background work stops (marker writes in
// progress are cancelled). It returns once the partition's appends in
// flight are durable or failed. Unloading a partition not served does
// nothing.
func (c *Coordinator) UnloadPartition(i int32) {
	c.mu.Lock()
	if i < 0 || int(i) >= len(c.parts) || c.parts[i] == nil {
		c.mu.Unlock()
		return
	}
	home := c.parts[i]
	c.parts[i] = nil
	ids := 0
	for id, t := range c.txns {
		if t.home == home {
			delete(c.txns, id)
			ids++
		}
	}
	c.mu.Unlock()
	home.cancel()
	home.writes.Wait()
	c.log.Info("unloaded transactional ids", "partition", i, "ids", ids)
}

// Serves reports whether this broker coordinates the ids of
// __transaction_state partition i, and at which coordinator epoch.
func (c *Coordinator) Serves(i int32) (coordinatorEpoch int32, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || int(i) >= len(c.parts) || c.parts[i] == nil {
		return -1, false
	}
	return c.parts[i].epoch, true
}

// replay applies partition i's records to loaded. Malformed records are
// logged and skipped: one bad record must not keep every other id from
// loading.
func (c *Coordinator) replay(i int, p coordinator.Partition, loaded map[string]meta) (int, error) {
	n, err := coordinator.Replay(p, loadReadBytes, func(r coordinator.Record) {
		if r.Control {
			return // __transaction_state has no markers
		}
		if err := replayRecord(r.Key, r.Value, loaded); err != nil {
			c.log.Error("skipped an unreadable record", "partition", i, "offset", r.Offset, "err", err)
		}
	})
	if err != nil {
		c.log.Error("skipped unreadable records", "partition", i, "err", err)
	}
	return n, nil
}

func replayRecord(key, value []byte, loaded map[string]meta) error {
	if len(key) < 2 {
		return fmt.Errorf("key of %d bytes", len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != keyVersion {
		return fmt.Errorf("key version %d", v) // Kafka has only version 0
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return fmt.Errorf("key: %w", err)
	}
	if value == nil {
		delete(loaded, k.TransactionalID)
		return nil
	}
	m, err := decodeValue(value)
	if err != nil {
		return fmt.Errorf("value of %q: %w", k.TransactionalID, err)
	}
	switch m.state {
	case stateDead:
		delete(loaded, k.TransactionalID)
		return nil
	case statePrepareEpochFence:
		// Never stored by Kafka or us; an Ongoing transaction is the
		// safe reading: its timeout aborts it.
		m.state = stateOngoing
	case stateEmpty, stateOngoing, statePrepareCommit, statePrepareAbort, stateCompleteCommit, stateCompleteAbort:
	default:
		return fmt.Errorf("value of %q: state %d", k.TransactionalID, m.state)
	}
	loaded[k.TransactionalID] = m
	return nil
}
