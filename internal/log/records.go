package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/strandlog/strand/internal/model"
)

// The record layout inside a v2 batch (after decompression): per record a
// varint body length, then attributes, a varlong timestamp delta, a varint
// offset delta, key and value as varint length (-1 for null) plus bytes, and a
// varint count of headers, each a varint-length key (never null) and a
// nullable value. All varints are zigzag encoded.

// RecordHeader is one record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Record is one record of a batch, its offset and timestamp relative to the
// batch header.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte // nil when the key is null
	Value          []byte // nil when the value is null (a tombstone)
	Headers        []RecordHeader
}

const (
	maxVarint32Len = 5
	maxVarint64Len = 10
	// noTimestamp is Kafka's "no timestamp"; such records skip the
	// timestamp window like in Kafka.
	noTimestamp = -1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchCRC is the CRC-32C of a batch as stored in its header: it covers
// attributes to the end, so offsets and leader epoch can change freely.
func batchCRC(b model.Batch) uint32 {
	return crc32.Checksum(b[model.BatchAttributesPos:b.Size()], castagnoli)
}

// varint32 and varint64 decode a zigzag varint at b[p:], returning the
// position after it. Lengths and deltas nearly always take one or two bytes,
// so those cases are unrolled.
func varint32(b []byte, p int) (int32, int, bool) {
	if p >= 0 && p+1 < len(b) {
		if c := b[p]; c < 0x80 {
			return zigzag32(uint32(c)), p + 1, true
		} else if d := b[p+1]; d < 0x80 {
			return zigzag32(uint32(c&0x7f) | uint32(d)<<7), p + 2, true
		}
	}
	u, p, ok := uvarint(b, p, maxVarint32Len)
	if !ok || u > math.MaxUint32 {
		return 0, 0, false
	}
	return zigzag32(uint32(u)), p, true
}

func varint64(b []byte, p int) (int64, int, bool) {
	if p >= 0 && p+1 < len(b) {
		if c := b[p]; c < 0x80 {
			return zigzag64(uint64(c)), p + 1, true
		} else if d := b[p+1]; d < 0x80 {
			return zigzag64(uint64(c&0x7f) | uint64(d)<<7), p + 2, true
		}
	}
	u, p, ok := uvarint(b, p, maxVarint64Len)
	return zigzag64(u), p, ok
}

func zigzag32(u uint32) int32 { return int32(u>>1) ^ -int32(u&1) }
func zigzag64(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// uvarint decodes an unsigned varint at b[p:] of at most maxLen bytes. It is
// stricter than Kafka's reader: a varint past its type's width is corrupt
// rather than silently truncated.
func uvarint(b []byte, p, maxLen int) (uint64, int, bool) {
	var x uint64
	for i, s := 0, uint(0); i < maxLen && p+i < len(b); i, s = i+1, s+7 {
		c := b[p+i]
		x |= uint64(c&0x7f) << s
		if c < 0x80 {
			if i == maxVarint64Len-1 && c > 1 {
				return 0, 0, false
			}
			return x, p + i + 1, true
		}
	}
	return 0, 0, false
}

// bytesField reads a varint length and that many bytes at b[p:]; -1 is null.
// The result's capacity is clipped so an append by a caller cannot overwrite
// the next field.
func bytesField(b []byte, p int) ([]byte, int, bool) {
	n, p, ok := varint32(b, p)
	switch {
	case !ok || n < -1 || int(n) > len(b)-p:
		return nil, 0, false
	case n == -1:
		return nil, p, true
	}
	end := p + int(n)
	return b[p:end:end], end, true
}

// recordReader walks the uncompressed records of one batch.
type recordReader struct {
	buf []byte
	pos int
	// headers says whether to materialise headers; validation only needs
	// their framing checked, which keeps it free of allocations.
	headers bool
	// keys is buf as a string, made on the first header of the batch so
	// header keys cost one allocation per batch rather than one each.
	keys string
	r    Record
}

// next decodes the record at pos into rr.r. It returns why the framing is
// broken, or "" when the record is sound.
func (rr *recordReader) next() string {
	size, p, ok := varint32(rr.buf, rr.pos)
	if !ok || size < 0 || int(size) > len(rr.buf)-p {
		return "bad record length"
	}
	end := p + int(size)
	body := rr.buf[:end] // bounds every field to this record
	if p == end {
		return "empty record"
	}
	r := &rr.r
	r.Attributes = int8(body[p])
	if r.TimestampDelta, p, ok = varint64(body, p+1); !ok {
		return "bad timestamp delta"
	}
	if r.OffsetDelta, p, ok = varint32(body, p); !ok {
		return "bad offset delta"
	}
	if r.Key, p, ok = bytesField(body, p); !ok {
		return "bad key"
	}
	if r.Value, p, ok = bytesField(body, p); !ok {
		return "bad value"
	}
	if p, ok = rr.readHeaders(body, p); !ok {
		return "bad headers"
	}
	if p != end {
		return "record length does not match its fields"
	}
	rr.pos = end
	return ""
}

func (rr *recordReader) readHeaders(body []byte, p int) (int, bool) {
	n, p, ok := varint32(body, p)
	// Each header takes at least two bytes, which bounds n before any
	// work proportional to it.
	if !ok || n < 0 || int(n) > (len(body)-p)/2 {
		return 0, false
	}
	rr.r.Headers = rr.r.Headers[:0]
	for range n {
		var kl int32
		if kl, p, ok = varint32(body, p); !ok || kl < 0 || int(kl) > len(body)-p {
			return 0, false
		}
		k := p
		p += int(kl)
		var v []byte
		if v, p, ok = bytesField(body, p); !ok {
			return 0, false
		}
		if rr.headers {
			rr.r.Headers = append(rr.r.Headers, RecordHeader{Key: rr.str(k, k+int(kl)), Value: v})
		}
	}
	return p, true
}

func (rr *recordReader) str(from, to int) string {
	if rr.keys == "" {
		rr.keys = string(rr.buf)
	}
	return rr.keys[from:to]
}

// recordsCorrupt builds the error for a record whose framing is broken.
func recordsCorrupt(i int32, why string) error {
	return fmt.Errorf("record %d: %s: %w", i, why, ErrCorruptMessage)
}

// checkBatchFraming checks that b holds a whole batch header and the bytes
// its length field claims, so Batch accessors cannot go out of range.
func checkBatchFraming(b model.Batch) error {
	if len(b) < model.BatchHeaderSize {
		return fmt.Errorf("batch of %d bytes is shorter than its header: %w", len(b), ErrCorruptMessage)
	}
	if size := b.Size(); size < model.BatchHeaderSize || size > len(b) {
		return fmt.Errorf("batch length %d does not fit %d bytes: %w", b.Length(), len(b), ErrCorruptMessage)
	}
	return nil
}

// batchRecords returns the uncompressed records of b. When it had to
// decompress, pooled holds the buffer to give back with putBuf once the
// records are no longer used.
func batchRecords(b model.Batch) (recs []byte, pooled *[]byte, err error) {
	payload := b.Records()
	c := b.Compression()
	if c == model.CompressionNone {
		return payload, nil, nil
	}
	if c > model.CompressionZstd {
		return nil, nil, fmt.Errorf("codec %d: %w", c, ErrUnsupportedCompression)
	}
	// An empty batch left by compaction carries no payload to decompress.
	if len(payload) == 0 && b.RecordCount() == 0 {
		return payload, nil, nil
	}
	buf := getBuf()
	out, err := decompress(c, payload, (*buf)[:0])
	if err != nil {
		putBuf(buf)
		return nil, nil, fmt.Errorf("%s: %v: %w", c, err, ErrCorruptMessage)
	}
	*buf = out
	return out, buf, nil
}

// forEachRecord decodes the batch's records (decompressing if needed) and
// calls fn for each, in order. It checks every varint and length against the
// bounds and that exactly RecordCount records are present with no trailing
// bytes; errors wrap ErrCorruptMessage. It does not check the CRC. The
// *Record passed to fn is only valid during the call; its byte slices alias
// the (decompressed) buffer. Header keys share one string per batch.
func forEachRecord(b model.Batch, fn func(r *Record) error) error {
	if err := checkBatchFraming(b); err != nil {
		return err
	}
	count := b.RecordCount()
	if count < 0 {
		return fmt.Errorf("negative record count %d: %w", count, ErrCorruptMessage)
	}
	buf, pooled, err := batchRecords(b)
	if err != nil {
		return err
	}
	if pooled != nil {
		defer putBuf(pooled)
	}
	rr := &recordReader{buf: buf, headers: true}
	for i := range count {
		if why := rr.next(); why != "" {
			return recordsCorrupt(i, why)
		}
		if err := fn(&rr.r); err != nil {
			return err
		}
	}
	if rr.pos != len(buf) {
		return fmt.Errorf("%d bytes after the last of %d records: %w", len(buf)-rr.pos, count, ErrCorruptMessage)
	}
	return nil
}

// batchHeader holds the header fields a new batch is built from.
type batchHeader struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Attributes           int16 // codec bits included
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
}

// appendBatch encodes a whole v2 batch (header, records, compression per
// h.Attributes, CRC-32C) and appends it to dst. RecordCount is len(recs).
// Record deltas are written as given, so compaction keeps the offsets and
// timestamps of the records it keeps. A batch without records is written
// uncompressed, as Kafka's cleaner does: there is nothing to compress.
func appendBatch(dst []byte, h batchHeader, recs []Record) ([]byte, error) {
	codec := model.Compression(h.Attributes & 0x7)
	if codec > model.CompressionZstd {
		return dst, fmt.Errorf("codec %d: %w", codec, ErrUnsupportedCompression)
	}
	attrs := h.Attributes
	if len(recs) == 0 {
		attrs &^= 0x7
		codec = model.CompressionNone
	}
	start := len(dst)
	dst = append(dst, make([]byte, model.BatchHeaderSize)...)
	var err error
	if codec == model.CompressionNone {
		dst, err = appendRecords(dst, recs)
	} else {
		scratch := getBuf()
		*scratch, err = appendRecords((*scratch)[:0], recs)
		if err == nil {
			dst, err = compress(codec, *scratch, dst)
		}
		putBuf(scratch)
	}
	if err != nil {
		return dst[:start], err
	}
	if n := len(dst) - start - model.BatchLengthOverhead; n > math.MaxInt32 {
		return dst[:start], fmt.Errorf("batch of %d bytes: %w", n, ErrMessageTooLarge)
	}
	putHeader(dst[start:], h, attrs, int32(len(recs)))
	return dst, nil
}

func putHeader(b model.Batch, h batchHeader, attrs int16, count int32) {
	be := binary.BigEndian
	be.PutUint64(b[model.BatchBaseOffsetPos:], uint64(h.BaseOffset))
	be.PutUint32(b[model.BatchLengthPos:], uint32(len(b)-model.BatchLengthOverhead))
	be.PutUint32(b[model.BatchLeaderEpochPos:], uint32(h.PartitionLeaderEpoch))
	b[model.BatchMagicPos] = model.BatchMagic
	be.PutUint16(b[model.BatchAttributesPos:], uint16(attrs))
	be.PutUint32(b[model.BatchLastDeltaPos:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[model.BatchBaseTimestampPos:], uint64(h.BaseTimestamp))
	be.PutUint64(b[model.BatchMaxTimestampPos:], uint64(h.MaxTimestamp))
	be.PutUint64(b[model.BatchProducerIDPos:], uint64(h.ProducerID))
	be.PutUint16(b[model.BatchProducerEpochPos:], uint16(h.ProducerEpoch))
	be.PutUint32(b[model.BatchBaseSequencePos:], uint32(h.BaseSequence))
	be.PutUint32(b[model.BatchRecordCountPos:], uint32(count))
	be.PutUint32(b[model.BatchCRCPos:], batchCRC(b))
}

// appendRecords appends the uncompressed encoding of recs.
func appendRecords(dst []byte, recs []Record) ([]byte, error) {
	for i := range recs {
		r := &recs[i]
		size, err := recordBodySize(r)
		if err != nil {
			return dst, fmt.Errorf("record %d: %w", i, err)
		}
		dst = slices.Grow(dst, maxVarint32Len+size)
		dst = binary.AppendVarint(dst, int64(size))
		dst = append(dst, byte(r.Attributes))
		dst = binary.AppendVarint(dst, r.TimestampDelta)
		dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
		dst = appendNullable(dst, r.Key)
		dst = appendNullable(dst, r.Value)
		dst = binary.AppendVarint(dst, int64(len(r.Headers)))
		for _, h := range r.Headers {
			dst = binary.AppendVarint(dst, int64(len(h.Key)))
			dst = append(dst, h.Key...)
			dst = appendNullable(dst, h.Value)
		}
	}
	return dst, nil
}

func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

// recordBodySize is the size of a record after its length prefix. Every
// length must fit the int32 varints of the format.
func recordBodySize(r *Record) (int, error) {
	n := 1 + varintLen(r.TimestampDelta) + varintLen(int64(r.OffsetDelta)) +
		nullableLen(r.Key) + nullableLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + nullableLen(h.Value)
	}
	if n > math.MaxInt32 || len(r.Headers) > math.MaxInt32 {
		return 0, fmt.Errorf("record of %d bytes: %w", n, ErrInvalidRecord)
	}
	return n, nil
}

func nullableLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

// varintLen is the size of x as a zigzag varint.
func varintLen(x int64) int {
	u := uint64(x<<1) ^ uint64(x>>63)
	n := 1
	for ; u >= 0x80; u >>= 7 {
		n++
	}
	return n
}

// setLogAppendTime stamps a topic's log-append time: it sets the
// timestamp-type attribute bit and MaxTimestamp to ts, and recomputes the
// CRC, both being covered by it. Consumers then read ts as every record's
// timestamp, as with Kafka.
func setLogAppendTime(b model.Batch, ts int64) {
	attrs := uint16(b.Attributes()) | model.AttrTimestampLogAppend
	binary.BigEndian.PutUint16(b[model.BatchAttributesPos:], attrs)
	binary.BigEndian.PutUint64(b[model.BatchMaxTimestampPos:], uint64(ts))
	binary.BigEndian.PutUint32(b[model.BatchCRCPos:], batchCRC(b))
}

// maxDecompressedBatch bounds what one batch may decompress to. Kafka streams
// records out of a compressed batch and needs no such bound, but we decompress
// whole batches, and a few bytes of zstd or gzip can claim gigabytes. 256 MiB
// is far above any batch a client builds under the usual limits.
const maxDecompressedBatch = 256 << 20

// maxPooledBuf keeps a rare huge batch from pinning its buffer in the pool.
const maxPooledBuf = 16 << 20

// ErrDecompressTooLarge is the refusal of data that decompresses to more
// than its bound.
var ErrDecompressTooLarge = errors.New("log: decompresses to more than its bound")

// tooLarge names the bound that was passed.
func tooLarge(limit int) error { return fmt.Errorf("%w of %d bytes", ErrDecompressTooLarge, limit) }

var bufPool = sync.Pool{New: func() any { return new([]byte) }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// decompress appends the decompressed form of src to dst. Snappy accepts
// both raw snappy and the xerial framing the Java client writes; lz4 is the
// LZ4 frame format; zstd and gzip as usual. The output is bounded by
// maxDecompressedBatch.
func decompress(c model.Compression, src, dst []byte) ([]byte, error) {
	return decompressAtMost(c, src, dst, maxDecompressedBatch)
}

// decompressAtMost is decompress bounded by limit bytes of output: past
// it, ErrDecompressTooLarge, having decompressed no more than the limit.
func decompressAtMost(c model.Compression, src, dst []byte, limit int) ([]byte, error) {
	switch c {
	case model.CompressionNone:
		if len(src) > limit {
			return dst, tooLarge(limit)
		}
		return append(dst, src...), nil
	case model.CompressionGzip:
		return gunzip(src, dst, limit)
	case model.CompressionSnappy:
		return unsnappy(src, dst, limit)
	case model.CompressionLZ4:
		return unlz4(src, dst, limit)
	case model.CompressionZstd:
		if limit >= maxDecompressedBatch {
			return unzstd(src, dst)
		}
		return unzstdAtMost(src, dst, limit)
	}
	return dst, fmt.Errorf("codec %d: %w", c, ErrUnsupportedCompression)
}

// Decompress returns the decompressed form of src, a stream compressed
// with one of Kafka's codecs (its ids), of at most limit bytes (at most
// what a batch may hold): past it, ErrDecompressTooLarge, without
// decompressing further. Client telemetry (KIP-714) is compressed the
// same way as batches.
func Decompress(codec int8, src []byte, limit int) ([]byte, error) {
	return decompressAtMost(model.Compression(codec), src, nil, min(limit, maxDecompressedBatch))
}

// compress appends the compressed form of src to dst in a form every Kafka
// client reads: the LZ4 frame with independent 64 KiB blocks and no content
// checksum like the Java producer, and snappy in the xerial framing, which is
// what the Java client writes (its reader also takes raw snappy, but some
// clients only take xerial; librdkafka and franz-go take both).
func compress(c model.Compression, src, dst []byte) ([]byte, error) {
	switch c {
	case model.CompressionNone:
		return append(dst, src...), nil
	case model.CompressionGzip:
		return gzipAppend(src, dst)
	case model.CompressionSnappy:
		return xerialAppend(src, dst), nil
	case model.CompressionLZ4:
		return lz4Append(src, dst)
	case model.CompressionZstd:
		return zstdEncoder().EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("codec %d: %w", c, ErrUnsupportedCompression)
}

// readInto appends all of r to dst, growing dst by itself so a pooled buffer
// is reused, and fails past limit bytes.
func readInto(r io.Reader, dst []byte, limit int) ([]byte, error) {
	start := len(dst)
	for idle := 0; ; {
		if len(dst) == cap(dst) {
			// Room for one more byte than allowed tells "exactly at the
			// bound" from "over it".
			room := min(max(cap(dst)-start, 64<<10), limit+1-(len(dst)-start))
			if room <= 0 {
				return dst, tooLarge(limit)
			}
			dst = slices.Grow(dst, room)
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst, tooLarge(limit)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
		// A reader that keeps returning nothing would spin forever.
		if n > 0 {
			idle = 0
		} else if idle++; idle > 100 {
			return dst, io.ErrNoProgress
		}
	}
}

type gzipReader struct {
	r   gzip.Reader
	src bytes.Reader
}

var gzipReaders = sync.Pool{New: func() any { return new(gzipReader) }}

func gunzip(src, dst []byte, limit int) ([]byte, error) {
	z := gzipReaders.Get().(*gzipReader)
	defer gzipReaders.Put(z)
	z.src.Reset(src)
	out, err := dst, z.r.Reset(&z.src)
	if err == nil {
		out, err = readInto(&z.r, dst, limit)
	}
	z.src.Reset(nil) // so the pool does not pin the batch
	return out, err
}

type lz4Reader struct {
	r   *lz4.Reader
	src bytes.Reader
}

var lz4Readers = sync.Pool{New: func() any { return &lz4Reader{r: lz4.NewReader(nil)} }}

func unlz4(src, dst []byte, limit int) ([]byte, error) {
	z := lz4Readers.Get().(*lz4Reader)
	defer lz4Readers.Put(z)
	z.src.Reset(src)
	z.r.Reset(&z.src)
	out, err := readInto(z.r, dst, limit)
	z.src.Reset(nil) // so the pool does not pin the batch
	z.r.Reset(nil)
	return out, err
}

var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(maxDecompressedBatch))
	if err != nil {
		panic(err) // the options are constant
	}
	return d
})

func unzstd(src, dst []byte) ([]byte, error) {
	return zstdDecoder().DecodeAll(src, dst)
}

// unzstdAtMost streams a frame out through its own decoder, bounded by
// limit, for a bound below a batch's (the shared decoder's memory bound).
// The decoder's window may be 8 MiB, what encoders use by default, or the
// bound if larger; a frame that asks for more is refused as too large.
func unzstdAtMost(src, dst []byte, limit int) ([]byte, error) {
	d, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(uint64(max(limit+1, 8<<20))))
	if err != nil {
		return dst, err
	}
	defer d.Close()
	out, err := readInto(d, dst, limit)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		err = tooLarge(limit)
	}
	return out, err
}

