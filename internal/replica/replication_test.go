package replica

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// replicate runs follower fetch rounds against the leader until the
// follower has the leader's whole log, and once more so that the leader
// learns it. It returns the rounds taken.
func replicate(t *testing.T, leader, follower *Partition, node int32) int {
	t.Helper()
	for round := 1; round <= 100; round++ {
		end := follower.Log().EndOffset()
		hw, err := leader.FollowerFetched(node, end)
		if err != nil {
			t.Fatalf("follower fetch at %d: %v", end, err)
		}
		follower.SetLeaderHighWatermark(hw)
		if end == leader.Log().EndOffset() {
			return round
		}
		sec, err := leader.ReadToLogEnd(end, 300)
		if err != nil {
			t.Fatal(err)
		}
		data, err := sec.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendReplicated(data, follower.LeaderEpoch()); err != nil {
			t.Fatalf("follower append at %d: %v", end, err)
		}
	}
	t.Fatal("the follower never caught up")
	return 0
}

func logBytes(t *testing.T, p *Partition) []byte {
	t.Helper()
	sec, err := p.ReadToLogEnd(p.Log().StartOffset(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sec.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A follower copies its leader byte for byte; the high watermark waits for
// it; it can take over with the producers' state; and the old leader
// truncates what only it had.
func TestReplicationBetweenTwoReplicas(t *testing.T) {
	a, b := newEnv(t, nil), newEnv(t, nil)
	set := func(self, leader, epoch int32, isr ...int32) ReplicaSet {
		return ReplicaSet{Self: self, Replicas: []int32{1, 2}, ISR: isr, Leader: leader, LeaderEpoch: epoch}
	}
	a.p.SetReplicaSet(set(1, 1, 1, 1, 2))
	a.p.SetRole(true, 1)
	b.p.SetReplicaSet(set(2, 1, 1, 1, 2))
	b.p.SetRole(false, 1)

	const pid = 7
	for seq := int32(0); seq < 30; seq += 3 {
		_, wait, err := a.p.Append(testBatch(pid, 0, seq, 3, 1000))
		if err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	}
	if hw := a.p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before the follower fetched", hw)
	}
	ctx := context.Background()
	if err := a.p.WaitReplicated(ctx, 30, 20*time.Millisecond); !errors.Is(err, ErrReplicationTimeout) {
		t.Fatalf("waiting with no follower fetch: %v", err)
	}
	replicate(t, a.p, b.p, 2)
	if a.p.HighWatermark() != 30 || b.p.HighWatermark() != 30 {
		t.Fatalf("high watermarks: leader %d, follower %d", a.p.HighWatermark(), b.p.HighWatermark())
	}
	if err := a.p.WaitReplicated(ctx, 30, time.Second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(logBytes(t, a.p), logBytes(t, b.p)) {
		t.Fatal("the follower's log differs from the leader's")
	}

	// The leader writes one batch nobody copies, then loses the lead.
	if _, _, err := a.p.Append(testBatch(pid, 0, 30, 2, 1000)); err != nil {
		t.Fatal(err)
	}
	b.p.SetReplicaSet(set(2, 2, 2, 2))
	b.p.SetRole(true, 2)
	a.p.SetRole(false, 2)
	a.p.SetReplicaSet(set(1, 2, 2, 2))
	// The producer retries the lost batch on the new leader: it follows
	// the sequences the follower replayed, neither a gap nor a duplicate.
	res, _, err := b.p.Append(testBatch(pid, 0, 30, 2, 1000))
	if err != nil || res.Duplicate || res.BaseOffset != 30 {
		t.Fatalf("retry on the new leader: %+v, %v", res, err)
	}
	if res, _, err := b.p.Append(testBatch(pid, 0, 27, 3, 1000)); err != nil || !res.Duplicate || res.BaseOffset != 27 {
		t.Fatalf("a retry of a batch the old leader wrote: %+v, %v", res, err)
	}
	// The old leader truncates to where the new leader's epoch 1 ended
	// (OffsetForLeaderEpoch), then follows.
	_, end := b.p.Log().EpochEndOffset(1)
	if err := a.p.TruncateTo(end); err != nil {
		t.Fatal(err)
	}
	b.p.SetReplicaSet(set(2, 2, 2, 2, 1))
	replicate(t, b.p, a.p, 1)
	if !bytes.Equal(logBytes(t, a.p), logBytes(t, b.p)) || a.p.Log().EndOffset() != 32 {
		t.Fatalf("after truncation the logs differ (old leader ends at %d)", a.p.Log().EndOffset())
	}
}

// The leader proposes in-sync set changes: a follower that has not caught
// up for the lag time leaves, one that reaches the high watermark joins;
// below min.insync.replicas acks=all writes are refused.
func TestInSyncChanges(t *testing.T) {
	a, b := newEnv(t, nil), newEnv(t, nil)
	a.cfg.MinInSyncReplicas = 2
	a.p.setConfig(a.cfg)
	a.p.SetReplicaSet(ReplicaSet{Self: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1})
	a.p.SetRole(true, 1)
	b.p.SetRole(false, 1)
	if _, _, err := a.p.Append(testBatch(-1, -1, -1, 5, 1000)); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := a.p.InSyncChange(time.Second); ok {
		t.Fatal("a change before the lag time")
	}
	a.clock.Advance(2 * time.Second)
	rs, isr, ok := a.p.InSyncChange(time.Second)
	if !ok || len(isr) != 1 || isr[0] != 1 || rs.PartitionEpoch != 0 {
		t.Fatalf("lagging follower: %v %v %+v", ok, isr, rs)
	}
	a.p.SetReplicaSet(ReplicaSet{Self: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1})
	if err := a.p.CheckEnoughReplicas(); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("one in-sync replica of min 2: %v", err)
	}
	if a.p.HighWatermark() != 0 {
		t.Fatal("the high watermark moved below min.insync.replicas")
	}
	replicate(t, a.p, b.p, 2)
	if _, isr, ok := a.p.InSyncChange(time.Second); !ok || len(isr) != 2 {
		t.Fatalf("caught-up follower: %v %v", ok, isr)
	}
	a.p.SetReplicaSet(ReplicaSet{Self: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2})
	replicate(t, a.p, b.p, 2)
	if err := a.p.CheckEnoughReplicas(); err != nil || a.p.HighWatermark() != 5 {
		t.Fatalf("back in sync: %v, high watermark %d", err, a.p.HighWatermark())
	}
}

// A follower out of the in-sync set that trails the others by one fetch
// joins all the same: it qualifies at its own fetch, when it has reached
// the high watermark, and holds it back from then until the change
// applies. Judged only when the change is proposed, it would never be
// seen at the high watermark while writes go on.
func TestInSyncJoinOfATrailingFollower(t *testing.T) {
	a, b, c := newEnv(t, nil), newEnv(t, nil), newEnv(t, nil)
	set := ReplicaSet{Self: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 4}
	a.p.SetReplicaSet(set)
	a.p.SetRole(true, 1)
	b.p.SetRole(false, 1)
	c.p.SetRole(false, 1)
	copyAll := func(to *Partition, node int32) {
		t.Helper()
		end := to.Log().EndOffset()
		if _, err := a.p.FollowerFetched(node, end); err != nil {
			t.Fatal(err)
		}
		if end == a.p.Log().EndOffset() {
			return
		}
		sec, err := a.p.ReadToLogEnd(end, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		data, err := sec.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := to.AppendReplicated(data, to.LeaderEpoch()); err != nil {
			t.Fatal(err)
		}
	}
	write := func() {
		t.Helper()
		if _, _, err := a.p.Append(testBatch(-1, -1, -1, 2, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		write()
		copyAll(b.p, 2)
		copyAll(b.p, 2)
	}
	// Broker 3 starts behind the high watermark and copies all there is.
	copyAll(c.p, 3)
	if _, isr, ok := a.p.InSyncChange(time.Hour); ok {
		t.Fatalf("a follower behind the high watermark joins: %v", isr)
	}
	// The next batch reaches broker 2 first. Broker 3 reports the end it
	// copied while that is still the high watermark, and takes the batch;
	// broker 2 then reports it before broker 3 does.
	write()
	copyAll(b.p, 2)
	at := c.p.Log().EndOffset()
	copyAll(c.p, 3)
	copyAll(b.p, 2)
	if hw := a.p.HighWatermark(); hw != at {
		t.Fatalf("the high watermark %d passed what a joining follower has (%d)", hw, at)
	}
	rs, isr, ok := a.p.InSyncChange(time.Hour)
	if !ok || len(isr) != 3 || rs.PartitionEpoch != 4 {
		t.Fatalf("the trailing follower does not join: %v %v %+v", ok, isr, rs)
	}
	// Another record's run of the metadata keeps the join pending; a
	// refused proposal drops it and the high watermark moves on.
	a.p.SetReplicaSet(set)
	if _, isr, ok := a.p.InSyncChange(time.Hour); !ok || len(isr) != 3 {
		t.Fatalf("the join was forgotten at an unchanged partition epoch: %v %v", ok, isr)
	}
	a.p.InSyncChangeFailed()
	if _, _, ok := a.p.InSyncChange(time.Hour); ok {
		t.Fatal("a refused join is proposed again before the follower fetches")
	}
	if hw := a.p.HighWatermark(); hw != a.p.Log().EndOffset() {
		t.Fatalf("high watermark %d after the join was dropped, log end %d", hw, a.p.Log().EndOffset())
	}
}

// A throttle lets a second's worth through, then holds until the rate has
// paid for what moved; at no rate it never holds.
func TestThrottle(t *testing.T) {
	rate := int64(1000)
	th := NewThrottle(func() int64 { return rate })
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	if th.Exceeded() {
		t.Fatal("exceeded before anything moved")
	}
	th.Record(3000) // one fetch may overshoot
	if !th.Exceeded() || th.Wait() != 2*time.Second {
		t.Fatalf("after 3000 bytes at 1000/s: exceeded %v, wait %v", th.Exceeded(), th.Wait())
	}
	now = now.Add(1500 * time.Millisecond)
	if w := th.Wait(); w != 500*time.Millisecond {
		t.Fatalf("1.5 s later: wait %v", w)
	}
	now = now.Add(time.Second)
	if th.Exceeded() {
		t.Fatal("still exceeded once the rate paid for it")
	}
	rate = 0 // no throttle
	th.Record(1 << 30)
	if th.Exceeded() || th.Wait() != 0 {
		t.Fatal("a throttle without a rate held")
	}
	var none *Throttle
	if none.Exceeded() {
		t.Fatal("a nil throttle held")
	}
}

// An append that comes after the broker stopped leading is refused, even
// though the caller checked leadership before: it would land after the
// follower's truncation, at the old epoch, and the replicas would differ.
func TestAppendRefusedOnceNotLeading(t *testing.T) {
	a := newEnv(t, nil)
	a.p.SetReplicaSet(ReplicaSet{Self: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 5})
	a.p.SetRole(true, 5)
	if _, _, err := a.p.Append(testBatch(7, 0, 0, 1, 1000)); err != nil {
		t.Fatal(err)
	}
	a.p.SetReplicaSet(ReplicaSet{Self: 1, Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 6})
	a.p.SetRole(false, 6)
	end := a.p.Log().EndOffset()
	if _, _, err := a.p.Append(testBatch(7, 0, 1, 1, 1000)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append on a follower: %v, want ErrNotLeader", err)
	}
	if got := a.p.Log().EndOffset(); got != end {
		t.Fatalf("the follower's log grew from %d to %d", end, got)
	}
}

// TestSingleReplicaMinInSync: a partition of one replica refuses acks=all
// writes while its min.insync.replicas is above 1, as Kafka does, and
// takes them once the config comes down to 1.
func TestSingleReplicaMinInSync(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.p.CheckEnoughReplicas(); err != nil {
		t.Fatalf("min.insync.replicas 1: %v", err)
	}
	e.cfg.MinInSyncReplicas = 2
	if err := e.p.setConfig(e.cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.p.CheckEnoughReplicas(); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("one replica, min.insync.replicas 2: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	e.cfg.MinInSyncReplicas = 1
	if err := e.p.setConfig(e.cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.p.CheckEnoughReplicas(); err != nil {
		t.Fatalf("back to min.insync.replicas 1: %v", err)
	}
}

// A follower whose log ends before its leader's starts restarts it at the
// leader's start: nothing of its old log remains (producers, open
// transactions, snapshots), the high watermark is the new start, and it
// copies the leader from there, byte for byte. A leader refuses.
func TestFollowerStartAt(t *testing.T) {
	a, b := newEnv(t, nil), newEnv(t, nil)
	set := func(self int32, isr ...int32) ReplicaSet {
		return ReplicaSet{Self: self, Replicas: []int32{1, 2}, ISR: isr, Leader: 1, LeaderEpoch: 1}
	}
	a.p.SetReplicaSet(set(1, 1, 2))
	a.p.SetRole(true, 1)
	b.p.SetReplicaSet(set(2, 1, 2))
	b.p.SetRole(false, 1)
	now := a.clock.Now().UnixMilli() // retention keeps it

	// Producer 7 idempotent, producer 9 with a transaction left open.
	for seq := int32(0); seq < 12; seq += 3 {
		if _, _, err := a.p.Append(testBatch(7, 0, seq, 3, now)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := a.p.Append(txnBatch(9, 0, 0, 2, now)); err != nil {
		t.Fatal(err)
	}
	replicate(t, a.p, b.p, 2)
	if err := b.p.SnapshotProducers(); err != nil {
		t.Fatal(err)
	}
	old := b.p.Log().EndOffset()
	if len(b.p.Producers()) != 2 || len(b.snapshots()) == 0 || b.p.LastStableOffset() != 12 {
		t.Fatalf("before: producers %+v, snapshots %v, last stable offset %d", b.p.Producers(), b.snapshots(), b.p.LastStableOffset())
	}

	// The follower is away; the leader goes on alone and deletes past
	// the follower's end.
	a.p.SetReplicaSet(set(1, 1))
	for seq := int32(0); seq < 10; seq += 2 {
		_, wait, err := a.p.Append(testBatch(11, 0, seq, 2, now))
		if err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	}
	start, err := a.p.DeleteRecords(old + 4)
	if err != nil || start != old+4 {
		t.Fatalf("DeleteRecords: %d, %v", start, err)
	}

	if err := a.p.StartAt(a.p.Log().EndOffset()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("StartAt on the leader: %v, want ErrNotLeader", err)
	}
	if err := b.p.StartAt(old - 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("StartAt below the follower's end: %v", err)
	}
	if err := b.p.StartAt(start); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		l := b.p.Log()
		if l.StartOffset() != start || l.EndOffset() != start || b.p.HighWatermark() != start ||
			b.p.LastStableOffset() != start || b.p.applied.Load() != start {
			t.Fatalf("%s: start %d end %d hw %d lso %d applied %d, want all %d", what, l.StartOffset(), l.EndOffset(),
				b.p.HighWatermark(), b.p.LastStableOffset(), b.p.applied.Load(), start)
		}
		if ps := b.p.Producers(); len(ps) != 0 {
			t.Fatalf("%s: producers %+v of the old log remain", what, ps)
		}
		if len(b.p.AbortedTransactions(0, start+100)) != 0 || len(l.Epochs()) != 0 {
			t.Fatalf("%s: aborted %v, epochs %v", what, b.p.AbortedTransactions(0, start+100), l.Epochs())
		}
	}
	check("after StartAt")
	if snaps := b.snapshots(); len(snaps) != 0 {
		t.Fatalf("snapshots %v of the old log remain", snaps)
	}
	b.restart(true)
	b.p.SetReplicaSet(set(2, 1))
	b.p.SetRole(false, 1)
	check("reopened")

	replicate(t, a.p, b.p, 2)
	if !bytes.Equal(logBytes(t, a.p), logBytes(t, b.p)) || b.p.Log().StartOffset() != a.p.Log().StartOffset() {
		t.Fatal("the follower's log differs from the leader's")
	}
	if ps := b.p.Producers(); len(ps) != 1 || ps[0].ProducerID != 11 || ps[0].LastSequence != 9 {
		t.Fatalf("producers after catching up: %+v", ps)
	}
}

// A producer snapshot of the old log at the very offset the log restarts
// at is not taken for the new log's state after a reopen.
func TestStartAtLogEndDropsSnapshot(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(7, 0, 0, 3)
	if err := e.p.SnapshotProducers(); err != nil {
		t.Fatal(err)
	}
	end := e.p.Log().EndOffset()
	if snaps := e.snapshots(); !slices.Equal(snaps, []int64{end}) {
		t.Fatalf("snapshots %v, want [%d]", snaps, end)
	}
	e.p.SetRole(false, 1)
	if err := e.p.StartAt(end); err != nil {
		t.Fatal(err)
	}
	e.restart(true)
	if ps := e.p.Producers(); len(ps) != 0 || e.p.Log().StartOffset() != end {
		t.Fatalf("after reopening: start %d, producers %+v", e.p.Log().StartOffset(), ps)
	}
}

// TestStaleFetchAnswerRefused: an answer fetched from the leader of an
// older epoch, arriving once this replica follows a newer one, is not
// written. It may have been in flight while the replica truncated to the
// new leader's log, which may hold other batches at those offsets.
func TestStaleFetchAnswerRefused(t *testing.T) {
	a, b := newEnv(t, nil), newEnv(t, nil)
	a.p.SetReplicaSet(ReplicaSet{Self: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1})
	a.p.SetRole(true, 1)
	b.p.SetReplicaSet(ReplicaSet{Self: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1})
	b.p.SetRole(false, 1)
	if _, _, err := a.p.Append(testBatch(7, 0, 0, 3, 1000)); err != nil {
		t.Fatal(err)
	}
	sec, err := a.p.ReadToLogEnd(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	data, err := sec.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// The answer was fetched at epoch 1; meanwhile a third replica leads
	// at epoch 2.
	b.p.SetRole(false, 2)
	if _, err := b.p.AppendReplicated(data, 1); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("a stale answer: %v", err)
	}
	if end := b.p.Log().EndOffset(); end != 0 {
		t.Fatalf("the stale answer was written: end %d", end)
	}
	if _, err := b.p.AppendReplicated(data, 2); err != nil {
		t.Fatalf("an answer of the current epoch: %v", err)
	}
}
