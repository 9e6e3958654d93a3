package txn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/txn"
)

// Every state comes back after a restart as it was.
func TestReplayEveryState(t *testing.T) {
	e := newEnv(t, nil)
	// Empty
	e.init("empty")
	// Ongoing
	pid, epoch := e.init("ongoing")
	e.add("ongoing", pid, epoch, tp("a", 0), tp("b", 3))
	// CompleteCommit (v1) and CompleteAbort (v2)
	pid, epoch = e.init("commit")
	e.add("commit", pid, epoch, tp("a", 1))
	if _, _, err := e.c.EndTxn(e.ctx, "commit", pid, epoch, true, false); err != nil {
		t.Fatal(err)
	}
	pid, epoch = e.init("abort")
	e.add("abort", pid, epoch, tp("a", 2))
	if _, _, err := e.c.EndTxn(e.ctx, "abort", pid, epoch, false, true); err != nil {
		t.Fatal(err)
	}
	// PrepareCommit and PrepareAbort: markers failing
	e.markers.setFail(-1)
	for _, id := range []string{"pcommit", "pabort"} {
		pid, epoch = e.init(id)
		e.add(id, pid, epoch, tp("c", 0))
		if _, _, err := e.c.EndTxn(e.ctx, id, pid, epoch, id == "pcommit", id == "pabort"); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Second)
	ids := []string{"empty", "ongoing", "commit", "abort", "pcommit", "pabort"}
	before := map[string]txn.TxnInfo{}
	for _, id := range ids {
		before[id] = e.describe(id)
	}
	wantStates := map[string]string{"empty": "Empty", "ongoing": "Ongoing", "commit": "CompleteCommit",
		"abort": "CompleteAbort", "pcommit": "PrepareCommit", "pabort": "PrepareAbort"}
	for id, st := range wantStates {
		if before[id].State != st {
			t.Fatalf("%s: state %s before restart, want %s", id, before[id].State, st)
		}
	}
	e.restart()
	for _, id := range ids {
		if got := e.describe(id); !equalInfo(got, before[id]) {
			t.Errorf("%s after restart:\n got %+v\nwant %+v", id, got, before[id])
		}
	}
	if got := e.c.List(txn.ListFilter{}); len(got) != len(ids) {
		t.Errorf("List after restart: %d ids, want %d", len(got), len(ids))
	}
	// The id allocated before survives: the next InitProducerID bumps it.
	if pid, epoch := e.init("commit"); pid != before["commit"].ProducerID || epoch != before["commit"].ProducerEpoch+1 {
		t.Errorf("init after restart: %d/%d", pid, epoch)
	}
}

// A crash between Prepare and Complete: the next coordinator writes the
// markers again (with the stored, possibly bumped, epoch) and completes.
func TestResumePrepareAfterCrash(t *testing.T) {
	for _, tc := range []struct {
		commit, v2 bool
	}{{true, false}, {false, false}, {true, true}, {false, true}} {
		e := newEnv(t, nil)
		pid, epoch := e.init("t1")
		e.add("t1", pid, epoch, tp("a", 0), tp("b", 1))
		e.markers.setFail(-1)
		wantPID, wantEpoch, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, tc.commit, tc.v2)
		if err != nil {
			t.Fatal(err)
		}
		prepare, complete := "PrepareAbort", "CompleteAbort"
		if tc.commit {
			prepare, complete = "PrepareCommit", "CompleteCommit"
		}
		if st := e.describe("t1").State; st != prepare {
			t.Fatalf("%+v: state %s, want %s", tc, st, prepare)
		}
		// Crash: a new coordinator over the same partitions; markers work.
		old := e.c
		e.markers = &fakeMarkers{}
		e.c = txn.New(e.cfg, e.topic, e.ids, e.markers, nil)
		c := e.c
		t.Cleanup(c.Close)
		e.load()
		old.Close()
		ti := e.waitState("t1", complete)
		if ti.ProducerID != wantPID || ti.ProducerEpoch != wantEpoch || len(ti.Partitions) != 0 {
			t.Fatalf("%+v: after resume %+v, want %d/%d", tc, ti, wantPID, wantEpoch)
		}
		calls := e.markers.all()
		if len(calls) != 1 || calls[0].commit != tc.commit || calls[0].pid != pid || calls[0].epoch != wantEpoch ||
			!equalParts(calls[0].parts, tp("a", 0), tp("b", 1)) {
			t.Fatalf("%+v: markers on resume: %+v", tc, calls)
		}
	}
}

