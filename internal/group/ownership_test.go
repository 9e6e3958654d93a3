package group_test

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/internal/group"
)

// TestCommitNotOwnedClassic: a member's commit of another member's
// partition is reported, with the owner, and taken; with strict ownership
// it is refused (ILLEGAL_GENERATION) while the member's own partition in
// the same request is taken.
func TestCommitNotOwnedClassic(t *testing.T) {
	for _, strict := range []bool{false, true} {
		l := &ledgerRecorder{}
		e := newEnv(t, func(c *group.Config) { c.Ledger, c.StrictCommitOwnership = l, strict })
		ids, gen := e.stableGroup("g", 2, 2) // c0 owns 0, c1 owns 1
		errs := recv(t, e.c.Commit(commit("g", gen, ids[1], at(0, 50), at(1, 60))))
		if errs[1] != nil {
			t.Fatalf("strict %v: c1's commit of its own partition: %v", strict, errs[1])
		}
		if strict != errors.Is(errs[0], group.ErrIllegalGeneration) || !strict && errs[0] != nil {
			t.Fatalf("strict %v: c1's commit of c0's partition: %v", strict, errs[0])
		}
		want := map[bool]int64{false: 50, true: -1}[strict]
		if got := e.committed("g", 0); got != want {
			t.Fatalf("strict %v: partition 0 committed at %d, want %d", strict, got, want)
		}
		nc := l.notOwned()
		if len(nc) != 1 || nc[0].Partition != 0 || nc[0].Offset != 50 || nc[0].Committer.MemberID != ids[1] ||
			nc[0].Owner.MemberID != ids[0] || nc[0].Generation != gen {
			t.Fatalf("strict %v: reported %+v", strict, nc)
		}
		if h, _ := e.c.History("g"); !hasEvent(h, group.EventCommitNotOwned, ids[1]) {
			t.Fatalf("strict %v: no %s event: %+v", strict, group.EventCommitNotOwned, h.Events)
		}
		// A commit outside group management is not checked.
		recv(t, e.c.Commit(commit("g", -1, "", at(0, 70))))
		if len(l.notOwned()) != 1 {
			t.Fatalf("strict %v: a commit without a member was reported", strict)
		}
	}
}

// TestCommitNotOwnedConsumerGroup: the same in a consumer group: a member
// commits what it holds or is revoking; another partition is reported,
// and refused with STALE_MEMBER_EPOCH when ownership is strict.
func TestCommitNotOwnedConsumerGroup(t *testing.T) {
	topics := &fakeTopics{}
	l := &ledgerRecorder{}
	e := &cgEnv{env: newEnv(t, func(c *group.Config) { c.Topics, c.Ledger, c.StrictCommitOwnership = topics, l, true }), topics: topics}
	e.topics.add("t", 2)
	a := e.joinMember("a", "t")
	b := e.joinMember("b", "t")
	for range 3 {
		e.beat(a)
		e.beat(b)
	}
	var bHolds int32
	for _, ps := range b.owned {
		bHolds = ps[0]
	}
	errs := recv(t, e.c.Commit(group.CommitRequest{Group: "g", MemberID: a.id, Generation: a.epoch, Version: 9, RetentionTime: -1,
		GroupMustExist: true, Offsets: []group.CommitOffset{{Topic: "t", Partition: bHolds, Offset: 5, LeaderEpoch: -1}}}))
	if !errors.Is(errs[0], group.ErrStaleMemberEpoch) {
		t.Fatalf("a's commit of b's partition: %v, want STALE_MEMBER_EPOCH", errs[0])
	}
	if nc := l.notOwned(); len(nc) != 1 || nc[0].Partition != bHolds || nc[0].Owner.MemberID != b.id || nc[0].Committer.MemberID != a.id {
		t.Fatalf("reported %+v", nc)
	}
}
