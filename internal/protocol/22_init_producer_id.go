package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
// Not supported yet: transactions. A request with a transactional id is
// answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients treat as
// fatal and report at once (initTransactions throws in Java; kgo fails the
// producer), rather than COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, which
// they retry until a timeout. An empty transactional id is INVALID_REQUEST,
// as in Kafka.

func init() { register(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	switch {
	case req.TransactionalID != nil && *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID != nil:
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case (req.ProducerID == -1) != (req.ProducerEpoch == -1):
		resp.ErrorCode = kerr.InvalidRequest.Code
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
