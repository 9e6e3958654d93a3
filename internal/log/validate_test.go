package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/strandlog/strand/internal/model"
)

// rvKeyed returns n records that all have keys and timestamps within a second
// of the base timestamp.
func rvKeyed(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(fmt.Sprint("k", i)), Value: []byte("v")}
	}
	return recs
}

func rvKeyedHeader(h *batchHeader) { h.MaxTimestamp = h.BaseTimestamp + int64(h.LastOffsetDelta) }

// rvEdited returns a copy of a valid batch rvEdited by f with its CRC fixed, so
// only the rvEdited field is wrong.
func rvEdited(t testing.TB, codec model.Compression, recs []Record, f func(b []byte)) []byte {
	b := rvBuild(t, codec, recs, rvKeyedHeader)
	f(b)
	return rvFixCRC(b)
}

func rvPutInt32(pos int, v int32) func([]byte) {
	return func(b []byte) { binary.BigEndian.PutUint32(b[pos:], uint32(v)) }
}

type rvCase struct {
	name  string
	batch func(t testing.TB) []byte
	opts  validateOptions
	want  error // nil: valid
}

func rvCases() []rvCase {
	now := int64(rvBaseTimestamp)
	window := validateOptions{now: now, maxTimestampAgo: 1000, maxTimestampAhead: 1000}
	var cases []rvCase
	add := func(name string, want error, opts validateOptions, batch func(t testing.TB) []byte) {
		cases = append(cases, rvCase{name, batch, opts, want})
	}
	for _, c := range rvCodecs {
		add("valid "+c.String(), nil, validateOptions{}, func(t testing.TB) []byte { return rvBuild(t, c, rvRecords(20), nil) })
		add("valid with keys "+c.String(), nil, validateOptions{requireKeys: true}, func(t testing.TB) []byte {
			return rvBuild(t, c, rvKeyed(20), rvKeyedHeader)
		})
		add("kmsg-built "+c.String(), nil, validateOptions{requireKeys: true}, func(t testing.TB) []byte {
			return rvKmsgBatch(t, c, rvKeyed(20), c == model.CompressionSnappy)
		})
		add("in window "+c.String(), nil, window, func(t testing.TB) []byte { return rvBuild(t, c, rvKeyed(20), rvKeyedHeader) })
		add("missing key "+c.String(), ErrInvalidRecord, validateOptions{requireKeys: true}, func(t testing.TB) []byte {
			return rvBuild(t, c, rvRecords(3), nil) // record 1 has no key
		})
		add("offset deltas out of order with keys "+c.String(), ErrInvalidRecord, validateOptions{requireKeys: true}, func(t testing.TB) []byte {
			recs := rvKeyed(3)
			recs[1].OffsetDelta, recs[2].OffsetDelta = 2, 1
			return rvBuild(t, c, recs, rvKeyedHeader)
		})
		add("control refused "+c.String(), ErrInvalidRecord, validateOptions{}, func(t testing.TB) []byte {
			return rvBuild(t, c, rvKeyed(1), func(h *batchHeader) { h.Attributes |= model.AttrControl })
		})
		add("control allowed "+c.String(), nil, validateOptions{allowControl: true}, func(t testing.TB) []byte {
			return rvBuild(t, c, rvKeyed(1), func(h *batchHeader) { h.Attributes |= model.AttrControl | model.AttrTransactional })
		})
		add("too old "+c.String(), ErrInvalidTimestamp, window, func(t testing.TB) []byte {
			return rvBuild(t, c, rvKeyed(2), func(h *batchHeader) { h.BaseTimestamp -= 5000; h.MaxTimestamp = h.BaseTimestamp + 1 })
		})
		add("too far ahead "+c.String(), ErrInvalidTimestamp, window, func(t testing.TB) []byte {
			return rvBuild(t, c, rvKeyed(2), func(h *batchHeader) { h.BaseTimestamp += 5000; h.MaxTimestamp = h.BaseTimestamp + 1 })
		})
		for codec := int16(5); codec <= 7; codec++ {
			add(fmt.Sprintf("codec %d over %s", codec, c), ErrUnsupportedCompression, validateOptions{}, func(t testing.TB) []byte {
				return rvEdited(t, c, rvKeyed(2), func(b []byte) { b[model.BatchAttributesPos+1] = b[model.BatchAttributesPos+1]&^7 | byte(codec) })
			})
		}
		for _, magic := range []byte{0, 1, 3} {
			add(fmt.Sprintf("magic %d %s", magic, c), ErrUnsupportedMagic, validateOptions{}, func(t testing.TB) []byte {
				b := rvBuild(t, c, rvKeyed(2), rvKeyedHeader)
				b[model.BatchMagicPos] = magic
				return b
			})
		}
		add("payload byte flipped "+c.String(), ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
			b := rvBuild(t, c, rvKeyed(5), rvKeyedHeader)
			b[len(b)-3] ^= 0x10
			return b
		})
		add("header byte flipped "+c.String(), ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
			b := rvBuild(t, c, rvKeyed(5), rvKeyedHeader)
			b[model.BatchProducerIDPos] ^= 1
			return b
		})
		add("truncated "+c.String(), ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
			b := rvBuild(t, c, rvKeyed(5), rvKeyedHeader)
			return b[:len(b)-1]
		})
		add("count 0 "+c.String(), ErrInvalidRecord, validateOptions{}, func(t testing.TB) []byte {
			return rvEdited(t, c, rvKeyed(1), func(b []byte) {
				rvPutInt32(model.BatchRecordCountPos, 0)(b)
				rvPutInt32(model.BatchLastDeltaPos, -1)(b)
			})
		})
		add("count above last delta+1 "+c.String(), ErrInvalidRecord, validateOptions{}, func(t testing.TB) []byte {
			return rvEdited(t, c, rvKeyed(3), rvPutInt32(model.BatchRecordCountPos, 4))
		})
		add("count below last delta+1 "+c.String(), ErrInvalidRecord, validateOptions{}, func(t testing.TB) []byte {
			return rvEdited(t, c, rvKeyed(3), rvPutInt32(model.BatchLastDeltaPos, 3))
		})
		add("last delta max int32 "+c.String(), ErrInvalidRecord, validateOptions{}, func(t testing.TB) []byte {
			return rvEdited(t, c, rvKeyed(3), rvPutInt32(model.BatchLastDeltaPos, math.MaxInt32))
		})
		add("producer without sequence "+c.String(), ErrInvalidRecord, validateOptions{}, func(t testing.TB) []byte {
			return rvBuild(t, c, rvKeyed(3), func(h *batchHeader) { rvKeyedHeader(h); h.ProducerID = 5; h.ProducerEpoch = 0 })
		})
		add("idempotent "+c.String(), nil, validateOptions{}, func(t testing.TB) []byte {
			return rvBuild(t, c, rvKeyed(3), func(h *batchHeader) { rvKeyedHeader(h); h.ProducerID, h.ProducerEpoch, h.BaseSequence = 5, 0, 9 })
		})
		add("too large "+c.String(), ErrMessageTooLarge, validateOptions{maxBatchBytes: 100}, func(t testing.TB) []byte {
			return rvBuild(t, c, rvRecords(50), nil)
		})
	}

	// Compressed batches are not decompressed unless keys are required: the
	// header timestamps, which are in the window, stand for the records.
	for _, c := range rvCodecs[1:] {
		add("missing key not required "+c.String(), nil, validateOptions{}, func(t testing.TB) []byte {
			return rvBuild(t, c, rvRecords(3), nil)
		})
		add("offset deltas out of order not read "+c.String(), nil, validateOptions{}, func(t testing.TB) []byte {
			recs := rvKeyed(3)
			recs[1].OffsetDelta, recs[2].OffsetDelta = 2, 1
			return rvBuild(t, c, recs, rvKeyedHeader)
		})
		add("old record behind the header "+c.String(), nil, window, func(t testing.TB) []byte {
			recs := rvKeyed(3)
			recs[1].TimestampDelta = -5000
			return rvBuild(t, c, recs, rvKeyedHeader)
		})
		add("old record with keys read "+c.String(), ErrInvalidTimestamp, validateOptions{requireKeys: true, now: now, maxTimestampAgo: 1000}, func(t testing.TB) []byte {
			recs := rvKeyed(3)
			recs[1].TimestampDelta = -5000
			return rvBuild(t, c, recs, rvKeyedHeader)
		})
		add("payload garbage with keys "+c.String(), ErrCorruptMessage, validateOptions{requireKeys: true}, func(t testing.TB) []byte {
			return rvEdited(t, c, rvKeyed(3), func(b []byte) {
				for i := model.BatchHeaderSize; i < len(b); i++ {
					b[i] = byte(i)
				}
			})
		})
	}

	none := model.CompressionNone
	add("offset deltas out of order", ErrInvalidRecord, validateOptions{}, func(t testing.TB) []byte {
		recs := rvKeyed(3)
		recs[1].OffsetDelta, recs[2].OffsetDelta = 2, 1
		return rvBuild(t, none, recs, rvKeyedHeader)
	})
	add("offset deltas from 1", ErrInvalidRecord, validateOptions{}, func(t testing.TB) []byte {
		recs := rvKeyed(3)
		for i := range recs {
			recs[i].OffsetDelta++
		}
		return rvBuild(t, none, recs, rvKeyedHeader)
	})
	add("old record in the middle", ErrInvalidTimestamp, window, func(t testing.TB) []byte {
		recs := rvKeyed(3)
		recs[1].TimestampDelta = -5000
		return rvBuild(t, none, recs, rvKeyedHeader)
	})
	add("record far ahead", ErrInvalidTimestamp, validateOptions{now: now, maxTimestampAhead: 1000}, func(t testing.TB) []byte {
		recs := rvKeyed(3)
		recs[2].TimestampDelta = 5000
		return rvBuild(t, none, recs, rvKeyedHeader)
	})
	add("window edge", nil, validateOptions{now: now + 1000, maxTimestampAgo: 1000, maxTimestampAhead: 1}, func(t testing.TB) []byte {
		return rvBuild(t, none, rvKeyed(2), rvKeyedHeader) // timestamps now-1000 and now-999
	})
	add("no timestamp is exempt", nil, window, func(t testing.TB) []byte {
		return rvBuild(t, none, rvKeyed(1), func(h *batchHeader) { h.BaseTimestamp, h.MaxTimestamp = -1, -1 })
	})
	add("extreme timestamp", ErrInvalidTimestamp, window, func(t testing.TB) []byte {
		return rvBuild(t, none, rvKeyed(1), func(h *batchHeader) { h.BaseTimestamp, h.MaxTimestamp = math.MinInt64, math.MinInt64 })
	})
	add("extreme timestamp ahead", ErrInvalidTimestamp, window, func(t testing.TB) []byte {
		return rvBuild(t, none, rvKeyed(1), func(h *batchHeader) { h.BaseTimestamp, h.MaxTimestamp = math.MaxInt64, math.MaxInt64 })
	})
	add("unchecked window", nil, validateOptions{now: now}, func(t testing.TB) []byte {
		return rvBuild(t, none, rvKeyed(1), func(h *batchHeader) { h.BaseTimestamp, h.MaxTimestamp = 0, 0 })
	})
	add("size at the limit", nil, validateOptions{maxBatchBytes: 61 + 9}, func(t testing.TB) []byte {
		return rvBuild(t, none, []Record{{Key: []byte("k"), Value: []byte("v")}}, nil) // a 9-byte record
	})
	add("too large beats corrupt", ErrMessageTooLarge, validateOptions{maxBatchBytes: 61}, func(t testing.TB) []byte {
		b := rvBuild(t, none, rvKeyed(2), rvKeyedHeader)
		b[model.BatchMagicPos] = 0
		return b
	})
	add("shorter than the magic", ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
		return rvBuild(t, none, rvKeyed(2), rvKeyedHeader)[:model.BatchMagicPos]
	})
	add("shorter than a header", ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
		b := rvBuild(t, none, rvKeyed(2), rvKeyedHeader)[:model.BatchHeaderSize-1]
		binary.BigEndian.PutUint32(b[model.BatchLengthPos:], uint32(len(b)-12))
		return b
	})
	add("length too small", ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
		b := rvBuild(t, none, rvKeyed(2), rvKeyedHeader)
		binary.BigEndian.PutUint32(b[model.BatchLengthPos:], 48)
		return b
	})
	add("length negative", ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
		b := rvBuild(t, none, rvKeyed(2), rvKeyedHeader)
		binary.BigEndian.PutUint32(b[model.BatchLengthPos:], 0xffffffff)
		return b
	})
	add("length too large", ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
		b := rvBuild(t, none, rvKeyed(2), rvKeyedHeader)
		binary.BigEndian.PutUint32(b[model.BatchLengthPos:], uint32(len(b)))
		return b
	})
	add("trailing byte", ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
		b := append(rvBuild(t, none, rvKeyed(2), rvKeyedHeader), 0)
		binary.BigEndian.PutUint32(b[model.BatchLengthPos:], uint32(len(b)-12))
		return rvFixCRC(b)
	})
	add("broken record framing", ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
		return rvEdited(t, none, rvKeyed(2), func(b []byte) { b[model.BatchHeaderSize] = 0x7f })
	})
	add("count beyond the payload", ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
		return rvEdited(t, none, rvKeyed(2), func(b []byte) {
			rvPutInt32(model.BatchRecordCountPos, 1000)(b)
			rvPutInt32(model.BatchLastDeltaPos, 999)(b)
		})
	})
	add("crc field wrong", ErrCorruptMessage, validateOptions{}, func(t testing.TB) []byte {
		b := rvBuild(t, none, rvKeyed(2), rvKeyedHeader)
		b[model.BatchCRCPos] ^= 0x80
		return b
	})
	add("base offset and epoch are not covered", nil, validateOptions{}, func(t testing.TB) []byte {
		b := rvBuild(t, none, rvKeyed(2), rvKeyedHeader)
		model.Batch(b).SetBaseOffset(1234)
		model.Batch(b).SetPartitionLeaderEpoch(9)
		return b
	})
	add("log append time stamped", nil, window, func(t testing.TB) []byte {
		b := rvBuild(t, none, rvKeyed(2), func(h *batchHeader) { h.BaseTimestamp = 0 })
		setLogAppendTime(b, now)
		return b
	})
	add("log append time too old", ErrInvalidTimestamp, window, func(t testing.TB) []byte {
		b := rvBuild(t, none, rvKeyed(2), rvKeyedHeader)
		setLogAppendTime(b, now-5000)
		return b
	})
	return cases
}

