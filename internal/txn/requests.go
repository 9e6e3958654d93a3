package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// InitProducerID gives a transactional producer its producer id and epoch
// (Kafka's handleInitProducerId). pid and epoch are the producer's current
// ones (KIP-360) or -1. An unknown id gets a new producer id with epoch 0;
// an idle one gets its epoch bumped (a new producer id when the epoch is
// exhausted), fencing any older producer with that id. An Ongoing
// transaction is aborted first, with the epoch bumped, in the background,
// and the answer is ErrConcurrentTransactions (the client retries and gets
// the next bump). Returns once the new state is durable.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeout time.Duration, pid int64, epoch int16) (int64, int16, error) {
	if id == "" {
		return -1, -1, ErrInvalidRequest
	}
	timeoutMs := timeout.Milliseconds()
	if timeoutMs <= 0 || timeout > c.cfg.MaxTimeout || timeoutMs > math.MaxInt32 {
		return -1, -1, ErrInvalidTransactionTimeout
	}
	t, err := c.lockOrCreate(id)
	if err != nil {
		return -1, -1, err
	}
	defer t.mu.Unlock()
	if t.pending {
		return -1, -1, ErrConcurrentTransactions
	}
	expected := pid >= 0
	// The producer names an id that is neither current nor, with an
	// exhausted epoch, the one just rotated away from (a retry whose
	// answer got lost); an epoch of -1 means the entry was just created.
	if expected && t.epoch >= 0 && pid != t.pid && (pid != t.prevPID || !exhausted(epoch)) {
		return -1, -1, ErrProducerFenced
	}
	now := c.nowMs()
	switch {
	case t.state.preparing() || t.state == statePrepareEpochFence:
		return -1, -1, ErrConcurrentTransactions
	case t.state == stateOngoing:
		if err := c.fence(t, now); err != nil {
			return -1, -1, err
		}
		return -1, -1, ErrConcurrentTransactions
	}
	var next meta
	if exhausted(t.epoch) && (!expected || epoch == t.epoch) {
		newPID, err := c.nextProducerID()
		if err != nil {
			return -1, -1, err
		}
		next = t.meta.rotate(newPID, expected, int32(timeoutMs), now)
	} else {
		var ok bool
		if next, ok = t.meta.bumpEpoch(expected, epoch, int32(timeoutMs), now); !ok {
			return -1, -1, ErrProducerFenced
		}
	}
	if err := c.write(t, &next); err != nil {
		return -1, -1, err
	}
	c.log.Debug("initialized transactional id", "id", id, "producer_id", next.pid, "epoch", next.epoch)
	return next.pid, next.epoch, nil
}

// lockOrCreate returns id's entry locked, creating it (Empty, a new
// producer id, epoch -1, in memory only until InitProducerID writes it) when
// unknown. An entry is made only in a partition served here, after
// __transaction_state is created if it does not exist yet.
func (c *Coordinator) lockOrCreate(id string) (*txn, error) {
	for {
		t, err := c.lockTxn(id)
		if err != nil || t != nil {
			return t, err
		}
		c.mu.Lock()
		err = c.topicLocked(true)
		var home *served
		if err == nil {
			home, err = c.homeLocked(id)
		}
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if home == nil {
			return nil, fmt.Errorf("%w: %s does not exist", ErrNotCoordinator, StateTopic)
		}
		pid, err := c.nextProducerID()
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		if now, err := c.homeLocked(id); err != nil || now != home {
			c.mu.Unlock()
			if err != nil {
				return nil, err
			}
			continue // reloaded meanwhile
		}
		if c.txns[id] != nil {
			c.mu.Unlock()
			continue // created meanwhile; the id allocated here is dropped
		}
		t = &txn{id: id, home: home, meta: meta{state: stateEmpty, pid: pid, epoch: -1, lastEpoch: -1, prevPID: -1,
			nextPID: -1, startMs: -1, updateMs: c.nowMs()}}
		c.txns[id] = t
		c.mu.Unlock()
		t.mu.Lock()
		if !t.removed {
			return t, nil
		}
		t.mu.Unlock()
	}
}

