package coordinator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/strandlog/strand/internal/model"
)

func kvs(prefix string, n int) []model.KeyValue {
	out := make([]model.KeyValue, n)
	for i := range out {
		out[i] = model.KeyValue{Key: fmt.Appendf(nil, "%s-k%d", prefix, i), Value: fmt.Appendf(nil, "%s-v%d", prefix, i)}
	}
	return out
}

// withAttributes sets a batch's attributes (the CRC is not Replay's to
// check: the log checked it when the batch was written).
func withAttributes(b []byte, attrs int16) []byte {
	binary.BigEndian.PutUint16(b[model.BatchAttributesPos:], uint16(attrs))
	return b
}

func appendAll(t *testing.T, p *MemPartition, batches ...[]byte) {
	t.Helper()
	for _, b := range batches {
		if _, wait, err := p.Append(b); err != nil || wait() != nil {
			t.Fatal("append failed")
		}
	}
}

func replayAll(p Partition, readBytes int) ([]Record, int, error) {
	var got []Record
	n, err := Replay(p, readBytes, func(r Record) { got = append(got, r) })
	return got, n, err
}

func TestReplayGivesEveryRecordInOrder(t *testing.T) {
	p := &MemPartition{}
	txn := model.Producer{ID: 42, Epoch: 3}
	appendAll(t, p,
		model.EncodeBatch(kvs("a", 3), 1000, model.NoProducer),                                               // 0-2
		model.EncodeBatch(kvs("b", 2), 1000, txn),                                                            // 3-4
		withAttributes(model.EncodeBatch(kvs("m", 2), 1000, txn), model.AttrTransactional|model.AttrControl), // 5-6
		model.EncodeBatch([]model.KeyValue{{Key: []byte("gone")}}, 1000, model.NoProducer),                   // 7
	)
	for _, readBytes := range []int{1, 100, 1 << 20} { // one batch a read, a few, all at once
		got, n, err := replayAll(p, readBytes)
		if err != nil {
			t.Fatal(err)
		}
		want := []Record{
			{Offset: 0, Key: []byte("a-k0"), Value: []byte("a-v0"), ProducerID: -1},
			{Offset: 1, Key: []byte("a-k1"), Value: []byte("a-v1"), ProducerID: -1},
			{Offset: 2, Key: []byte("a-k2"), Value: []byte("a-v2"), ProducerID: -1},
			{Offset: 3, Key: []byte("b-k0"), Value: []byte("b-v0"), ProducerID: 42},
			{Offset: 4, Key: []byte("b-k1"), Value: []byte("b-v1"), ProducerID: 42},
			{Offset: 5, Key: []byte("m-k0"), Value: []byte("m-v0"), ProducerID: 42, Control: true}, // a control batch's first record only
			{Offset: 7, Key: []byte("gone"), ProducerID: -1},
		}
		if n != len(want) || len(got) != len(want) {
			t.Fatalf("read %d bytes at a time: %d records (n %d), want %d", readBytes, len(got), n, len(want))
		}
		for i, r := range got {
			w := want[i]
			if r.Offset != w.Offset || string(r.Key) != string(w.Key) || string(r.Value) != string(w.Value) ||
				(r.Value == nil) != (w.Value == nil) || r.ProducerID != w.ProducerID || r.Control != w.Control {
				t.Errorf("read %d bytes at a time: record %d = %+v, want %+v", readBytes, i, r, w)
			}
		}
	}
}

func TestReplaySkipsCompressedBatches(t *testing.T) {
	p := &MemPartition{}
	appendAll(t, p,
		model.EncodeBatch(kvs("a", 1), 1000, model.NoProducer),
		withAttributes(model.EncodeBatch(kvs("z", 2), 1000, model.NoProducer), int16(model.CompressionGzip)),
		model.EncodeBatch(kvs("b", 1), 1000, model.NoProducer),
	)
	got, n, err := replayAll(p, 1)
	if !errors.Is(err, ErrCompressed) {
		t.Fatalf("error %v, want ErrCompressed", err)
	}
	if n != 2 || len(got) != 2 || string(got[0].Key) != "a-k0" || string(got[1].Key) != "b-k0" || got[1].Offset != 3 {
		t.Fatalf("records %+v: want a-k0 and b-k0 at 3, around the compressed batch", got)
	}
}

// failingReads fails every read.
type failingReads struct{ *MemPartition }

func (failingReads) Read(int64, int) ([]byte, error) { return nil, errors.New("disk on fire") }

func TestReplayEndsOnAFailedRead(t *testing.T) {
	p := &MemPartition{}
	appendAll(t, p, model.EncodeBatch(kvs("a", 1), 1000, model.NoProducer))
	if _, _, err := replayAll(failingReads{p}, 1); err == nil {
		t.Fatal("a failed read replayed without error")
	}
	empty := &MemPartition{}
	if got, n, err := replayAll(failingReads{empty}, 1); err != nil || n != 0 || len(got) != 0 {
		t.Fatalf("an empty partition is not read: %v, %d", err, n)
	}
}

func TestMemPartitionGates(t *testing.T) {
	p := &MemPartition{}
	gate := make(chan struct{})
	p.HoldDurability(gate)
	_, wait, err := p.Append(model.EncodeBatch(kvs("a", 1), 1000, model.NoProducer))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case <-done:
		t.Fatal("the wait returned before the durability gate closed")
	default:
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	p.FailAppends(boom)
	if _, _, err := p.Append(model.EncodeBatch(kvs("b", 1), 1000, model.NoProducer)); !errors.Is(err, boom) {
		t.Fatalf("append: %v, want %v", err, boom)
	}
	p.FailAppends(nil)
	appendAll(t, p, model.EncodeBatch(kvs("c", 2), 1000, model.NoProducer))
	if p.LoadEnd() != 3 {
		t.Fatalf("end %d, want 3", p.LoadEnd())
	}
	p.DropLast()
	if p.LoadEnd() != 1 || len(p.Batches()) != 1 {
		t.Fatalf("after DropLast: end %d, %d batches", p.LoadEnd(), len(p.Batches()))
	}
}
