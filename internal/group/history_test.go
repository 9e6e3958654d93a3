package group_test

import (
	"testing"

	"github.com/strandlog/strand/internal/group"
)

// handoffs returns the hand-offs of partition p of "t", oldest first.
func handoffs(h group.History, p int32) []group.Handoff {
	var out []group.Handoff
	for _, ho := range h.Handoffs {
		if ho.Topic == "t" && ho.Partition == p {
			out = append(out, ho)
		}
	}
	return out
}

func TestHistoryRecordsHandoffs(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 2, 2) // c0 owns 0, c1 owns 1
	h, _ := e.c.History("g")
	if len(h.Handoffs) != 2 {
		t.Fatalf("%+v", h.Handoffs)
	}
	first := handoffs(h, 1)[0]
	if first.From != (group.Owner{}) || first.To.MemberID != ids[1] || first.To.ClientID != "c1" || first.Committed != -1 || first.Generation != gen {
		t.Fatalf("initial assignment: %+v", first)
	}

	// c1 reads partition 1 (its fetches come from another port of its
	// host); c0's client reading it does not count for c1.
	e.c.Fetched("10.0.0.1:6000", "c1", "t", 1, 0)
	e.c.Fetched("10.0.0.1:6000", "c1", "t", 1, 40)
	e.c.Fetched("10.0.0.1:6001", "c0", "t", 1, 99)
	e.c.Fetched("10.0.0.9:6000", "c1", "t", 1, 77) // another host
	recv(t, e.c.Commit(commit("g", gen, ids[1], at(1, 30))))

	// c1 leaves; c0 takes partition 1 over in the next generation.
	<-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: ids[1]}}})
	req := joinReq("g", "c0")
	req.MemberID = ids[0]
	r := recv(t, e.c.Join(req))
	e.sync("g", r.Generation, ids[:1], []group.Assignment{{MemberID: ids[0], Data: assignment("t", 0, 1)}})

	h, _ = e.c.History("g")
	ho := handoffs(h, 1)
	if len(ho) != 2 || len(handoffs(h, 0)) != 1 {
		t.Fatalf("%+v", h.Handoffs)
	}
	move := ho[1]
	if move.From.MemberID != ids[1] || move.To.MemberID != ids[0] || move.Committed != 30 ||
		move.LastFetched != 40 || move.FirstFetched != -1 || move.Generation != r.Generation {
		t.Fatalf("hand-off: %+v", move)
	}
	// c0 starts reading partition 1: the first fetch is recorded, later
	// ones are not.
	e.c.Fetched("10.0.0.1:6001", "c0", "t", 1, 30)
	e.c.Fetched("10.0.0.1:6001", "c0", "t", 1, 35)
	h, _ = e.c.History("g")
	if got := handoffs(h, 1)[1].FirstFetched; got != 30 {
		t.Fatalf("first fetched %d", got)
	}
	kinds := map[group.EventKind]int{}
	for _, ev := range h.Events {
		kinds[ev.Kind]++
	}
	if kinds[group.EventMemberJoined] != 2 || kinds[group.EventMemberLeft] != 1 || kinds[group.EventStable] != 2 ||
		kinds[group.EventGeneration] != 2 || kinds[group.EventRebalance] != 2 {
		t.Fatalf("%v", kinds)
	}
}

// With cooperative rebalancing a partition is revoked in one generation
// and assigned in the next: one hand-off, from the old owner to the new.
func TestHistoryCooperativeHandoff(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 1, 2) // c0 owns 0 and 1
	e.c.Fetched("10.0.0.1:7000", "c0", "t", 1, 12)
	// c1 joins: generation 2 revokes partition 1 from c0, giving it to no
	// one; generation 3 gives it to c1.
	id1, ch1 := e.firstJoin(joinReq("g", "c1"))
	req := joinReq("g", "c0")
	req.MemberID = ids[0]
	r0 := recv(t, e.c.Join(req))
	recv(t, ch1)
	members := []string{ids[0], id1}
	e.sync("g", r0.Generation, members, []group.Assignment{{MemberID: ids[0], Data: assignment("t", 0)}, {MemberID: id1, Data: []byte{}}})
	ch0 := e.c.Join(req)
	req1 := joinReq("g", "c1")
	req1.MemberID = id1
	r1 := recv(t, e.c.Join(req1))
	recv(t, ch0)
	e.sync("g", r1.Generation, members, []group.Assignment{{MemberID: ids[0], Data: assignment("t", 0)}, {MemberID: id1, Data: assignment("t", 1)}})
	if r1.Generation != gen+2 {
		t.Fatalf("generation %d", r1.Generation)
	}
	h, _ := e.c.History("g")
	ho := handoffs(h, 1)
	if len(ho) != 2 || ho[1].From.MemberID != ids[0] || ho[1].To.MemberID != id1 || ho[1].LastFetched != 12 || ho[1].Generation != gen+2 {
		t.Fatalf("%+v", ho)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	e := newEnv(t, func(c *group.Config) { c.HistoryEvents = 5; c.HistoryHandoffs = 3 })
	ids, _ := e.stableGroup("g", 1, 10)
	for range 5 {
		req := joinReq("g", "c0")
		req.MemberID = ids[0]
		r := recv(t, e.c.Join(req))
		e.sync("g", r.Generation, ids, []group.Assignment{{MemberID: ids[0], Data: assignment("t", 0)}})
	}
	h, _ := e.c.History("g")
	if len(h.Events) != 5 || len(h.Handoffs) != 3 || h.Events[4].Kind != group.EventStable {
		t.Fatalf("%d events, %d hand-offs: %+v", len(h.Events), len(h.Handoffs), h.Events)
	}
	if _, ok := e.c.History("nope"); ok {
		t.Fatal("history of an unknown group")
	}
}
