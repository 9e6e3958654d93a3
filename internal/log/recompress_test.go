package log

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// storedBatches reads every batch of l.
func storedBatches(t *testing.T, l *Log) []model.Batch {
	t.Helper()
	var out []model.Batch
	for next := l.StartOffset(); next < l.EndOffset(); {
		sec, err := l.Read(next, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		data, err := sec.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		for pos := 0; pos < len(data); {
			n, err := batchSize(data[pos:], 0)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, model.Batch(bytes.Clone(data[pos:pos+n])))
			pos += n
		}
		next = sec.Next
	}
	return out
}

func recordsOf(t *testing.T, b model.Batch) []string {
	t.Helper()
	var out []string
	if err := forEachRecord(b, func(r *Record) error {
		out = append(out, fmt.Sprintf("%d %d %s=%s", r.OffsetDelta, r.TimestampDelta, r.Key, r.Value))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAppendRecompresses: a topic whose compression.type names a codec
// stores every produced batch in it: the records, offsets, timestamps,
// producer id, epoch and sequence as sent, a CRC that checks; a batch
// already in the codec is stored byte for byte as sent. Control batches
// are left alone.
func TestAppendRecompresses(t *testing.T) {
	codecs := []model.Compression{model.CompressionNone, model.CompressionGzip, model.CompressionSnappy,
		model.CompressionLZ4, model.CompressionZstd}
	for _, target := range codecs {
		for _, source := range codecs {
			t.Run(fmt.Sprintf("%s-to-%s", codecName(source), codecName(target)), func(t *testing.T) {
				cfg := testConfig()
				cfg.SegmentBytes = 1 << 20
				cfg.Compression = Compression{Recompress: true, Codec: target, GzipLevel: 6, LZ4Level: 9, ZstdLevel: 9}
				clk := &clock{t: time.UnixMilli(1_700_000_000_000)}
				l := openLog(t, vfs.NewMem(), "p", cfg, clk.now)
				ts := clk.t.UnixMilli()
				sent := [][]byte{makeBatch(t, "a", 20, ts, source), txnDataBatch(t, 7, 0, ts, source, "k1", "v1", "k2", "v2")}
				data := append(bytes.Clone(sent[0]), sent[1]...)
				if _, err := l.Append(data, AppendOptions{LeaderEpoch: -1}); err != nil {
					t.Fatal(err)
				}
				if _, err := l.Append(markerBatch(t, 7, ControlCommit, ts, model.CompressionNone), AppendOptions{LeaderEpoch: -1, Internal: true}); err != nil {
					t.Fatal(err)
				}
				got := storedBatches(t, l)
				if len(got) != 3 {
					t.Fatalf("%d batches stored", len(got))
				}
				for i, b := range got[:2] {
					in := model.Batch(sent[i])
					if b.Compression() != target {
						t.Errorf("batch %d stored as %s", i, codecName(b.Compression()))
					}
					if _, err := validateBatch(b, nil); err != nil {
						t.Errorf("batch %d: %v", i, err)
					}
					if b.ProducerID() != in.ProducerID() || b.BaseSequence() != in.BaseSequence() || b.ProducerEpoch() != in.ProducerEpoch() ||
						b.RecordCount() != in.RecordCount() || b.MaxTimestamp() != in.MaxTimestamp() || b.IsTransactional() != in.IsTransactional() {
						t.Errorf("batch %d's header changed", i)
					}
					if w, g := recordsOf(t, in), recordsOf(t, b); strings.Join(w, "|") != strings.Join(g, "|") {
						t.Errorf("batch %d's records: %v, sent %v", i, g, w)
					}
					// Kept as sent when already in the codec (but for the
					// base offset and leader epoch Append sets).
					if source == target && !bytes.Equal(b[model.BatchAttributesPos:], in[model.BatchAttributesPos:]) {
						t.Errorf("batch %d of the topic's codec was rewritten", i)
					}
				}
				if !got[2].IsControl() || got[2].Compression() != model.CompressionNone {
					t.Errorf("the marker was rewritten")
				}
			})
		}
	}
}

// A batch that recompression makes larger than max.message.bytes is
// refused, and nothing is written.
func TestRecompressedOverMaxMessageBytes(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.Compression = Compression{Recompress: true, Codec: model.CompressionNone, GzipLevel: -1, LZ4Level: 9, ZstdLevel: 3}
	clk := &clock{t: time.UnixMilli(1_700_000_000_000)}
	l := openLog(t, vfs.NewMem(), "p", cfg, clk.now)
	b := makeBatch(t, "z", 200, clk.t.UnixMilli(), model.CompressionZstd) // compresses well
	l.mu.Lock()
	l.cfg.MaxMessageBytes = len(b) + 100
	l.mu.Unlock()
	if _, err := l.Append(b, AppendOptions{LeaderEpoch: -1}); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("append: %v, want ErrMessageTooLarge", err)
	}
	if l.EndOffset() != 0 {
		t.Fatalf("end offset %d", l.EndOffset())
	}
}

// BenchmarkAppendTopicCodec is the cost of a topic's compression.type to
// the broker: a producer's lz4 batch of about 16 KiB of records (before
// compression) appended to a topic that keeps the producer's codec
// (producer), has it already (lz4), recompresses it (zstd, gzip) or stores
// it uncompressed. Bytes are the records' uncompressed size, so MB/s
// compares alike; FlushNever keeps fsync out of it.
//
//	go test -run='^$' -bench=AppendTopicCodec -benchtime=2s -count=3 ./internal/log/
func BenchmarkAppendTopicCodec(b *testing.B) {
	raw := benchBatch(b, 16<<10)
	var recs []Record
	if err := forEachRecord(model.Batch(raw), func(r *Record) error {
		recs = append(recs, cloneRecord(r))
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	for i := range recs { // values that compress as real payloads do, not as one repeated byte
		recs[i].Value = fmt.Appendf(nil, "order-%08d customer-%05d amount-%07.2f %s", i*7919, i*31%50000, float64(i*1237%100000)/100, padding[:20])
	}
	sent := makeBatchOf(b, recs, time.Now().UnixMilli(), model.CompressionLZ4)
	recsBytes := 0
	for _, r := range recs {
		size, _ := recordBodySize(&r)
		recsBytes += size
	}
	for _, tc := range []struct {
		name string
		c    Compression
	}{
		{"producer", Compression{}},
		{"lz4", Compression{Recompress: true, Codec: model.CompressionLZ4, LZ4Level: 9}},
		{"zstd", Compression{Recompress: true, Codec: model.CompressionZstd, ZstdLevel: 3}},
		{"gzip", Compression{Recompress: true, Codec: model.CompressionGzip, GzipLevel: -1}},
		{"uncompressed", Compression{Recompress: true, Codec: model.CompressionNone}},
	} {
		b.Run("topic="+tc.name, func(b *testing.B) {
			cfg := benchConfig(FlushNever)
			cfg.Compression = tc.c
			l, err := Open(b.TempDir(), cfg, Options{Logger: benchLogger})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			data := bytes.Clone(sent)
			b.SetBytes(int64(recsBytes))
			b.ResetTimer()
			for range b.N {
				if _, err := l.Append(data, AppendOptions{LeaderEpoch: -1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
