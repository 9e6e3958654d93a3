package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// Produce: v0-12 advertised, v3-12 served
//
// Behaviour:
//   - v0-2 are advertised, as Kafka 4 does, because librdkafka only
//     compresses when the advertised minimum is 0; every partition of such a
//     request is answered UNSUPPORTED_VERSION.
//   - Each partition's records must be exactly one record batch v2
//     (INVALID_RECORD otherwise); the log validates it (CRC, sizes, offsets)
//     and stores it as received.
//   - Batches are appended in request order while the request is read; the
//     answer waits for durability (the topic's flush policy) off the read
//     path, so pipelined requests share an fsync.
//   - acks=0 gets no answer; acks other than 0, 1, -1 is INVALID_REQUIRED_ACKS.
//   - v8+: the error message names the reason.
//
// Not supported yet: transactional produce (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
//
// Note: resp.Topics' partition slices are allocated whole before any
// partition is filled, so the pointers kept for the deferred part stay
// valid.

func init() { register(0, 0, 12, handleProduce) }

type producePart struct {
	resp *kmsg.ProduceResponseTopicPartition
	p    *replica.Partition
	wait func() error
}

func handleProduce(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)

	var fail *kerr.Error
	switch {
	case req.Version < 3:
		fail = kerr.UnsupportedVersion
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		fail = kerr.InvalidRequiredAcks
	case req.TransactionID != nil:
		fail = kerr.TransactionalIDAuthorizationFailed
	}
	var parts []producePart
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
				sp.ErrorCode = fail.Code
				continue
			}
			pp, err := b.produceOne(rt.Topic, rp, sp)
			if err != nil {
				setProduceError(sp, req.Version, err)
				continue
			}
			parts = append(parts, pp)
		}
	}
	return &Response{Body: resp, Defer: func(context.Context) (*Response, error) {
		for _, pp := range parts {
			if err := pp.wait(); err != nil {
				setProduceError(pp.resp, req.Version, err)
				pp.resp.BaseOffset = -1
			}
			pp.resp.LogStartOffset = pp.p.Log().StartOffset()
		}
		if req.Acks == 0 {
			return &Response{}, nil
		}
		return &Response{Body: resp}, nil
	}}, nil
}

func (b *Broker) produceOne(topic string, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition) (producePart, error) {
	p, ok := b.Replicas.Get(model.TopicPartition{Topic: topic, Partition: rp.Partition})
	if !ok {
		return producePart{}, replica.ErrUnknownPartition
	}
	if err := oneBatch(rp.Records); err != nil {
		return producePart{}, err
	}
	res, wait, err := p.Append(rp.Records)
	if err != nil {
		return producePart{}, err
	}
	sp.BaseOffset, sp.LogAppendTime = res.BaseOffset, res.LogAppendTime
	return producePart{resp: sp, p: p, wait: wait}, nil
}

// oneBatch checks that records hold exactly one v2 batch, as Kafka requires
// of produce requests from v3 on.
func oneBatch(records []byte) error {
	if len(records) < model.BatchHeaderSize {
		return fmt.Errorf("%w: %d bytes of records is not a batch", replica.ErrCorruptMessage, len(records))
	}
	b := model.Batch(records)
	if b.Magic() != model.BatchMagic {
		return fmt.Errorf("%w: magic %d", replica.ErrUnsupportedMagic, b.Magic())
	}
	if int64(b.Length())+model.BatchLengthOverhead < int64(len(records)) {
		return fmt.Errorf("%w: a produce request carries one batch per partition", replica.ErrInvalidRecord)
	}
	return nil
}

func setProduceError(sp *kmsg.ProduceResponseTopicPartition, version int16, err error) {
	sp.ErrorCode = errorCode(err)
	sp.BaseOffset = -1
	if version >= 8 {
		sp.ErrorMessage = errorMessage(err)
	}
}
