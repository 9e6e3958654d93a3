package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// The records of __consumer_offsets, in Kafka's formats so that the topic
// reads the same to Kafka's tools (kafka-console-consumer with its
// formatters, kcat with a decoder):
//
//   - a committed offset: key OffsetCommitKey v1 (group, topic, partition),
//     value OffsetCommitValue v3 (offset, leader epoch, metadata, commit
//     time), or v1 when the commit set an expiry (OffsetCommit v2-4 with a
//     retention time), as Kafka 4 writes them; a null value deletes it.
//   - a group's state: key GroupMetadataKey v2 (group), value
//     GroupMetadataValue v3 (protocol type and name, generation, leader,
//     state time, and each member with its subscription and assignment);
//     a null value deletes the group.
//
// Keys of other versions (Kafka's KIP-848 records) are skipped on replay.
// Each write is one uncompressed batch without a producer id, except a
// TxnOffsetCommit's: a transactional batch (attributes 0x10) carrying the
// transaction's producer id and epoch and base sequence 0, as Kafka's
// coordinator writes it. Its offsets count once the transaction's marker
// (a control batch, written by the transaction coordinator's markers, not
// by this package) commits them.

const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
	expiringValueVer   = 1
	groupKeyVersion    = 2
	groupValueVersion  = 3
)

// record is one key and value (nil value: a tombstone).
type record struct {
	key, value []byte
}

func offsetKey(group string, tp model.TopicPartition) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = offsetKeyVersion, group, tp.Topic, tp.Partition
	return k.AppendTo(nil)
}

func offsetValue(o offset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	if o.ExpireTime >= 0 {
		v.Version = expiringValueVer
		v.ExpireTimestamp = o.ExpireTime
	}
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = o.Offset, o.LeaderEpoch, o.Metadata, o.CommitTime
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = groupKeyVersion, group
	return k.AppendTo(nil)
}

// batchProducer is the producer a batch is written for: none (id -1) for
// the coordinator's own writes, the transaction's for a TxnOffsetCommit.
type batchProducer struct {
	id    int64
	epoch int16
}

var noProducer = batchProducer{id: -1, epoch: -1}

func (p batchProducer) transactional() bool { return p.id >= 0 }

// encodeBatch builds one record batch v2 of recs, every record stamped ts
// (ms), transactional when p is a producer. The log sets the base offset
// and leader epoch.
func encodeBatch(recs []record, ts int64, p batchProducer) []byte {
	b := make([]byte, model.BatchHeaderSize, 256)
	for i, r := range recs {
		var body []byte
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, 0)        // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, int64(len(r.key)))
		body = append(body, r.key...)
		if r.value == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.value)))
			body = append(body, r.value...)
		}
		body = binary.AppendVarint(body, 0) // headers
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
	}
	be := binary.BigEndian
	be.PutUint32(b[model.BatchLengthPos:], uint32(len(b)-model.BatchLengthOverhead))
	be.PutUint32(b[model.BatchLeaderEpochPos:], 0xffffffff)
	b[model.BatchMagicPos] = model.BatchMagic
	seq := int32(-1)
	if p.transactional() {
		// Base sequence 0: the log takes a coordinator's batch without
		// sequence checks (Kafka's AppendOrigin.COORDINATOR), but a
		// transactional batch has a sequence, as Kafka writes it.
		be.PutUint16(b[model.BatchAttributesPos:], uint16(model.AttrTransactional))
		seq = 0
	}
	be.PutUint32(b[model.BatchLastDeltaPos:], uint32(len(recs)-1))
	be.PutUint64(b[model.BatchBaseTimestampPos:], uint64(ts))
	be.PutUint64(b[model.BatchMaxTimestampPos:], uint64(ts))
	be.PutUint64(b[model.BatchProducerIDPos:], uint64(p.id))
	be.PutUint16(b[model.BatchProducerEpochPos:], uint16(p.epoch))
	be.PutUint32(b[model.BatchBaseSequencePos:], uint32(seq))
	be.PutUint32(b[model.BatchRecordCountPos:], uint32(len(recs)))
	be.PutUint32(b[model.BatchCRCPos:], crc32.Checksum(b[model.BatchAttributesPos:], castagnoli))
	return b
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errCompressed = errors.New("compressed batch")

// batchInfo is what replay needs of a record's batch.
type batchInfo struct {
	// producerID is the producer of a transactional batch, else -1.
	producerID int64
	// control: a control batch (a transaction marker); its record is a
	// control record (see controlType).
	control bool
}

// forEachRecord calls fn for each record of the whole batches in data,
// with its batch and offset. Of a control batch only the first record is
// passed, flagged: it says what the batch is (a transaction marker has no
// other). The coordinator never compresses, so a compressed batch is
// reported as errCompressed (with its offsets) and skipped.
func forEachRecord(data []byte, fn func(batch batchInfo, offset int64, key, value []byte)) (next int64, err error) {
	next = -1
	for len(data) >= model.BatchHeaderSize {
		b := model.Batch(data)
		size := b.Size()
		if size < model.BatchHeaderSize || size > len(data) {
			break // a partial batch at the end of a read
		}
		b = b[:size]
		data = data[size:]
		next = b.LastOffset() + 1
		if b.Compression() != model.CompressionNone {
			err = errors.Join(err, fmt.Errorf("%w at offsets %d-%d", errCompressed, b.BaseOffset(), b.LastOffset()))
			continue
		}
		info := batchInfo{producerID: -1, control: b.IsControl()}
		if b.IsTransactional() && b.ProducerID() >= 0 {
			info.producerID = b.ProducerID()
		}
		first := true
		each := func(offset int64, key, value []byte) {
			if first || !info.control {
				fn(info, offset, key, value)
			}
			first = false
		}
		if rerr := eachRecord(b, each); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return next, err
}

// Control record types (Kafka's ControlRecordType) that end a
// transaction.
const (
	controlAbort  = 0
	controlCommit = 1
)

// controlType reads a control record's key: int16 version, int16 type.
// Kafka parses any version's type as version 0's, and so does this.
func controlType(key []byte) (int16, bool) {
	if len(key) < 4 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(key[2:])), true
}

func eachRecord(b model.Batch, fn func(offset int64, key, value []byte)) error {
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

// javaHashCode is Java's String.hashCode: 31*h + c over the UTF-16 code
// units.
func javaHashCode(s string) int32 {
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

// partitionFor is Kafka's rule for a group's __consumer_offsets partition:
// Utils.abs(groupId.hashCode()) % partitions, where abs(MinInt32) is 0.
func partitionFor(group string, partitions int32) int32 {
	h := javaHashCode(group)
	switch {
	case h == -1<<31:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
}
