package group_test

import (
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/group"
)

func TestJoinMemberIDRequiredAndInitialDelay(t *testing.T) {
	e := newEnv(t, nil)
	req := joinReq("g", "c0")
	r := recv(t, e.c.Join(req))
	if r.Err != group.ErrMemberIDRequired || r.Generation != -1 || len(r.MemberID) < len("c0-")+36 || r.MemberID[:3] != "c0-" {
		t.Fatalf("first join: %+v", r)
	}
	if got := e.state("g"); got != "Empty" {
		t.Fatalf("state after MEMBER_ID_REQUIRED: %s", got)
	}
	req.MemberID = r.MemberID
	ch := e.c.Join(req)
	parked(t, ch)
	if got := e.state("g"); got != "PreparingRebalance" {
		t.Fatalf("state: %s", got)
	}
	e.clock.Advance(delay - time.Millisecond)
	parked(t, ch)
	e.clock.Advance(time.Millisecond)
	r = recv(t, ch)
	if r.Err != nil || r.Generation != 1 || r.Leader != req.MemberID || r.MemberID != req.MemberID ||
		*r.ProtocolType != "consumer" || *r.ProtocolName != "range" || len(r.Members) != 1 || r.SkipAssignment {
		t.Fatalf("join: %+v", r)
	}
	if got := e.state("g"); got != "CompletingRebalance" {
		t.Fatalf("state: %s", got)
	}
}

func TestJoinBeforeV4JoinsAtOnce(t *testing.T) {
	e := newEnv(t, nil)
	req := joinReq("g", "c0")
	req.RequireKnownMemberID = false
	ch := e.c.Join(req)
	e.clock.Advance(delay)
	if r := recv(t, ch); r.Err != nil || r.Generation != 1 || r.MemberID == "" {
		t.Fatalf("%+v", r)
	}
}

func TestInitialDelayExtendsWhileMembersJoin(t *testing.T) {
	e := newEnv(t, nil)
	_, ch0 := e.firstJoin(joinReq("g", "c0"))
	e.clock.Advance(2 * time.Second)
	_, ch1 := e.firstJoin(joinReq("g", "c1"))
	e.clock.Advance(time.Second) // the first delay ends; a member came: wait again
	parked(t, ch0)
	e.clock.Advance(delay)
	r0, r1 := recv(t, ch0), recv(t, ch1)
	if r0.Err != nil || r1.Err != nil || r0.Generation != 1 || len(r0.Members) != 2 || len(r1.Members) != 0 {
		t.Fatalf("%+v %+v", r0, r1)
	}
}

func TestSyncWaitsForLeaderAndDurability(t *testing.T) {
	e := newEnv(t, nil)
	id0, ch0 := e.firstJoin(joinReq("g", "c0"))
	id1, ch1 := e.firstJoin(joinReq("g", "c1"))
	e.clock.Advance(2 * delay) // extended once: several joined
	gen := recv(t, ch0).Generation
	recv(t, ch1)

	follower := e.c.Sync(group.SyncRequest{Group: "g", Generation: gen, MemberID: id1})
	parked(t, follower)
	// A heartbeat while awaiting the assignment is fine.
	if err := e.heartbeat("g", gen, id1); err != nil {
		t.Fatal(err)
	}
	e.c.EnsureTopic()
	part := e.topic.Partition(int(e.c.PartitionFor("g")))
	gate := make(chan struct{})
	part.HoldDurability(gate)
	leader := e.c.Sync(group.SyncRequest{Group: "g", Generation: gen, MemberID: id0,
		Assignments: []group.Assignment{{MemberID: id0, Data: assignment("t", 0)}}})
	parked(t, leader)
	parked(t, follower)
	close(gate)
	if r := recv(t, leader); r.Err != nil || string(r.Assignment) != string(assignment("t", 0)) || *r.ProtocolName != "range" {
		t.Fatalf("leader: %+v", r)
	}
	// The leader left the follower out: an empty assignment.
	if r := recv(t, follower); r.Err != nil || len(r.Assignment) != 0 || r.Assignment == nil {
		t.Fatalf("follower: %+v", r)
	}
	if got := e.state("g"); got != "Stable" {
		t.Fatal(got)
	}
	// A stable group answers a sync at once.
	if r := recv(t, e.c.Sync(group.SyncRequest{Group: "g", Generation: gen, MemberID: id0})); r.Err != nil {
		t.Fatal(r.Err)
	}
}

