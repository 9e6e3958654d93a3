package log

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

var rvCodecs = []model.Compression{
	model.CompressionNone, model.CompressionGzip, model.CompressionSnappy,
	model.CompressionLZ4, model.CompressionZstd,
}

const rvBaseTimestamp = 1_700_000_000_000

// rvRecords covers null and empty keys and values, headers with null and
// empty values, and negative and large deltas.
func rvRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		r := &recs[i]
		r.OffsetDelta = int32(i)
		r.TimestampDelta = int64(i * 37)
		switch i % 5 {
		case 0:
			r.Key = []byte(fmt.Sprintf("key-%d", i))
			r.Value = bytes.Repeat([]byte{byte(i)}, i*3)
		case 1:
			r.Value = []byte("value without a key") // null key
		case 2:
			r.Key = []byte{} // empty, not null
			r.Headers = []RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "", Value: nil}, {Key: "e", Value: []byte{}}}
		case 3:
			r.Key = []byte("tombstone") // null value
			r.TimestampDelta = -5
		case 4:
			r.Key = []byte("k")
			r.Value = []byte(strings.Repeat("abc", 50))
			r.Headers = []RecordHeader{{Key: "trace-id", Value: []byte("0123456789")}}
			r.TimestampDelta = 1 << 40
		}
	}
	return recs
}

func rvHeader(codec model.Compression, n int) batchHeader {
	return batchHeader{
		BaseOffset: 0, PartitionLeaderEpoch: -1, Attributes: int16(codec),
		LastOffsetDelta: int32(n - 1), BaseTimestamp: rvBaseTimestamp, MaxTimestamp: rvBaseTimestamp + 1<<40,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}
}

func rvBuild(t testing.TB, codec model.Compression, recs []Record, edit func(*batchHeader)) []byte {
	t.Helper()
	h := rvHeader(codec, len(recs))
	if edit != nil {
		edit(&h)
	}
	b, err := appendBatch(nil, h, recs)
	if err != nil {
		t.Fatalf("appendBatch(%s): %v", codec, err)
	}
	return b
}

// rvFixCRC recomputes the CRC after a test rvEdited covered bytes on purpose.
func rvFixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[model.BatchCRCPos:], crc32.Checksum(b[model.BatchAttributesPos:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func rvCloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func rvCloneRecord(r *Record) Record {
	c := Record{Attributes: r.Attributes, TimestampDelta: r.TimestampDelta, OffsetDelta: r.OffsetDelta,
		Key: rvCloneBytes(r.Key), Value: rvCloneBytes(r.Value)}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, RecordHeader{Key: strings.Clone(h.Key), Value: rvCloneBytes(h.Value)})
	}
	return c
}