// Records written by Kafka, including tombstones, Dead and version 0
// values, replay; the last record of an id wins.
func TestReplayKafkaRecords(t *testing.T) {
	e := newEnvNoLoad(t, nil)
	v0 := value(1, 0, 0)
	v0.Version = 0
	e.topic.seed(t, parts, "v0", &v0)
	a := value(2, 3, 1, tp("x", 0))
	e.topic.seed(t, parts, "gone", &a)
	e.topic.seed(t, parts, "gone", nil)
	dead := value(3, 1, 6)
	e.topic.seed(t, parts, "dead", &dead)
	e.topic.seed(t, parts, "later", &a)
	b := value(2, 4, 5)
	e.topic.seed(t, parts, "later", &b)
	fence := value(4, 2, 7, tp("x", 1))
	e.topic.seed(t, parts, "fence", &fence)
	// Unreadable records are skipped: a key of an unknown version, a
	// truncated value.
	e.topic.seedRaw(t, parts, "x", []byte{0, 9, 0, 1, 'x'}, []byte{0, 1})
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = "bad"
	e.topic.seedRaw(t, parts, "bad", k.AppendTo(nil), []byte{0, 1, 0})
	e.load()
	if _, err := e.c.Describe("bad"); !errors.Is(err, txn.ErrTransactionalIDNotFound) {
		t.Errorf("bad: %v", err)
	}
	if ti := e.describe("v0"); ti.State != "Empty" || ti.ProducerID != 1 || ti.Timeout != timeout {
		t.Errorf("v0: %+v", ti)
	}
	for _, id := range []string{"gone", "dead"} {
		if _, err := e.c.Describe(id); !errors.Is(err, txn.ErrTransactionalIDNotFound) {
			t.Errorf("%s: %v", id, err)
		}
	}
	if ti := e.describe("later"); ti.State != "CompleteAbort" || ti.ProducerEpoch != 4 {
		t.Errorf("later: %+v", ti)
	}
	if ti := e.describe("fence"); ti.State != "Ongoing" {
		t.Errorf("a stored PrepareEpochFence: %+v", ti)
	}
}

func TestLoadInProgressAndClosed(t *testing.T) {
	e := newEnvNoLoad(t, nil)
	ctx := e.ctx
	checks := func(want error) {
		t.Helper()
		if _, _, err := e.c.InitProducerID(ctx, "t1", timeout, -1, -1); !errors.Is(err, want) {
			t.Errorf("InitProducerID: %v, want %v", err, want)
		}
		if err := e.c.AddPartitions(ctx, "t1", 1, 0, nil); !errors.Is(err, want) {
			t.Errorf("AddPartitions: %v, want %v", err, want)
		}
		if err := e.c.Verify("t1", 1, 0, tp("a", 0)); !errors.Is(err, want) {
			t.Errorf("Verify: %v, want %v", err, want)
		}
		if _, _, err := e.c.EndTxn(ctx, "t1", 1, 0, true, true); !errors.Is(err, want) {
			t.Errorf("EndTxn: %v, want %v", err, want)
		}
		if _, err := e.c.Describe("t1"); !errors.Is(err, want) {
			t.Errorf("Describe: %v, want %v", err, want)
		}
		if l := e.c.List(txn.ListFilter{}); l != nil {
			t.Errorf("List: %v", l)
		}
	}
	checks(txn.ErrCoordinatorLoadInProgress)
	e.load()
	e.init("t1")
	e.c.Close()
	checks(txn.ErrNotCoordinator)
	if err := e.c.EnsureTopic(); !errors.Is(err, txn.ErrNotCoordinator) {
		t.Errorf("EnsureTopic after Close: %v", err)
	}
}

