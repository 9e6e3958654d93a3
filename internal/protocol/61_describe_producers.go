package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// DescribeProducers: v0 (Kafka 4.0's range)
//
// Behaviour: for each partition, the producers its state knows (idempotent
// and transactional): epoch, last sequence and timestamp, the coordinator
// epoch of its last marker and the first offset of its open transaction
// (-1 for none), which is how operators find a hanging transaction. A
// partition this broker does not serve is UNKNOWN_TOPIC_OR_PARTITION.
//
// Authorization: READ on each topic (TOPIC_AUTHORIZATION_FAILED).

func init() { register(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	may := b.topicCheck(r, acl.Read)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, pn := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = pn
			if !may(t.Topic) {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			p, ok := b.Replicas.Get(model.TopicPartition{Topic: t.Topic, Partition: pn})
			if !ok {
				rp.ErrorCode = errorCode(replica.ErrUnknownPartition)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			for _, pi := range p.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.Epoch)
				ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}