func TestSyncErrors(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 1, 1)
	rt, rn := "consumer", "roundrobin"
	for _, tc := range []struct {
		req  group.SyncRequest
		want error
	}{
		{group.SyncRequest{Group: "nope", Generation: gen, MemberID: ids[0]}, group.ErrUnknownMemberID},
		{group.SyncRequest{Group: "", Generation: gen, MemberID: ids[0]}, group.ErrInvalidGroupID},
		{group.SyncRequest{Group: "g", Generation: gen, MemberID: "x"}, group.ErrUnknownMemberID},
		{group.SyncRequest{Group: "g", Generation: gen + 1, MemberID: ids[0]}, group.ErrIllegalGeneration},
		{group.SyncRequest{Group: "g", Generation: gen, MemberID: ids[0], ProtocolName: &rn}, group.ErrInconsistentGroupProtocol},
		{group.SyncRequest{Group: "g", Generation: gen, MemberID: ids[0], ProtocolType: &rt}, nil},
	} {
		if r := recv(t, e.c.Sync(tc.req)); !errors.Is(r.Err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.req, r.Err, tc.want)
		}
	}
}

func TestRebalanceCompletesWhenAllRejoin(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 2, 4)
	// The leader rejoining triggers a rebalance even with nothing new.
	req0 := joinReq("g", "c0")
	req0.MemberID = ids[0]
	ch0 := e.c.Join(req0)
	parked(t, ch0)
	if err := e.heartbeat("g", gen, ids[1]); err != group.ErrRebalanceInProgress {
		t.Fatalf("heartbeat: %v", err)
	}
	req1 := joinReq("g", "c1")
	req1.MemberID = ids[1]
	r1 := recv(t, e.c.Join(req1))
	r0 := recv(t, ch0)
	if r0.Generation != gen+1 || r1.Generation != gen+1 || len(r0.Members) != 2 || r0.Leader != ids[0] {
		t.Fatalf("%+v %+v", r0, r1)
	}
	// Commits wait for the assignment (REBALANCE_IN_PROGRESS).
	errs := recv(t, e.c.Commit(group.CommitRequest{Group: "g", Generation: gen + 1, MemberID: ids[1],
		RetentionTime: -1, Offsets: []group.CommitOffset{{Topic: "t", Partition: 1, Offset: 5, LeaderEpoch: -1}}}))
	if errs[0] != group.ErrRebalanceInProgress {
		t.Fatalf("commit while completing: %v", errs)
	}
}

func TestFollowerRejoinWithNothingNewKeepsGeneration(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 2, 2)
	req := joinReq("g", "c1")
	req.MemberID = ids[1]
	r := recv(t, e.c.Join(req))
	if r.Err != nil || r.Generation != gen || r.Leader != ids[0] || len(r.Members) != 0 || e.state("g") != "Stable" {
		t.Fatalf("%+v in %s", r, e.state("g"))
	}
	// Changed metadata rebalances.
	req.Protocols = []group.Protocol{{Name: "range", Metadata: subscription("t", "u")}}
	ch := e.c.Join(req)
	parked(t, ch)
	if e.state("g") != "PreparingRebalance" {
		t.Fatal(e.state("g"))
	}
}

