package txn_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/txn"
)

func TestInitProducerIDNewID(t *testing.T) {
	e := newEnv(t, nil)
	if e.topic.Len() != 0 {
		t.Fatal("topic created before first use")
	}
	pid, epoch := e.init("t1")
	if pid != 1000 || epoch != 0 {
		t.Fatalf("got %d/%d, want 1000/0", pid, epoch)
	}
	if e.topic.Created() != parts {
		t.Fatalf("topic created with %d partitions, want %d", e.topic.Created(), parts)
	}
	ti := e.describe("t1")
	want := txn.TxnInfo{ID: "t1", State: "Empty", ProducerID: 1000, ProducerEpoch: 0, Timeout: timeout,
		LastUpdate: e.clock.Now()}
	if !equalInfo(ti, want) {
		t.Fatalf("describe: %+v, want %+v", ti, want)
	}
	recs := e.topic.recordsOf(t, "t1")
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	r := recs[0]
	if r.partition != partitionOf("t1", parts) || e.c.PartitionFor("t1") != r.partition {
		t.Errorf("record in partition %d, want %d", r.partition, partitionOf("t1", parts))
	}
	v := r.value
	if v.Version != 1 || v.ProducerID != 1000 || v.ProducerEpoch != 0 || v.TimeoutMillis != 60000 || v.State != 0 ||
		v.Topics != nil || v.StartTimestamp != -1 || v.LastUpdateTimestamp != e.clock.Now().UnixMilli() ||
		v.PreviousProducerID != -1 || v.NextProducerID != -1 || v.ClientTransactionVersion != 0 {
		t.Errorf("record: %+v", v)
	}
}

func TestInitProducerIDTimeout(t *testing.T) {
	e := newEnv(t, func(c *txn.Config) { c.MaxTimeout = time.Minute })
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond, time.Minute + time.Millisecond} {
		if _, _, err := e.c.InitProducerID(e.ctx, "t1", d, -1, -1); !errors.Is(err, txn.ErrInvalidTransactionTimeout) {
			t.Errorf("timeout %v: %v, want ErrInvalidTransactionTimeout", d, err)
		}
	}
	if _, _, err := e.c.InitProducerID(e.ctx, "t1", time.Minute, -1, -1); err != nil {
		t.Errorf("timeout at the maximum: %v", err)
	}
	if _, _, err := e.c.InitProducerID(e.ctx, "", time.Minute, -1, -1); !errors.Is(err, txn.ErrInvalidRequest) {
		t.Errorf("empty id: %v", err)
	}
}

// A second producer with the same id bumps the epoch and fences the first.
func TestInitProducerIDBumpFences(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	pid2, epoch2 := e.init("t1")
	if pid2 != pid || epoch2 != epoch+1 {
		t.Fatalf("second init: %d/%d, want %d/%d", pid2, epoch2, pid, epoch+1)
	}
	if err := e.c.AddPartitions(e.ctx, "t1", pid, epoch, []model.TopicPartition{tp("a", 0)}); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("old producer's AddPartitions: %v, want ErrProducerFenced", err)
	}
	// After a completed transaction too.
	e.add("t1", pid2, epoch2, tp("a", 0))
	if _, _, err := e.c.EndTxn(e.ctx, "t1", pid2, epoch2, true, false); err != nil {
		t.Fatal(err)
	}
	if _, epoch3 := e.init("t1"); epoch3 != epoch2+1 {
		t.Fatalf("init after commit: epoch %d, want %d", epoch3, epoch2+1)
	}
}

