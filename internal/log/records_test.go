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

var allCodecs = []model.Compression{
	model.CompressionNone, model.CompressionGzip, model.CompressionSnappy,
	model.CompressionLZ4, model.CompressionZstd,
}

const testBaseTimestamp = 1_700_000_000_000

// testRecords covers null and empty keys and values, headers with null and
// empty values, and negative and large deltas.
func testRecords(n int) []Record {
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

func testHeader(codec model.Compression, n int) batchHeader {
	return batchHeader{
		BaseOffset: 0, PartitionLeaderEpoch: -1, Attributes: int16(codec),
		LastOffsetDelta: int32(n - 1), BaseTimestamp: testBaseTimestamp, MaxTimestamp: testBaseTimestamp + 1<<40,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}
}

func buildBatch(t testing.TB, codec model.Compression, recs []Record, edit func(*batchHeader)) []byte {
	t.Helper()
	h := testHeader(codec, len(recs))
	if edit != nil {
		edit(&h)
	}
	b, err := appendBatch(nil, h, recs)
	if err != nil {
		t.Fatalf("appendBatch(%s): %v", codec, err)
	}
	return b
}

// fixCRC recomputes the CRC after a test edited covered bytes on purpose.
func fixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[model.BatchCRCPos:], crc32.Checksum(b[model.BatchAttributesPos:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func cloneRec(r *Record) Record {
	c := Record{Attributes: r.Attributes, TimestampDelta: r.TimestampDelta, OffsetDelta: r.OffsetDelta,
		Key: cloneBytes(r.Key), Value: cloneBytes(r.Value)}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, RecordHeader{Key: strings.Clone(h.Key), Value: cloneBytes(h.Value)})
	}
	return c
}

func collect(t testing.TB, b []byte) []Record {
	t.Helper()
	var out []Record
	if err := forEachRecord(b, func(r *Record) error { out = append(out, cloneRec(r)); return nil }); err != nil {
		t.Fatalf("forEachRecord: %v", err)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			want := testRecords(23)
			b := buildBatch(t, codec, want, nil)
			if err := checkCRC(b); err != nil {
				t.Fatal(err)
			}
			bt := model.Batch(b)
			if bt.Compression() != codec || bt.RecordCount() != 23 || bt.Size() != len(b) || bt.Magic() != 2 {
				t.Fatalf("header: codec %s count %d size %d/%d", bt.Compression(), bt.RecordCount(), bt.Size(), len(b))
			}
			if got := collect(t, b); !reflect.DeepEqual(got, want) {
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
	for _, codec := range allCodecs {
		b := buildBatch(t, codec, want, nil)
		if got := collect(t, b); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: records differ", codec)
		}
	}
}

func TestAppendBatchEmpty(t *testing.T) {
	b := buildBatch(t, model.CompressionZstd, nil, func(h *batchHeader) { h.Attributes |= model.AttrTransactional })
	bt := model.Batch(b)
	if len(b) != model.BatchHeaderSize || bt.Compression() != model.CompressionNone || !bt.IsTransactional() || bt.RecordCount() != 0 {
		t.Fatalf("empty batch: %d bytes, codec %s, attrs %x", len(b), bt.Compression(), bt.Attributes())
	}
	if err := checkCRC(b); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, b); len(got) != 0 {
		t.Fatalf("got %d records", len(got))
	}
}

func TestAppendBatchAppends(t *testing.T) {
	prefix := []byte("prefix")
	b, err := appendBatch(append([]byte{}, prefix...), testHeader(model.CompressionLZ4, 3), testRecords(3))
	if err != nil || !bytes.HasPrefix(b, prefix) {
		t.Fatalf("appendBatch: %v", err)
	}
	if got := collect(t, b[len(prefix):]); !reflect.DeepEqual(got, testRecords(3)) {
		t.Fatal("records differ")
	}
	if _, err := appendBatch(nil, batchHeader{Attributes: 6}, testRecords(1)); !errors.Is(err, ErrUnsupportedCompression) {
		t.Fatalf("codec 6: %v", err)
	}
}

// independentDecompress undoes a codec with the plain library calls (and
// the standard library's gzip), not with decompress.
func independentDecompress(t *testing.T, c model.Compression, src []byte) []byte {
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
		out, err = unxerialForTest(src)
	}
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	return out
}

