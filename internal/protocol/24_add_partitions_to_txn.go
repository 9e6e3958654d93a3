package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/model"
)

// AddPartitionsToTxn: v0-5 (Kafka 4.0's range)
//
// Behaviour:
//   - v0-3 (clients of the older transaction flow): adds the partitions to
//     the producer's transaction, answered once the coordinator's state is
//     durable. A partition the cluster does not have makes the whole
//     request fail: UNKNOWN_TOPIC_OR_PARTITION for it and
//     OPERATION_NOT_ATTEMPTED for the others, as Kafka.
//   - NOT_COORDINATOR for an id whose __transaction_state partition another
//     broker leads, COORDINATOR_LOAD_IN_PROGRESS while this broker is
//     loading it.
//   - Coordinator errors go on every partition: CONCURRENT_TRANSACTIONS
//     while the previous transaction is completing, PRODUCER_FENCED (v2+;
//     INVALID_PRODUCER_EPOCH before) for an old epoch,
//     INVALID_PRODUCER_ID_MAPPING for another producer id.
//   - v4+ is the brokers' batched form (KIP-890 part 1), which a partition
//     leader sends the transaction's coordinator before appending a
//     transactional batch (internal/server's remoteCoordinators): several
//     transactions, each either added (Produce v12+, TxnOffsetCommit v5+)
//     or, with VerifyOnly, checked (INVALID_TXN_STATE for a partition not
//     in the ongoing transaction). It is answered by this broker's
//     coordinator only, never passed on.
//
// Authorization: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic
// (TOPIC_AUTHORIZATION_FAILED, the other partitions
// OPERATION_NOT_ATTEMPTED); v4+, sent by brokers, needs CLUSTER_ACTION
// (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(24, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	if req.Version >= 4 {
		if !b.allowedCluster(r, acl.ClusterAction) {
			resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return reply(resp)
		}
		return b.addPartitionsBatched(req), nil
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	var tps []model.TopicPartition
	unknown := map[model.TopicPartition]bool{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := model.TopicPartition{Topic: t.Topic, Partition: p}
			if _, ok := b.Cluster.Partition(tp.Topic, tp.Partition); !ok {
				unknown[tp] = true
			}
			tps = append(tps, tp)
		}
	}
	answer := func(code func(model.TopicPartition) int16) *Response {
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition = p
				rp.ErrorCode = code(model.TopicPartition{Topic: t.Topic, Partition: p})
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return &Response{Body: resp}
	}
	if err := checkTxnID(req.TransactionalID); err != nil {
		return answer(func(model.TopicPartition) int16 { return errorCode(err) }), nil
	}
	if !b.allowed(r, acl.Write, acl.TransactionalID, req.TransactionalID) {
		return answer(func(model.TopicPartition) int16 { return kerr.TransactionalIDAuthorizationFailed.Code }), nil
	}
	if may := b.topicCheck(r, acl.Write); slices.ContainsFunc(tps, func(tp model.TopicPartition) bool { return !may(tp.Topic) }) {
		return answer(func(tp model.TopicPartition) int16 {
			if !may(tp.Topic) {
				return kerr.TopicAuthorizationFailed.Code
			}
			return kerr.OperationNotAttempted.Code
		}), nil
	}
	if len(unknown) > 0 {
		return answer(func(tp model.TopicPartition) int16 {
			if unknown[tp] {
				return kerr.UnknownTopicOrPartition.Code
			}
			return kerr.OperationNotAttempted.Code
		}), nil
	}
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		err := b.Txns.AddPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps)
		code := txnCode(err, req.Version, 2)
		return answer(func(model.TopicPartition) int16 { return code }), nil
	}}, nil
}

// addPartitionsBatched serves v4+: each transaction's partitions added, or
// verified.
func (b *Broker) addPartitionsBatched(req *kmsg.AddPartitionsToTxnRequest) *Response {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		for _, rt := range req.Transactions {
			st := kmsg.NewAddPartitionsToTxnResponseTransaction()
			st.TransactionalID = rt.TransactionalID
			var tps []model.TopicPartition
			for _, t := range rt.Topics {
				for _, p := range t.Partitions {
					tps = append(tps, model.TopicPartition{Topic: t.Topic, Partition: p})
				}
			}
			codes := make([]int16, len(tps))
			switch {
			case checkTxnID(rt.TransactionalID) != nil:
				for i := range codes {
					codes[i] = kerr.InvalidRequest.Code
				}
			default:
				errs := b.Txns.CheckPartitionsHere(ctx, rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, tps, !rt.VerifyOnly)
				for i, err := range errs {
					codes[i] = errorCode(err)
				}
			}
			i := 0
			for _, t := range rt.Topics {
				tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				tt.Topic = t.Topic
				for _, p := range t.Partitions {
					tp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					tp.Partition, tp.ErrorCode = p, codes[i]
					i++
					tt.Partitions = append(tt.Partitions, tp)
				}
				st.Topics = append(st.Topics, tt)
			}
			resp.Transactions = append(resp.Transactions, st)
		}
		return &Response{Body: resp}, nil
	}}
}
