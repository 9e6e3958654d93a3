package txn_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/txn"
)

func TestAddPartitions(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	tests := []struct {
		name  string
		id    string
		pid   int64
		epoch int16
		err   error
	}{
		{"unknown id", "nope", pid, epoch, txn.ErrInvalidProducerIDMapping},
		{"other producer id", "t1", pid + 1, epoch, txn.ErrInvalidProducerIDMapping},
		{"other epoch", "t1", pid, epoch + 1, txn.ErrProducerFenced},
		{"older epoch", "t1", pid, epoch - 1, txn.ErrProducerFenced},
		{"empty id", "", pid, epoch, txn.ErrInvalidRequest},
	}
	for _, tc := range tests {
		if err := e.c.AddPartitions(e.ctx, tc.id, tc.pid, tc.epoch, []model.TopicPartition{tp("a", 0)}); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	start := e.clock.Now()
	e.add("t1", pid, epoch, tp("b", 1), tp("a", 0))
	e.clock.Advance(time.Second)
	n := len(e.topic.recordsOf(t, "t1"))
	e.add("t1", pid, epoch, tp("a", 0)) // already in: nothing written
	if got := len(e.topic.recordsOf(t, "t1")); got != n {
		t.Fatalf("re-adding wrote a record")
	}
	e.add("t1", pid, epoch, tp("a", 1))
	ti := e.describe("t1")
	if ti.State != "Ongoing" || !ti.Start.Equal(start) || !ti.LastUpdate.Equal(e.clock.Now()) ||
		!equalParts(ti.Partitions, tp("a", 0), tp("a", 1), tp("b", 1)) {
		t.Fatalf("describe: %+v", ti)
	}
	recs := e.topic.recordsOf(t, "t1")
	last := recs[len(recs)-1].value
	if last.State != 1 || len(last.Topics) != 2 || last.Topics[0].Topic != "a" || len(last.Topics[0].Partitions) != 2 ||
		last.StartTimestamp != start.UnixMilli() {
		t.Fatalf("record: %+v", last)
	}
}

func equalParts(got []model.TopicPartition, want ...model.TopicPartition) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func TestVerify(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	if err := e.c.Verify("t1", pid, epoch, tp("a", 0)); !errors.Is(err, txn.ErrInvalidTxnState) {
		t.Fatalf("verify on Empty: %v", err)
	}
	e.add("t1", pid, epoch, tp("a", 0))
	tests := []struct {
		name  string
		id    string
		pid   int64
		epoch int16
		tp    model.TopicPartition
		err   error
	}{
		{"in the transaction", "t1", pid, epoch, tp("a", 0), nil},
		{"not in it", "t1", pid, epoch, tp("a", 1), txn.ErrInvalidTxnState},
		{"unknown id", "x", pid, epoch, tp("a", 0), txn.ErrInvalidProducerIDMapping},
		{"other pid", "t1", pid + 1, epoch, tp("a", 0), txn.ErrInvalidProducerIDMapping},
		{"other epoch", "t1", pid, epoch + 1, tp("a", 0), txn.ErrProducerFenced},
	}
	for _, tc := range tests {
		if err := e.c.Verify(tc.id, tc.pid, tc.epoch, tc.tp); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	block := make(chan struct{})
	e.markers.setBlock(block)
	go e.c.EndTxn(e.ctx, "t1", pid, epoch, false, false)
	e.waitState("t1", "PrepareAbort")
	if err := e.c.Verify("t1", pid, epoch, tp("a", 0)); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Errorf("verify while PrepareAbort: %v", err)
	}
	close(block)
	e.waitState("t1", "CompleteAbort")
	if err := e.c.Verify("t1", pid, epoch, tp("a", 0)); !errors.Is(err, txn.ErrInvalidTxnState) {
		t.Errorf("verify after abort: %v", err)
	}
}

// The old flow (EndTxn v0-4): no epoch bump.
func TestEndTxnV1(t *testing.T) {
	for _, commit := range []bool{true, false} {
		e := newEnv(t, nil)
		pid, epoch := e.init("t1")
		e.add("t1", pid, epoch, tp("a", 0), tp("b", 2))
		gotPID, gotEpoch, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, commit, false)
		if err != nil || gotPID != pid || gotEpoch != epoch {
			t.Fatalf("EndTxn: %d/%d %v", gotPID, gotEpoch, err)
		}
		want := "CompleteAbort"
		wantStates := []kmsg.TransactionState{0, 1, 3, 5}
		if commit {
			want, wantStates = "CompleteCommit", []kmsg.TransactionState{0, 1, 2, 4}
		}
		ti := e.describe("t1") // durable before the answer: no waiting
		if ti.State != want || ti.ProducerEpoch != epoch || len(ti.Partitions) != 0 || ti.ClientVersion != 0 {
			t.Fatalf("after EndTxn: %+v", ti)
		}
		calls := e.markers.all()
		if len(calls) != 1 || calls[0].commit != commit || calls[0].pid != pid || calls[0].epoch != epoch ||
			!equalParts(calls[0].parts, tp("a", 0), tp("b", 2)) {
			t.Fatalf("markers: %+v", calls)
		}
		var states []kmsg.TransactionState
		recs := e.topic.recordsOf(t, "t1")
		for _, r := range recs {
			states = append(states, r.value.State)
		}
		if !equalStates(states, wantStates) {
			t.Fatalf("records: %v, want %v", states, wantStates)
		}
		if prep := recs[2].value; len(prep.Topics) != 2 || prep.ProducerEpoch != epoch {
			t.Fatalf("prepare record: %+v", prep)
		}
		if done := recs[3].value; len(done.Topics) != 0 || done.Topics == nil {
			t.Fatalf("complete record: %+v", done)
		}

		// Retries and mismatches.
		tests := []struct {
			name   string
			pid    int64
			epoch  int16
			commit bool
			err    error
		}{
			{"retry", pid, epoch, commit, nil},
			{"the other result", pid, epoch, !commit, txn.ErrInvalidTxnState},
			{"other epoch", pid, epoch + 1, commit, txn.ErrProducerFenced},
			{"older epoch", pid, epoch - 1, commit, txn.ErrProducerFenced},
			{"other pid", pid + 1, epoch, commit, txn.ErrInvalidProducerIDMapping},
		}
		for _, tc := range tests {
			if _, _, err := e.c.EndTxn(e.ctx, "t1", tc.pid, tc.epoch, tc.commit, false); !errors.Is(err, tc.err) {
				t.Errorf("commit=%v %s: %v, want %v", commit, tc.name, err, tc.err)
			}
		}
		if len(e.markers.all()) != 1 {
			t.Errorf("a retry wrote markers")
		}
	}
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	for _, commit := range []bool{true, false} {
		if _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, commit, false); !errors.Is(err, txn.ErrInvalidTxnState) {
			t.Errorf("EndTxn(commit=%v) on Empty: %v", commit, err)
		}
	}
	if _, _, err := e.c.EndTxn(e.ctx, "nope", pid, epoch, true, false); !errors.Is(err, txn.ErrInvalidProducerIDMapping) {
		t.Errorf("unknown id: %v", err)
	}
}