func TestValidateBatch(t *testing.T) {
	for _, tc := range rvCases() {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.batch(t)
			info, err := validateBatch(b, &tc.opts)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				rvCheckInfo(t, b, info)
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if info != (batchInfo{}) {
				t.Fatalf("info %+v returned with an error", info)
			}
		})
	}
}

func rvCheckInfo(t *testing.T, b []byte, info batchInfo) {
	t.Helper()
	bt := model.Batch(b)
	want := batchInfo{
		size: len(b), count: bt.RecordCount(), lastOffsetDelta: bt.LastOffsetDelta(),
		firstTimestamp: bt.BaseTimestamp(), maxTimestamp: bt.MaxTimestamp(),
		producerID: bt.ProducerID(), producerEpoch: bt.ProducerEpoch(), baseSequence: bt.BaseSequence(),
		compression: bt.Compression(), transactional: bt.IsTransactional(), control: bt.IsControl(),
	}
	if info != want {
		t.Fatalf("info %+v, want %+v", info, want)
	}
}

func TestValidateBatchNilOptions(t *testing.T) {
	if _, err := validateBatch(rvBuild(t, model.CompressionNone, rvRecords(3), nil), nil); err != nil {
		t.Fatal(err)
	}
}

func TestBatchSize(t *testing.T) {
	b := rvBuild(t, model.CompressionNone, rvKeyed(2), rvKeyedHeader)
	hdr := func(length int32, magic byte) []byte {
		h := append([]byte{}, b[:model.BatchMagicPos+1]...)
		binary.BigEndian.PutUint32(h[model.BatchLengthPos:], uint32(length))
		h[model.BatchMagicPos] = magic
		return h
	}
	cases := []struct {
		name    string
		hdr     []byte
		maxSize int
		want    int
		err     error
	}{
		{"real batch", b, 0, len(b), nil},
		{"header only", hdr(49, 2), 0, 61, nil},
		{"at max", hdr(88, 2), 100, 100, nil},
		{"over max", hdr(89, 2), 100, 0, ErrCorruptMessage},
		{"below header", hdr(48, 2), 0, 0, ErrCorruptMessage},
		{"zero", hdr(0, 0), 0, 0, ErrCorruptMessage},
		{"negative", hdr(-1, 2), 0, 0, ErrCorruptMessage},
		{"max int32", hdr(math.MaxInt32, 2), 0, math.MaxInt32 + 12, nil},
		{"magic 0", hdr(100, 0), 0, 0, ErrUnsupportedMagic},
		{"magic 1", hdr(100, 1), 0, 0, ErrUnsupportedMagic},
		{"magic 3", hdr(100, 3), 0, 0, ErrUnsupportedMagic},
		{"too short", b[:model.BatchMagicPos], 0, 0, ErrCorruptMessage},
	}
	for _, tc := range cases {
		n, err := batchSize(tc.hdr, tc.maxSize)
		if n != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: got %d, %v; want %d, %v", tc.name, n, err, tc.want, tc.err)
		}
	}
}

