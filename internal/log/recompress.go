package log

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/strandlog/strand/internal/model"
)

// A topic whose compression.type names a codec stores what producers send
// in that codec, as Kafka's LogValidator does: a batch of another codec is
// decompressed and compressed again, its header (base offset, producer id,
// epoch and sequence, timestamps, count) kept and its CRC computed anew. A
// batch already of the topic's codec is stored as sent, whatever level the
// producer used, so the common case keeps the path without copies.

// recompressBatches returns data with each batch whose codec is not the
// topic's recompressed, and refs moved to match. Control batches (written
// by coordinators) are never rewritten. A batch that grows over
// max.message.bytes is refused, as Kafka refuses it.
func recompressBatches(data []byte, refs []batchRef, infos []BatchInfo, cfg Config) ([]byte, []batchRef, error) {
	c := cfg.Compression
	need := false
	for i, r := range refs {
		if !infos[i].Control && model.Batch(data[r.pos:r.pos+r.size]).Compression() != c.Codec {
			need = true
			break
		}
	}
	if !need {
		return data, refs, nil
	}
	out := make([]byte, 0, len(data))
	moved := make([]batchRef, len(refs))
	for i, r := range refs {
		b := model.Batch(data[r.pos : r.pos+r.size])
		moved[i] = r
		moved[i].pos = len(out)
		if infos[i].Control || b.Compression() == c.Codec {
			out = append(out, b...)
			continue
		}
		var err error
		if out, err = appendRecompressed(out, b, c); err != nil {
			return nil, nil, err
		}
		moved[i].size = len(out) - moved[i].pos
		if cfg.MaxMessageBytes > 0 && moved[i].size > cfg.MaxMessageBytes {
			return nil, nil, fmt.Errorf("batch of %d bytes once %s, over max.message.bytes %d: %w",
				moved[i].size, codecName(c.Codec), cfg.MaxMessageBytes, ErrMessageTooLarge)
		}
	}
	return out, moved, nil
}

// appendRecompressed appends b with its records in codec c.
func appendRecompressed(dst []byte, b model.Batch, c Compression) ([]byte, error) {
	recs, pooled, err := batchRecords(b)
	if err != nil {
		return dst, err
	}
	if pooled != nil {
		defer putBuf(pooled)
	}
	start := len(dst)
	dst = append(dst, b[:model.BatchHeaderSize]...)
	if dst, err = compressAt(c, recs, dst); err != nil {
		return dst[:start], err
	}
	nb := model.Batch(dst[start:])
	be := binary.BigEndian
	be.PutUint32(nb[model.BatchLengthPos:], uint32(len(nb)-model.BatchLengthOverhead))
	attrs := be.Uint16(nb[model.BatchAttributesPos:])
	be.PutUint16(nb[model.BatchAttributesPos:], attrs&^0x7|uint16(c.Codec))
	be.PutUint32(nb[model.BatchCRCPos:], batchCRC(nb))
	return dst, nil
}

func codecName(c model.Compression) string {
	if c == model.CompressionNone {
		return "uncompressed"
	}
	return c.String()
}

// compressAt compresses src with c's codec at c's level for it. Kafka's
// LZ4 levels above 9, which the Java client's high-compression mode
// reaches, are this library's highest.
func compressAt(c Compression, src, dst []byte) ([]byte, error) {
	switch c.Codec {
	case model.CompressionGzip:
		return appendFrameAt(model.CompressionGzip, c.GzipLevel, src, dst)
	case model.CompressionLZ4:
		return appendFrameAt(model.CompressionLZ4, min(max(c.LZ4Level, 1), 9), src, dst)
	case model.CompressionZstd:
		return zstdLevelEncoder(c.ZstdLevel).EncodeAll(src, dst), nil
	}
	return compress(c.Codec, src, dst)
}

// zstdByLevel are the zstd encoders by level, made on first use.
var zstdByLevel sync.Map // zstd.EncoderLevel -> *zstd.Encoder

// zstdLevelEncoder is the encoder of zstdEncoder at the nearest of this
// library's levels to a zstd level.
func zstdLevelEncoder(level int) *zstd.Encoder {
	l := zstd.EncoderLevelFromZstd(level)
	if l == zstd.SpeedDefault {
		return zstdEncoder()
	}
	if e, ok := zstdByLevel.Load(l); ok {
		return e.(*zstd.Encoder)
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(0), zstd.WithWindowSize(1<<20),
		zstd.WithZeroFrames(true), zstd.WithEncoderLevel(l))
	if err != nil {
		panic(err) // the options are valid for every level
	}
	got, _ := zstdByLevel.LoadOrStore(l, e)
	return got.(*zstd.Encoder)
}