// KIP-360: a producer that names its pid and epoch.
func TestInitProducerIDKIP360(t *testing.T) {
	e := newEnv(t, nil)
	pid, _ := e.init("t1")
	pid, epoch := e.init("t1") // epoch 1, last epoch 0 (no expected epoch: last -1)
	tests := []struct {
		name      string
		pid       int64
		epoch     int16
		wantPID   int64
		wantEpoch int16
		err       error
	}{
		{"current epoch bumps", pid, epoch, pid, epoch + 1, nil},
		{"retry with the previous epoch answers the current one", pid, epoch, pid, epoch + 1, nil},
		{"an older epoch is fenced", pid, epoch - 1, 0, 0, txn.ErrProducerFenced},
		{"another producer id is fenced", pid + 50, epoch + 1, 0, 0, txn.ErrProducerFenced},
		{"the current epoch again bumps", pid, epoch + 1, pid, epoch + 2, nil},
	}
	for _, tc := range tests {
		gotPID, gotEpoch, err := e.c.InitProducerID(e.ctx, "t1", timeout, tc.pid, tc.epoch)
		if !errors.Is(err, tc.err) || (err == nil && (gotPID != tc.wantPID || gotEpoch != tc.wantEpoch)) {
			t.Errorf("%s: got %d/%d %v, want %d/%d %v", tc.name, gotPID, gotEpoch, err, tc.wantPID, tc.wantEpoch, tc.err)
		}
	}
	// An unknown id with a pid given (the coordinator lost it): a new id.
	gotPID, gotEpoch, err := e.c.InitProducerID(e.ctx, "t2", timeout, 5, 3)
	if err != nil || gotPID == pid || gotEpoch != 0 {
		t.Errorf("unknown id with pid: %d/%d %v", gotPID, gotEpoch, err)
	}
}

// An exhausted epoch gives a new producer id; a retry of that rotation
// with the old id and epoch is recognised.
func TestInitProducerIDExhaustedEpoch(t *testing.T) {
	e := newEnvNoLoad(t, nil)
	v := value(7, math.MaxInt16-1, 4) // CompleteCommit
	e.topic.seed(t, parts, "t1", &v)
	e.load()
	pid, epoch, err := e.c.InitProducerID(e.ctx, "t1", timeout, 7, math.MaxInt16-1)
	if err != nil || pid != 1000 || epoch != 0 {
		t.Fatalf("init on an exhausted epoch: %d/%d %v, want 1000/0", pid, epoch, err)
	}
	recs := e.topic.recordsOf(t, "t1")
	last := recs[len(recs)-1].value
	if last.ProducerID != 1000 || last.ProducerEpoch != 0 || last.PreviousProducerID != 7 || last.State != 0 {
		t.Errorf("record: %+v", last)
	}
	// The answer got lost: the producer retries with its old id and epoch.
	pid, epoch, err = e.c.InitProducerID(e.ctx, "t1", timeout, 7, math.MaxInt16-1)
	if err != nil || pid != 1000 || epoch != 0 {
		t.Fatalf("retried rotation: %d/%d %v, want 1000/0", pid, epoch, err)
	}
	// The old id with a non-exhausted epoch is fenced.
	if _, _, err := e.c.InitProducerID(e.ctx, "t1", timeout, 7, 5); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("old id: %v, want ErrProducerFenced", err)
	}
	// Without an expected epoch, exhaustion rotates as well.
	v = value(8, math.MaxInt16, 5)
	e.topic.seed(t, parts, "t2", &v)
	e.restart()
	if pid, epoch := e.init("t2"); pid == 8 || epoch != 0 {
		t.Fatalf("init on epoch MaxInt16: %d/%d", pid, epoch)
	}
}

