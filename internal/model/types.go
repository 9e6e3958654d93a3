package model

import (
	"fmt"
	"strconv"
)

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
