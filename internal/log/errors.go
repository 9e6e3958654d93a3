package log

import (
	"errors"
	"fmt"
	"strings"
)

// Errors the log returns. The protocol layer maps each to a Kafka error code
// (protocol/errors.go); wrapped errors keep the detail for logs while
// errors.Is finds the kind.
var (
	// ErrCorruptMessage: a batch failed its CRC or its framing is broken
	// (Kafka CORRUPT_MESSAGE).
	ErrCorruptMessage = errors.New("log: corrupt record batch")
	// ErrInvalidRecord: a batch is well formed but breaks a rule of the
	// topic or the format, e.g. a record without a key on a compacted topic
	// or inconsistent offset deltas (Kafka INVALID_RECORD).
	ErrInvalidRecord = errors.New("log: invalid record")
	// ErrUnsupportedMagic: a batch of a record format other than v2
	// (Kafka UNSUPPORTED_FOR_MESSAGE_FORMAT).
	ErrUnsupportedMagic = errors.New("log: unsupported record batch magic")
	// ErrUnsupportedCompression: an unknown codec id (Kafka
	// UNSUPPORTED_COMPRESSION_TYPE).
	ErrUnsupportedCompression = errors.New("log: unsupported compression type")
	// ErrMessageTooLarge: a batch over the topic's max.message.bytes
	// (Kafka MESSAGE_TOO_LARGE).
	ErrMessageTooLarge = errors.New("log: record batch too large")
	// ErrInvalidTimestamp: a timestamp outside the topic's allowed window
	// (Kafka INVALID_TIMESTAMP).
	ErrInvalidTimestamp = errors.New("log: invalid timestamp")
	// ErrOffsetOutOfRange: a read or truncation outside [start, end]
	// (Kafka OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrClosed: the log was closed (Kafka NOT_LEADER_OR_FOLLOWER at the
	// protocol layer, since the partition is gone from this broker).
	ErrClosed = errors.New("log: closed")
	// ErrCorruptLog: stored data that was durable failed its checks. It is
	// never retried and never repaired silently; an operator decides.
	ErrCorruptLog = errors.New("log: stored data is corrupt")
)

// CorruptLogError says where stored data failed its checks.
type CorruptLogError struct {
	File   string // segment file
	Pos    int64  // byte position of the bad batch in the file
	Reason string
}

func (e *CorruptLogError) Error() string {
	return fmt.Sprintf("log: stored data is corrupt: %s at byte %d: %s", e.File, e.Pos, e.Reason)
}

func (e *CorruptLogError) Unwrap() error { return ErrCorruptLog }

// ErrStorage: a write or sync failed, so what is on disk is unknown. The log
// refuses further writes until reopened (Kafka KAFKA_STORAGE_ERROR), since
// after a failed fsync the kernel may have dropped the dirty pages.
var ErrStorage = errors.New("log: storage error")

// RecordError is one record of a batch that breaks a rule of the topic,
// by its index in the batch (KIP-467).
type RecordError struct {
	Index   int32
	Message string
}

// RecordErrors: records of a batch break the topic's rules; the batch is
// refused whole, and the answer names each of them, so that a client can
// tell its records apart. It is an ErrInvalidTimestamp when a timestamp is
// among the reasons, as Kafka answers, else an ErrInvalidRecord.
type RecordErrors struct {
	Kind    error
	Records []RecordError
}

func (e *RecordErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of the batch's records refused", len(e.Records))
	for i, r := range e.Records {
		if i == 3 {
			b.WriteString(", ...")
			break
		}
		fmt.Fprintf(&b, "; record %d: %s", r.Index, r.Message)
	}
	return b.String()
}

func (e *RecordErrors) Unwrap() error { return e.Kind }
