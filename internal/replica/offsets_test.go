package replica

import (
	"testing"
)

// appendAcked appends a batch of n records at ts and waits for it, so the
// high watermark passes it.
func appendAcked(t *testing.T, p *Partition, n int, ts int64) {
	t.Helper()
	_, wait, err := p.Append(testBatch(-1, -1, -1, n, ts))
	if err == nil {
		err = wait()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestListOffset(t *testing.T) {
	e := newEnv(t, nil)
	appendAcked(t, e.p, 2, 1000) // offsets 0-1
	appendAcked(t, e.p, 3, 3000) // 2-4
	appendAcked(t, e.p, 1, 2000) // 5
	// Appended, not acknowledged: above the high watermark.
	_, ack, err := e.p.Append(testBatch(-1, -1, -1, 1, 9000))
	if err != nil {
		t.Fatal(err)
	}
	if hw := e.p.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d, want 6", hw)
	}
	for _, tc := range []struct {
		timestamp      int64
		offset, wantTS int64
	}{
		{LatestTimestamp, 6, -1},
		{EarliestTimestamp, 0, -1},
		{EarliestLocalTimestamp, 0, -1},
		{LatestTieredTimestamp, -1, -1},
		{-7, -1, -1},
		{MaxTimestamp, -1, -1}, // the largest timestamp, 9000, is not visible yet (as in Kafka)
		{0, 0, 1000},
		{1500, 2, 3000},
		{3000, 2, 3000},
		{3001, -1, -1}, // only the invisible record is newer
	} {
		offset, ts, err := e.p.ListOffset(tc.timestamp, false)
		if err != nil || offset != tc.offset || ts != tc.wantTS {
			t.Errorf("ListOffset(%d) = %d, %d, %v; want %d, %d", tc.timestamp, offset, ts, err, tc.offset, tc.wantTS)
		}
	}
	if offset, _, _ := e.p.ListOffset(LatestTimestamp, true); offset != e.p.LastStableOffset() {
		t.Errorf("read_committed latest %d, want the last stable offset %d", offset, e.p.LastStableOffset())
	}
	if err := ack(); err != nil {
		t.Fatal(err)
	}
	if offset, ts, err := e.p.ListOffset(MaxTimestamp, false); offset != 6 || ts != 9000 || err != nil {
		t.Errorf("max timestamp once visible: %d, %d, %v; want 6, 9000", offset, ts, err)
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	e := newEnv(t, nil)
	e.p.SetRole(true, 2)
	appendAcked(t, e.p, 2, 1000) // epoch 2: 0-1
	e.p.SetRole(true, 4)
	appendAcked(t, e.p, 3, 1000) // epoch 4: 2-4
	for _, tc := range []struct {
		epoch, wantEpoch int32
		wantEnd          int64
	}{
		{4, 4, 5},   // the current epoch ends at the log end
		{3, 2, 2},   // the largest epoch at most 3 is 2, which ended where 4 began
		{2, 2, 2},   // likewise
		{1, 1, 0},   // older than the first epoch: where the first began
		{5, -1, -1}, // newer than the current
		{-1, -1, -1},
	} {
		epoch, end := e.p.OffsetForLeaderEpoch(tc.epoch)
		if epoch != tc.wantEpoch || end != tc.wantEnd {
			t.Errorf("OffsetForLeaderEpoch(%d) = %d, %d; want %d, %d", tc.epoch, epoch, end, tc.wantEpoch, tc.wantEnd)
		}
	}
}

func TestLeaderThrottled(t *testing.T) {
	e := newEnv(t, nil)
	set := func(list string, isr ...int32) {
		e.cfg.LeaderThrottledReplicas = list
		if err := e.p.setConfig(e.cfg); err != nil {
			t.Fatal(err)
		}
		e.p.SetReplicaSet(ReplicaSet{Self: 1, Replicas: []int32{1, 2}, ISR: isr, Leader: 1, LeaderEpoch: 1})
	}
	for _, tc := range []struct {
		list      string
		isr       []int32
		throttled bool
	}{
		{"", []int32{1}, false},
		{"0:1", []int32{1}, true},     // this leader's replica, follower 2 out of sync
		{"0:1", []int32{1, 2}, false}, // in sync: never throttled
		{"0:2", []int32{1}, false},    // names the follower's replica, not this one
		{"1:1", []int32{1}, false},    // another partition
		{"*", []int32{1}, true},
	} {
		set(tc.list, tc.isr...)
		if got := e.p.LeaderThrottled(2); got != tc.throttled {
			t.Errorf("list %q, ISR %v: throttled %v, want %v", tc.list, tc.isr, got, tc.throttled)
		}
	}
}

func TestThrottleListed(t *testing.T) {
	if !ThrottleListed("0:1,3:2", 3, 2) || ThrottleListed("0:1,3:2", 3, 1) || !ThrottleListed("0:1, 3:2", 3, 2) ||
		!ThrottleListed(" * ", 7, 7) || ThrottleListed("", 0, 0) {
		t.Error("ThrottleListed names the wrong replicas")
	}
}
