package txn

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// The records of __transaction_state, in Kafka's formats so that the topic
// reads the same to Kafka's tools:
//
//   - key TxnMetadataKey v0 (the transactional id);
//   - value TxnMetadataValue v1 (flexible, as Kafka 4 writes it): producer
//     id and epoch, timeout, state, the partitions of the transaction
//     (null for Empty), last update and start times in ms (start -1:
//     none), and the tagged PreviousProducerID, NextProducerID and
//     ClientTransactionVersion of KIP-890;
//   - a null value (tombstone) when the id expires.
//
// Kafka does not store its lastProducerEpoch (the epoch before the last
// bump, used to recognise a retried InitProducerId); neither do we, so such
// a retry across a restart is fenced, as in Kafka. Each write is one
// uncompressed batch of one record without a producer id.

const (
	keyVersion   = 0
	valueVersion = 1
)

// record is one key and value (nil value: a tombstone).
type record struct {
	key, value []byte
}

func txnKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version, k.TransactionalID = keyVersion, id
	return k.AppendTo(nil)
}

func txnValue(m *meta) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = m.pid, m.epoch, m.timeoutMs
	v.State = kmsg.TransactionState(m.state)
	if m.state != stateEmpty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range m.parts {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewTxnMetadataValueTopic()
				t.Topic = tp.Topic
				v.Topics = append(v.Topics, t)
			}
			t := &v.Topics[len(v.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
	}
	v.LastUpdateTimestamp, v.StartTimestamp = m.updateMs, m.startMs
	v.PreviousProducerID, v.NextProducerID = m.prevPID, m.nextPID
	v.ClientTransactionVersion = m.clientVer
	return v.AppendTo(nil)
}

// decodeValue reads a TxnMetadataValue of any version.
func decodeValue(b []byte) (meta, error) {
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(b); err != nil {
		return meta{}, err
	}
	m := meta{
		state: state(v.State), pid: v.ProducerID, epoch: v.ProducerEpoch, lastEpoch: -1,
		prevPID: v.PreviousProducerID, nextPID: v.NextProducerID, timeoutMs: v.TimeoutMillis,
		startMs: v.StartTimestamp, updateMs: v.LastUpdateTimestamp, clientVer: v.ClientTransactionVersion,
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.parts = append(m.parts, model.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	m.parts = sortParts(m.parts)
	return m, nil
}

// sortParts sorts and dedups a partition list in place.
func sortParts(ps []model.TopicPartition) []model.TopicPartition {
	slices.SortFunc(ps, cmpTP)
	return slices.Compact(ps)
}

func cmpTP(a, b model.TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// encodeBatch builds one record batch v2 of recs, every record stamped ts
// (ms). The log sets the base offset and leader epoch.
func encodeBatch(recs []record, ts int64) []byte {
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
	be.PutUint32(b[model.BatchLastDeltaPos:], uint32(len(recs)-1))
	be.PutUint64(b[model.BatchBaseTimestampPos:], uint64(ts))
	be.PutUint64(b[model.BatchMaxTimestampPos:], uint64(ts))
	be.PutUint64(b[model.BatchProducerIDPos:], 0xffffffffffffffff)
	be.PutUint16(b[model.BatchProducerEpochPos:], 0xffff)
	be.PutUint32(b[model.BatchBaseSequencePos:], 0xffffffff)
	be.PutUint32(b[model.BatchRecordCountPos:], uint32(len(recs)))
	be.PutUint32(b[model.BatchCRCPos:], crc32.Checksum(b[model.BatchAttributesPos:], castagnoli))
	return b
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// forEachRecord calls fn for each record of the whole batches in data,
// with its offset, and returns the offset after the last whole batch (-1:
// none). Control batches are skipped (__transaction_state has none). The
// coordinator never compresses, so a compressed batch is reported and
// skipped.
func forEachRecord(data []byte, fn func(offset int64, key, value []byte)) (next int64, err error) {
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
		if b.IsControl() {
			continue
		}
		if b.Compression() != model.CompressionNone {
			if err == nil {
				err = fmt.Errorf("compressed batch at offsets %d-%d", b.BaseOffset(), b.LastOffset())
			}
			continue
		}
		if rerr := eachRecord(b, fn); rerr != nil && err == nil {
			err = rerr
		}
	}
	return next, err
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

// partitionFor is Kafka's rule for a transactional id's
// __transaction_state partition: Utils.abs(id.hashCode()) % partitions,
// where abs(MinInt32) is 0.
func partitionFor(id string, partitions int32) int32 {
	h := javaHashCode(id)
	switch {
	case h == -1<<31:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
}
