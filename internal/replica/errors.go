package replica

import (
	"errors"

	"github.com/strandlog/strand/internal/log"
)

// Section is a stored byte range of whole batches (see log.Section).
type Section = log.Section

// RecordErrors names the records a batch was refused for (see
// log.RecordErrors).
type RecordErrors = log.RecordErrors

// The log's errors, re-exported so the protocol layer maps them without
// importing the log.
var (
	ErrCorruptMessage         = log.ErrCorruptMessage
	ErrInvalidRecord          = log.ErrInvalidRecord
	ErrUnsupportedMagic       = log.ErrUnsupportedMagic
	ErrUnsupportedCompression = log.ErrUnsupportedCompression
	ErrMessageTooLarge        = log.ErrMessageTooLarge
	ErrInvalidTimestamp       = log.ErrInvalidTimestamp
	ErrOffsetOutOfRange       = log.ErrOffsetOutOfRange
	ErrClosed                 = log.ErrClosed
	ErrStorage                = log.ErrStorage
	ErrCorruptLog             = log.ErrCorruptLog
)

// Producer-state errors (idempotent and transactional producing).
var (
	// ErrOutOfOrderSequence: a batch's sequence does not follow the
	// producer's last (Kafka OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("replica: out of order sequence number")
	// ErrInvalidProducerEpoch: a batch from an older producer epoch (Kafka
	// INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = errors.New("replica: invalid producer epoch")
	// ErrUnknownProducerID: the partition has no state for the producer and
	// the batch does not start a sequence (Kafka UNKNOWN_PRODUCER_ID).
	ErrUnknownProducerID = errors.New("replica: unknown producer id")
	// ErrInvalidTxnState: a non-transactional batch from a producer whose
	// transaction is open (Kafka INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("replica: invalid transaction state")
	// ErrTransactionCoordinatorFenced: a marker from a coordinator epoch
	// older than the producer's last marker had (Kafka
	// TRANSACTION_COORDINATOR_FENCED).
	ErrTransactionCoordinatorFenced = errors.New("replica: transaction coordinator fenced")
)

// Leader-epoch fencing of client requests that name the epoch they saw.
var (
	// ErrFencedLeaderEpoch: the request saw an older epoch (Kafka
	// FENCED_LEADER_EPOCH); the client refreshes its metadata.
	ErrFencedLeaderEpoch = errors.New("replica: fenced leader epoch")
	// ErrUnknownLeaderEpoch: the request saw a newer epoch than this broker
	// knows (Kafka UNKNOWN_LEADER_EPOCH); the client retries.
	ErrUnknownLeaderEpoch = errors.New("replica: unknown leader epoch")
)

// Replication errors.
var (
	// ErrNotEnoughReplicas: an acks=all write to a partition whose in-sync
	// set is below min.insync.replicas, refused before it is written
	// (Kafka NOT_ENOUGH_REPLICAS).
	ErrNotEnoughReplicas = errors.New("replica: not enough in-sync replicas")
	// ErrNotEnoughReplicasAfterAppend: the write is in the leader's log and
	// committed, but the in-sync set shrank below min.insync.replicas
	// meanwhile (Kafka NOT_ENOUGH_REPLICAS_AFTER_APPEND).
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: not enough in-sync replicas after append")
	// ErrReplicationTimeout: the in-sync replicas did not all have an
	// acks=all write within the request's timeout (Kafka REQUEST_TIMED_OUT).
	ErrReplicationTimeout = errors.New("replica: timed out waiting for the in-sync replicas")
	// ErrNotLeader: the partition is not led here (any more).
	ErrNotLeader = errors.New("replica: not the leader")
	// ErrNotReplica: a follower fetch from a broker that holds no replica.
	ErrNotReplica = errors.New("replica: not a replica of the partition")
)
