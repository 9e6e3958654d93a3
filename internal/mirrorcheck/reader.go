package mirrorcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Reader reads one side of a comparison: a cluster's topics and the raw
// record batches of their partitions.
type Reader interface {
	// Topic returns the topic's id and number of partitions.
	Topic(ctx context.Context, topic string) (TopicInfo, error)
	// Offsets returns a partition's log start and high watermark.
	Offsets(ctx context.Context, topic string, partition int32) (LogRange, error)
	// Fetch returns the partition's record batches from offset on, as a
	// leader sends them to a READ_UNCOMMITTED fetch of about maxBytes:
	// whole batches, the first possibly starting before offset, the last
	// possibly cut short; nothing when there is no batch past offset.
	Fetch(ctx context.Context, topic string, partition int32, offset int64, maxBytes int32) ([]byte, error)
}

// TopicInfo is what Metadata says of a topic.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32 // numbered 0 to Partitions-1
}

// LogRange is a partition's log start and high watermark.
type LogRange struct {
	LogStart, HighWatermark int64
}

// NewReader reads a Kafka cluster through cl, asking each partition's
// leader directly.
func NewReader(cl *kgo.Client) Reader {
	return &kafkaReader{cl: cl, topics: map[string]kafkaTopic{}}
}

type kafkaTopic struct {
	id      [16]byte
	leaders map[int32]int32
}

type kafkaReader struct {
	cl *kgo.Client

	mu     sync.Mutex
	topics map[string]kafkaTopic // as the last Metadata said; guarded by mu
}

// Leadership moves (an election, a broker killed) are retried this many
// times, a backoff apart, with a fresh look at the metadata each time:
// about 15 s in all, more than a Kafka election takes.
const (
	leaderAttempts = 60
	leaderBackoff  = 250 * time.Millisecond
)

func (r *kafkaReader) Topic(ctx context.Context, topic string) (TopicInfo, error) {
	t, err := r.refresh(ctx, topic)
	if err != nil {
		return TopicInfo{}, err
	}
	return TopicInfo{ID: t.id, Partitions: int32(len(t.leaders))}, nil
}

// refresh asks Metadata for topic and caches its id and leaders.
func (r *kafkaReader) refresh(ctx context.Context, topic string) (kafkaTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return kafkaTopic{}, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return kafkaTopic{}, fmt.Errorf("metadata of %s: %d topics in the answer", topic, len(resp.Topics))
	}
	mt := resp.Topics[0]
	if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
		return kafkaTopic{}, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	t := kafkaTopic{id: mt.TopicID, leaders: make(map[int32]int32, len(mt.Partitions))}
	for _, p := range mt.Partitions {
		t.leaders[p.Partition] = p.Leader
	}
	for p := range int32(len(t.leaders)) {
		if _, ok := t.leaders[p]; !ok {
			return kafkaTopic{}, fmt.Errorf("metadata of %s: partition %d missing from %d", topic, p, len(t.leaders))
		}
	}
	r.mu.Lock()
	r.topics[topic] = t
	r.mu.Unlock()
	return t, nil
}

// onLeader runs req against the partition's leader, looking the leader
// up again and retrying while the failure says leadership is moving or
// the leader cannot be reached. req returns the partition's error code.
func (r *kafkaReader) onLeader(ctx context.Context, topic string, partition int32,
	req func(b *kgo.Broker, id [16]byte) (int16, error)) error {
	var last error
	for attempt := range leaderAttempts {
		if attempt > 0 && !backoff(ctx) {
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		}
		r.mu.Lock()
		t, ok := r.topics[topic]
		r.mu.Unlock()
		if !ok || attempt > 0 {
			var err error
			if t, err = r.refresh(ctx, topic); err != nil {
				if !retriable(err) {
					return err
				}
				last = err
				continue
			}
		}
		leader, ok := t.leaders[partition]
		if !ok {
			return fmt.Errorf("%s has no partition %d", topic, partition)
		}
		if leader < 0 {
			last = fmt.Errorf("%s/%d has no leader", topic, partition)
			continue
		}
		code, err := req(r.cl.Broker(int(leader)), t.id)
		if err == nil {
			err = kerr.ErrorForCode(code)
		}
		if err == nil {
			return nil
		}
		last = fmt.Errorf("%s/%d on broker %d: %w", topic, partition, leader, err)
		if !retriable(err) {
			return last
		}
	}
	return fmt.Errorf("after %d attempts: %w", leaderAttempts, last)
}

// retriable says whether an error means the leadership is moving or the
// broker cannot be reached for now: worth another look at the metadata.
func retriable(err error) bool {
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Retriable
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true // refused, reset, timed out: a broker that died or is not up yet
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

func backoff(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(leaderBackoff):
		return true
	}
}

func (r *kafkaReader) Offsets(ctx context.Context, topic string, partition int32) (LogRange, error) {
	var lr LogRange
	err := r.onLeader(ctx, topic, partition, func(b *kgo.Broker, _ [16]byte) (int16, error) {
		for _, at := range []struct {
			timestamp int64 // Kafka's: -2 the earliest offset, -1 the latest
			into      *int64
		}{{-2, &lr.LogStart}, {-1, &lr.HighWatermark}} {
			req := kmsg.NewPtrListOffsetsRequest()
			req.ReplicaID = -1
			req.IsolationLevel = 0
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = partition
			rp.Timestamp = at.timestamp
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			kresp, err := b.Request(ctx, req)
			if err != nil {
				return 0, err
			}
			resp := kresp.(*kmsg.ListOffsetsResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return 0, fmt.Errorf("list offsets: an answer without the partition")
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 {
				return p.ErrorCode, nil
			}
			*at.into = p.Offset
		}
		return 0, nil
	})
	return lr, err
}

func (r *kafkaReader) Fetch(ctx context.Context, topic string, partition int32, offset int64, maxBytes int32) ([]byte, error) {
	var records []byte
	err := r.onLeader(ctx, topic, partition, func(b *kgo.Broker, id [16]byte) (int16, error) {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0 // answer at once: the range read is below the high watermark
		req.MinBytes = 0
		req.MaxBytes = maxBytes
		req.IsolationLevel = 0 // READ_UNCOMMITTED: aborted records and markers too
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic // up to v12
		rt.TopicID = id  // v13 on
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = partition
		rp.FetchOffset = offset
		rp.PartitionMaxBytes = maxBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := b.Request(ctx, req)
		if err != nil {
			return 0, err
		}
		resp := kresp.(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode, nil
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("fetch: an answer without the partition")
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			return p.ErrorCode, nil
		}
		records = p.RecordBatches
		return 0, nil
	})
	return records, err
}