func rvCollect(t testing.TB, b []byte) []Record {
	t.Helper()
	var out []Record
	if err := forEachRecord(b, func(r *Record) error { out = append(out, rvCloneRecord(r)); return nil }); err != nil {
		t.Fatalf("forEachRecord: %v", err)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	for _, codec := range rvCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			want := rvRecords(23)
			b := rvBuild(t, codec, want, nil)
			if err := checkCRC(b); err != nil {
				t.Fatal(err)
			}
			bt := model.Batch(b)
			if bt.Compression() != codec || bt.RecordCount() != 23 || bt.Size() != len(b) || bt.Magic() != 2 {
				t.Fatalf("header: codec %s count %d size %d/%d", bt.Compression(), bt.RecordCount(), bt.Size(), len(b))
			}
			if got := rvCollect(t, b); !reflect.DeepEqual(got, want) {
				t.Fatalf("records differ:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// A large batch spans several lz4 and xerial blocks.
func TestRoundTripLarge(t *testing.T) {
	want := make([]Record, 3000)
	for i := range want {
		want[i] = Record{OffsetDelta: int32(i), Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte(fmt.Sprint(i)), 40)}
	}
	for _, codec := range rvCodecs {
		b := rvBuild(t, codec, want, nil)
		if got := rvCollect(t, b); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: records differ", codec)
		}
	}
}

func TestAppendBatchEmpty(t *testing.T) {
	b := rvBuild(t, model.CompressionZstd, nil, func(h *batchHeader) { h.Attributes |= model.AttrTransactional })
	bt := model.Batch(b)
	if len(b) != model.BatchHeaderSize || bt.Compression() != model.CompressionNone || !bt.IsTransactional() || bt.RecordCount() != 0 {
		t.Fatalf("empty batch: %d bytes, codec %s, attrs %x", len(b), bt.Compression(), bt.Attributes())
	}
	if err := checkCRC(b); err != nil {
		t.Fatal(err)
	}
	if got := rvCollect(t, b); len(got) != 0 {
		t.Fatalf("got %d records", len(got))
	}
}

func TestAppendBatchAppends(t *testing.T) {
	prefix := []byte("prefix")
	b, err := appendBatch(append([]byte{}, prefix...), rvHeader(model.CompressionLZ4, 3), rvRecords(3))
	if err != nil || !bytes.HasPrefix(b, prefix) {
		t.Fatalf("appendBatch: %v", err)
	}
	if got := rvCollect(t, b[len(prefix):]); !reflect.DeepEqual(got, rvRecords(3)) {
		t.Fatal("records differ")
	}
	if _, err := appendBatch(nil, batchHeader{Attributes: 6}, rvRecords(1)); !errors.Is(err, ErrUnsupportedCompression) {
		t.Fatalf("codec 6: %v", err)
	}
}

// rvDecompress undoes a codec with the plain library calls (and
// the standard library's gzip), not with decompress.
func rvDecompress(t *testing.T, c model.Compression, src []byte) []byte {
	t.Helper()
	var out []byte
	var err error
	switch c {
	case model.CompressionNone:
		return src
	case model.CompressionGzip:
		var r *stdgzip.Reader
		if r, err = stdgzip.NewReader(bytes.NewReader(src)); err == nil {
			out, err = io.ReadAll(r)
		}
	case model.CompressionLZ4:
		out, err = io.ReadAll(lz4.NewReader(bytes.NewReader(src)))
	case model.CompressionZstd:
		var d *zstd.Decoder
		if d, err = zstd.NewReader(nil); err == nil {
			out, err = d.DecodeAll(src, nil)
			d.Close()
		}
	case model.CompressionSnappy:
		out, err = rvUnxerial(src)
	}
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	return out
}

// rvUnxerial reads the framing as snappy-java documents it: a 16-byte
// header of magic, version 1 and compatible version 1, then blocks of a
// big-endian length and a raw snappy block.
func rvUnxerial(src []byte) ([]byte, error) {
	hdr := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	if !bytes.HasPrefix(src, hdr) {
		return nil, errors.New("no xerial header")
	}
	var out []byte
	for src = src[16:]; len(src) > 0; {
		n := binary.BigEndian.Uint32(src)
		block, err := snappy.Decode(nil, src[4:4+n])
		if err != nil {
			return nil, err
		}
		if len(block) > 32<<10 {
			return nil, errors.New("block over 32 KiB")
		}
		out = append(out, block...)
		src = src[4+n:]
	}
	return out, nil
}

func rvKmsgRecords(t *testing.T, raw []byte, n int) []kmsg.Record {
	t.Helper()
	var out []kmsg.Record
	for range n {
		l, m := binary.Varint(raw)
		if m <= 0 || int(l) > len(raw)-m {
			t.Fatalf("bad record length")
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:m+int(l)]); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
		raw = raw[m+int(l):]
	}
	if len(raw) != 0 {
		t.Fatalf("%d trailing bytes", len(raw))
	}
	return out
}

func TestKmsgDecodesOurBatch(t *testing.T) {
	for _, codec := range rvCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			want := rvRecords(17)
			b := rvBuild(t, codec, want, func(h *batchHeader) {
				h.BaseOffset, h.ProducerID, h.ProducerEpoch, h.BaseSequence = 42, 7, 3, 100
			})
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(b); err != nil {
				t.Fatal(err)
			}
			if kb.FirstOffset != 42 || kb.Magic != 2 || int(kb.Length) != len(b)-12 || kb.NumRecords != 17 ||
				kb.LastOffsetDelta != 16 || kb.ProducerID != 7 || kb.ProducerEpoch != 3 || kb.FirstSequence != 100 ||
				kb.FirstTimestamp != rvBaseTimestamp || model.Compression(kb.Attributes&7) != codec {
				t.Fatalf("kmsg header %+v", kb)
			}
			if uint32(kb.CRC) != crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)) {
				t.Fatal("crc")
			}
			got := rvKmsgRecords(t, rvDecompress(t, codec, kb.Records), 17)
			for i, r := range got {
				w := want[i]
				if r.OffsetDelta != w.OffsetDelta || r.TimestampDelta64 != w.TimestampDelta ||
					!reflect.DeepEqual(r.Key, w.Key) || !reflect.DeepEqual(r.Value, w.Value) || len(r.Headers) != len(w.Headers) {
					t.Fatalf("record %d: kmsg %+v, want %+v", i, r, w)
				}
				for j, h := range r.Headers {
					if h.Key != w.Headers[j].Key || !reflect.DeepEqual(h.Value, w.Headers[j].Value) {
						t.Fatalf("record %d header %d: %+v", i, j, h)
					}
				}
			}
		})
	}
}