// While markers are being written: the same result answers
// CONCURRENT_TRANSACTIONS, the other INVALID_TXN_STATE, AddPartitions
// CONCURRENT_TRANSACTIONS.
func TestEndTxnWhilePreparing(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		for _, commit := range []bool{true, false} {
			e := newEnv(t, nil)
			pid, epoch := e.init("t1")
			e.add("t1", pid, epoch, tp("a", 0))
			block := make(chan struct{})
			e.markers.setBlock(block)
			done := make(chan error, 1)
			go func() { _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, commit, v2); done <- err }()
			want := "PrepareAbort"
			if commit {
				want = "PrepareCommit"
			}
			e.waitState("t1", want)
			if _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, commit, v2); !errors.Is(err, txn.ErrConcurrentTransactions) {
				t.Errorf("v2=%v commit=%v same result: %v", v2, commit, err)
			}
			if _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, !commit, v2); !errors.Is(err, txn.ErrInvalidTxnState) {
				t.Errorf("v2=%v commit=%v other result: %v", v2, commit, err)
			}
			addEpoch := epoch
			if v2 {
				addEpoch++ // the bumped epoch is current already
			}
			if err := e.c.AddPartitions(e.ctx, "t1", pid, addEpoch, []model.TopicPartition{tp("b", 0)}); !errors.Is(err, txn.ErrConcurrentTransactions) {
				t.Errorf("v2=%v AddPartitions: %v", v2, err)
			}
			close(block)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
}