func TestMembersThatDoNotRejoinAreRemoved(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 3, 3)
	req := joinReq("g", "c0")
	req.MemberID = ids[0]
	ch := e.c.Join(req)
	// Members keep their sessions by heartbeating until they rejoin; c1
	// rejoins, c2 does nothing at all.
	e.clock.Advance(session / 2)
	e.heartbeat("g", gen, ids[1])
	req1 := joinReq("g", "c1")
	req1.MemberID = ids[1]
	ch1 := e.c.Join(req1)
	e.clock.Advance(session/2 + time.Millisecond) // c2's session ends
	r := recv(t, ch)
	recv(t, ch1)
	if r.Generation != gen+1 || len(r.Members) != 2 {
		t.Fatalf("%+v", r)
	}
	if err := e.heartbeat("g", gen, ids[2]); err != group.ErrUnknownMemberID {
		t.Fatalf("removed member: %v", err)
	}
	h, _ := e.c.History("g")
	if !hasEvent(h, group.EventMemberExpired, ids[2]) {
		t.Fatalf("no expiry event: %+v", h.Events)
	}
}

func TestRebalanceTimeoutRemovesLateMembers(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 2, 2)
	req := joinReq("g", "c0")
	req.MemberID = ids[0]
	ch := e.c.Join(req)
	// c1 keeps heartbeating but never rejoins.
	for range 5 {
		e.clock.Advance(rebalance / 6)
		e.heartbeat("g", gen, ids[1])
	}
	parked(t, ch)
	e.clock.Advance(rebalance / 6)
	r := recv(t, ch)
	if r.Generation != gen+1 || len(r.Members) != 1 || r.Members[0].MemberID != ids[0] {
		t.Fatalf("%+v", r)
	}
	h, _ := e.c.History("g")
	if !hasEvent(h, group.EventMemberRemoved, ids[1]) {
		t.Fatalf("no removal event: %+v", h.Events)
	}
}

func TestSessionTimeoutStartsRebalance(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 2, 2)
	e.clock.Advance(session - time.Second)
	if err := e.heartbeat("g", gen, ids[0]); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	if err := e.heartbeat("g", gen, ids[0]); err != group.ErrRebalanceInProgress {
		t.Fatalf("after the other's session ended: %v", err)
	}
	req := joinReq("g", "c0")
	req.MemberID = ids[0]
	if r := recv(t, e.c.Join(req)); r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("%+v", r)
	}
}

func TestPendingSyncExpires(t *testing.T) {
	e := newEnv(t, nil)
	id0, ch0 := e.firstJoin(joinReq("g", "c0"))
	id1, ch1 := e.firstJoin(joinReq("g", "c1"))
	e.clock.Advance(2 * delay) // extended once: several joined
	gen := recv(t, ch0).Generation
	recv(t, ch1)
	leader := e.c.Sync(group.SyncRequest{Group: "g", Generation: gen, MemberID: id0})
	recv(t, leader)
	// c1 heartbeats but never syncs.
	for range 4 {
		e.clock.Advance(rebalance / 4)
		e.heartbeat("g", gen, id1)
		e.heartbeat("g", gen, id0)
	}
	if err := e.heartbeat("g", gen, id1); err != group.ErrUnknownMemberID {
		t.Fatalf("unsynced member: %v", err)
	}
	if got := e.state("g"); got != "PreparingRebalance" {
		t.Fatal(got)
	}
}

func TestHeartbeatErrors(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 1, 1)
	inst := "i"
	for _, tc := range []struct {
		req  group.HeartbeatRequest
		want error
	}{
		{group.HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[0]}, nil},
		{group.HeartbeatRequest{Group: "g", Generation: gen - 1, MemberID: ids[0]}, group.ErrIllegalGeneration},
		{group.HeartbeatRequest{Group: "g", Generation: gen, MemberID: "nope"}, group.ErrUnknownMemberID},
		{group.HeartbeatRequest{Group: "other", Generation: gen, MemberID: ids[0]}, group.ErrUnknownMemberID},
		{group.HeartbeatRequest{Group: "", Generation: gen, MemberID: ids[0]}, group.ErrInvalidGroupID},
		{group.HeartbeatRequest{Group: "g", Generation: gen, MemberID: ids[0], InstanceID: &inst}, group.ErrUnknownMemberID},
	} {
		if err := e.c.Heartbeat(tc.req); err != tc.want {
			t.Errorf("%+v: %v, want %v", tc.req, err, tc.want)
		}
	}
}

