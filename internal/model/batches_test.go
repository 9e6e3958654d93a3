package model

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// testBatches returns three batches of different sizes at offsets 0, 1 and
// 3, and the buffer that holds them end to end.
func testBatches() ([][]byte, []byte) {
	var batches [][]byte
	var data []byte
	base := int64(0)
	for _, recs := range [][]KeyValue{
		{{Key: []byte("a"), Value: []byte("1")}},
		{{Key: []byte("bb"), Value: []byte("22")}, {Key: []byte("cc")}},
		{{Key: []byte("ddd"), Value: bytes.Repeat([]byte("x"), 100)}},
	} {
		b := EncodeBatch(recs, 1000, NoProducer)
		Batch(b).SetBaseOffset(base)
		base = Batch(b).LastOffset() + 1
		batches = append(batches, b)
		data = append(data, b...)
	}
	return batches, data
}

// withLength returns a copy of b whose length field says length.
func withLength(b []byte, length int32) []byte {
	c := append([]byte(nil), b...)
	binary.BigEndian.PutUint32(c[BatchLengthPos:], uint32(length))
	return c
}

// readAll walks data to its end, checking at each step that Pos and Rest
// agree, and returns the batches read.
func readAll(t *testing.T, data []byte) (*BatchReader, []Batch) {
	t.Helper()
	r := NewBatchReader(data)
	var got []Batch
	for {
		before := r.Pos()
		b, ok := r.Next()
		if r.Pos()+len(r.Rest()) != len(data) || !bytes.Equal(r.Rest(), data[r.Pos():]) {
			t.Fatalf("Pos %d and Rest of %d bytes disagree over %d bytes", r.Pos(), len(r.Rest()), len(data))
		}
		if !ok {
			if r.Pos() != before {
				t.Fatalf("Next moved Pos from %d to %d when it stopped", before, r.Pos())
			}
			return r, got
		}
		if r.Pos() != before+len(b) {
			t.Fatalf("Pos %d after a batch of %d bytes from %d", r.Pos(), len(b), before)
		}
		got = append(got, b)
	}
}

func TestBatchReader(t *testing.T) {
	batches, whole := testBatches()
	last := batches[len(batches)-1]
	tests := []struct {
		name    string
		data    []byte
		batches int // whole batches read before the stop
		stop    BatchStop
		claimed int
	}{
		{"empty", nil, 0, EndOfBatches, 0},
		{"one batch", batches[0], 1, EndOfBatches, 0},
		{"exact batches", whole, 3, EndOfBatches, 0},
		{"a partial length field", append(whole[:len(whole):len(whole)], last[:BatchLengthOverhead-1]...), 3, PartialBatch, 0},
		{"a partial header", append(whole[:len(whole):len(whole)], last[:BatchHeaderSize-1]...), 3, PartialBatch, len(last)},
		{"a header alone", last[:BatchHeaderSize], 0, PartialBatch, len(last)},
		{"a partial body", append(whole[:len(whole):len(whole)], last[:len(last)-1]...), 3, PartialBatch, len(last)},
		{"a length below a header's", append(whole[:len(whole):len(whole)], withLength(last, BatchHeaderSize-BatchLengthOverhead-1)...), 3,
			MalformedBatch, BatchHeaderSize - 1},
		{"a negative length", withLength(last, -1), 0, MalformedBatch, BatchLengthOverhead - 1},
		{"a short rest with a length below a header's", withLength(last, 0)[:BatchLengthOverhead], 0, MalformedBatch, BatchLengthOverhead},
		{"a length of just a header", withLength(last, BatchHeaderSize-BatchLengthOverhead)[:BatchHeaderSize], 1, EndOfBatches, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, got := readAll(t, tc.data)
			if len(got) != tc.batches {
				t.Fatalf("%d batches, want %d", len(got), tc.batches)
			}
			pos := 0
			for i, b := range got {
				if len(b) != b.Size() || cap(b) != len(b) {
					t.Errorf("batch %d: %d bytes (capacity %d), its size %d", i, len(b), cap(b), b.Size())
				}
				if !bytes.Equal(b, tc.data[pos:pos+len(b)]) {
					t.Errorf("batch %d is not the data at %d", i, pos)
				}
				pos += len(b)
			}
			if r.Pos() != pos {
				t.Errorf("Pos %d after batches of %d bytes", r.Pos(), pos)
			}
			if r.Stop() != tc.stop || r.Claimed() != tc.claimed {
				t.Errorf("stopped at %d on %v claiming %d, want %v claiming %d", r.Pos(), r.Stop(), r.Claimed(), tc.stop, tc.claimed)
			}
			if b, ok := r.Next(); ok || b != nil || r.Stop() != tc.stop || r.Claimed() != tc.claimed {
				t.Errorf("Next after the stop: %d bytes, %v, %v claiming %d", len(b), ok, r.Stop(), r.Claimed())
			}
		})
	}
}

func TestBatchReaderOffsets(t *testing.T) {
	batches, data := testBatches()
	_, got := readAll(t, data)
	if len(got) != len(batches) {
		t.Fatalf("%d batches, want %d", len(got), len(batches))
	}
	next := int64(0)
	for i, b := range got {
		if b.BaseOffset() != next || b.LastOffset() != Batch(batches[i]).LastOffset() {
			t.Errorf("batch %d at [%d, %d], want [%d, %d]", i, b.BaseOffset(), b.LastOffset(), next, Batch(batches[i]).LastOffset())
		}
		next = b.LastOffset() + 1
	}
}

// A batch handed out must not reach into the next: appending to it copies.
func TestBatchReaderBatchCannotGrowIntoTheNext(t *testing.T) {
	_, data := testBatches()
	keep := append([]byte(nil), data...)
	r := NewBatchReader(data)
	b, _ := r.Next()
	_ = append(b, 0xff)
	if !bytes.Equal(data, keep) {
		t.Fatal("appending to a batch overwrote the data after it")
	}
}