// rvCompress compresses the way other clients do, with independent or
// differently configured encoders. Snappy is raw unless xerial is set.
func rvCompress(t testing.TB, c model.Compression, src []byte, xerial bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch c {
	case model.CompressionNone:
		return src
	case model.CompressionGzip:
		w := stdgzip.NewWriter(&buf)
		w.Write(src)
		w.Close()
	case model.CompressionLZ4:
		// franz-go's defaults: 4 MiB blocks and a content checksum.
		w := lz4.NewWriter(&buf)
		w.Write(src)
		w.Close()
	case model.CompressionZstd:
		e, _ := zstd.NewWriter(nil)
		defer e.Close()
		return e.EncodeAll(src, nil)
	case model.CompressionSnappy:
		if !xerial {
			return snappy.Encode(nil, src)
		}
		// Small blocks so the framing has several.
		out := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
		for len(src) > 0 {
			n := min(len(src), 100)
			block := snappy.Encode(nil, src[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
			src = src[n:]
		}
		return out
	}
	return buf.Bytes()
}

// rvKmsgBatch builds a batch with kmsg the way a franz-go producer lays it out.
func rvKmsgBatch(t testing.TB, c model.Compression, recs []Record, xerial bool) []byte {
	t.Helper()
	var raw []byte
	for _, r := range recs {
		kr := kmsg.Record{Attributes: r.Attributes, TimestampDelta64: r.TimestampDelta, OffsetDelta: r.OffsetDelta, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		body := kr.AppendTo(nil)[1:] // with Length 0, the first byte is its varint
		kr.Length = int32(len(body))
		raw = kr.AppendTo(raw)
	}
	kb := kmsg.RecordBatch{
		FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(c),
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: rvBaseTimestamp, MaxTimestamp: rvBaseTimestamp + 1<<40,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)),
		Records: rvCompress(t, c, raw, xerial),
	}
	b := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[model.BatchLengthPos:], uint32(len(b)-12))
	return rvFixCRC(b)
}

func TestWeDecodeKmsgBatch(t *testing.T) {
	for _, codec := range rvCodecs {
		for _, xerial := range []bool{false, true} {
			if xerial && codec != model.CompressionSnappy {
				continue
			}
			t.Run(fmt.Sprintf("%s/xerial=%v", codec, xerial), func(t *testing.T) {
				want := rvRecords(31)
				b := rvKmsgBatch(t, codec, want, xerial)
				if _, err := validateBatch(b, &validateOptions{}); err != nil {
					t.Fatal(err)
				}
				if got := rvCollect(t, b); !reflect.DeepEqual(got, want) {
					t.Fatalf("records differ:\n got %+v\nwant %+v", got, want)
				}
				// Our encoding of the same records is byte-identical
				// before compression.
				ours := rvBuild(t, model.CompressionNone, want, nil)
				theirs := rvKmsgBatch(t, model.CompressionNone, want, false)
				if !bytes.Equal(ours, theirs) {
					t.Fatal("uncompressed encodings differ from kmsg's")
				}
			})
		}
	}
}

