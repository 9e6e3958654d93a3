package group

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// consumerProtocolType is the protocol type of Kafka consumers, whose
// subscriptions and assignments the coordinator can read (ConsumerProtocol).
const consumerProtocolType = "consumer"

// subscribedTopics reads the topics of a ConsumerProtocol subscription.
// Every version starts with version int16 and topics [string], which is
// all Kafka reads here too, so later versions parse as well.
func subscribedTopics(meta []byte) ([]string, bool) {
	if len(meta) < 6 {
		return nil, false
	}
	n := int32(binary.BigEndian.Uint32(meta[2:]))
	p := 6
	if n < 0 {
		return nil, true
	}
	topics := make([]string, 0, min(int(n), 1024))
	for range n {
		if len(meta)-p < 2 {
			return nil, false
		}
		l := int(int16(binary.BigEndian.Uint16(meta[p:])))
		p += 2
		if l < 0 || len(meta)-p < l {
			return nil, false
		}
		topics = append(topics, string(meta[p:p+l]))
		p += l
	}
	return topics, true
}

// assignedPartitions reads a ConsumerProtocol assignment.
func assignedPartitions(data []byte) ([]model.TopicPartition, bool) {
	if len(data) == 0 {
		return nil, true // an empty assignment
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(data); err != nil {
		return nil, false
	}
	var tps []model.TopicPartition
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, model.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return tps, true
}
