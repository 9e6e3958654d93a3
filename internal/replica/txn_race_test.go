package replica

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// The high watermark moves from any append's wait, concurrently with other
// appends; these check that it never moves the last stable offset past what
// the producer state has recorded (Partition.applied).

// A commit marker's wait must leave the last stable offset at the high
// watermark even when another wait moved the high watermark past the marker
// between its write and its application to the producer state.
func TestLastStableOffsetAfterConcurrentMarker(t *testing.T) {
	e := newEnv(t, nil)
	_, other, err := e.p.Append(testBatch(-1, -1, -1, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		_, w, err := e.p.Append(txnBatch(7, 0, int32(i), 1, 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := w(); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			for !stop.Load() {
				other()
			}
		})
		_, mw, err := e.p.WriteMarker(Marker{ProducerID: 7, ProducerEpoch: 0, Commit: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := mw(); err != nil {
			t.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
		if lso, hw := e.p.LastStableOffset(), e.p.HighWatermark(); lso != hw {
			t.Fatalf("transaction %d: last stable offset %d, high watermark %d after its commit marker is durable", i, lso, hw)
		}
	}
}

// The last stable offset never passes the first batch of a transaction,
// even for the moment between the batch's write and its producer state.
func TestLastStableOffsetNeverPassesOpenTransaction(t *testing.T) {
	e := newEnv(t, nil)
	_, other, err := e.p.Append(testBatch(-1, -1, -1, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := other(); err != nil {
		t.Fatal(err)
	}
	var highest atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			other()
			l := e.p.LastStableOffset()
			for m := highest.Load(); l > m && !highest.CompareAndSwap(m, l); m = highest.Load() {
			}
		}
	})
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range 3000 {
		res, w, err := e.p.Append(txnBatch(9, 0, int32(i), 1, 0))
		if err != nil {
			t.Fatal(err)
		}
		if m := highest.Load(); m > res.BaseOffset {
			t.Fatalf("transaction %d: the last stable offset reached %d, past its first offset %d, before it was decided", i, m, res.BaseOffset)
		}
		if err := w(); err != nil {
			t.Fatal(err)
		}
		_, mw, err := e.p.WriteMarker(Marker{ProducerID: 9, ProducerEpoch: 0, Commit: false})
		if err != nil {
			t.Fatal(err)
		}
		if err := mw(); err != nil {
			t.Fatal(err)
		}
		_, pw, _ := e.p.Append(testBatch(-1, -1, -1, 1, 0))
		if err := pw(); err != nil {
			t.Fatal(err)
		}
	}
}

// A batch of the older protocol verified with the coordinator is refused if
// its transaction's marker reached the partition in between: written, it
// would open a transaction that no marker ends.
func TestTxnGuard(t *testing.T) {
	e := newEnv(t, nil)
	const pid = 11
	mustAppend := func(g TxnGuard, seq int32) {
		t.Helper()
		_, w, err := e.p.AppendVerified(txnBatch(pid, 0, seq, 1, 0), g)
		if err != nil {
			t.Fatalf("sequence %d: %v", seq, err)
		}
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	marker := func() {
		t.Helper()
		_, w, err := e.p.WriteMarker(Marker{ProducerID: pid, ProducerEpoch: 0, Commit: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	// A new producer: nothing happened since the guard.
	mustAppend(e.p.TxnGuard(pid), 0)
	// The transaction is open: a guard taken now still admits the next
	// batch.
	g := e.p.TxnGuard(pid)
	mustAppend(g, 1)
	// The marker ends the transaction after the guard was taken.
	g = e.p.TxnGuard(pid)
	marker()
	if _, _, err := e.p.AppendVerified(txnBatch(pid, 0, 2, 1, 0), g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch verified before the marker: %v, want ErrInvalidTxnState", err)
	}
	if lso, hw := e.p.LastStableOffset(), e.p.HighWatermark(); lso != hw {
		t.Fatalf("last stable offset %d, high watermark %d: a transaction was opened", lso, hw)
	}
	// A guard taken after the marker admits the next transaction.
	mustAppend(e.p.TxnGuard(pid), 2)
}