func (c *Coordinator) nextProducerID() (int64, error) {
	pid, err := c.ids.NextProducerID()
	if err != nil {
		return -1, fmt.Errorf("txn: allocating a producer id: %w", err)
	}
	return pid, nil
}

// fence aborts t's Ongoing transaction on the coordinator's own account:
// PrepareAbort with the epoch bumped, durable, then markers and completion
// in the background. Caller holds t.mu.
func (c *Coordinator) fence(t *txn, now int64) error {
	nextPID := int64(-1)
	if t.epoch == math.MaxInt16 {
		pid, err := c.nextProducerID()
		if err != nil {
			return err
		}
		nextPID = pid
	}
	next := t.meta.fence(nextPID, now)
	if err := c.write(t, &next); err != nil {
		return err
	}
	c.startFinish(t)
	return nil
}

// AddPartitions adds partitions to the producer's transaction, starting it
// (Ongoing) if none is in progress. Returns once durable; nothing is
// written when every partition is already in the ongoing transaction.
// While another record of the id is being made durable it answers
// ErrConcurrentTransactions, as Kafka.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []model.TopicPartition) error {
	return c.addPartitions(ctx, id, pid, epoch, tps, false)
}

// addPartitions is AddPartitions; with queue, a request that finds a
// record of the id in flight that does not end its transaction (another
// partition leader adding its partitions: KIP-890's leaders add theirs at
// once, one request per broker) waits for it to be durable, or for ctx to
// end, rather than answering ErrConcurrentTransactions, which would send
// the producer's batches back to it to retry.
func (c *Coordinator) addPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []model.TopicPartition,
	queue bool) error {
	if id == "" {
		return ErrInvalidRequest
	}
	t, err := c.lockTxn(id)
	if err != nil {
		return err
	}
	if t == nil {
		return ErrInvalidProducerIDMapping
	}
	defer t.mu.Unlock()
	for queue && t.pending && !t.ending {
		settled := t.settled
		t.mu.Unlock()
		select {
		case <-settled:
		case <-ctx.Done():
		}
		t.mu.Lock()
		if t.removed || ctx.Err() != nil {
			return ErrConcurrentTransactions
		}
	}
	switch {
	case t.pid != pid:
		return ErrInvalidProducerIDMapping
	case t.epoch != epoch:
		return ErrProducerFenced
	case t.pending || t.state.preparing():
		return ErrConcurrentTransactions
	}
	if t.state == stateOngoing && !slices.ContainsFunc(tps, func(tp model.TopicPartition) bool { return !t.has(tp) }) {
		return nil
	}
	next := t.meta.addPartitions(tps, c.nowMs())
	return c.write(t, &next)
}

// Verify checks that tp is in the producer's ongoing transaction (KIP-890
// part 1: a partition verifies a transactional produce before appending
// it). Errors: ErrInvalidProducerIDMapping, ErrProducerFenced,
// ErrConcurrentTransactions while the transaction ends (as Kafka), and
// ErrInvalidTxnState when no transaction is ongoing or tp is not in it.
func (c *Coordinator) Verify(id string, pid int64, epoch int16, tp model.TopicPartition) error {
	t, err := c.lockTxn(id)
	if err != nil {
		return err
	}
	if t == nil {
		return ErrInvalidProducerIDMapping
	}
	defer t.mu.Unlock()
	switch {
	case t.pid != pid:
		return ErrInvalidProducerIDMapping
	case t.epoch != epoch:
		return ErrProducerFenced
	case t.state.preparing() || t.ending:
		return ErrConcurrentTransactions
	case t.state != stateOngoing || !t.has(tp):
		return ErrInvalidTxnState
	}
	return nil
}

