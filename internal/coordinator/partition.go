package coordinator

import "errors"

// Topic is the internal topic a coordinator keeps its state in.
type Topic interface {
	// Partitions returns the topic's partitions in order, or none when it
	// does not exist; a partition this broker does not lead is nil.
	Partitions() ([]Partition, error)
	// Create creates the topic with n partitions unless it exists, and
	// returns its partitions as Partitions does; created says whether
	// this call made it (its partitions are then empty), rather than
	// finding it made already.
	Create(n int32) (parts []Partition, created bool, err error)
}

// Partition is one partition of a coordinator's topic, as this broker
// leads it.
type Partition interface {
	// Append writes one record batch and returns its base offset and a
	// function that returns once the batch is durable on every in-sync
	// replica. It fails with ErrNotLeader once this broker no longer
	// leads the partition, and ErrTooLarge for a batch over the topic's
	// limit; the wait fails with ErrNotLeader or ErrNotReplicated.
	Append(batch []byte) (base int64, wait func() error, err error)
	// Read returns whole batches from offset up to LoadEnd: about
	// maxBytes, and at least one batch if there is one.
	Read(offset int64, maxBytes int) ([]byte, error)
	StartOffset() int64
	// LoadEnd is where loading the partition stops: the log end, as
	// Kafka's coordinators load, since on a new leader its whole log
	// becomes committed (followers learn the high watermark a fetch late).
	LoadEnd() int64
	// LeaderEpoch is the partition's current leader epoch (the
	// transaction coordinator's epoch is its partition's).
	LeaderEpoch() int32
}

// The errors of a coordinator's writes.
var (
	// ErrNotLeader: this broker no longer leads the partition; another
	// coordinator has taken over.
	ErrNotLeader = errors.New("coordinator: this broker no longer leads the partition")
	// ErrNotReplicated: the write is durable here, but the in-sync
	// replicas did not all take it in time, so it may be lost with this
	// broker.
	ErrNotReplicated = errors.New("coordinator: the write did not reach every in-sync replica")
	// ErrTooLarge: the batch is over the topic's max.message.bytes.
	ErrTooLarge = errors.New("coordinator: record batch too large")
)
