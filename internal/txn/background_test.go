package txn_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/txn"
)

// A transaction older than its timeout is aborted with the epoch bumped,
// which fences the producer (v1) or lets it abort and go on (v2).
func TestTimeoutAbort(t *testing.T) {
	e := newEnv(t, nil) // abort check every 10 s
	pid, epoch, err := e.c.InitProducerID(e.ctx, "t1", 15*time.Second, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	e.add("t1", pid, epoch, tp("a", 0))
	pid2, epoch2 := e.init("t2") // a minute: not yet due
	e.add("t2", pid2, epoch2, tp("a", 1))
	e.clock.Advance(10 * time.Second) // 10 s: not older than 15 s
	if st := e.describe("t1").State; st != "Ongoing" {
		t.Fatalf("aborted early: %s", st)
	}
	e.clock.Advance(10 * time.Second) // 20 s
	ti := e.waitState("t1", "CompleteAbort")
	if ti.ProducerEpoch != epoch+1 {
		t.Fatalf("epoch %d, want %d", ti.ProducerEpoch, epoch+1)
	}
	calls := e.markers.all()
	if len(calls) != 1 || calls[0].commit || calls[0].epoch != epoch+1 || calls[0].pid != pid {
		t.Fatalf("markers: %+v", calls)
	}
	if st := e.describe("t2").State; st != "Ongoing" {
		t.Fatalf("t2: %s", st)
	}
	// The producer (old flow) is fenced.
	if _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, true, false); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("EndTxn after timeout: %v", err)
	}
	if err := e.c.AddPartitions(e.ctx, "t1", pid, epoch, []model.TopicPartition{tp("a", 0)}); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("AddPartitions after timeout: %v", err)
	}
	// A v2 producer's abort with its epoch reads as a retry and succeeds
	// with the bumped epoch; its commit is invalid.
	if _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, true, true); !errors.Is(err, txn.ErrInvalidTxnState) {
		t.Fatalf("v2 commit after timeout: %v", err)
	}
	if gotPID, gotEpoch, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, false, true); err != nil || gotPID != pid || gotEpoch != epoch+1 {
		t.Fatalf("v2 abort after timeout: %d/%d %v", gotPID, gotEpoch, err)
	}
	e.clock.Advance(time.Minute)
	e.waitState("t2", "CompleteAbort")
}

