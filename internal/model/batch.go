package model

import "encoding/binary"

// Record batch v2 layout (magic 2), all integers big-endian. The CRC-32C
// covers everything from Attributes to the end of the batch, so the broker
// may set BaseOffset and PartitionLeaderEpoch without recomputing it.
const (
	BatchBaseOffsetPos    = 0  // int64
	BatchLengthPos        = 8  // int32: bytes that follow this field
	BatchLeaderEpochPos   = 12 // int32
	BatchMagicPos         = 16 // int8
	BatchCRCPos           = 17 // uint32
	BatchAttributesPos    = 21 // int16
	BatchLastDeltaPos     = 23 // int32
	BatchBaseTimestampPos = 27 // int64
	BatchMaxTimestampPos  = 35 // int64
	BatchProducerIDPos    = 43 // int64
	BatchProducerEpochPos = 51 // int16
	BatchBaseSequencePos  = 53 // int32
	BatchRecordCountPos   = 57 // int32

	// BatchHeaderSize is the size of the fixed header before the records.
	BatchHeaderSize = 61
	// BatchLengthOverhead is the part of the header not counted by the
	// length field (base offset and the length itself).
	BatchLengthOverhead = 12
	// BatchMagic is the only record format Strand stores.
	BatchMagic = 2
)

// Compression is the codec named by a batch's attributes (bits 0-2).
type Compression int8

const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return "unknown"
}

// Attribute bits above the codec.
const (
	AttrTimestampLogAppend = 1 << 3
	AttrTransactional      = 1 << 4
	AttrControl            = 1 << 5
	AttrDeleteHorizon      = 1 << 6
)

// Batch is a view over the bytes of one record batch. Methods read fields in
// place; the caller guarantees len(b) >= BatchHeaderSize.
type Batch []byte

func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[BatchBaseOffsetPos:])) }
func (b Batch) Length() int32     { return int32(binary.BigEndian.Uint32(b[BatchLengthPos:])) }
func (b Batch) PartitionLeaderEpoch() int32 {
	return int32(binary.BigEndian.Uint32(b[BatchLeaderEpochPos:]))
}
func (b Batch) Magic() int8            { return int8(b[BatchMagicPos]) }
func (b Batch) CRC() uint32            { return binary.BigEndian.Uint32(b[BatchCRCPos:]) }
func (b Batch) Attributes() int16      { return int16(binary.BigEndian.Uint16(b[BatchAttributesPos:])) }
func (b Batch) LastOffsetDelta() int32 { return int32(binary.BigEndian.Uint32(b[BatchLastDeltaPos:])) }
func (b Batch) BaseTimestamp() int64 {
	return int64(binary.BigEndian.Uint64(b[BatchBaseTimestampPos:]))
}
func (b Batch) MaxTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[BatchMaxTimestampPos:])) }
func (b Batch) ProducerID() int64   { return int64(binary.BigEndian.Uint64(b[BatchProducerIDPos:])) }
func (b Batch) ProducerEpoch() int16 {
	return int16(binary.BigEndian.Uint16(b[BatchProducerEpochPos:]))
}
func (b Batch) BaseSequence() int32 { return int32(binary.BigEndian.Uint32(b[BatchBaseSequencePos:])) }
func (b Batch) RecordCount() int32  { return int32(binary.BigEndian.Uint32(b[BatchRecordCountPos:])) }

// Size is the whole batch's size in bytes, header included.
func (b Batch) Size() int { return int(b.Length()) + BatchLengthOverhead }

// LastOffset is the offset of the batch's last record.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

func (b Batch) Compression() Compression { return Compression(b.Attributes() & 0x7) }
func (b Batch) IsLogAppendTime() bool    { return b.Attributes()&AttrTimestampLogAppend != 0 }
func (b Batch) IsTransactional() bool    { return b.Attributes()&AttrTransactional != 0 }
func (b Batch) IsControl() bool          { return b.Attributes()&AttrControl != 0 }

// Records returns the bytes after the header: the records, possibly
// compressed.
func (b Batch) Records() []byte { return b[BatchHeaderSize:b.Size()] }

// SetBaseOffset stores the offset the log assigned; the CRC does not cover it.
func (b Batch) SetBaseOffset(o int64) { binary.BigEndian.PutUint64(b[BatchBaseOffsetPos:], uint64(o)) }

// SetPartitionLeaderEpoch stores the leader epoch; the CRC does not cover it.
func (b Batch) SetPartitionLeaderEpoch(e int32) {
	binary.BigEndian.PutUint32(b[BatchLeaderEpochPos:], uint32(e))
}