// InitProducerID on an Ongoing transaction aborts it with the epoch bumped
// and answers CONCURRENT_TRANSACTIONS; the retry gets the next epoch.
func TestInitProducerIDFencesOngoing(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	e.add("t1", pid, epoch, tp("a", 0), tp("b", 1))
	if _, _, err := e.c.InitProducerID(e.ctx, "t1", timeout, -1, -1); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("init on Ongoing: %v, want ErrConcurrentTransactions", err)
	}
	ti := e.waitState("t1", "CompleteAbort")
	if ti.ProducerEpoch != epoch+1 || len(ti.Partitions) != 0 {
		t.Fatalf("after fence: %+v", ti)
	}
	calls := e.markers.all()
	if len(calls) != 1 || calls[0].commit || calls[0].pid != pid || calls[0].epoch != epoch+1 ||
		calls[0].coordinatorEpoch != 0 || len(calls[0].parts) != 2 {
		t.Fatalf("markers: %+v", calls)
	}
	// The fenced producer.
	if _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, true, false); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("fenced producer's EndTxn: %v", err)
	}
	if _, epoch2 := e.init("t1"); epoch2 != epoch+2 {
		t.Fatalf("retry: epoch %d, want %d", epoch2, epoch+2)
	}
	// Records: Empty, Ongoing, PrepareAbort (bumped), CompleteAbort, Empty.
	var states []kmsg.TransactionState
	for _, r := range e.topic.recordsOf(t, "t1") {
		states = append(states, r.value.State)
	}
	if want := []kmsg.TransactionState{0, 1, 3, 5, 0}; !equalStates(states, want) {
		t.Fatalf("records: %v, want %v", states, want)
	}
}

func TestInitProducerIDWhilePreparing(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	e.add("t1", pid, epoch, tp("a", 0))
	block := make(chan struct{})
	e.markers.setBlock(block)
	done := make(chan error, 1)
	go func() { _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, true, false); done <- err }()
	e.waitState("t1", "PrepareCommit")
	if _, _, err := e.c.InitProducerID(e.ctx, "t1", timeout, -1, -1); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("init while PrepareCommit: %v", err)
	}
	close(block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.waitState("t1", "CompleteCommit")
}

// Methods return only once durable; meanwhile other requests on the id
// answer CONCURRENT_TRANSACTIONS and the old state shows.
func TestDurableBeforeAnswer(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	p := e.topic.Partition(int(partitionOf("t1", parts)))
	gate := make(chan struct{})
	p.HoldDurability(gate)
	done := make(chan error, 1)
	go func() {
		done <- e.c.AddPartitions(context.Background(), "t1", pid, epoch, []model.TopicPartition{tp("a", 0)})
	}()
	waitFor(t, "the append", func() bool { return len(e.topic.recordsOf(t, "t1")) == 2 })
	select {
	case err := <-done:
		t.Fatalf("answered before durable: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	if st := e.describe("t1").State; st != "Empty" {
		t.Fatalf("state %s before durable, want Empty", st)
	}
	if err := e.c.AddPartitions(e.ctx, "t1", pid, epoch, []model.TopicPartition{tp("b", 0)}); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("concurrent AddPartitions: %v", err)
	}
	if _, _, err := e.c.InitProducerID(e.ctx, "t1", timeout, -1, -1); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("concurrent InitProducerID: %v", err)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := e.describe("t1").State; st != "Ongoing" {
		t.Fatalf("state %s, want Ongoing", st)
	}
}

// A failed append leaves the state unchanged and answers NOT_COORDINATOR.
func TestWriteFailure(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	p := e.topic.Partition(int(partitionOf("t1", parts)))
	p.FailAppends(errors.New("disk full"))
	if err := e.c.AddPartitions(e.ctx, "t1", pid, epoch, []model.TopicPartition{tp("a", 0)}); !errors.Is(err, txn.ErrNotCoordinator) {
		t.Fatalf("AddPartitions: %v, want ErrNotCoordinator", err)
	}
	if _, _, err := e.c.InitProducerID(e.ctx, "t1", timeout, -1, -1); !errors.Is(err, txn.ErrNotCoordinator) {
		t.Fatalf("InitProducerID: %v, want ErrNotCoordinator", err)
	}
	if ti := e.describe("t1"); ti.State != "Empty" || ti.ProducerEpoch != epoch {
		t.Fatalf("state changed: %+v", ti)
	}
	p.FailAppends(nil)
	e.add("t1", pid, epoch, tp("a", 0))
}

