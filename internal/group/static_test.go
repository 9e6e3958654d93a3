package group_test

import (
	"testing"

	"github.com/strandlog/strand/internal/group"
)

func staticReq(g, client, instance string) group.JoinRequest {
	req := joinReq(g, client)
	req.InstanceID = &instance
	return req
}

// stableStatic forms a stable group of static members i0, i1, ...
func (e *env) stableStatic(g string, n int) ([]string, int32) {
	e.t.Helper()
	var chs []<-chan group.JoinResult
	for i := range n {
		// Static members skip MEMBER_ID_REQUIRED, even at v4+.
		chs = append(chs, e.c.Join(staticReq(g, clientName(i), "i"+clientName(i))))
	}
	e.clock.Advance(2 * delay)
	var ids []string
	var gen int32
	for _, ch := range chs {
		r := recv(e.t, ch)
		if r.Err != nil {
			e.t.Fatal(r.Err)
		}
		ids, gen = append(ids, r.MemberID), r.Generation
	}
	var as []group.Assignment
	for i, id := range ids {
		as = append(as, group.Assignment{MemberID: id, Data: assignment("t", int32(i))})
	}
	e.sync(g, gen, ids, as)
	return ids, gen
}

func TestStaticMemberRestartsWithoutRebalance(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableStatic("g", 2)
	if ids[1][:3] != "ic1" {
		t.Fatalf("static member id %s should start with its instance id", ids[1])
	}
	// The follower's instance restarts: a join with no member id.
	r := recv(t, e.c.Join(staticReq("g", "c1", "ic1")))
	if r.Err != nil || r.MemberID == ids[1] || r.Generation != gen || r.Leader != ids[0] || len(r.Members) != 0 || r.SkipAssignment {
		t.Fatalf("%+v", r)
	}
	if got := e.state("g"); got != "Stable" {
		t.Fatal(got)
	}
	inst := "ic1"
	if err := e.c.Heartbeat(group.HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[1], InstanceID: &inst}); err != group.ErrFencedInstanceID {
		t.Fatalf("old member id: %v", err)
	}
	if err := e.c.Heartbeat(group.HeartbeatRequest{Group: "g", Generation: gen, MemberID: r.MemberID, InstanceID: &inst}); err != nil {
		t.Fatalf("new member id: %v", err)
	}
	// It keeps its assignment.
	if s := recv(t, e.c.Sync(group.SyncRequest{Group: "g", Generation: gen, MemberID: r.MemberID, InstanceID: &inst})); string(s.Assignment) != string(assignment("t", 1)) {
		t.Fatalf("%+v", s)
	}
	h, _ := e.c.History("g")
	if !hasEvent(h, group.EventMemberReplaced, r.MemberID) {
		t.Fatalf("%+v", h.Events)
	}
}

func TestStaticLeaderRestart(t *testing.T) {
	for _, skip := range []bool{true, false} {
		e := newEnv(t, nil)
		ids, gen := e.stableStatic("g", 2)
		req := staticReq("g", "c0", "ic0")
		req.SupportsSkipAssignment = skip
		r := recv(t, e.c.Join(req))
		if r.Err != nil || r.Generation != gen || r.SkipAssignment != skip {
			t.Fatalf("skip %v: %+v", skip, r)
		}
		if skip && (r.Leader != r.MemberID || len(r.Members) != 2) {
			t.Fatalf("v9: the leader learns it leads: %+v", r)
		}
		if !skip && (r.Leader != ids[0] || len(r.Members) != 0) {
			t.Fatalf("before v9: the old leader id is answered: %+v", r)
		}
	}
}

func TestStaticMemberChangingProtocolRebalances(t *testing.T) {
	e := newEnv(t, nil)
	e.stableStatic("g", 2)
	req := staticReq("g", "c1", "ic1")
	req.Protocols = consumerProtocols("roundrobin", "range")
	ch := e.c.Join(req)
	// range is still the only common protocol: no change, no rebalance.
	if r := recv(t, ch); r.Err != nil {
		t.Fatal(r)
	}
	req = staticReq("g", "c0", "ic0")
	req.Protocols = consumerProtocols("roundrobin", "range")
	// Now both prefer roundrobin: the protocol changes, so a rebalance.
	ch = e.c.Join(req)
	parked(t, ch)
	if got := e.state("g"); got != "PreparingRebalance" {
		t.Fatal(got)
	}
}

func TestStaticMemberFencedWhileParked(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableStatic("g", 2)
	inst := "ic1"
	// The old instance rejoins (metadata changed): parked in a rebalance.
	old := staticReq("g", "c1", inst)
	old.MemberID = ids[1]
	old.Protocols = []group.Protocol{{Name: "range", Metadata: subscription("t", "u")}}
	oldCh := e.c.Join(old)
	parked(t, oldCh)
	// A second process with the same instance id takes over.
	newCh := e.c.Join(staticReq("g", "c1", inst))
	if r := recv(t, oldCh); r.Err != group.ErrFencedInstanceID {
		t.Fatalf("old: %+v", r)
	}
	lead := joinReq("g", "c0")
	lead.MemberID, lead.InstanceID = ids[0], ptr("ic0")
	leadCh := e.c.Join(lead)
	r := recv(t, newCh)
	if r.Err != nil || r.Generation != gen+1 {
		t.Fatalf("new: %+v", r)
	}
	recv(t, leadCh)
	// Commits from the fenced id are refused.
	errs := recv(t, e.c.Commit(group.CommitRequest{Group: "g", Generation: gen + 1, MemberID: ids[1], InstanceID: &inst,
		RetentionTime: -1, Offsets: []group.CommitOffset{{Topic: "t", Partition: 1, Offset: 1, LeaderEpoch: -1}}}))
	if errs[0] != group.ErrFencedInstanceID {
		t.Fatalf("%v", errs)
	}
}

func TestLeaveByInstanceID(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableStatic("g", 2)
	inst := "ic1"
	res := <-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{InstanceID: &inst}}})
	if res.Err != nil || res.Members[0] != nil {
		t.Fatalf("%+v", res)
	}
	if err := e.heartbeat("g", gen, ids[0]); err != group.ErrRebalanceInProgress {
		t.Fatal(err)
	}
	// A wrong member id for an instance is fenced.
	inst0 := "ic0"
	res = <-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: "other", InstanceID: &inst0}}})
	if res.Members[0] != group.ErrFencedInstanceID {
		t.Fatalf("%+v", res)
	}
}

func ptr(s string) *string { return &s }