// CheckPartitions is what a partition leader asks of the coordinator before
// it appends a transactional batch (KIP-890): with add (Produce v12+,
// TxnOffsetCommit v5+) tps join the producer's transaction, as
// AddPartitions but waiting behind another leader's add; without, each is
// verified to be in it, as Verify. When another broker coordinates id the
// question goes to it through Remote. It returns one error per partition,
// in order. Before __transaction_state is known here the answer is
// ErrNotCoordinator, which producers retry: this broker's metadata may lag
// the coordinator's.
func (c *Coordinator) CheckPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []model.TopicPartition,
	add bool) []error {
	if id != "" && c.remote != nil {
		c.mu.Lock()
		_, err := c.homeLocked(id)
		c.mu.Unlock()
		if errors.Is(err, errElsewhere) {
			return c.remote.CheckPartitions(ctx, id, pid, epoch, tps, add)
		}
	}
	return c.CheckPartitionsHere(ctx, id, pid, epoch, tps, add)
}

// CheckPartitionsHere is CheckPartitions answered by this coordinator only
// (AddPartitionsToTxn v4+, which partition leaders send it): an id
// coordinated elsewhere is ErrNotCoordinator.
func (c *Coordinator) CheckPartitionsHere(ctx context.Context, id string, pid int64, epoch int16,
	tps []model.TopicPartition, add bool) []error {
	errs := make([]error, len(tps))
	all := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if id == "" {
		return all(ErrInvalidRequest)
	}
	c.mu.Lock()
	home, err := c.homeLocked(id)
	c.mu.Unlock()
	switch {
	case err != nil:
		return all(err)
	case home == nil:
		return all(fmt.Errorf("%w: %s is not known here yet", ErrNotCoordinator, StateTopic))
	case add:
		return all(c.addPartitions(ctx, id, pid, epoch, tps, true))
	}
	for i, tp := range tps {
		errs[i] = c.Verify(id, pid, epoch, tp)
	}
	return errs
}

// EndTxn commits or aborts the producer's transaction (Kafka's
// handleEndTransaction). v2 is EndTxn v5+ (KIP-890 part 2): every EndTxn
// bumps the epoch (a new producer id when exhausted), the markers carry the
// bumped epoch, and a retry with the epoch before the bump is recognised.
// It returns the producer id and epoch the client continues with, once the
// markers are durable and the Complete state is written (see writeAhead);
// if the markers fail (or ctx ends) once the Prepare state is durable, it
// answers success and a background retry completes the transaction.
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit, v2 bool) (int64, int16, error) {
	if id == "" {
		return -1, -1, ErrInvalidRequest
	}
	t, err := c.lockTxn(id)
	if err != nil {
		return -1, -1, err
	}
	if t == nil {
		return -1, -1, ErrInvalidProducerIDMapping
	}
	var next *meta
	var retPID int64
	var retEpoch int16
	if v2 {
		next, err = c.prepareEndV2(t, pid, epoch, commit)
	} else {
		next, err = c.prepareEndV1(t, pid, epoch, commit)
	}
	if err != nil || next == nil {
		retPID, retEpoch = t.pid, t.epoch
		t.mu.Unlock()
		if err != nil {
			return -1, -1, err
		}
		return retPID, retEpoch, nil // a retry of a completed EndTxn
	}
	if err := c.write(t, next); err != nil {
		t.mu.Unlock()
		return -1, -1, err
	}
	retPID, retEpoch = t.answer()
	done := c.startFinish(t)
	t.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return retPID, retEpoch, nil
}

// prepareEndV1 checks an EndTxn v0-4 and returns the Prepare state to
// write; nil and no error answers success without a write. Caller holds
// t.mu.
func (c *Coordinator) prepareEndV1(t *txn, pid int64, epoch int16, commit bool) (*meta, error) {
	switch {
	case t.pid != pid:
		return nil, ErrInvalidProducerIDMapping
	case t.epoch != epoch:
		return nil, ErrProducerFenced
	case t.pending:
		return nil, ErrConcurrentTransactions
	}
	switch t.state {
	case stateOngoing:
		next := t.meta.prepareEnd(commit, clientVersionV1, -1, false, c.nowMs())
		return &next, nil
	case stateCompleteCommit, stateCompleteAbort:
		if commit == (t.state == stateCompleteCommit) {
			return nil, nil // a retry: the transaction ended that way
		}
	case statePrepareCommit, statePrepareAbort:
		if commit == (t.state == statePrepareCommit) {
			return nil, ErrConcurrentTransactions
		}
	}
	return nil, ErrInvalidTxnState
}

