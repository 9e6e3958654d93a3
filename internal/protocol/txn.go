package protocol

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
	"github.com/strandlog/strand/internal/txn"
)

// Shared parts of the transaction APIs (AddPartitionsToTxn, AddOffsetsToTxn,
// EndTxn, TxnOffsetCommit, WriteTxnMarkers, and transactional Produce).

// txnCode is the Kafka code for a transaction coordinator error in a
// response of version: PRODUCER_FENCED came with KIP-588 at fencedSince, and
// older clients get INVALID_PRODUCER_EPOCH instead, as Kafka answers them.
func txnCode(err error, version, fencedSince int16) int16 {
	code := errorCode(err)
	if code == kerr.ProducerFenced.Code && version < fencedSince {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// checkTxnID refuses an empty transactional id, as Kafka's coordinator does.
func checkTxnID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty transactional id", errInvalidRequest)
	}
	return nil
}

// offsetsPartitionFor is the __consumer_offsets partition holding a
// group's offsets, which a transaction that commits them includes.
func (b *Broker) offsetsPartitionFor(groupID string) (model.TopicPartition, error) {
	if err := b.Groups.EnsureTopic(); err != nil {
		return model.TopicPartition{}, err
	}
	return model.TopicPartition{Topic: group.OffsetsTopic, Partition: b.Groups.PartitionFor(groupID)}, nil
}

// checkTxnProduce admits a transactional batch to tps (see
// checkTxnPartitions) and returns the first refusal.
func (b *Broker) checkTxnProduce(ctx context.Context, txnID *string, version int16, tps []model.TopicPartition, batch model.Batch) error {
	for _, err := range b.checkTxnPartitions(ctx, txnID, version, tps, batch) {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkTxnPartitions admits a transactional batch to each of tps, at the
// transaction's coordinator (this broker's or, through the peer client,
// another's: txn.Coordinator.CheckPartitions): with KIP-890's protocol
// (Produce v12+) the request itself adds the partitions to the
// transaction, durably before the batch is written, so a crash can never
// leave data of a transaction whose coordinator does not know the
// partition (a hanging transaction); before v12 the client added them with
// AddPartitionsToTxn and each is verified to be in the ongoing transaction
// (KIP-890 part 1). It returns one error per partition, as Produce
// answers it.
func (b *Broker) checkTxnPartitions(ctx context.Context, txnID *string, version int16, tps []model.TopicPartition, batch model.Batch) []error {
	errs := make([]error, len(tps))
	if txnID == nil {
		for i := range errs {
			errs[i] = fmt.Errorf("%w: transactional records in a request without a transactional id", replica.ErrInvalidRecord)
		}
		return errs
	}
	for i, err := range b.Txns.CheckPartitions(ctx, *txnID, batch.ProducerID(), batch.ProducerEpoch(), tps, version >= 12) {
		errs[i] = produceTxnError(err, version)
	}
	return errs
}

// produceTxnError is a coordinator's refusal as Produce answers it.
func produceTxnError(err error, version int16) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, txn.ErrProducerFenced):
		// Produce speaks of epochs, not of fencing.
		return fmt.Errorf("%w: %v", replica.ErrInvalidProducerEpoch, err)
	case version < 12 && (errors.Is(err, txn.ErrConcurrentTransactions) ||
		errors.Is(err, txn.ErrCoordinatorLoadInProgress) || errors.Is(err, txn.ErrNotCoordinator)):
		// Older clients do not retry these on produce; Kafka answers them
		// NOT_ENOUGH_REPLICAS, which they do retry.
		return fmt.Errorf("%w: %v", errNotEnoughReplicas, err)
	}
	return err
}

// txnAdmission is how a produce request's transactional batch to one
// partition was admitted: err refuses it; guard, for the older protocol,
// is what the partition knew when the coordinator verified it.
type txnAdmission struct {
	err   error
	guard *replica.TxnGuard
}