func TestJoinErrors(t *testing.T) {
	e := newEnv(t, func(c *group.Config) { c.MinSessionTimeout = time.Second; c.MaxSessionTimeout = time.Minute })
	e.stableGroup("g", 1, 1)
	for _, tc := range []struct {
		edit func(*group.JoinRequest)
		want error
	}{
		{func(r *group.JoinRequest) { r.Group = "" }, group.ErrInvalidGroupID},
		{func(r *group.JoinRequest) { r.SessionTimeout = time.Second - 1 }, group.ErrInvalidSessionTimeout},
		{func(r *group.JoinRequest) { r.SessionTimeout = time.Minute + 1 }, group.ErrInvalidSessionTimeout},
		{func(r *group.JoinRequest) { r.ProtocolType = "connect" }, group.ErrInconsistentGroupProtocol},
		{func(r *group.JoinRequest) { r.Protocols = consumerProtocols("roundrobin") }, group.ErrInconsistentGroupProtocol},
		{func(r *group.JoinRequest) { r.Group, r.Protocols = "new", nil }, group.ErrInconsistentGroupProtocol},
		{func(r *group.JoinRequest) { r.Group, r.ProtocolType = "new", "" }, group.ErrInconsistentGroupProtocol},
		{func(r *group.JoinRequest) { r.MemberID = "unknown" }, group.ErrUnknownMemberID},
		{func(r *group.JoinRequest) { r.Group, r.MemberID = "nope", "unknown" }, group.ErrUnknownMemberID},
	} {
		req := joinReq("g", "c9")
		tc.edit(&req)
		if r := recv(t, e.c.Join(req)); r.Err != tc.want {
			t.Errorf("%+v: %v, want %v", req, r.Err, tc.want)
		}
	}
}

func TestGroupMaxSize(t *testing.T) {
	e := newEnv(t, func(c *group.Config) { c.MaxSize = 1 })
	e.stableGroup("g", 1, 1)
	if r := recv(t, e.c.Join(joinReq("g", "c1"))); r.Err != group.ErrGroupMaxSizeReached {
		t.Fatalf("%+v", r)
	}
}

func TestProtocolSelection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		prefs [][]string
		want  string
	}{
		{"majority", [][]string{{"range", "roundrobin"}, {"roundrobin", "range"}, {"roundrobin", "range"}}, "roundrobin"},
		{"only common one", [][]string{{"range", "cooperative-sticky"}, {"cooperative-sticky"}}, "cooperative-sticky"},
		{"tie goes to the leader", [][]string{{"range", "roundrobin"}, {"roundrobin", "range"}}, "range"},
		{"tie goes to the leader (2)", [][]string{{"roundrobin", "range"}, {"range", "roundrobin"}}, "roundrobin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			var chs []<-chan group.JoinResult
			for i, p := range tc.prefs {
				req := joinReq("g", clientName(i))
				req.Protocols = consumerProtocols(p...)
				_, ch := e.firstJoin(req)
				chs = append(chs, ch)
			}
			e.clock.Advance(2 * delay) // extended once: several joined
			for _, ch := range chs {
				if r := recv(t, ch); r.Err != nil || *r.ProtocolName != tc.want {
					t.Fatalf("%+v, want %s", r, tc.want)
				}
			}
		})
	}
}