// An existing topic keeps its partition count.
func TestExistingTopicPartitionCount(t *testing.T) {
	e := newEnvNoLoad(t, nil)
	v := value(1, 0, 0)
	e.topic.seed(t, 3, "seeded", &v)
	e.load()
	e.init("fresh")
	for _, r := range e.topic.records(t) {
		if r.partition != partitionOf(r.id, 3) {
			t.Errorf("%s in partition %d, want %d", r.id, r.partition, partitionOf(r.id, 3))
		}
	}
	if got := e.c.PartitionFor("fresh"); got != partitionOf("fresh", 3) {
		t.Errorf("PartitionFor: %d", got)
	}
}

// Ongoing transactions stay Ongoing after a restart; their timeout
// still applies.
func TestReplayOngoingThenTimeout(t *testing.T) {
	e := newEnv(t, func(c *txn.Config) { c.AbortCheckInterval = time.Second })
	pid, epoch, err := e.c.InitProducerID(e.ctx, "t1", 5*time.Second, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	e.add("t1", pid, epoch, tp("a", 0))
	e.restart()
	if st := e.describe("t1").State; st != "Ongoing" {
		t.Fatalf("state %s", st)
	}
	e.clock.Advance(6 * time.Second)
	ti := e.waitState("t1", "CompleteAbort")
	if ti.ProducerEpoch != epoch+1 {
		t.Fatalf("epoch %d, want %d", ti.ProducerEpoch, epoch+1)
	}
}

// EndTxn answers once the Complete record is appended, without waiting for
// its fsync; if a crash loses it, the next Load finishes the transaction
// again from the durable Prepare, with the same outcome.
func TestCompleteNeedNotBeDurable(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	e.add("t1", pid, epoch, tp("a", 0))
	p := e.topic.Partition(int(partitionOf("t1", parts)))
	block := make(chan struct{})
	e.markers.setBlock(block)
	type answer struct {
		pid   int64
		epoch int16
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		pid, epoch, err := e.c.EndTxn(context.Background(), "t1", pid, epoch, true, true)
		done <- answer{pid, epoch, err}
	}()
	waitFor(t, "the markers", func() bool { return len(e.markers.all()) == 1 })
	gate := make(chan struct{})
	defer close(gate)
	p.HoldDurability(gate) // the Complete record will not become durable
	e.markers.setBlock(nil)
	close(block)
	var a answer
	select {
	case a = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("EndTxn waited for the Complete record's fsync")
	}
	if a.err != nil || a.pid != pid || a.epoch != epoch+1 {
		t.Fatalf("EndTxn: %+v", a)
	}
	if st := e.describe("t1").State; st != "CompleteCommit" {
		t.Fatalf("state %s, want CompleteCommit", st)
	}

	// Crash: the Complete record never reached the disk.
	p.DropLast()
	p.HoldDurability(nil)
	old := e.c
	e.markers = &fakeMarkers{}
	e.c = txn.New(e.cfg, e.topic, e.ids, e.markers, nil)
	t.Cleanup(e.c.Close)
	e.load()
	ti := e.waitState("t1", "CompleteCommit")
	if ti.ProducerID != pid || ti.ProducerEpoch != epoch+1 {
		t.Fatalf("after the crash: %+v, want %d/%d", ti, pid, epoch+1)
	}
	if calls := e.markers.all(); len(calls) != 1 || !calls[0].commit || calls[0].epoch != epoch+1 {
		t.Fatalf("markers after the crash: %+v, want the commit again with epoch %d", calls, epoch+1)
	}
	go old.Close() // its Complete wait is parked on the gate until the test ends
}