func TestSnappyFramings(t *testing.T) {
	src := bytes.Repeat([]byte("snappy framing test "), 5000) // several 32 KiB blocks
	ours, err := compress(model.CompressionSnappy, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rvUnxerial(ours); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("our xerial framing: %v", err)
	}
	// Version fields stored little endian, as some writers do, and two
	// concatenated streams, as snappy-java reads.
	le := rvCompress(t, model.CompressionSnappy, src[:1000], true)
	copy(le[8:], []byte{1, 0, 0, 0, 1, 0, 0, 0})
	cat := append(append([]byte{}, le...), rvCompress(t, model.CompressionSnappy, src[1000:], true)...)
	for name, in := range map[string][]byte{
		"raw": rvCompress(t, model.CompressionSnappy, src, false), "xerial": ours, "concatenated": cat,
	} {
		got, err := decompress(model.CompressionSnappy, in, []byte("x"))
		if err != nil || !bytes.Equal(got[1:], src) || got[0] != 'x' {
			t.Fatalf("%s: %v", name, err)
		}
	}
	bad := append([]byte{}, ours...)
	binary.BigEndian.PutUint32(bad[16:], 1<<30)
	if _, err := decompress(model.CompressionSnappy, bad, nil); err == nil {
		t.Fatal("block length past the end accepted")
	}
	if _, err := decompress(model.CompressionSnappy, ours[:len(ours)-2], nil); err == nil {
		t.Fatal("truncated block accepted")
	}
}

func TestDecompressRejectsGarbage(t *testing.T) {
	garbage := []byte("this is not compressed data at all, not even close")
	for _, c := range rvCodecs[1:] {
		if _, err := decompress(c, garbage, nil); err == nil {
			t.Errorf("%s accepted garbage", c)
		}
	}
	// A raw snappy block claiming 4 GiB is refused before allocating.
	if _, err := decompress(model.CompressionSnappy, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0}, nil); err == nil {
		t.Error("huge snappy claim accepted")
	}
	if _, err := decompress(7, nil, nil); !errors.Is(err, ErrUnsupportedCompression) {
		t.Errorf("codec 7: %v", err)
	}
}

func TestDecompressBound(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses 256 MiB per codec")
	}
	big := make([]byte, maxDecompressedBatch+1)
	for _, c := range rvCodecs[1:] {
		z, err := compress(c, big, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decompress(c, z, nil); err == nil {
			t.Errorf("%s: %d bytes decompressed past the bound", c, len(big))
		}
	}
}