func TestCheckCRC(t *testing.T) {
	b := rvBuild(t, model.CompressionLZ4, rvKeyed(3), rvKeyedHeader)
	if err := checkCRC(b); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{b[:len(b)-1], b[:model.BatchHeaderSize-1]} {
		if err := checkCRC(bad); !errors.Is(err, ErrCorruptMessage) {
			t.Errorf("%d bytes: %v", len(bad), err)
		}
	}
	for i := model.BatchCRCPos; i < len(b); i++ {
		c := append([]byte{}, b...)
		c[i] ^= 0x01
		if err := checkCRC(c); !errors.Is(err, ErrCorruptMessage) {
			t.Fatalf("flip at %d: %v", i, err)
		}
	}
}

// poolsDropItems tells whether sync.Pool drops items on purpose, as it does
// under the race detector, which makes allocation counts meaningless.
func poolsDropItems() bool {
	var p sync.Pool
	misses := 0
	for i := range 100 {
		p.Put(&i)
		if p.Get() == nil {
			misses++
		}
	}
	return misses > 5
}

// The validation path reuses its buffers and decoders: no allocation per
// record nor, once warm, per batch. A GC emptying the pools mid-run costs a
// few allocations, hence "fewer than one per batch".
func TestValidateBatchAllocs(t *testing.T) {
	if poolsDropItems() {
		t.Skip("sync.Pool drops items (race detector)")
	}
	for _, c := range rvCodecs {
		b := rvBenchBatch(t, c)
		for _, keys := range []bool{false, true} {
			opts := &validateOptions{requireKeys: keys, now: rvBaseTimestamp, maxTimestampAgo: 1 << 40, maxTimestampAhead: 1 << 40}
			if _, err := validateBatch(b, opts); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(50, func() { validateBatch(b, opts) })
			t.Logf("%s requireKeys=%v: %.1f allocs per batch of %d records", c, keys, allocs, model.Batch(b).RecordCount())
			if allocs >= 1 {
				t.Errorf("%s requireKeys=%v: %.1f allocs per batch", c, keys, allocs)
			}
		}
	}
}