// unxerialForTest reads the framing as snappy-java documents it: a 16-byte
// header of magic, version 1 and compatible version 1, then blocks of a
// big-endian length and a raw snappy block.
func unxerialForTest(src []byte) ([]byte, error) {
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

func kmsgSplitRecords(t *testing.T, raw []byte, n int) []kmsg.Record {
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
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			want := testRecords(17)
			b := buildBatch(t, codec, want, func(h *batchHeader) {
				h.BaseOffset, h.ProducerID, h.ProducerEpoch, h.BaseSequence = 42, 7, 3, 100
			})
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(b); err != nil {
				t.Fatal(err)
			}
			if kb.FirstOffset != 42 || kb.Magic != 2 || int(kb.Length) != len(b)-12 || kb.NumRecords != 17 ||
				kb.LastOffsetDelta != 16 || kb.ProducerID != 7 || kb.ProducerEpoch != 3 || kb.FirstSequence != 100 ||
				kb.FirstTimestamp != testBaseTimestamp || model.Compression(kb.Attributes&7) != codec {
				t.Fatalf("kmsg header %+v", kb)
			}
			if uint32(kb.CRC) != crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)) {
				t.Fatal("crc")
			}
			got := kmsgSplitRecords(t, independentDecompress(t, codec, kb.Records), 17)
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

// compressForTest compresses the way other clients do, with independent or
// differently configured encoders. Snappy is raw unless xerial is set.
func compressForTest(t testing.TB, c model.Compression, src []byte, xerial bool) []byte {
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

// kmsgBatch builds a batch with kmsg the way a franz-go producer lays it out.
func kmsgBatch(t testing.TB, c model.Compression, recs []Record, xerial bool) []byte {
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
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: testBaseTimestamp, MaxTimestamp: testBaseTimestamp + 1<<40,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)),
		Records: compressForTest(t, c, raw, xerial),
	}
	b := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[model.BatchLengthPos:], uint32(len(b)-12))
	return fixCRC(b)
}