// xerialMagic starts the framing of snappy-java's SnappyOutputStream; a
// 16-byte header (magic, version, minimum compatible version) precedes
// blocks that are each a big-endian int32 length and a raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderLen = 16
	// xerialBlockSize is snappy-java's default block size.
	xerialBlockSize = 32 << 10
)

var errXerial = errors.New("malformed xerial snappy framing")

func unsnappy(src, dst []byte, limit int) ([]byte, error) {
	start := len(dst)
	if len(src) < xerialHeaderLen || !bytes.HasPrefix(src, xerialMagic) {
		return unsnappyBlock(src, dst, limit)
	}
	// The version fields are not checked: some writers store them little
	// endian, and librdkafka ignores them too.
	for src = src[xerialHeaderLen:]; len(src) > 0; {
		// snappy-java reads concatenated streams; a block length
		// cannot start with the magic's 0x82, so this is unambiguous.
		if len(src) >= xerialHeaderLen && bytes.HasPrefix(src, xerialMagic) {
			src = src[xerialHeaderLen:]
			continue
		}
		if len(src) < 4 {
			return dst, errXerial
		}
		n := binary.BigEndian.Uint32(src)
		if n > uint32(len(src)-4) {
			return dst, errXerial
		}
		var err error
		if dst, err = unsnappyBlock(src[4:4+n], dst, limit-(len(dst)-start)); err != nil {
			return dst, err
		}
		src = src[4+n:]
	}
	return dst, nil
}

