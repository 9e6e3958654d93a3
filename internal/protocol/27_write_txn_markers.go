package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// WriteTxnMarkers: v1 (Kafka 4.0's range)
//
// Behaviour: writes each commit or abort marker to the partitions named and
// answers once they are durable; a marker in __consumer_offsets applies or
// drops the transaction's offsets. Kafka's brokers send it to partition
// leaders; on a single node the coordinator writes markers directly, so
// this request comes from operators (Admin.abortTransaction, which ends a
// hanging transaction). Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch,
// TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch. A
// coordinator epoch above this node's (0: the single node's
// __transaction_state leader epoch) names a coordinator that does not
// exist and is INVALID_REQUEST: stored, it would fence this node's own
// markers and leave the producer's next transaction hanging.
//
// Not supported yet: authorisation (Kafka requires CLUSTER_ACTION).

func init() { register(27, 1, 1, handleWriteTxnMarkers) }

// coordinatorEpoch is the transaction coordinator's epoch on a single node.
const coordinatorEpoch = 0

func handleWriteTxnMarkers(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	return &Response{Defer: func(context.Context) (*Response, error) {
		for _, m := range req.Markers {
			var tps []model.TopicPartition
			for _, t := range m.Topics {
				for _, p := range t.Partitions {
					tps = append(tps, model.TopicPartition{Topic: t.Topic, Partition: p})
				}
			}
			var errs []error
			if m.CoordinatorEpoch > coordinatorEpoch {
				errs = make([]error, len(tps))
				for i := range errs {
					errs[i] = fmt.Errorf("%w: coordinator epoch %d is above this node's %d", errInvalidRequest,
						m.CoordinatorEpoch, coordinatorEpoch)
				}
			} else {
				errs = b.WriteMarkers(replica.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
					Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch}, tps)
			}
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			i := 0
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, errorCode(errs[i])
					i++
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return reply(resp)
	}}, nil
}
