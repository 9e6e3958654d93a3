package group

import (
	"errors"
	"fmt"

	"github.com/strandlog/strand/internal/model"
)

// Transactional offset commits (Kafka's TxnOffsetCommit), as Kafka 4's
// OffsetMetadataManager keeps them:
//
//  1. CommitTxn appends the offsets as one transactional batch of the
//     producer. From the append on they are pending: held per group per
//     producer id (offsetStore.pending), invisible to FetchOffsets, and they
//     make a RequireStable fetch of their partition UNSTABLE_OFFSET_COMMIT.
//  2. The transaction coordinator writes a marker (a control batch) for the
//     producer to the partition. Once it is durable the server calls
//     CompleteTxn: a commit applies the producer's pending offsets of every
//     group of the partition, an abort drops them.
//  3. Applying follows the log: a pending offset replaces the committed one
//     only if it was written later in __consumer_offsets, so a plain commit
//     written after the transaction's offset wins even though the
//     transaction commits after it (offsetStore.set).
//
// Load replays the same rules from the log (load.go): transactional
// batches are pending until a marker of their producer later in the
// partition; what is still pending at the end stays pending, its marker
// arrives through CompleteTxn.
//
// Finding the groups for a marker: each partition's writer indexes, per
// producer id, the groups it wrote transactional offsets for, in the same
// critical section as the append (writer.go). A marker is written after
// the batches of its transaction, so when it is durable the index has
// them. CompleteTxn does not know the marker's offset: pending offsets of
// the producer appended after the marker (only a client that commits
// offsets outside its transaction can do that: the epoch bump of
// transaction version 2 fences such a write, and version 1 clients only
// start the next transaction after EndTxn answers) would be completed with
// it.

// TxnCommitRequest is a TxnOffsetCommit.
type TxnCommitRequest struct {
	Group         string
	ProducerID    int64
	ProducerEpoch int16
	// Generation -1 is not checked (v0-2, or a producer outside group
	// management); MemberID "" and InstanceID nil likewise. When any is
	// given, the member must be the group's and the generation its
	// current one (Kafka's ClassicGroup.validateOffsetCommit).
	Generation int32
	MemberID   string
	InstanceID *string
	Offsets    []CommitOffset
}

// CommitTxn serves a TxnOffsetCommit: it checks the committer against the
// group (an unknown group is created, Empty), writes the offsets as one
// transactional batch of the producer (attributes 0x10, its id and epoch,
// base sequence 0) to the group's __consumer_offsets partition, and
// answers once it is durable, with one error per offset, in order. The
// offsets stay pending, invisible to FetchOffsets, until CompleteTxn.
//
// A write the partition refuses is ErrNotCoordinator (or
// ErrInvalidCommitOffsetSize when too large) wrapping the partition's own
// error, so the caller can tell a fenced producer epoch from a failed
// write with errors.Is.
func (c *Coordinator) CommitTxn(req TxnCommitRequest) <-chan []error {
	ch := make(chan []error, 1)
	errs := make([]error, len(req.Offsets))
	failAll := func(err error) <-chan []error {
		for i := range errs {
			errs[i] = err
		}
		ch <- errs
		return ch
	}
	switch {
	case req.Group == "":
		return failAll(ErrInvalidGroupID)
	case req.ProducerID < 0:
		// A batch without a producer would be a plain commit: refuse
		// rather than commit outside the transaction.
		return failAll(fmt.Errorf("%w: transactional commit without a producer id", ErrUnknownServerError))
	}
	if err := c.serves(req.Group); err != nil {
		return failAll(err)
	}
	g, ok := c.lookup(req.Group, false)
	if !ok {
		if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
			// The group Kafka would create has no members.
			return failAll(ErrUnknownMemberID)
		}
		if g, ok = c.lookup(req.Group, true); !ok {
			return failAll(ErrNotCoordinator)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	check := txnCommit(req)
	if err := g.validateCommit(check); err != nil {
		return failAll(err)
	}
	g.checkOwnership(check, req.Offsets, errs)
	b := g.commitBatch(req.Offsets, c.clock.Now().UnixMilli(), -1, errs)
	recs, keep, tps, vals := b.recs, b.keep, b.tps, b.vals
	if len(recs) == 0 {
		ch <- errs
		return ch
	}
	pid := req.ProducerID
	fail := func(err error) {
		err = txnCommitError(err)
		for _, i := range keep {
			errs[i] = err
		}
		ch <- errs
	}
	appended := func(base int64) {
		pend := g.offsets.pending[pid]
		if pend == nil {
			pend = map[model.TopicPartition]offset{}
			g.offsets.pending[pid] = pend
		}
		for j, tp := range tps {
			v := vals[j]
			v.logOffset = base + int64(j)
			pend[tp] = v // in log order: the last write of a partition wins
		}
	}
	err := g.writeTxn(model.Producer{ID: pid, Epoch: req.ProducerEpoch}, recs, appended, func(base int64, err error) {
		g.offsets.inFlight--
		defer g.offsets.wakeStable()
		if err != nil {
			g.offsets.dropTxnWrite(pid, base, base+int64(len(recs)))
			fail(err)
			return
		}
		ch <- errs
	})
	if err != nil {
		fail(err)
		return ch
	}
	g.offsets.inFlight++
	return ch
}

// txnCommitError maps a failed transactional write as commitError does,
// keeping the partition's error in the chain: a fenced producer epoch is
// the client's to see (Kafka answers INVALID_PRODUCER_EPOCH or
// PRODUCER_FENCED), not a coordinator failure.
func txnCommitError(err error) error {
	switch {
	case errors.Is(err, ErrRecordTooLarge):
		return fmt.Errorf("%w: %w", ErrInvalidCommitOffsetSize, err)
	case errors.Is(err, ErrNotCoordinator), errors.Is(err, ErrCoordinatorNotAvailable):
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotCoordinator, err)
}

// CompleteTxn applies a transaction marker of producerID that is durable
// in __consumer_offsets partition `partition` (the server calls it once
// the marker's write has returned): with commit the producer's pending
// offsets of every group of the partition become committed, each unless
// the partition's committed offset was written later in the log; without,
// they are dropped. A marker for a producer with nothing pending does
// nothing.
func (c *Coordinator) CompleteTxn(partition int32, producerID int64, commit bool) {
	c.mu.Lock()
	var w *writer
	if partition >= 0 && int(partition) < len(c.writers) {
		w = c.writers[partition]
	}
	c.mu.Unlock()
	if w == nil {
		return // no __consumer_offsets yet: nothing can be pending
	}
	for _, g := range w.takeTxn(producerID) {
		g.mu.Lock()
		g.completeTxn(producerID, commit)
		g.mu.Unlock()
	}
}

// completeTxn ends producerID's transaction for the group. Caller holds
// g.mu.
func (g *group) completeTxn(producerID int64, commit bool) {
	g.offsets.complete(producerID, commit && !g.unloaded && g.state != stateDead)
}