// prepareEndV2 is prepareEndV1 for EndTxn v5+, after Kafka's table:
//
//	               Abort            Commit
//	               retry  current   retry  current
//	Empty          fenced bump      fenced invalid
//	CompleteAbort  ok     bump      invalid invalid
//	CompleteCommit invalid bump     ok     invalid
//
// where a retry carries the epoch before the last bump (or, after a
// producer id rotation, the old id with epoch MaxInt16-1), and bump is an
// abort of a transaction with no partitions that bumps the epoch.
func (c *Coordinator) prepareEndV2(t *txn, pid int64, epoch int16, commit bool) (*meta, error) {
	retryOnOverflow := t.prevPID == pid && epoch == math.MaxInt16-1 && t.epoch == 0
	retryOnBump := int32(t.epoch) == int32(epoch)+1
	retry := retryOnBump || retryOnOverflow
	var validEpoch bool
	switch {
	case t.state.preparing():
		validEpoch = retryOnBump
	case t.state.complete():
		validEpoch = retry || epoch == t.epoch
	default:
		validEpoch = epoch == t.epoch
	}
	switch {
	case t.pid != pid && !retryOnOverflow:
		return nil, ErrInvalidProducerIDMapping
	case !validEpoch:
		return nil, ErrProducerFenced
	case t.pending:
		return nil, ErrConcurrentTransactions
	}
	prepare := func(commit, empty bool) (*meta, error) {
		nextPID := int64(-1)
		if exhausted(t.epoch) {
			pid, err := c.nextProducerID()
			if err != nil {
				return nil, err
			}
			nextPID = pid
		}
		next := t.meta.prepareEnd(commit, clientVersionV2, nextPID, empty, c.nowMs())
		return &next, nil
	}
	switch t.state {
	case stateOngoing:
		return prepare(commit, false)
	case stateCompleteCommit, stateCompleteAbort:
		same := commit == (t.state == stateCompleteCommit)
		switch {
		case retry && same:
			return nil, nil
		case !retry && !commit:
			return prepare(false, true)
		}
	case statePrepareCommit, statePrepareAbort:
		if commit == (t.state == statePrepareCommit) {
			return nil, ErrConcurrentTransactions
		}
	case stateEmpty:
		if !commit {
			return prepare(false, true)
		}
	}
	return nil, ErrInvalidTxnState
}

// Describe returns a transactional id's state (DescribeTransactions).
func (c *Coordinator) Describe(id string) (TxnInfo, error) {
	t, err := c.lockTxn(id)
	if err != nil {
		return TxnInfo{}, err
	}
	if t == nil {
		return TxnInfo{}, ErrTransactionalIDNotFound
	}
	defer t.mu.Unlock()
	return t.info(), nil
}

// List returns the transactional ids f selects, by id
// (ListTransactions). Nothing before Load finishes or after Close.
func (c *Coordinator) List(f ListFilter) []TxnInfo {
	c.mu.Lock()
	ready := c.loaded && !c.closed
	c.mu.Unlock()
	if !ready {
		return nil
	}
	now := c.nowMs()
	var out []TxnInfo
	for _, t := range c.snapshot() {
		t.mu.Lock()
		ok := !t.removed &&
			(len(f.States) == 0 || slices.Contains(f.States, t.state.String())) &&
			(len(f.ProducerIDs) == 0 || slices.Contains(f.ProducerIDs, t.pid)) &&
			(f.MinDuration <= 0 || now-t.startMs >= f.MinDuration.Milliseconds()) &&
			(f.IDPattern == nil || f.IDPattern.MatchString(t.id))
		if ok {
			out = append(out, t.info())
		}
		t.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b TxnInfo) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}
