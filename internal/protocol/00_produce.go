package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/quota"
	"github.com/strandlog/strand/internal/replica"
)

// Produce: v0-12 advertised, v3-12 served
//
// Behaviour:
//   - v0-2 are advertised, as Kafka 4 does, because librdkafka only
//     compresses when the advertised minimum is 0; every partition of such a
//     request is answered UNSUPPORTED_VERSION.
//   - Each partition's records must be exactly one record batch v2 with
//     base offset 0 (INVALID_RECORD otherwise; CORRUPT_MESSAGE for a
//     length or magic no batch can have, as Kafka; see oneBatch); the log
//     validates it (CRC, sizes, offsets) and stores it as received.
//   - Batches are appended in request order while the request is read; the
//     answer waits for durability (the topic's flush policy) off the read
//     path, so pipelined requests share an fsync, and the partitions of
//     one request are awaited together.
//   - acks=all (-1) on a replicated partition: refused with
//     NOT_ENOUGH_REPLICAS while the in-sync set is below
//     min.insync.replicas; answered once the high watermark passes the
//     batch (every in-sync replica has it, synced under the default flush
//     policy); REQUEST_TIMED_OUT after the request's timeout,
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND if the in-sync set shrank below the
//     minimum meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved. acks=1
//     is answered after the leader's own write.
//   - Idempotent producers (batch producer id >= 0; see replica/producer.go
//     for the rules, which are Kafka 4's): a retry of one of the producer's
//     last five batches is answered NONE with the original base offset (and
//     log-append time on LogAppendTime topics) and is not written again; its
//     answer waits until the original is durable. A fenced epoch is
//     INVALID_PRODUCER_EPOCH, a gap or a new epoch not starting at sequence
//     0 OUT_OF_ORDER_SEQUENCE_NUMBER. An unknown producer may start at any
//     sequence (Kafka 4 never answers UNKNOWN_PRODUCER_ID here).
//   - acks=0 gets no answer, but a failure on any partition closes the
//     connection, as Kafka does; acks other than 0, 1, -1 is
//     INVALID_REQUIRED_ACKS.
//   - v8+: the error message names the reason; records that break the
//     topic's rules (no key on a compacted topic, a timestamp out of the
//     topic's window) are each named by their index in the batch
//     (KIP-467's RecordErrors), the batch refused whole as Kafka refuses it.
//   - The internal topics (__consumer_offsets) are INVALID_TOPIC_EXCEPTION:
//     only the coordinator writes them. Another broker (its client id and
//     CLUSTER_ACTION) may write the hand-off ledger's and the fetch
//     positions' topics, whose partitions it does not lead.
//   - With an authorizer: WRITE on the transactional id
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition) and on
//     each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
//   - A partition this broker does not lead is NOT_LEADER_OR_FOLLOWER; v10+
//     names the leader and its listener (KIP-951's CurrentLeader and
//     NodeEndpoints), so the client goes there without asking for metadata.
//
//   - Transactional batches: before v12 the partition must be in the
//     producer's ongoing transaction (added with AddPartitionsToTxn), else
//     INVALID_TXN_STATE; from v12 (KIP-890) the request adds it, durably,
//     before the batch is written. An old epoch is INVALID_PRODUCER_EPOCH; a
//     transaction still completing is CONCURRENT_TRANSACTIONS from v12 and
//     NOT_ENOUGH_REPLICAS before (both retried by clients). Transactional
//     batches in a request without a transactional id are INVALID_RECORD.
//
// Note: resp.Topics' partition slices are allocated whole before any
// partition is filled, so the pointers kept for the deferred part stay
// valid.

func init() { register(0, 0, 12, handleProduce) }

type producePart struct {
	resp *kmsg.ProduceResponseTopicPartition
	p    Partition
	wait func() error
	end  int64 // the offset after the write: acks=all waits for the high watermark to pass it
}

