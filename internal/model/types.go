package model

import (
	"fmt"
	"strconv"
)

// Offset is the position of a record in a partition's log. It is never a
// byte position in a file; those are plain int64 named "pos".
type Offset = int64

// Epoch is a partition leader epoch or a producer epoch.
type Epoch = int32

// NodeID identifies a broker in a cluster.
type NodeID = int32

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String returns "topic-partition", the name Kafka gives a partition's
// directory.
func (tp TopicPartition) String() string {
	return tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

// ParseTopicPartition reverses String: the partition number follows the
// last dash, so topic names that contain dashes parse correctly.
func ParseTopicPartition(s string) (TopicPartition, error) {
	for i := len(s) - 1; i > 0; i-- {
		if s[i] == '-' {
			p, err := strconv.ParseInt(s[i+1:], 10, 32)
			if err != nil || p < 0 {
				break
			}
			return TopicPartition{Topic: s[:i], Partition: int32(p)}, nil
		}
	}
	return TopicPartition{}, fmt.Errorf("model: %q is not topic-partition", s)
}
