package txn

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// loadReadBytes is how much of a partition Load reads at a time.
const loadReadBytes = 1 << 20

// Load rebuilds the transactional ids from __transaction_state, if it
// exists: every partition is replayed from its start to its high
// watermark, the last record of each id winning and tombstones deleting.
// A transaction found in PrepareCommit or PrepareAbort is finished in the
// background (markers again, then Complete); an Ongoing one stays, and its
// timeout aborts it if its producer is gone. Then the timeout and expiry
// checks start. Requests before Load returns answer
// ErrCoordinatorLoadInProgress. Call Load once, before serving.
func (c *Coordinator) Load() error {
	parts, err := c.topic.Partitions()
	if err != nil {
		return fmt.Errorf("txn: opening %s: %w", StateTopic, err)
	}
	start := time.Now()
	loaded := map[string]meta{}
	var records int
	for i, p := range parts {
		if p == nil {
			continue // led elsewhere
		}
		n, err := c.replay(i, p, loaded)
		records += n
		if err != nil {
			return fmt.Errorf("txn: replaying %s-%d: %w", StateTopic, i, err)
		}
	}

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrNotCoordinator
	}
	if len(parts) > 0 {
		c.parts = parts
		if int32(len(parts)) != c.cfg.StatePartitions {
			c.log.Warn(StateTopic+" keeps the partition count it was created with",
				"partitions", len(parts), "transaction.state.log.num.partitions", c.cfg.StatePartitions)
		}
	}
	var resume []*txn
	for id, m := range loaded {
		t := &txn{id: id, meta: m}
		c.txns[id] = t
		if m.state.preparing() {
			resume = append(resume, t)
		}
	}
	c.loaded = true
	c.abort = c.clock.AfterFunc(c.cfg.AbortCheckInterval, c.abortTimedOut)
	c.expiry = c.clock.AfterFunc(c.cfg.ExpiryCheckInterval, c.expireIDs)
	c.mu.Unlock()

	for _, t := range resume {
		t.mu.Lock()
		c.startFinish(t)
		t.mu.Unlock()
	}
	c.log.Info("loaded transactional ids", "ids", len(loaded), "resumed", len(resume), "records", records,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// replay applies partition i's records to loaded. Malformed records are
// logged and skipped: one bad record must not keep every other id from
// loading.
func (c *Coordinator) replay(i int, p Partition, loaded map[string]meta) (int, error) {
	var n int
	apply := func(at int64, key, value []byte) {
		n++
		if err := replayRecord(key, value, loaded); err != nil {
			c.log.Error("skipped an unreadable record", "partition", i, "offset", at, "err", err)
		}
	}
	hw := p.HighWatermark()
	for off := p.StartOffset(); off < hw; {
		data, err := p.Read(off, loadReadBytes)
		if err != nil {
			return n, err
		}
		next, err := forEachRecord(data, apply)
		if err != nil {
			c.log.Error("skipped unreadable records", "partition", i, "from", off, "err", err)
		}
		if next <= off {
			break // nothing more below the high watermark
		}
		off = next
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
