package txn_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/txn"
)

// idIn returns an id of prefix whose partition (of parts) is p.
func idIn(t *testing.T, prefix string, p int32) string {
	t.Helper()
	for i := range 1000 {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if partitionOf(id, parts) == p {
			return id
		}
	}
	t.Fatalf("no id of %s in partition %d", prefix, p)
	return ""
}

// notServed checks that every request on id answers want and leaves no
// state behind.
func notServed(t *testing.T, e *env, id string, want error) {
	t.Helper()
	ctx := e.ctx
	if _, _, err := e.c.InitProducerID(ctx, id, timeout, -1, -1); !errors.Is(err, want) {
		t.Errorf("InitProducerID(%s): %v, want %v", id, err, want)
	}
	if err := e.c.AddPartitions(ctx, id, 1000, 0, nil); !errors.Is(err, want) {
		t.Errorf("AddPartitions(%s): %v, want %v", id, err, want)
	}
	if err := e.c.Verify(id, 1000, 0, tp("a", 0)); !errors.Is(err, want) {
		t.Errorf("Verify(%s): %v, want %v", id, err, want)
	}
	if errs := e.c.CheckPartitions(ctx, id, 1000, 0, []model.TopicPartition{tp("a", 0)}, true); !errors.Is(errs[0], want) {
		t.Errorf("CheckPartitions(%s): %v, want %v", id, errs[0], want)
	}
	if _, _, err := e.c.EndTxn(ctx, id, 1000, 0, true, true); !errors.Is(err, want) {
		t.Errorf("EndTxn(%s): %v, want %v", id, err, want)
	}
	if _, err := e.c.Describe(id); !errors.Is(err, want) {
		t.Errorf("Describe(%s): %v, want %v", id, err, want)
	}
	for _, ti := range e.c.List(txn.ListFilter{}) {
		if ti.ID == id {
			t.Errorf("List shows %s", id)
		}
	}
}

