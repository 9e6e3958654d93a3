package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/fetchpos"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/replica"
)

// fetchPositionsInterval is how often a broker publishes its consumers'
// reads; a hand-off coordinated elsewhere is complete that much later.
const fetchPositionsInterval = 100 * time.Millisecond

// fetchPositionsReportDelay bounds how late another broker's report of a
// fetch is waited for: an interval, the topic's replication and the
// follower's read, with room for a loaded machine and a follower's
// retries after an error.
const fetchPositionsReportDelay = 2 * time.Second

// fetchPositionsRetention keeps the topic small: it is a channel.
const fetchPositionsRetention = 10 * time.Minute

// fetchPositionsTopic is __strand_fetch_positions as this broker writes
// and reads it (fetchpos.Output and fetchpos.Source): created on first
// write with one partition per registered broker, written to a partition
// led here (else to the broker's own partition through its leader), read
// from each partition's leader over a connection of its own per partition
// (a read waits for records, which would hold up the other requests to
// that broker).
type fetchPositionsTopic struct {
	self              int32
	replicationFactor int16
	metadata          *cluster.Store
	topics            *topicAdmin
	replicas          *replica.Manager
	newClient         func() *peer.Client // a connection of its own per partition read
	peers             *peer.Client        // writes through another broker

	mu      lockrank.Mutex[lockrank.Leaf]
	readers map[int32]*peer.Client
}

func (f *fetchPositionsTopic) Append(key, value []byte) error {
	t, ok := f.metadata.Topic(fetchpos.Topic)
	if !ok {
		configs := map[string]string{"cleanup.policy": "delete",
			"retention.ms": fmt.Sprint(fetchPositionsRetention.Milliseconds())}
		n := int32(max(1, len(f.metadata.Brokers())))
		var err error
		if t, _, err = f.topics.createInternal(fetchpos.Topic, n, configs, f.replicationFactor); err != nil {
			return err
		}
	}
	// The same partition while it is led here, so that this broker's
	// records stay in order.
	batch := model.EncodeBatch([]model.KeyValue{{Key: key, Value: value}}, time.Now().UnixMilli(), model.NoProducer)
	parts := leadingPartitions(f.replicas, t)
	for i := range parts {
		p := parts[(int(f.self)+i)%len(parts)]
		if p == nil {
			continue
		}
		_, wait, err := p.AppendInternal(batch)
		if err == nil {
			// Synced and offered to the followers; not awaited on them,
			// a record lost with this broker is only late figures.
			err = wait()
		}
		return err
	}
	// None led here: the broker's own partition, through its leader, not
	// awaited on the followers either.
	through := throughLeader{self: f.self, tp: model.TopicPartition{Topic: fetchpos.Topic, Partition: f.self % t.Partitions},
		metadata: f.metadata, peers: f.peers, leaderOnly: true}
	_, _, err := through.Append(batch)
	return err
}

func (f *fetchPositionsTopic) Partitions() int32 {
	t, _ := f.metadata.Topic(fetchpos.Topic)
	return t.Partitions
}

func (f *fetchPositionsTopic) leader(partition int32) (int32, *peer.Client, error) {
	p, ok := f.metadata.Partition(fetchpos.Topic, partition)
	if !ok || p.Leader == cluster.NoLeader {
		return 0, nil, kerr.LeaderNotAvailable
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readers == nil {
		f.readers = map[int32]*peer.Client{}
	}
	cl := f.readers[partition]
	if cl == nil {
		cl = f.newClient()
		f.readers[partition] = cl
	}
	return p.Leader, cl, nil
}

func (f *fetchPositionsTopic) End(ctx context.Context, partition int32) (int64, error) {
	node, cl, err := f.leader(partition)
	if err != nil {
		return -1, err
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(4)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = fetchpos.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Request(ctx, node, req)
	if err != nil {
		return -1, err
	}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return -1, err
			}
			return p.Offset, nil
		}
	}
	return -1, errors.New("ListOffsets answered without the partition")
}

func (f *fetchPositionsTopic) Read(ctx context.Context, partition int32, offset int64, fn func(key, value []byte)) (int64, error) {
	node, cl, err := f.leader(partition)
	if err != nil {
		return offset, err
	}
	tp := model.TopicPartition{Topic: fetchpos.Topic, Partition: partition}
	resp, err := cl.Request(ctx, node, consumerFetch(tp, offset, 4<<20, 500*time.Millisecond))
	if err != nil {
		return offset, err
	}
	for _, t := range resp.(*kmsg.FetchResponse).Topics {
		for _, p := range t.Partitions {
			switch err := kerr.ErrorForCode(p.ErrorCode); {
			case errors.Is(err, kerr.OffsetOutOfRange):
				return -1, err // trimmed or truncated: on from its end
			case err != nil:
				return offset, err
			}
			return eachRecord(p.RecordBatches, offset, fn)
		}
	}
	return offset, nil
}

// eachRecord calls fn with the records of batches from offset on and
// returns the offset after the last whole batch.
func eachRecord(batches []byte, offset int64, fn func(key, value []byte)) (int64, error) {
	// A partial batch at the end was cut by the size limit.
	r := model.NewBatchReader(batches)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		if b.Compression() != model.CompressionNone || b.IsControl() {
			offset = b.LastOffset() + 1
			continue
		}
		err := model.EachRecord(b, func(o int64, key, value []byte) {
			if o >= offset {
				fn(key, value)
			}
		})
		if err != nil {
			return b.LastOffset() + 1, err
		}
		offset = b.LastOffset() + 1
	}
	return offset, nil
}

// close closes the readers' connections.
func (f *fetchPositionsTopic) close() {
	f.mu.Lock()
	readers := f.readers
	f.readers = nil
	f.mu.Unlock()
	// Closed after letting go: mu is a leaf, and a client has its own lock.
	for _, cl := range readers {
		cl.Close()
	}
}