func TestWeDecodeKmsgBatch(t *testing.T) {
	for _, codec := range allCodecs {
		for _, xerial := range []bool{false, true} {
			if xerial && codec != model.CompressionSnappy {
				continue
			}
			t.Run(fmt.Sprintf("%s/xerial=%v", codec, xerial), func(t *testing.T) {
				want := testRecords(31)
				b := kmsgBatch(t, codec, want, xerial)
				if _, err := validateBatch(b, &validateOptions{}); err != nil {
					t.Fatal(err)
				}
				if got := collect(t, b); !reflect.DeepEqual(got, want) {
					t.Fatalf("records differ:\n got %+v\nwant %+v", got, want)
				}
				// Our encoding of the same records is byte-identical
				// before compression.
				ours := buildBatch(t, model.CompressionNone, want, nil)
				theirs := kmsgBatch(t, model.CompressionNone, want, false)
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
	if got, err := unxerialForTest(ours); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("our xerial framing: %v", err)
	}
	// Version fields stored little endian, as some writers do, and two
	// concatenated streams, as snappy-java reads.
	le := compressForTest(t, model.CompressionSnappy, src[:1000], true)
	copy(le[8:], []byte{1, 0, 0, 0, 1, 0, 0, 0})
	cat := append(append([]byte{}, le...), compressForTest(t, model.CompressionSnappy, src[1000:], true)...)
	for name, in := range map[string][]byte{
		"raw": compressForTest(t, model.CompressionSnappy, src, false), "xerial": ours, "concatenated": cat,
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
	for _, c := range allCodecs[1:] {
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
	big := make([]byte, maxDecompressedBatch+1)
	for _, c := range allCodecs[1:] {
		z, err := compress(c, big, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decompress(c, z, nil); err == nil {
			t.Errorf("%s: %d bytes decompressed past the bound", c, len(big))
		}
	}
}

func TestCompressEmpty(t *testing.T) {
	for _, c := range allCodecs {
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
	for _, codec := range allCodecs {
		b := buildBatch(t, codec, testRecords(5), nil)
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
		if kb.FirstTimestamp != testBaseTimestamp {
			t.Fatalf("base timestamp changed to %d", kb.FirstTimestamp)
		}
	}
}

func TestForEachRecordCorrupt(t *testing.T) {
	good := buildBatch(t, model.CompressionNone, testRecords(3), nil)
	edit := func(f func(b []byte) []byte) []byte {
		b := f(append([]byte{}, good...))
		binary.BigEndian.PutUint32(b[model.BatchLengthPos:], uint32(len(b)-12))
		return fixCRC(b)
	}
	setCount := func(n int32) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[model.BatchRecordCountPos:], uint32(n)); return b }
	}
	cases := map[string][]byte{
		"short":            good[:40],
		"length past end":  good[:len(good)-1],
		"count too high":   edit(setCount(4)),
		"count negative":   edit(setCount(-1)),
		"trailing bytes":   edit(func(b []byte) []byte { return append(b, 0) }),
		"unfinished varint": edit(func(b []byte) []byte {
			return append(b[:model.BatchHeaderSize], 0x80, 0x80, 0x80, 0x80, 0x80, 0x01)
		}),
		"record length past end": edit(func(b []byte) []byte { b[model.BatchHeaderSize] = 0x7e; return b }),
		"empty record":           edit(func(b []byte) []byte { return append(b[:model.BatchHeaderSize], 0) }),
		"key length past record": edit(func(b []byte) []byte {
			return append(b[:model.BatchHeaderSize], 10, 0, 0, 0, 20, 1, 2, 3)
		}),
		"key length -2": edit(func(b []byte) []byte {
			return append(b[:model.BatchHeaderSize], 10, 0, 0, 0, 3, 1, 0, 0, 0, 0)
		}),
		"negative header count": edit(func(b []byte) []byte {
			return append(b[:model.BatchHeaderSize], 10, 0, 0, 0, 1, 1, 1, 0)
		}),
		"record longer than its fields": edit(func(b []byte) []byte {
			return append(b[:model.BatchHeaderSize], 14, 0, 0, 0, 1, 1, 0, 0, 0)
		}),
		"gzip garbage": func() []byte {
			b := buildBatch(t, model.CompressionGzip, testRecords(3), nil)
			b[len(b)-8] ^= 0xff // the gzip CRC of the payload
			return fixCRC(b)
		}(),
	}
	for name, b := range cases {
		if name == "key length -2" || name == "negative header count" || name == "record longer than its fields" ||
			name == "key length past record" || name == "empty record" || name == "unfinished varint" {
			binary.BigEndian.PutUint32(b[model.BatchRecordCountPos:], 1)
			fixCRC(b)
		}
		err := forEachRecord(b, func(*Record) error { return nil })
		if !errors.Is(err, ErrCorruptMessage) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A sound single record, to show the hand-made ones above differ only
	// in the broken field.
	one := edit(func(b []byte) []byte { return append(b[:model.BatchHeaderSize], 12, 0, 0, 0, 1, 1, 0, 0) })
	binary.BigEndian.PutUint32(one[model.BatchRecordCountPos:], 1)
	fixCRC(one)
	if got := collect(t, one); len(got) != 1 || got[0].Key != nil || got[0].Value != nil {
		t.Fatalf("hand-made record: %+v", got)
	}
}

func TestForEachRecordStops(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := forEachRecord(buildBatch(t, model.CompressionZstd, testRecords(10), nil), func(*Record) error {
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