// The coordinator serves the partitions this broker leads: ids of the
// others are NOT_COORDINATOR and get no state; unloading a partition drops
// its ids (NOT_COORDINATOR after), others untouched; loading it again
// brings back what was written, and its ids' Prepare* transactions are
// finished.
func TestPartitionLoadUnload(t *testing.T) {
	e := newEnvNoLoad(t, nil)
	e.topic.Create(parts)
	e.topic.Lead(0, 1, 2)
	e.load()
	here, there := idIn(t, "here", 1), idIn(t, "there", 3)
	notServed(t, e, there, txn.ErrNotCoordinator)
	for i := range int32(parts) {
		if _, ok := e.c.Serves(i); ok != (i < 3) {
			t.Errorf("Serves(%d) = %v", i, ok)
		}
	}

	pid, epoch := e.init(here)
	e.add(here, pid, epoch, tp("a", 0))
	other := idIn(t, "other", 2)
	e.init(other)
	e.c.UnloadPartition(1)
	if _, ok := e.c.Serves(1); ok {
		t.Fatal("Serves(1) after unload")
	}
	notServed(t, e, here, txn.ErrNotCoordinator)
	e.describe(other) // its partition stays served

	// Led again: what was written comes back.
	if err := e.c.LoadPartition(1, parts, e.topic.Partition(1)); err != nil {
		t.Fatal(err)
	}
	if ti := e.describe(here); ti.State != "Ongoing" || ti.ProducerID != pid || !equalParts(ti.Partitions, tp("a", 0)) {
		t.Fatalf("after reload: %+v", ti)
	}
	if _, _, err := e.c.EndTxn(e.ctx, here, pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	e.waitState(here, "CompleteCommit")

	// A partition led elsewhere that this broker comes to lead: its ids,
	// written there by another coordinator, load, and a Prepare* one
	// is finished here.
	v := value(77, 4, 2, tp("b", 1)) // PrepareCommit
	e.topic.seed(t, parts, there, &v)
	if err := e.c.LoadPartition(3, parts, e.topic.Partition(3)); err != nil {
		t.Fatal(err)
	}
	ti := e.waitState(there, "CompleteCommit")
	if ti.ProducerID != 77 || ti.ProducerEpoch != 4 {
		t.Fatalf("loaded %+v", ti)
	}
	if calls := e.markers.all(); len(calls) != 2 || calls[1].pid != 77 || !calls[1].commit || !equalParts(calls[1].parts, tp("b", 1)) {
		t.Fatalf("markers: %+v", calls)
	}
}

// While a partition replays, its ids answer COORDINATOR_LOAD_IN_PROGRESS;
// the other partitions are served meanwhile.
func TestPartitionLoadInProgress(t *testing.T) {
	e := newEnvNoLoad(t, nil)
	e.topic.Create(parts)
	e.topic.Lead(0)
	e.load()
	id := idIn(t, "loading", 2)
	v := value(55, 1, 0)
	e.topic.seed(t, parts, id, &v)
	p := e.topic.Partition(2)
	gate := make(chan struct{})
	p.HoldReads(gate)
	done := make(chan error, 1)
	go func() { done <- e.c.LoadPartition(2, parts, p) }()
	waitFor(t, "the load to start", func() bool {
		_, err := e.c.Describe(id)
		return errors.Is(err, txn.ErrCoordinatorLoadInProgress)
	})
	notServed(t, e, id, txn.ErrCoordinatorLoadInProgress)
	e.init(idIn(t, "ready", 0))
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ti := e.describe(id); ti.ProducerID != 55 || ti.State != "Empty" {
		t.Fatalf("loaded %+v", ti)
	}
}

// Markers carry the __transaction_state partition's leader epoch as their
// coordinator epoch: the one it had when it was loaded, and a newer one
// once it is loaded again at a newer epoch.
func TestCoordinatorEpochIsLeaderEpoch(t *testing.T) {
	e := newEnvNoLoad(t, nil)
	e.topic.Create(parts)
	id := idIn(t, "epoch", 4)
	p := e.topic.Partition(4)
	p.SetLeaderEpoch(7)
	e.load()
	if ce, ok := e.c.Serves(4); !ok || ce != 7 {
		t.Fatalf("Serves(4) = %d, %v; want 7", ce, ok)
	}
	pid, epoch := e.init(id)
	e.add(id, pid, epoch, tp("a", 0))
	if _, _, err := e.c.EndTxn(e.ctx, id, pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	// Led again at epoch 9 (this broker lost and won the partition): the
	// markers of a transaction it finishes after the move carry 9.
	e.add(id, pid, epoch, tp("a", 1))
	e.markers.setFail(-1)
	if _, _, err := e.c.EndTxn(e.ctx, id, pid, epoch, false, false); err != nil {
		t.Fatal(err)
	}
	e.c.UnloadPartition(4)
	p.SetLeaderEpoch(9)
	e.markers.setFail(0)
	if err := e.c.LoadPartition(4, parts, p); err != nil {
		t.Fatal(err)
	}
	if ce, _ := e.c.Serves(4); ce != 9 {
		t.Fatalf("coordinator epoch %d after the reload, want 9", ce)
	}
	e.advanceUntil(id, "CompleteAbort")
	calls := e.markers.all()
	if calls[0].coordinatorEpoch != 7 || !calls[0].commit {
		t.Errorf("first transaction's markers: %+v, want coordinator epoch 7", calls[0])
	}
	last := calls[len(calls)-1]
	if last.coordinatorEpoch != 9 || last.commit {
		t.Errorf("markers after the reload: %+v, want the abort with coordinator epoch 9", last)
	}
	for _, c := range calls[1 : len(calls)-1] {
		if c.coordinatorEpoch != 7 {
			t.Errorf("markers before the reload: %+v, want coordinator epoch 7", c)
		}
	}
}

// Unloading stops the partition's background work: a Prepare* whose
// markers are being written is cancelled, and nothing more is written for
// it, until the partition is loaded again and finishes it.
func TestUnloadStopsMarkers(t *testing.T) {
	e := newEnv(t, nil)
	id := idIn(t, "stop", 1)
	pid, epoch := e.init(id)
	e.add(id, pid, epoch, tp("a", 0))
	block := make(chan struct{})
	defer close(block)
	e.markers.setBlock(block)
	ended := make(chan error, 1)
	go func() {
		_, _, err := e.c.EndTxn(context.Background(), id, pid, epoch, true, true)
		ended <- err
	}()
	waitFor(t, "the markers", func() bool { return len(e.markers.all()) == 1 })
	records := len(e.topic.recordsOf(t, id))
	e.c.UnloadPartition(1)
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("EndTxn: %v (the decision was durable)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the unload did not stop the marker write")
	}
	e.clock.Advance(time.Second) // retries, were any scheduled
	time.Sleep(20 * time.Millisecond)
	if n := len(e.topic.recordsOf(t, id)); n != records {
		t.Fatalf("%d records after the unload, want %d", n, records)
	}
	if n := len(e.markers.all()); n != 1 {
		t.Fatalf("%d marker calls after the unload, want 1", n)
	}
	e.markers.setBlock(nil)
	if err := e.c.LoadPartition(1, parts, e.topic.Partition(1)); err != nil {
		t.Fatal(err)
	}
	if ti := e.waitState(id, "CompleteCommit"); ti.ProducerEpoch != epoch+1 {
		t.Fatalf("after the reload: %+v", ti)
	}
}

// UnloadPartition returns only once the partition's appends in flight
// are durable, so a load after it sees them.
func TestUnloadWaitsForWrites(t *testing.T) {
	e := newEnv(t, nil)
	id := idIn(t, "inflight", 2)
	pid, epoch := e.init(id)
	p := e.topic.Partition(2)
	gate := make(chan struct{})
	p.HoldDurability(gate)
	added := make(chan error, 1)
	go func() {
		added <- e.c.AddPartitions(context.Background(), id, pid, epoch, []model.TopicPartition{tp("a", 0)})
	}()
	waitFor(t, "the append", func() bool { return len(e.topic.recordsOf(t, id)) == 2 })
	unloaded := make(chan struct{})
	go func() {
		e.c.UnloadPartition(2)
		close(unloaded)
	}()
	select {
	case <-unloaded:
		t.Fatal("UnloadPartition returned with a write in flight")
	case <-time.After(50 * time.Millisecond):
	}
	p.HoldDurability(nil)
	close(gate)
	<-unloaded
	if err := <-added; err != nil {
		t.Fatalf("AddPartitions: %v", err)
	}
	if err := e.c.LoadPartition(2, parts, p); err != nil {
		t.Fatal(err)
	}
	if ti := e.describe(id); ti.State != "Ongoing" {
		t.Fatalf("after the reload: %+v", ti)
	}
}

// An id's entry is made only while its partition is served: an
// InitProducerID of a new id whose partition is unloaded meanwhile answers
// NOT_COORDINATOR and leaves nothing, in memory or in the log.
func TestNoStateForUnservedID(t *testing.T) {
	e := newEnv(t, nil)
	id := idIn(t, "late", 3)
	e.init(idIn(t, "first", 3)) // the topic exists
	block := make(chan struct{})
	e.ids.mu.Lock()
	e.ids.block = block
	e.ids.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, _, err := e.c.InitProducerID(context.Background(), id, timeout, -1, -1)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // waiting for its producer id
	e.c.UnloadPartition(3)
	close(block)
	if err := <-done; !errors.Is(err, txn.ErrNotCoordinator) {
		t.Fatalf("InitProducerID: %v, want ErrNotCoordinator", err)
	}
	if err := e.c.LoadPartition(3, parts, e.topic.Partition(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Describe(id); !errors.Is(err, txn.ErrTransactionalIDNotFound) {
		t.Fatalf("Describe: %v, want not found", err)
	}
	if recs := e.topic.recordsOf(t, id); len(recs) != 0 {
		t.Fatalf("records of %s: %+v", id, recs)
	}
}

// __transaction_state made by another broker while this coordinator did
// not know it: its partitions are loaded before they are served (they
// may hold ids), never started empty.
func TestTopicMadeElsewhereIsLoaded(t *testing.T) {
	e := newEnv(t, nil) // no topic at Load
	id := idIn(t, "made", 0)
	v := value(300, 5, 0)
	e.topic.seed(t, parts, id, &v) // another coordinator's record
	if err := e.c.EnsureTopic(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.c.InitProducerID(e.ctx, id, timeout, -1, -1); !errors.Is(err, txn.ErrNotCoordinator) {
		t.Fatalf("InitProducerID before the load: %v, want ErrNotCoordinator", err)
	}
	if err := e.c.LoadPartition(0, parts, e.topic.Partition(0)); err != nil {
		t.Fatal(err)
	}
	if pid, epoch := e.init(id); pid != 300 || epoch != 6 {
		t.Fatalf("InitProducerID after the load: %d/%d, want 300/6", pid, epoch)
	}
}

// An id another broker coordinates is asked of it (Remote); one this
// broker coordinates is answered here.
func TestCheckPartitionsRemote(t *testing.T) {
	e := newEnvNoLoad(t, nil)
	remote := &fakeRemote{err: txn.ErrInvalidTxnState}
	e.c = txn.New(e.cfg, e.topic, e.ids, e.markers, remote)
	c := e.c
	t.Cleanup(c.Close)
	e.topic.Create(parts)
	e.topic.Lead(0)
	e.load()
	local, far := idIn(t, "local", 0), idIn(t, "far", 1)
	pid, epoch := e.init(local)
	if errs := e.c.CheckPartitions(e.ctx, local, pid, epoch, []model.TopicPartition{tp("a", 0), tp("a", 1)}, true); errs[0] != nil || errs[1] != nil {
		t.Fatalf("local add: %v", errs)
	}
	if errs := e.c.CheckPartitions(e.ctx, local, pid, epoch, []model.TopicPartition{tp("a", 1), tp("b", 0)}, false); errs[0] != nil ||
		!errors.Is(errs[1], txn.ErrInvalidTxnState) {
		t.Fatalf("local verify: %v", errs)
	}
	errs := e.c.CheckPartitions(e.ctx, far, 9, 2, []model.TopicPartition{tp("a", 0)}, false)
	if !errors.Is(errs[0], txn.ErrInvalidTxnState) || len(remote.calls) != 1 || remote.calls[0] != far {
		t.Fatalf("remote: %v, calls %v", errs, remote.calls)
	}
	// Answered here only: no forwarding.
	if errs := e.c.CheckPartitionsHere(e.ctx, far, 9, 2, []model.TopicPartition{tp("a", 0)}, false); !errors.Is(errs[0], txn.ErrNotCoordinator) ||
		len(remote.calls) != 1 {
		t.Fatalf("CheckPartitionsHere: %v", errs)
	}
}

// KIP-890 leaders add their partitions at once: an add that finds another
// add of the id in flight waits for it instead of answering
// CONCURRENT_TRANSACTIONS (AddPartitions from clients keeps Kafka's answer).
func TestConcurrentAddsQueue(t *testing.T) {
	e := newEnv(t, nil)
	id := idIn(t, "queue", 0)
	pid, epoch := e.init(id)
	p := e.topic.Partition(0)
	gate := make(chan struct{})
	p.HoldDurability(gate)
	first := make(chan []error, 1)
	go func() {
		first <- e.c.CheckPartitions(context.Background(), id, pid, epoch, []model.TopicPartition{tp("a", 0)}, true)
	}()
	waitFor(t, "the first add", func() bool { return len(e.topic.recordsOf(t, id)) == 2 })
	if err := e.c.AddPartitions(e.ctx, id, pid, epoch, []model.TopicPartition{tp("c", 0)}); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("a client's concurrent AddPartitions: %v", err)
	}
	second := make(chan []error, 1)
	go func() {
		second <- e.c.CheckPartitions(context.Background(), id, pid, epoch, []model.TopicPartition{tp("b", 0)}, true)
	}()
	select {
	case errs := <-second:
		t.Fatalf("the second add answered %v while the first was in flight", errs)
	case <-time.After(30 * time.Millisecond):
	}
	p.HoldDurability(nil)
	close(gate)
	if errs := <-first; errs[0] != nil {
		t.Fatal(errs)
	}
	if errs := <-second; errs[0] != nil {
		t.Fatal(errs)
	}
	if ti := e.describe(id); !equalParts(ti.Partitions, tp("a", 0), tp("b", 0)) {
		t.Fatalf("partitions %v", ti.Partitions)
	}
	// A context that ends while queued answers CONCURRENT_TRANSACTIONS.
	gate = make(chan struct{})
	defer close(gate)
	p.HoldDurability(gate)
	go e.c.CheckPartitions(context.Background(), id, pid, epoch, []model.TopicPartition{tp("d", 0)}, true)
	waitFor(t, "the third add", func() bool { return len(e.topic.recordsOf(t, id)) == 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if errs := e.c.CheckPartitions(ctx, id, pid, epoch, []model.TopicPartition{tp("e", 0)}, true); !errors.Is(errs[0], txn.ErrConcurrentTransactions) {
		t.Fatalf("queued add whose context ended: %v", errs)
	}
}

// fakeRemote answers every CheckPartitions with err and records the ids.
type fakeRemote struct {
	err   error
	calls []string
}

func (f *fakeRemote) CheckPartitions(_ context.Context, id string, _ int64, _ int16, tps []model.TopicPartition, _ bool) []error {
	f.calls = append(f.calls, id)
	errs := make([]error, len(tps))
	for i := range errs {
		errs[i] = f.err
	}
	return errs
}
