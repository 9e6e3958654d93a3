package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// InitProducerId: v0-5 (Kafka 4.0's range)
//
// Behaviour:
//   - Without a transactional id (an idempotent producer) the answer is a
//     new producer id with epoch 0, whatever ProducerID and ProducerEpoch
//     the request carries, exactly as Kafka's TransactionCoordinator
//     ("blindly accept the request and return a new producerId"). KIP-360's
//     epoch bump of an idempotent producer happens in the client: the Java
//     client raises its epoch locally and restarts its sequences at 0, which
//     the partitions accept (see replica/producer.go).
//   - ProducerID and ProducerEpoch (v3+) must be both -1 or both set, else
//     INVALID_REQUEST, as KafkaApis checks.
//   - Producer ids are unique across restarts: the cluster store reserves
//     them in blocks of 1000, saved durably before use.
//
//   - With a transactional id the transaction coordinator answers (see
//     internal/txn): a new id or the next epoch of the id's producer, which
//     fences older instances; an ongoing transaction of the id is aborted
//     first and the answer is CONCURRENT_TRANSACTIONS until it is, which the
//     client retries. v3+ (KIP-360): the producer id and epoch the client
//     holds, if given, must be the coordinator's current or previous ones,
//     else PRODUCER_FENCED (v4+; INVALID_PRODUCER_EPOCH before). A timeout
//     outside 1 ms .. transaction.max.timeout.ms is
//     INVALID_TRANSACTION_TIMEOUT. An empty transactional id is
//     INVALID_REQUEST, as in Kafka.
//
// Authorization: with a transactional id, WRITE on it
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without, IDEMPOTENT_WRITE on the
// cluster or WRITE on some topic (KIP-679; CLUSTER_AUTHORIZATION_FAILED).

func init() { register(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	switch {
	case req.TransactionalID != nil && *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case (req.ProducerID == -1) != (req.ProducerEpoch == -1):
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID != nil && !b.allowed(r, acl.Write, acl.TransactionalID, *req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case req.TransactionalID == nil && !b.allowedCluster(r, acl.IdempotentWrite) &&
		!b.authorizer().AuthorizedByType(r.principal(), r.Host, acl.Write, acl.Topic):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case req.TransactionalID != nil:
		return &Response{Defer: func(ctx context.Context) (*Response, error) {
			timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
			pid, epoch, err := b.Txns.InitProducerID(ctx, *req.TransactionalID, timeout, req.ProducerID, req.ProducerEpoch)
			resp.ProducerID, resp.ProducerEpoch = -1, -1
			if resp.ErrorCode = txnCode(err, req.Version, 4); err == nil {
				resp.ProducerID, resp.ProducerEpoch = pid, epoch
			}
			return reply(resp)
		}}, nil
	default:
		id, err := b.Cluster.NextProducerID()
		if err != nil {
			if b.Logger != nil {
				b.Logger.Error("allocating a producer id failed", "err", err)
			}
			resp.ErrorCode = errorCode(err)
			return reply(resp)
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
	}
	return reply(resp)
}