// unsnappyBlock decodes one raw snappy block straight into dst's spare room,
// checking the claimed length against room (the bytes it may add) before
// allocating for it.
func unsnappyBlock(src, dst []byte, room int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n > room {
		return dst, tooLarge(room)
	}
	dst = slices.Grow(dst, n)
	if _, err := s2.Decode(dst[len(dst):len(dst)+n], src); err != nil {
		return dst, err
	}
	return dst[:len(dst)+n], nil
}

var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

func xerialAppend(src, dst []byte) []byte {
	dst = append(dst, xerialHeader...)
	for len(src) > 0 {
		n := min(len(src), xerialBlockSize)
		dst = slices.Grow(dst, 4+s2.MaxEncodedLen(n))
		at := len(dst)
		// EncodeSnappy writes from the start of the slice it is given
		// when it has the capacity, so the block lands in place.
		block := s2.EncodeSnappy(dst[at+4:at+4], src[:n])
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)))
		dst = dst[:at+4+len(block)]
		src = src[n:]
	}
	return dst
}

// appendWriter lets stream compressors append to a slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// streamCompressor is a gzip or LZ4 writer: a frame per Reset.
type streamCompressor interface {
	Reset(w io.Writer)
	Write(p []byte) (int, error)
	Close() error
}

// frameWriter is a pooled stream compressor with the slice it appends to.
type frameWriter struct {
	w   streamCompressor
	out appendWriter
}

