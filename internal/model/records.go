package model

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unicode/utf16"
)

// The coordinators' own records: the group and transaction coordinators
// write small uncompressed batches of key/value records into their
// internal topics and read them back on start. Both need the same batch
// encoding, record walk and Kafka's key partitioning, so they live here.

// HandoffsTopic is the hand-off ledger's internal topic (internal/ledger).
const HandoffsTopic = "__strand_handoffs"

// FetchPositionsTopic carries consumers' reads from partition leaders to
// group coordinators (internal/fetchpos).
const FetchPositionsTopic = "__strand_fetch_positions"

// KeyValue is one record a coordinator writes; a nil Value is a tombstone.
type KeyValue struct {
	Key, Value []byte
}

// Producer is the producer a coordinator batch is written for.
type Producer struct {
	ID    int64
	Epoch int16
}

// NoProducer is a coordinator's own write.
var NoProducer = Producer{ID: -1, Epoch: -1}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeBatch builds one uncompressed record batch v2 of recs, every record
// stamped ts (ms). With a producer (ID >= 0) the batch is transactional with
// base sequence 0, as Kafka's coordinator writes a TxnOffsetCommit: the log
// takes a coordinator's batch without sequence checks, but a transactional
// batch has a sequence. The log sets the base offset and leader epoch.
func EncodeBatch(recs []KeyValue, ts int64, p Producer) []byte {
	b := make([]byte, BatchHeaderSize, 256)
	var body []byte
	for i, r := range recs {
		body = body[:0]
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, 0)        // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, int64(len(r.Key)))
		body = append(body, r.Key...)
		if r.Value == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.Value)))
			body = append(body, r.Value...)
		}
		body = binary.AppendVarint(body, 0) // headers
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
	}
	be := binary.BigEndian
	be.PutUint32(b[BatchLengthPos:], uint32(len(b)-BatchLengthOverhead))
	be.PutUint32(b[BatchLeaderEpochPos:], 0xffffffff)
	b[BatchMagicPos] = BatchMagic
	seq := int32(-1)
	if p.ID >= 0 {
		be.PutUint16(b[BatchAttributesPos:], uint16(AttrTransactional))
		seq = 0
	}
	be.PutUint32(b[BatchLastDeltaPos:], uint32(len(recs)-1))
	be.PutUint64(b[BatchBaseTimestampPos:], uint64(ts))
	be.PutUint64(b[BatchMaxTimestampPos:], uint64(ts))
	be.PutUint64(b[BatchProducerIDPos:], uint64(p.ID))
	be.PutUint16(b[BatchProducerEpochPos:], uint16(p.Epoch))
	be.PutUint32(b[BatchBaseSequencePos:], uint32(seq))
	be.PutUint32(b[BatchRecordCountPos:], uint32(len(recs)))
	be.PutUint32(b[BatchCRCPos:], crc32.Checksum(b[BatchAttributesPos:], castagnoli))
	return b
}

// EachRecord calls fn with the offset, key and value of each record of an
// uncompressed batch (the slices alias b).
func EachRecord(b Batch, fn func(offset int64, key, value []byte)) error {
	recs := b.Records()
	for i := int32(0); i < b.RecordCount(); i++ {
		n, w := binary.Varint(recs)
		if w <= 0 || n < 0 || int64(len(recs)-w) < n {
			return fmt.Errorf("batch at %d: record %d truncated", b.BaseOffset(), i)
		}
		r := recordReader{b: recs[w : w+int(n)], p: 1} // after the attributes
		recs = recs[w+int(n):]
		r.varint() // timestamp delta
		delta := r.varint()
		key := r.bytes()
		value := r.bytes()
		if r.bad {
			return fmt.Errorf("batch at %d: record %d malformed", b.BaseOffset(), i)
		}
		fn(b.BaseOffset()+delta, key, value)
	}
	return nil
}

// recordReader reads a record's fields; bad is set on the first that does
// not fit.
type recordReader struct {
	b   []byte
	p   int
	bad bool
}

func (r *recordReader) varint() int64 {
	if r.bad || r.p > len(r.b) {
		r.bad = true
		return 0
	}
	v, w := binary.Varint(r.b[r.p:])
	if w <= 0 {
		r.bad = true
		return 0
	}
	r.p += w
	return v
}

// bytes reads a varint length and that many bytes; -1 is null.
func (r *recordReader) bytes() []byte {
	n := r.varint()
	if r.bad || n < 0 {
		return nil
	}
	if int64(len(r.b)-r.p) < n {
		r.bad = true
		return nil
	}
	v := r.b[r.p : r.p+int(n)]
	r.p += int(n)
	return v
}

// JavaHashCode is Java's String.hashCode: 31*h + c over the UTF-16 code
// units.
func JavaHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
			continue
		}
		h = 31*h + r
	}
	return h
}

// CoordinatorPartition is Kafka's rule for the partition of a coordinator's
// topic holding key (a group id in __consumer_offsets, a transactional id
// in __transaction_state): Utils.abs(key.hashCode()) % partitions, where
// abs(MinInt32) is 0.
func CoordinatorPartition(key string, partitions int32) int32 {
	h := JavaHashCode(key)
	switch {
	case h == -1<<31:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
}
