package model

import (
	"hash/crc32"
	"math"
	"testing"
)

func TestCoordinatorPartition(t *testing.T) {
	tests := []struct {
		key  string
		hash int32
		part int32 // of 50
	}{
		{"", 0, 0},
		{"a", 97, 47},
		{"hello", 99162322, 22},
		{"Aa", 2112, 12}, // "Aa" and "BB" collide in Java
		{"BB", 2112, 12},
		{"polygenelubricants", math.MinInt32, 0}, // abs(MinInt32) is 0 in Kafka's Utils.abs
		{"my-group", -1906497762, 12},
		{"\U0001F600", 55357*31 + 56832, (55357*31 + 56832) % 50}, // a surrogate pair: two UTF-16 units
	}
	for _, tc := range tests {
		if got := JavaHashCode(tc.key); got != tc.hash {
			t.Errorf("JavaHashCode(%q) = %d, want %d", tc.key, got, tc.hash)
		}
		if got := CoordinatorPartition(tc.key, 50); got != tc.part {
			t.Errorf("CoordinatorPartition(%q, 50) = %d, want %d", tc.key, got, tc.part)
		}
	}
}

func TestEncodeBatchRoundTrip(t *testing.T) {
	recs := []KeyValue{{Key: []byte("k1"), Value: []byte("v1")}, {Key: []byte("k2")}, {Key: []byte{}, Value: []byte{}}}
	for _, p := range []Producer{NoProducer, {ID: 42, Epoch: 7}} {
		b := Batch(EncodeBatch(recs, 1234, p))
		b.SetBaseOffset(100)
		if b.Size() != len(b) || b.Magic() != BatchMagic || b.RecordCount() != 3 || b.LastOffset() != 102 {
			t.Fatalf("%+v: header size %d of %d, magic %d, count %d, last %d", p, b.Size(), len(b), b.Magic(), b.RecordCount(), b.LastOffset())
		}
		if got := crc32.Checksum(b[BatchAttributesPos:], castagnoli); got != b.CRC() {
			t.Fatalf("%+v: crc %08x, header %08x", p, got, b.CRC())
		}
		if b.BaseTimestamp() != 1234 || b.MaxTimestamp() != 1234 {
			t.Fatalf("%+v: timestamps %d %d", p, b.BaseTimestamp(), b.MaxTimestamp())
		}
		wantSeq := int32(-1)
		if p.ID >= 0 {
			wantSeq = 0
		}
		if b.ProducerID() != p.ID || b.ProducerEpoch() != p.Epoch || b.BaseSequence() != wantSeq || b.IsTransactional() != (p.ID >= 0) {
			t.Fatalf("%+v: producer %d/%d seq %d transactional %v", p, b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), b.IsTransactional())
		}
		i := 0
		err := EachRecord(b, func(off int64, k, v []byte) {
			r := recs[i]
			if off != 100+int64(i) || string(k) != string(r.Key) || (v == nil) != (r.Value == nil) || string(v) != string(r.Value) {
				t.Errorf("%+v: record %d at %d: %q=%q, want %q=%q", p, i, off, k, v, r.Key, r.Value)
			}
			i++
		})
		if err != nil || i != len(recs) {
			t.Fatalf("%+v: %d records, %v", p, i, err)
		}
		bad := Batch(append([]byte(nil), b...))
		bad[BatchRecordCountPos+3] = 4 // one more record than the batch holds
		if err := EachRecord(bad, func(int64, []byte, []byte) {}); err == nil {
			t.Fatalf("%+v: a batch short of its record count read without error", p)
		}
	}
}