func handleProduce(ctx context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)

	var fail *kerr.Error
	switch {
	case req.Version < 3:
		fail = kerr.UnsupportedVersion
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		fail = kerr.InvalidRequiredAcks
	}
	if fail == nil && req.TransactionID != nil && !b.allowed(r, acl.Write, acl.TransactionalID, *req.TransactionID) {
		fail = kerr.TransactionalIDAuthorizationFailed
	}
	// The topics the principal may not write are refused before anything
	// is done for them.
	var denied map[string]bool
	for _, rt := range req.Topics {
		if fail == nil && !b.allowed(r, acl.Write, acl.Topic, rt.Topic) {
			if denied == nil {
				denied = map[string]bool{}
			}
			denied[rt.Topic] = true
		}
	}
	var admitted map[model.TopicPartition]txnAdmission
	if fail == nil && req.TransactionID != nil {
		admitted = b.admitTxnPartitions(ctx, req, denied)
	}
	var (
		parts   []producePart
		leaders endpoints
	)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, st)
		topic := &resp.Topics[len(resp.Topics)-1]
		for i, rp := range rt.Partitions {
			sp := &topic.Partitions[i]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			if fail != nil {
				sp.ErrorCode, sp.BaseOffset = fail.Code, -1
				continue
			}
			if denied[rt.Topic] {
				sp.ErrorCode, sp.BaseOffset = kerr.TopicAuthorizationFailed.Code, -1
				continue
			}
			pp, err := b.produceOne(ctx, r, admitted, rt.Topic, rp, sp)
			if err != nil {
				setProduceError(sp, req.Version, err)
				if leader, epoch, ok := leaderHint(err); ok && req.Version >= 10 {
					sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
					if leaders == nil {
						leaders = endpoints{}
					}
					b.addEndpoint(leaders, leader, r.Listener)
				}
				continue
			}
			parts = append(parts, pp)
		}
	}
	if req.Version >= 10 {
		resp.Brokers = leaders.produce()
	}
	SetThrottle(resp, b.throttle(r, quota.Produce, float64(r.Size)))
	return &Response{Body: resp, Defer: func(ctx context.Context) (*Response, error) {
		timeout := time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond
		b.syncParts(parts)
		awaitAll(parts, func(pp producePart) {
			err := pp.wait()
			if err == nil && req.Acks == -1 {
				err = pp.p.WaitReplicated(ctx, pp.end, timeout)
			}
			if err != nil {
				setProduceError(pp.resp, req.Version, err)
				pp.resp.BaseOffset = -1
			}
			pp.resp.LogStartOffset = pp.p.StartOffset()
		})
		if req.Acks == 0 {
			// No answer is expected, so Kafka closes the connection
			// when a partition failed: the client notices and
			// refreshes its metadata.
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						return nil, fmt.Errorf("acks=0 produce failed on %s[%d]: %s", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
					}
				}
			}
			return &Response{}, nil
		}
		return &Response{Body: resp}, nil
	}}, nil
}

// syncParts makes the parts' appends durable together ahead of their
// waits, which then find them durable (or report why not). A request
// naming one partition leaves it to its wait.
func (b *Broker) syncParts(parts []producePart) {
	if len(parts) < 2 {
		return
	}
	ps := make([]Partition, len(parts))
	ends := make([]int64, len(parts))
	for i, pp := range parts {
		ps[i], ends[i] = pp.p, pp.end
	}
	b.Replicas.SyncAppends(ps, ends)
}

// maxParallelWaits bounds the partitions of one produce request whose
// fsyncs and replication are awaited at the same time.
const maxParallelWaits = 64

// awaitAll runs wait for every part, those of different partitions at the
// same time: their fsyncs and followers overlap instead of adding up. Each
// part's response is its own, so no two waits touch the same memory. Parts
// that need no waiting (synced by syncParts, no followers) run in line: a
// goroutine each cost a tenth of the broker's CPU with 1000 partitions.
func awaitAll(parts []producePart, wait func(producePart)) {
	if len(parts) == 1 {
		wait(parts[0])
		return
	}
	var (
		sem chan struct{}
		wg  sync.WaitGroup
	)
	for _, pp := range parts {
		if pp.p.Settled(pp.end) {
			wait(pp)
			continue
		}
		if sem == nil {
			sem = make(chan struct{}, maxParallelWaits)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			wait(pp)
		})
	}
	wg.Wait()
}

