package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// WriteTxnMarkers: v1 (Kafka 4.0's range)
//
// Behaviour: writes each commit or abort marker to the partitions named,
// which this broker must lead, and answers once they are durable; a marker
// in __consumer_offsets applies or drops the transaction's offsets at this
// broker's group coordinator. Transaction coordinators send it for the
// partitions other brokers lead (internal/server's marker writer); operators
// send it too (Admin.abortTransaction, which ends a hanging transaction).
// Per-partition errors: NOT_LEADER_OR_FOLLOWER for a partition led
// elsewhere, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH for a
// marker older than the producer's epoch, TRANSACTION_COORDINATOR_FENCED
// for an older coordinator epoch than the producer's last marker had. A
// coordinator epoch above the highest leader epoch of __transaction_state's
// partitions (0 on a single node) names a coordinator that does not exist
// and is INVALID_REQUEST: stored, it would fence the real coordinator's
// markers and leave the producer's next transaction hanging.
//
// Not supported yet: authorisation (Kafka requires CLUSTER_ACTION).
//
// Authorization: CLUSTER_ACTION on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(27, 1, 1, handleWriteTxnMarkers) }

func handleWriteTxnMarkers(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	clusterAction := b.allowedCluster(r, acl.ClusterAction)
	return &Response{Defer: func(context.Context) (*Response, error) {
		for _, m := range req.Markers {
			var tps []model.TopicPartition
			for _, t := range m.Topics {
				for _, p := range t.Partitions {
					tps = append(tps, model.TopicPartition{Topic: t.Topic, Partition: p})
				}
			}
			var errs []error
			if !clusterAction {
				errs = make([]error, len(tps))
				for i := range errs {
					errs[i] = kerr.ClusterAuthorizationFailed
				}
			} else if top := b.maxCoordinatorEpoch(); m.CoordinatorEpoch > top {
				errs = make([]error, len(tps))
				for i := range errs {
					errs[i] = fmt.Errorf("%w: coordinator epoch %d is above every coordinator's (%d)", errInvalidRequest,
						m.CoordinatorEpoch, top)
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
