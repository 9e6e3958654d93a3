package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareTracker: the share workload's count finds the end of the
// backlog and of the run, counts a record received twice once, names what
// never arrived, and rejects a record it did not expect.
func TestShareTracker(t *testing.T) {
	w := benchWorkload{RecordSize: 100, Partitions: 2}
	tr := newShareTracker(w, []int64{2, 1}, []int64{1, 1})
	rec := func(p int32, offset, seq int64) *kgo.Record {
		v := make([]byte, w.RecordSize)
		fillPayload(v, p, seq, monoNow())
		return &kgo.Record{Partition: p, Offset: offset, Value: v}
	}
	closed := func(c chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	backlog := []*kgo.Record{rec(0, 0, 0), rec(0, 1, 1), rec(1, 0, 0)}
	for i, r := range backlog {
		if err := tr.check(r); err != nil {
			t.Fatal(err)
		}
		if !tr.accepted(r, monoNow()) {
			t.Errorf("record %d: not its first receipt", i)
		}
		if closed(tr.backlogDone) != (i == len(backlog)-1) {
			t.Errorf("after %d records the backlog is done: %v", i+1, closed(tr.backlogDone))
		}
	}
	// The live records follow the backlog: offset 2 of partition 0 is its
	// first live record, sequence 0.
	live := rec(0, 2, 0)
	if err := tr.check(live); err != nil {
		t.Fatal(err)
	}
	tr.accepted(live, monoNow())
	for range 2 {
		if tr.accepted(backlog[0], monoNow()) {
			t.Error("a record received again counts as new")
		}
	}
	if n := tr.redelivered.Load(); n != 1 {
		t.Errorf("%d records received more than once, want 1", n)
	}
	if m := tr.missing(); m != "partition 1: 1 records from offset 1" || closed(tr.allDone) {
		t.Errorf("missing %q, all done %v", m, closed(tr.allDone))
	}
	tr.accepted(rec(1, 1, 0), monoNow())
	if !closed(tr.allDone) || tr.missing() != "" {
		t.Errorf("all done %v, missing %q", closed(tr.allDone), tr.missing())
	}
	if err := tr.check(rec(1, 2, 1)); err == nil || !strings.Contains(err.Error(), "beyond") {
		t.Errorf("an offset past the records produced: %v", err)
	}
	if err := tr.check(rec(0, 2, 1)); err == nil || !strings.Contains(err.Error(), "where 0 was due") {
		t.Errorf("the wrong record at an offset: %v", err)
	}
}