// appendFrame appends the compressed frame of src to dst.
func (f *frameWriter) appendFrame(src, dst []byte) ([]byte, error) {
	f.out.b = dst
	f.w.Reset(&f.out)
	_, err := f.w.Write(src)
	if err == nil {
		err = f.w.Close()
	}
	dst, f.out.b = f.out.b, nil
	return dst, err
}

// framePools are the pools of frameWriters, by codec and level.
var framePools sync.Map // frameKind -> *sync.Pool

type frameKind struct {
	codec model.Compression
	level int // the codec's own scale; lz4DefaultLevel for the LZ4 writer's default
}

// lz4DefaultLevel is the LZ4 writer's own default (its fast mode), which
// producers' batches are compressed with when compaction rewrites them.
const lz4DefaultLevel = 0

// appendFrameAt appends src compressed by codec (gzip or LZ4) at level.
func appendFrameAt(codec model.Compression, level int, src, dst []byte) ([]byte, error) {
	k := frameKind{codec, level}
	p, _ := framePools.LoadOrStore(k, &sync.Pool{New: func() any {
		w, err := newStreamCompressor(k)
		if err != nil {
			return err
		}
		return &frameWriter{w: w}
	}})
	got := p.(*sync.Pool).Get()
	f, ok := got.(*frameWriter)
	if !ok {
		return dst, fmt.Errorf("%s level %d: %v", codec, level, got)
	}
	defer p.(*sync.Pool).Put(f)
	return f.appendFrame(src, dst)
}