// KIP-890 part 2: every EndTxn bumps the epoch; markers carry it; retries
// are recognised.
func TestEndTxnV2(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	e.add("t1", pid, epoch, tp("a", 0))
	gotPID, gotEpoch, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, true, true)
	if err != nil || gotPID != pid || gotEpoch != epoch+1 {
		t.Fatalf("commit: %d/%d %v, want %d/%d", gotPID, gotEpoch, err, pid, epoch+1)
	}
	calls := e.markers.all()
	if len(calls) != 1 || calls[0].epoch != epoch+1 || !calls[0].commit {
		t.Fatalf("markers: %+v", calls)
	}
	recs := e.topic.recordsOf(t, "t1")
	if prep := recs[2].value; prep.State != 2 || prep.ProducerEpoch != epoch+1 || prep.ClientTransactionVersion != 2 {
		t.Fatalf("prepare record: %+v", prep)
	}
	ti := e.describe("t1")
	if ti.State != "CompleteCommit" || ti.ProducerEpoch != epoch+1 || ti.ClientVersion != 2 {
		t.Fatalf("describe: %+v", ti)
	}
	cur := epoch + 1
	type step struct {
		name      string
		epoch     int16
		commit    bool
		err       error
		wantEpoch int16 // on success
		state     string
	}
	steps := []step{
		{"CompleteCommit: commit retry", cur - 1, true, nil, cur, "CompleteCommit"},
		{"CompleteCommit: abort retry", cur - 1, false, txn.ErrInvalidTxnState, 0, "CompleteCommit"},
		{"CompleteCommit: commit current", cur, true, txn.ErrInvalidTxnState, 0, "CompleteCommit"},
		{"CompleteCommit: older epoch", cur - 2, true, txn.ErrProducerFenced, 0, "CompleteCommit"},
		{"CompleteCommit: newer epoch", cur + 1, true, txn.ErrProducerFenced, 0, "CompleteCommit"},
		{"CompleteCommit: abort current bumps", cur, false, nil, cur + 1, "CompleteAbort"},
		{"CompleteAbort: abort retry", cur, false, nil, cur + 1, "CompleteAbort"},
		{"CompleteAbort: commit retry", cur, true, txn.ErrInvalidTxnState, 0, "CompleteAbort"},
		{"CompleteAbort: commit current", cur + 1, true, txn.ErrInvalidTxnState, 0, "CompleteAbort"},
		{"CompleteAbort: abort current bumps", cur + 1, false, nil, cur + 2, "CompleteAbort"},
	}
	for _, s := range steps {
		gotPID, gotEpoch, err := e.c.EndTxn(e.ctx, "t1", pid, s.epoch, s.commit, true)
		if !errors.Is(err, s.err) || (err == nil && (gotPID != pid || gotEpoch != s.wantEpoch)) {
			t.Errorf("%s: %d/%d %v, want %d/%d %v", s.name, gotPID, gotEpoch, err, pid, s.wantEpoch, s.err)
		}
		if st := e.describe("t1").State; st != s.state {
			t.Errorf("%s: state %s, want %s", s.name, st, s.state)
		}
	}
	if n := len(e.markers.all()); n != 1 {
		t.Errorf("aborts without partitions wrote markers (%d calls)", n)
	}
	// Empty (after InitProducerID): commit is invalid, a retry fenced,
	// abort bumps.
	pid, epoch = e.init("t1")
	if _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, true, true); !errors.Is(err, txn.ErrInvalidTxnState) {
		t.Errorf("Empty commit: %v", err)
	}
	if _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch-1, false, true); !errors.Is(err, txn.ErrProducerFenced) {
		t.Errorf("Empty abort retry: %v", err)
	}
	if _, got, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, false, true); err != nil || got != epoch+1 {
		t.Errorf("Empty abort: %d %v", got, err)
	}
	ti = e.describe("t1")
	if ti.State != "CompleteAbort" || ti.Start.IsZero() {
		t.Errorf("after aborting Empty: %+v", ti)
	}
	// Ongoing: only the current epoch.
	pid, epoch = ti.ProducerID, ti.ProducerEpoch
	e.add("t1", pid, epoch, tp("a", 0))
	if _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch-1, false, true); !errors.Is(err, txn.ErrProducerFenced) {
		t.Errorf("Ongoing with the previous epoch: %v", err)
	}
	if _, _, err := e.c.EndTxn(e.ctx, "t1", pid+1, epoch, false, true); !errors.Is(err, txn.ErrInvalidProducerIDMapping) {
		t.Errorf("Ongoing with another pid: %v", err)
	}
}