// TestDecompressAtMost: with every codec, data of exactly the caller's
// bound decompresses, and one byte more is ErrDecompressTooLarge, having
// decompressed no more than the bound (a few bytes of zstd or gzip can
// claim gigabytes).
func TestDecompressAtMost(t *testing.T) {
	const limit = 100 << 10
	for _, c := range rvCodecs {
		for _, size := range []int{limit, limit + 1, 64 * limit} {
			z, err := compress(c, make([]byte, size), nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Decompress(int8(c), z, limit)
			switch {
			case size <= limit && (err != nil || len(out) != size):
				t.Errorf("%s, %d bytes within a bound of %d: %d bytes, %v", c, size, limit, len(out), err)
			case size > limit && !errors.Is(err, ErrDecompressTooLarge):
				t.Errorf("%s, %d bytes over a bound of %d: %v", c, size, limit, err)
			case size > limit && cap(out) > 2*limit:
				t.Errorf("%s: %d bytes held for a bound of %d", c, cap(out), limit)
			}
		}
	}
}

func TestCompressEmpty(t *testing.T) {
	for _, c := range rvCodecs {
		z, err := compress(c, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decompress(c, z, nil)
		if err != nil || len(got) != 0 {
			t.Errorf("%s: empty input: %v, %d bytes", c, err, len(got))
		}
	}
}

func TestSetLogAppendTime(t *testing.T) {
	for _, codec := range rvCodecs {
		b := rvBuild(t, codec, rvRecords(5), nil)
		const ts = 1_800_000_000_000
		setLogAppendTime(b, ts)
		if err := checkCRC(b); err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		if _, err := validateBatch(b, &validateOptions{requireKeys: false}); err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if kb.Attributes&0x08 == 0 || kb.MaxTimestamp != ts || model.Compression(kb.Attributes&7) != codec {
			t.Fatalf("%s: attributes %x max %d", codec, kb.Attributes, kb.MaxTimestamp)
		}
		if kb.FirstTimestamp != rvBaseTimestamp {
			t.Fatalf("base timestamp changed to %d", kb.FirstTimestamp)
		}
	}
}

// rvWithPayload replaces the records of a one-record batch by payload, framed
// and CRC'd so that only the records are wrong.
func rvWithPayload(t testing.TB, count int32, payload ...byte) []byte {
	b := append(rvBuild(t, model.CompressionNone, rvRecords(1), nil)[:model.BatchHeaderSize], payload...)
	binary.BigEndian.PutUint32(b[model.BatchLengthPos:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[model.BatchRecordCountPos:], uint32(count))
	return rvFixCRC(b)
}

func TestForEachRecordCorrupt(t *testing.T) {
	good := rvBuild(t, model.CompressionNone, rvRecords(3), nil)
	records := good[model.BatchHeaderSize:]
	gz := rvBuild(t, model.CompressionGzip, rvRecords(3), nil)
	gz[len(gz)-8] ^= 0xff // the gzip trailer's CRC of the payload
	cases := map[string][]byte{
		"short":           good[:40],
		"length past end": good[:len(good)-1],
		"count too high":  rvWithPayload(t, 4, records...),
		"count negative":  rvWithPayload(t, -1, records...),
		"trailing bytes":  rvWithPayload(t, 3, append(append([]byte{}, records...), 0)...),
		// Zigzag varints: 12 is 6, 1 is -1, 3 is -2.
		"unfinished varint":             rvWithPayload(t, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01),
		"record length past end":        rvWithPayload(t, 1, 0xfe, 0x0f, 0, 0, 0),
		"negative record length":        rvWithPayload(t, 1, 1, 0, 0, 0),
		"empty record":                  rvWithPayload(t, 1, 0),
		"key length past record":        rvWithPayload(t, 1, 10, 0, 0, 0, 20, 1, 2, 3),
		"key length -2":                 rvWithPayload(t, 1, 10, 0, 0, 0, 3, 1),
		"negative header count":         rvWithPayload(t, 1, 12, 0, 0, 0, 1, 1, 1),
		"negative header key length":    rvWithPayload(t, 1, 16, 0, 0, 0, 1, 1, 2, 1, 1),
		"record longer than its fields": rvWithPayload(t, 1, 14, 0, 0, 0, 1, 1, 0, 0),
		"gzip trailer":                  rvFixCRC(gz),
	}
	for name, b := range cases {
		err := forEachRecord(b, func(*Record) error { return nil })
		if !errors.Is(err, ErrCorruptMessage) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The hand-made record the cases above break, field by field.
	got := rvCollect(t, rvWithPayload(t, 1, 12, 0, 0, 0, 1, 1, 0))
	if len(got) != 1 || got[0].Key != nil || got[0].Value != nil || got[0].Headers != nil {
		t.Fatalf("hand-made record: %+v", got)
	}
}

func TestForEachRecordStops(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := forEachRecord(rvBuild(t, model.CompressionZstd, rvRecords(10), nil), func(*Record) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Fatalf("err %v after %d records", err, n)
	}
}

func TestVarints(t *testing.T) {
	for _, x := range []int64{0, 1, -1, 63, -64, 64, 1 << 31, -1 << 31, 1<<63 - 1, -1 << 63} {
		b := binary.AppendVarint(nil, x)
		if len(b) != varintLen(x) {
			t.Errorf("varintLen(%d) = %d, want %d", x, varintLen(x), len(b))
		}
		if got, p, ok := varint64(b, 0); !ok || got != x || p != len(b) {
			t.Errorf("varint64(%d) = %d %d %v", x, got, p, ok)
		}
		got, p, ok := varint32(b, 0)
		if fits := x == int64(int32(x)); ok != fits || (fits && (got != int32(x) || p != len(b))) {
			t.Errorf("varint32(%d) = %d %d %v", x, got, p, ok)
		}
	}
	// An 11th byte, or a 10th byte over 1, overflows an int64.
	for _, b := range [][]byte{
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02},
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
		{0x80},
	} {
		if _, _, ok := varint64(b, 0); ok {
			t.Errorf("varint64(%x) accepted", b)
		}
	}
}