// Idle ids untouched for IDExpiration are removed with a tombstone; ids
// with a transaction in progress are not.
func TestExpiry(t *testing.T) {
	e := newEnv(t, func(c *txn.Config) {
		c.IDExpiration = time.Hour
		c.ExpiryCheckInterval = 10 * time.Minute
		c.MaxTimeout = 24 * time.Hour
	})
	pidEmpty, _ := e.init("empty")
	pid, epoch := e.init("done")
	e.add("done", pid, epoch, tp("a", 0))
	if _, _, err := e.c.EndTxn(e.ctx, "done", pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := e.c.InitProducerID(e.ctx, "ongoing", 20*time.Hour, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	e.add("ongoing", pid, epoch, tp("a", 1))
	e.clock.Advance(50 * time.Minute)
	e.init("touched") // recent
	e.clock.Advance(20 * time.Minute)
	for _, id := range []string{"empty", "done"} {
		waitFor(t, id+" to expire", func() bool {
			_, err := e.c.Describe(id)
			return errors.Is(err, txn.ErrTransactionalIDNotFound)
		})
		recs := e.topic.recordsOf(t, id)
		if recs[len(recs)-1].value != nil {
			t.Fatalf("%s: last record is not a tombstone", id)
		}
	}
	for _, id := range []string{"ongoing", "touched"} {
		if _, err := e.c.Describe(id); err != nil {
			t.Fatalf("%s expired: %v", id, err)
		}
	}
	// Gone after a restart too; a new producer gets a new id.
	e.restart()
	if _, err := e.c.Describe("empty"); !errors.Is(err, txn.ErrTransactionalIDNotFound) {
		t.Fatalf("after restart: %v", err)
	}
	if pid, epoch := e.init("empty"); pid == pidEmpty || epoch != 0 {
		t.Fatalf("re-created: %d/%d", pid, epoch)
	}
}

// Close waits for the background marker work, cancelling it.
func TestCloseWaitsForBackground(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	e.add("t1", pid, epoch, tp("a", 0))
	e.markers.setBlock(make(chan struct{})) // never released
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, _, err := e.c.EndTxn(ctx, "t1", pid, epoch, true, false); done <- err }()
	waitFor(t, "the marker call", func() bool { return len(e.markers.all()) == 1 })
	closed := make(chan struct{})
	go func() { e.c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := <-done; err != nil {
		t.Fatalf("EndTxn: %v", err)
	}
	cancel()
	e.clock.Advance(time.Hour) // timers do nothing after Close
	if n := len(e.markers.all()); n != 1 {
		t.Fatalf("%d marker calls after Close", n)
	}
	// The next coordinator finishes it.
	e.markers.setBlock(nil)
	e.restart()
	e.waitState("t1", "CompleteCommit")
}

func TestDescribeAndList(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.c.Describe("nope"); !errors.Is(err, txn.ErrTransactionalIDNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	pidA, epochA := e.init("app-a")
	start := e.clock.Now()
	e.add("app-a", pidA, epochA, tp("x", 0))
	e.clock.Advance(2 * time.Second)
	pidB, _ := e.init("app-b")
	e.init("other")
	ti := e.describe("app-a")
	want := txn.TxnInfo{ID: "app-a", State: "Ongoing", ProducerID: pidA, ProducerEpoch: epochA, Timeout: timeout,
		Start: start, LastUpdate: start, Partitions: []model.TopicPartition{tp("x", 0)}}
	if !equalInfo(ti, want) {
		t.Fatalf("describe: %+v, want %+v", ti, want)
	}
	pat, err := txn.CompileIDPattern("app-.")
	if err != nil {
		t.Fatal(err)
	}
	partial, _ := txn.CompileIDPattern("app")
	tests := []struct {
		name string
		f    txn.ListFilter
		want []string
	}{
		{"all", txn.ListFilter{}, []string{"app-a", "app-b", "other"}},
		{"state", txn.ListFilter{States: []string{"Ongoing"}}, []string{"app-a"}},
		{"states", txn.ListFilter{States: []string{"Empty", "CompleteAbort"}}, []string{"app-b", "other"}},
		{"producer id", txn.ListFilter{ProducerIDs: []int64{pidB}}, []string{"app-b"}},
		{"duration", txn.ListFilter{MinDuration: 2 * time.Second, States: []string{"Ongoing"}}, []string{"app-a"}},
		{"duration too long", txn.ListFilter{MinDuration: 3 * time.Second, States: []string{"Ongoing"}}, nil},
		{"pattern", txn.ListFilter{IDPattern: pat}, []string{"app-a", "app-b"}},
		{"pattern matches whole ids", txn.ListFilter{IDPattern: partial}, nil},
		{"combined", txn.ListFilter{IDPattern: pat, States: []string{"Empty"}}, []string{"app-b"}},
	}
	for _, tc := range tests {
		var got []string
		for _, ti := range e.c.List(tc.f) {
			got = append(got, ti.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := txn.CompileIDPattern("("); err == nil {
		t.Error("a bad pattern compiled")
	}
}

// Many producers, some sharing ids, with timeouts, fences and expiry
// running meanwhile; run with -race. Every answer must be one of the
// documented ones, and the state must replay to the same.
func TestConcurrency(t *testing.T) {
	e := newEnv(t, func(c *txn.Config) {
		c.AbortCheckInterval = 50 * time.Millisecond
		c.ExpiryCheckInterval = 100 * time.Millisecond
		c.IDExpiration = time.Second
	})
	allowed := []error{nil, txn.ErrConcurrentTransactions, txn.ErrProducerFenced, txn.ErrInvalidProducerIDMapping,
		txn.ErrInvalidTxnState}
	check := func(op string, err error) {
		for _, a := range allowed {
			if errors.Is(err, a) {
				return
			}
		}
		t.Errorf("%s: unexpected %v", op, err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the clock runs timeouts and expiry
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				e.clock.Advance(10 * time.Millisecond)
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	var workers sync.WaitGroup
	for w := range 8 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			id := fmt.Sprintf("t%d", w%4) // two producers per id
			for range 200 {
				pid, epoch, err := e.c.InitProducerID(e.ctx, id, time.Duration(100+r.IntN(200))*time.Millisecond, -1, -1)
				check("init", err)
				if err != nil {
					continue
				}
				v2 := r.IntN(2) == 0
				for range 1 + r.IntN(3) {
					err := e.c.AddPartitions(e.ctx, id, pid, epoch, []model.TopicPartition{tp("a", int32(r.IntN(4)))})
					check("add", err)
					if err == nil {
						check("verify", e.c.Verify(id, pid, epoch, tp("a", 0)))
					}
				}
				_, _, err = e.c.EndTxn(e.ctx, id, pid, epoch, r.IntN(2) == 0, v2)
				check("end", err)
				_, _ = e.c.Describe(id)
				_ = e.c.List(txn.ListFilter{States: []string{"Ongoing"}})
			}
		}()
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	// Close waits for background work; the next coordinator finishes any
	// Prepare* left (no timer fires: the clock stands still).
	e.restart()
	waitFor(t, "no Prepare* left", func() bool {
		return len(e.c.List(txn.ListFilter{States: []string{"PrepareCommit", "PrepareAbort"}})) == 0
	})
	before := e.c.List(txn.ListFilter{})
	e.restart()
	after := e.c.List(txn.ListFilter{})
	if len(before) != len(after) {
		t.Fatalf("replay: %d ids, want %d", len(after), len(before))
	}
	for i := range before {
		if !equalInfo(before[i], after[i]) {
			t.Errorf("replay of %s:\n got %+v\nwant %+v", before[i].ID, after[i], before[i])
		}
	}
}