func TestLeaveGroup(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 3, 3)
	inst := "nobody"
	res := <-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{
		{MemberID: ids[1], Reason: "shutting down"}, {MemberID: "unknown"}, {InstanceID: &inst},
	}})
	if res.Err != nil || res.Members[0] != nil || res.Members[1] != group.ErrUnknownMemberID || res.Members[2] != group.ErrUnknownMemberID {
		t.Fatalf("%+v", res)
	}
	if err := e.heartbeat("g", gen, ids[0]); err != group.ErrRebalanceInProgress {
		t.Fatalf("after a leave: %v", err)
	}
	if res := <-e.c.Leave(group.LeaveRequest{Group: "nope", Members: []group.LeavingMember{{MemberID: ids[0]}}}); res.Err != group.ErrUnknownMemberID {
		t.Fatalf("unknown group: %+v", res)
	}
	// The last members leaving end the rebalance with an empty group.
	res = <-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: ids[0]}, {MemberID: ids[2]}}})
	if res.Members[0] != nil || res.Members[1] != nil {
		t.Fatalf("%+v", res)
	}
	if got := e.state("g"); got != "Empty" {
		t.Fatal(got)
	}
	h, _ := e.c.History("g")
	if !hasEvent(h, group.EventMemberLeft, ids[1]) || h.Events[len(h.Events)-1].Kind != group.EventEmpty {
		t.Fatalf("%+v", h.Events)
	}
}

func TestLeaveOfParkedMemberAnswersItsJoin(t *testing.T) {
	e := newEnv(t, nil)
	ids, _ := e.stableGroup("g", 2, 2)
	req := joinReq("g", "c0")
	req.MemberID = ids[0]
	ch := e.c.Join(req)
	if res := <-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: ids[0]}}}); res.Members[0] != nil {
		t.Fatal(res)
	}
	if r := recv(t, ch); r.Err != group.ErrUnknownMemberID {
		t.Fatalf("%+v", r)
	}
}

func TestPendingMemberExpires(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 1, 1)
	r := recv(t, e.c.Join(joinReq("g", "c1")))
	if r.Err != group.ErrMemberIDRequired {
		t.Fatal(r)
	}
	// The pending member never comes back; the group stays as it is.
	e.clock.Advance(session / 2)
	e.heartbeat("g", gen, ids[0])
	e.clock.Advance(session / 2)
	if err := e.heartbeat("g", gen, ids[0]); err != nil || e.state("g") != "Stable" {
		t.Fatalf("%v %s", err, e.state("g"))
	}
	req := joinReq("g", "c1")
	req.MemberID = r.MemberID
	if r := recv(t, e.c.Join(req)); r.Err != group.ErrUnknownMemberID {
		t.Fatalf("expired pending member: %+v", r)
	}
}

func hasEvent(h group.History, kind group.EventKind, member string) bool {
	for _, ev := range h.Events {
		if ev.Kind == kind && ev.Member.MemberID == member {
			return true
		}
	}
	return false
}

func TestCloseAnswersParkedRequests(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 2, 2)
	req := joinReq("g", "c0")
	req.MemberID = ids[0]
	ch := e.c.Join(req)
	parked(t, ch)
	e.c.Close()
	if r := recv(t, ch); r.Err != group.ErrNotCoordinator {
		t.Fatalf("%+v", r)
	}
	if r := recv(t, e.c.Join(joinReq("new", "c9"))); r.Err != group.ErrNotCoordinator {
		t.Fatalf("join after close: %+v", r)
	}
	if err := e.heartbeat("g", gen, ids[1]); err != group.ErrNotCoordinator {
		t.Fatalf("heartbeat after close: %v", err)
	}
	if errs := recv(t, e.c.Commit(commit("g", gen, ids[1], at(0, 1)))); errs[0] != group.ErrNotCoordinator {
		t.Fatalf("commit after close: %v", errs)
	}
	// Timers do nothing once closed.
	e.clock.Advance(time.Hour)
}