func (b *Broker) produceOne(ctx context.Context, r *Request, admitted map[model.TopicPartition]txnAdmission,
	topic string, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition) (producePart, error) {
	req := r.Body.(*kmsg.ProduceRequest)
	if internalTopic(topic) && !b.peerWritable(r, topic) {
		// Only the coordinators write their topics (Kafka: "Cannot
		// append to internal topic").
		return producePart{}, fmt.Errorf("%w: cannot append to internal topic %s", cluster.ErrInvalidTopic, topic)
	}
	p, err := b.leading(model.TopicPartition{Topic: topic, Partition: rp.Partition})
	if err != nil {
		return producePart{}, err
	}
	if err := oneBatch(rp.Records); err != nil {
		return producePart{}, err
	}
	if req.Acks == -1 {
		if err := p.CheckEnoughReplicas(); err != nil {
			return producePart{}, err
		}
	}
	var guard *replica.TxnGuard
	if batch := model.Batch(rp.Records); batch.IsTransactional() {
		a, ok := admitted[p.TopicPartition()]
		if !ok {
			if req.Version < 12 {
				g := p.TxnGuard(batch.ProducerID())
				a.guard = &g
			}
			a.err = b.checkTxnProduce(ctx, req.TransactionID, req.Version, []model.TopicPartition{p.TopicPartition()}, batch)
		}
		if a.err != nil {
			return producePart{}, a.err
		}
		guard = a.guard
	}
	var (
		res  replica.AppendResult
		wait func() error
	)
	if guard != nil {
		res, wait, err = p.AppendVerified(rp.Records, *guard)
	} else {
		res, wait, err = p.Append(rp.Records)
	}
	if err != nil {
		return producePart{}, err
	}
	sp.BaseOffset, sp.LogAppendTime = res.BaseOffset, res.LogAppendTime
	if b.Meter != nil {
		var records int64
		if !res.Duplicate { // a producer's retry adds nothing
			records = res.LastOffset - res.BaseOffset + 1
		}
		b.Meter.Produced(topic, len(rp.Records), records)
	}
	return producePart{resp: sp, p: p, wait: wait, end: res.LastOffset + 1}, nil
}

// oneBatch checks that records hold exactly one v2 batch, as Kafka requires
// of produce requests from v3 on, with Kafka's codes: its batch iterator
// (ByteBufferLogInputStream) calls a length below the smallest legacy
// record's or a magic outside 0..2 CORRUPT_MESSAGE; ProduceRequest's
// validateRecords calls no whole batch, a magic 0 or 1 batch or a second
// batch INVALID_RECORD; and a client batch's base offset must be 0
// (INVALID_RECORD, UnifiedLog.analyzeAndValidateRecords). The log checks
// the rest (size limit, CRC, records).
func oneBatch(records []byte) error {
	const (
		logOverhead     = 12 // base offset and length
		headerUpToMagic = 17
		minLegacyRecord = 14 // LegacyRecord.RECORD_OVERHEAD_V0
	)
	if len(records) < logOverhead {
		return fmt.Errorf("%w: a produce request needs one record batch per partition", replica.ErrInvalidRecord)
	}
	length := int32(binary.BigEndian.Uint32(records[model.BatchLengthPos:]))
	if length < minLegacyRecord {
		return fmt.Errorf("%w: batch length %d is below the minimum record overhead", replica.ErrCorruptMessage, length)
	}
	if len(records) < headerUpToMagic {
		return fmt.Errorf("%w: a produce request needs one record batch per partition", replica.ErrInvalidRecord)
	}
	if m := int8(records[model.BatchMagicPos]); m < 0 || m > model.BatchMagic {
		return fmt.Errorf("%w: invalid magic %d", replica.ErrCorruptMessage, m)
	}
	if int64(length)+logOverhead > int64(len(records)) {
		return fmt.Errorf("%w: batch of %d bytes, only %d present", replica.ErrInvalidRecord, int64(length)+logOverhead, len(records))
	}
	if m := int8(records[model.BatchMagicPos]); m != model.BatchMagic {
		return fmt.Errorf("%w: produce requests may only carry record batches with magic 2, not %d", replica.ErrInvalidRecord, m)
	}
	if int64(length)+logOverhead < int64(len(records)) {
		return fmt.Errorf("%w: a produce request carries exactly one record batch per partition", replica.ErrInvalidRecord)
	}
	if off := model.Batch(records).BaseOffset(); off != 0 {
		return fmt.Errorf("%w: the base offset of a produced batch must be 0, not %d", replica.ErrInvalidRecord, off)
	}
	return nil
}

func setProduceError(sp *kmsg.ProduceResponseTopicPartition, version int16, err error) {
	sp.ErrorCode = errorCode(err)
	sp.BaseOffset = -1
	if version < 8 {
		return
	}
	sp.ErrorMessage = errorMessage(err)
	// KIP-467: the records that broke the topic's rules, by index, so
	// that a client fails those and tells the others apart.
	var refused *replica.RecordErrors
	if errors.As(err, &refused) {
		for _, r := range refused.Records {
			re := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			re.RelativeOffset, re.ErrorMessage = r.Index, kmsg.StringPtr(r.Message)
			sp.ErrorRecords = append(sp.ErrorRecords, re)
		}
	}
}
