package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// EndTxn: v0-5 (Kafka 4.0's range)
//
// Behaviour:
//   - Commits or aborts the producer's transaction: the decision is made
//     durable (PrepareCommit/PrepareAbort), markers are written to every
//     partition of the transaction (those other brokers lead through
//     WriteTxnMarkers to them), and the transaction is completed; the
//     answer comes once the markers are durable and the Complete state is
//     written; its own fsync is not waited for, since a crash that loses it
//     leaves the durable decision, which is finished again at start. If a
//     partition fails to take its marker, the answer comes once the
//     decision is durable: the coordinator retries the markers in the
//     background, and the next request of the producer gets
//     CONCURRENT_TRANSACTIONS until they are written.
//   - v5+ is KIP-890's protocol: every EndTxn bumps the producer epoch (a
//     new producer id when the epoch is exhausted), returned in the answer;
//     a retried EndTxn of the previous epoch is answered with the result it
//     had. Aborting a transaction with no partitions is allowed.
//   - A retry of a completed EndTxn (same result) succeeds; the other result
//     is INVALID_TXN_STATE. PRODUCER_FENCED from v2 (INVALID_PRODUCER_EPOCH
//     before). NOT_COORDINATOR when another broker coordinates the id,
//     COORDINATOR_LOAD_IN_PROGRESS while this one loads it.
//
// Authorization: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

func init() { register(26, 0, 5, handleEndTxn) }

func handleEndTxn(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if err := checkTxnID(req.TransactionalID); err != nil {
		resp.ErrorCode = errorCode(err)
		return reply(resp)
	}
	if !b.allowed(r, acl.Write, acl.TransactionalID, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return reply(resp)
	}
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		pid, epoch, err := b.Txns.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, req.Version >= 5)
		resp.ErrorCode = txnCode(err, req.Version, 2)
		if err == nil {
			resp.ProducerID, resp.ProducerEpoch = pid, epoch
		}
		return reply(resp)
	}}, nil
}
