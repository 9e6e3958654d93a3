package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/model"
)

// AddOffsetsToTxn: v0-4 (Kafka 4.0's range)
//
// Behaviour: adds the group's __consumer_offsets partition to the
// producer's transaction (the older flow; KIP-890's clients let
// TxnOffsetCommit v5 do it), answered once durable; the partition may be
// led by another broker (the group's coordinator need not be the
// transaction's). Errors as AddPartitionsToTxn's; PRODUCER_FENCED from v2
// (INVALID_PRODUCER_EPOCH before).
//
// Authorization: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group
// (GROUP_AUTHORIZATION_FAILED).

func init() { register(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if err := checkTxnID(req.TransactionalID); err != nil {
		resp.ErrorCode = errorCode(err)
		return reply(resp)
	}
	switch {
	case !b.allowed(r, acl.Write, acl.TransactionalID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return reply(resp)
	case !b.allowed(r, acl.Read, acl.Group, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply(resp)
	}
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		tp, err := b.offsetsPartitionFor(req.Group)
		if err == nil {
			err = b.Txns.AddPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []model.TopicPartition{tp})
		}
		resp.ErrorCode = txnCode(err, req.Version, 2)
		return reply(resp)
	}}, nil
}