func newStreamCompressor(k frameKind) (streamCompressor, error) {
	if k.codec == model.CompressionGzip {
		return gzip.NewWriterLevel(nil, k.level)
	}
	w := lz4.NewWriter(nil)
	// Like the Java producer: the Java reader takes block sizes of 64 KiB
	// to 4 MiB, and older ones ignore a content checksum.
	opts := []lz4.Option{lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false)}
	if k.level != lz4DefaultLevel {
		opts = append(opts, lz4.CompressionLevelOption(lz4.CompressionLevel(1<<(8+k.level))))
	}
	return w, w.Apply(opts...)
}

func gzipAppend(src, dst []byte) ([]byte, error) {
	return appendFrameAt(model.CompressionGzip, gzip.DefaultCompression, src, dst)
}

func lz4Append(src, dst []byte) ([]byte, error) {
	return appendFrameAt(model.CompressionLZ4, lz4DefaultLevel, src, dst)
}

var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	// A 1 MiB window covers a whole batch of usual size while bounding
	// the memory of every consumer that streams the frame; zero frames
	// keep an empty input decodable by every client.
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderConcurrency(0),
		zstd.WithWindowSize(1<<20),
		zstd.WithZeroFrames(true))
	if err != nil {
		panic(err) // the options are constant
	}
	return e
})