// rvBenchBatch is a 16 KiB batch of 100-byte records (10-byte keys, 81-byte
// values of words, compressible as real payloads are).
func rvBenchBatch(t testing.TB, c model.Compression) []byte {
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"}
	var recs []Record
	size, seed := 0, uint32(1)
	for size+100 <= 16<<10 {
		i := len(recs)
		v := make([]byte, 0, 90)
		for len(v) < 81 {
			seed = seed*1664525 + 1013904223
			v = append(v, words[seed>>28%uint32(len(words))]...)
			v = append(v, ' ')
		}
		recs = append(recs, Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(fmt.Sprintf("key-%06d", i)), Value: v[:81]})
		n, _ := recordBodySize(&recs[i])
		size += n + varintLen(int64(n))
	}
	return rvBuild(t, c, recs, rvKeyedHeader)
}

func BenchmarkValidateBatch(b *testing.B) {
	for _, c := range rvCodecs {
		batch := rvBenchBatch(b, c)
		raw := len(model.Batch(rvBenchBatch(b, model.CompressionNone)).Records())
		for _, keys := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/requireKeys=%v", c, keys), func(b *testing.B) {
				opts := &validateOptions{requireKeys: keys, now: rvBaseTimestamp, maxTimestampAgo: 1 << 40, maxTimestampAhead: 1 << 40}
				// Throughput counts the uncompressed records, so codecs
				// compare on the same work; wire-B is the batch's size.
				b.SetBytes(int64(raw))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := validateBatch(batch, opts); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(batch)), "wire-B")
			})
		}
	}
}

// Decoders, encoders and buffers are shared through pools; concurrent use
// must not mix batches up (run with -race).
func TestValidateBatchConcurrent(t *testing.T) {
	var batches [][]byte
	for _, c := range rvCodecs {
		batches = append(batches, rvBuild(t, c, rvKeyed(50), rvKeyedHeader))
	}
	want := rvCollect(t, batches[0])
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				b := batches[(g+i)%len(batches)]
				if _, err := validateBatch(b, &validateOptions{requireKeys: true}); err != nil {
					errs <- err
					return
				}
				n := 0
				err := forEachRecord(b, func(r *Record) error {
					if string(r.Key) != string(want[n].Key) {
						return fmt.Errorf("record %d has key %q", n, r.Key)
					}
					n++
					return nil
				})
				if err == nil {
					_, err = appendBatch(nil, rvHeader(model.Compression(i%5), 1), rvKeyed(1))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