// admitTxnPartitions admits the transactional batches of a produce request
// before any is written: the partitions whose batches carry the same
// producer id and epoch go to the coordinator together, so a request
// spanning many partitions adds them all with one durable write, or, when
// another broker coordinates the transaction, one request to it. It
// returns the outcome per partition; partitions it could not judge (not
// led here, not one whole batch) are left to produceOne.
func (b *Broker) admitTxnPartitions(ctx context.Context, req *kmsg.ProduceRequest, denied map[string]bool) map[model.TopicPartition]txnAdmission {
	type producer struct {
		id    int64
		epoch int16
	}
	groups := map[producer][]model.TopicPartition{}
	first := map[producer]model.Batch{}
	out := map[model.TopicPartition]txnAdmission{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			tp := model.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			if oneBatch(rp.Records) != nil || internalTopic(rt.Topic) || denied[rt.Topic] {
				continue
			}
			batch := model.Batch(rp.Records)
			if !batch.IsTransactional() {
				continue
			}
			p, ok := b.Replicas.Get(tp)
			if !ok || !p.IsLeader() {
				continue
			}
			k := producer{batch.ProducerID(), batch.ProducerEpoch()}
			groups[k] = append(groups[k], tp)
			if _, ok := first[k]; !ok {
				first[k] = batch
			}
			if req.Version < 12 {
				g := p.TxnGuard(k.id)
				out[tp] = txnAdmission{guard: &g}
			}
		}
	}
	for k, tps := range groups {
		errs := b.checkTxnPartitions(ctx, req.TransactionID, req.Version, tps, first[k])
		for i, tp := range tps {
			a := out[tp]
			a.err = errs[i]
			out[tp] = a
		}
	}
	return out
}

// WriteMarkers writes a transaction marker to each partition, which this
// broker must lead, and waits for all of them to be durable; a marker in
// __consumer_offsets then makes the group coordinator apply or drop the
// transaction's offsets. It returns one error per partition, in order: a
// partition led elsewhere is NOT_LEADER_OR_FOLLOWER, one the cluster does
// not have replica.ErrUnknownPartition.
func (b *Broker) WriteMarkers(m replica.Marker, tps []model.TopicPartition) []error {
	errs := make([]error, len(tps))
	waits := make([]func() error, len(tps))
	parts := make([]Partition, len(tps))
	ends := make([]int64, len(tps))
	for i, tp := range tps {
		p, err := b.leading(tp)
		if err == nil {
			// As Kafka writes markers: acks=all, so with fewer in-sync
			// replicas than min.insync.replicas the coordinator retries.
			err = p.CheckEnoughReplicas()
		}
		if err != nil {
			errs[i] = err
			continue
		}
		off, wait, err := p.WriteMarker(m)
		errs[i], waits[i], parts[i], ends[i] = err, wait, p, off+1
	}
	// Each partition is its own file: their fsyncs run at once. A marker
	// is answered once every in-sync replica has it: one only the leader
	// had would be lost with it, and the new leader would count the
	// transaction's records as part of the producer's next transaction,
	// committed with it even when this one was aborted.
	var wg sync.WaitGroup
	for i, tp := range tps {
		if errs[i] != nil || waits[i] == nil {
			continue
		}
		wg.Go(func() {
			if errs[i] = waits[i](); errs[i] == nil {
				errs[i] = parts[i].WaitReplicated(context.Background(), ends[i], markerReplicationTimeout)
			}
			if errs[i] == nil && tp.Topic == group.OffsetsTopic {
				b.Groups.CompleteTxn(tp.Partition, m.ProducerID, m.Commit)
			}
		})
	}
	wg.Wait()
	return errs
}

// markerReplicationTimeout bounds how long a marker waits for the in-sync
// replicas, as the coordinators' own writes do; past it the coordinator
// retries.
const markerReplicationTimeout = 5 * time.Second

// maxCoordinatorEpoch is the highest coordinator epoch a transaction
// coordinator can have now: the highest leader epoch of __transaction_state's
// partitions (0 before it exists, and on a single node, where leader
// epochs stay 0).
func (b *Broker) maxCoordinatorEpoch() int32 {
	var top int32
	if t, ok := b.Cluster.Topic(txn.StateTopic); ok {
		for _, st := range t.States {
			top = max(top, st.LeaderEpoch)
		}
	}
	return top
}