func TestProducerIDAllocationFailure(t *testing.T) {
	e := newEnv(t, nil)
	boom := errors.New("no ids")
	e.ids.err = boom
	if _, _, err := e.c.InitProducerID(e.ctx, "t1", timeout, -1, -1); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if _, err := e.c.Describe("t1"); !errors.Is(err, txn.ErrTransactionalIDNotFound) {
		t.Fatalf("describe: %v", err)
	}
}

// Fencing an Ongoing transaction whose epoch is MaxInt16 (no bump left)
// moves it to a new producer id when the abort completes.
func TestFenceAtMaxEpoch(t *testing.T) {
	e := newEnvNoLoad(t, nil)
	v := value(7, math.MaxInt16, 1, tp("a", 0))
	e.topic.seed(t, parts, "t1", &v)
	e.load()
	if _, _, err := e.c.InitProducerID(e.ctx, "t1", timeout, -1, -1); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("init: %v", err)
	}
	ti := e.waitState("t1", "CompleteAbort")
	if ti.ProducerID != 1000 || ti.ProducerEpoch != 0 {
		t.Fatalf("after fence: %+v", ti)
	}
	if c := e.markers.all(); len(c) != 1 || c[0].pid != 7 || c[0].epoch != math.MaxInt16 {
		t.Fatalf("markers: %+v", c)
	}
	if pid, epoch := e.init("t1"); pid != 1000 || epoch != 1 {
		t.Fatalf("retry: %d/%d", pid, epoch)
	}
}

// TestSettingsOnly: a Config that gives the settings and nothing else
// works (real clock, default logger, the internals filled).
func TestSettingsOnly(t *testing.T) {
	c := txn.New(txn.Defaults(), &coordinator.MemTopic{}, &fakeIDs{}, &fakeMarkers{}, nil)
	if err := c.Load(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.InitProducerID(context.Background(), "t", time.Minute, -1, -1); err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// While the record deciding a transaction is being made durable, Verify
// refuses batches of the old flow (they could land after the markers); while
// a partition is being added, batches to partitions already in the
// transaction still pass.
func TestVerifyWhileEnding(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	a, b := tp("a", 0), tp("b", 0)
	if err := e.c.AddPartitions(e.ctx, "t1", pid, epoch, []model.TopicPartition{a}); err != nil {
		t.Fatal(err)
	}
	p := e.topic.Partition(int(partitionOf("t1", parts)))
	hold := func() chan struct{} {
		gate := make(chan struct{})
		p.HoldDurability(gate)
		return gate
	}

	gate := hold()
	added := make(chan error, 1)
	go func() { added <- e.c.AddPartitions(context.Background(), "t1", pid, epoch, []model.TopicPartition{b}) }()
	waitFor(t, "the add's append", func() bool { return len(e.topic.recordsOf(t, "t1")) == 3 })
	if err := e.c.Verify("t1", pid, epoch, a); err != nil {
		t.Fatalf("verify during an add: %v", err)
	}
	close(gate)
	if err := <-added; err != nil {
		t.Fatal(err)
	}

	gate = hold()
	ended := make(chan error, 1)
	go func() {
		_, _, err := e.c.EndTxn(context.Background(), "t1", pid, epoch, true, false)
		ended <- err
	}()
	waitFor(t, "the prepare's append", func() bool { return len(e.topic.recordsOf(t, "t1")) == 4 })
	if err := e.c.Verify("t1", pid, epoch, a); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("verify while the prepare is written: %v, want ErrConcurrentTransactions", err)
	}
	close(gate)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if err := e.c.Verify("t1", pid, epoch, a); !errors.Is(err, txn.ErrInvalidTxnState) {
		t.Fatalf("verify after the commit: %v, want ErrInvalidTxnState", err)
	}
}