// A v2 EndTxn on epoch MaxInt16-1 moves to a new producer id with epoch 0;
// the markers carry the old id with epoch MaxInt16; a retry with the old
// id is recognised.
func TestEndTxnV2EpochOverflow(t *testing.T) {
	e := newEnvNoLoad(t, nil)
	v := value(7, math.MaxInt16-1, 1, tp("a", 0))
	e.topic.seed(t, parts, "t1", &v)
	e.load()
	pid, epoch, err := e.c.EndTxn(e.ctx, "t1", 7, math.MaxInt16-1, true, true)
	if err != nil || pid != 1000 || epoch != 0 {
		t.Fatalf("EndTxn: %d/%d %v, want 1000/0", pid, epoch, err)
	}
	calls := e.markers.all()
	if len(calls) != 1 || calls[0].pid != 7 || calls[0].epoch != math.MaxInt16 {
		t.Fatalf("markers: %+v", calls)
	}
	recs := e.topic.recordsOf(t, "t1")
	prep, done := recs[1].value, recs[2].value
	if prep.State != 2 || prep.ProducerID != 7 || prep.ProducerEpoch != math.MaxInt16 || prep.NextProducerID != 1000 {
		t.Fatalf("prepare record: %+v", prep)
	}
	if done.State != 4 || done.ProducerID != 1000 || done.ProducerEpoch != 0 || done.PreviousProducerID != 7 || done.NextProducerID != -1 {
		t.Fatalf("complete record: %+v", done)
	}
	pid, epoch, err = e.c.EndTxn(e.ctx, "t1", 7, math.MaxInt16-1, true, true)
	if err != nil || pid != 1000 || epoch != 0 {
		t.Fatalf("retry: %d/%d %v", pid, epoch, err)
	}
	if _, _, err := e.c.EndTxn(e.ctx, "t1", 7, math.MaxInt16-1, false, true); !errors.Is(err, txn.ErrInvalidTxnState) {
		t.Fatalf("retry with the other result: %v", err)
	}
	e.add("t1", 1000, 0, tp("b", 0))
	if _, got, err := e.c.EndTxn(e.ctx, "t1", 1000, 0, false, true); err != nil || got != 1 {
		t.Fatalf("next transaction: %d %v", got, err)
	}
}

// Markers that fail: EndTxn still succeeds once Prepare is durable, and a
// background retry completes the transaction.
func TestEndTxnMarkersFail(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	e.add("t1", pid, epoch, tp("a", 0))
	e.markers.setFail(2)
	gotPID, gotEpoch, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, true, true)
	if err != nil || gotPID != pid || gotEpoch != epoch+1 {
		t.Fatalf("EndTxn: %d/%d %v", gotPID, gotEpoch, err)
	}
	if st := e.describe("t1").State; st != "PrepareCommit" {
		t.Fatalf("state %s, want PrepareCommit", st)
	}
	if _, _, err := e.c.EndTxn(e.ctx, "t1", pid, epoch, true, true); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("retry while the markers fail: %v", err)
	}
	e.advanceUntil("t1", "CompleteCommit") // the second attempt fails too; the third succeeds
	calls := e.markers.all()
	if len(calls) != 3 {
		t.Fatalf("%d marker calls, want 3", len(calls))
	}
	for _, c := range calls {
		if c.pid != pid || c.epoch != epoch+1 || !c.commit {
			t.Fatalf("marker call %+v", c)
		}
	}
}

// A caller that gives up (its context ends) still gets success: the
// outcome is decided once Prepare is durable.
func TestEndTxnContextEnds(t *testing.T) {
	e := newEnv(t, nil)
	pid, epoch := e.init("t1")
	e.add("t1", pid, epoch, tp("a", 0))
	block := make(chan struct{})
	e.markers.setBlock(block)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := e.c.EndTxn(ctx, "t1", pid, epoch, false, false); err != nil {
		t.Fatal(err)
	}
	if st := e.describe("t1").State; st != "PrepareAbort" {
		t.Fatalf("state %s", st)
	}
	close(block)
	e.waitState("t1", "CompleteAbort")
}
