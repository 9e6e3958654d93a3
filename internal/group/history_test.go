package group_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/group"
)

// fetched reports a fetch of partition p of "t" at offset by client id on
// addr, whose answer carried nothing.
func fetched(c *group.Coordinator, addr, client string, p int32, offset int64) {
	c.Fetched(addr, client, time.Time{}, time.Time{}, []group.FetchReport{{Topic: "t", Partition: p, Offset: offset, SentEnd: offset}})
}

// takeOver has member ids[1] leave and ids[0] (client id client) take
// partitions 0 and 1 in the next generation, which it returns.
func (e *env) takeOver(ids []string, client string) int32 {
	e.t.Helper()
	<-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: ids[1]}}})
	req := joinReq("g", client)
	req.MemberID = ids[0]
	r := recv(e.t, e.c.Join(req))
	e.sync("g", r.Generation, ids[:1], []group.Assignment{{MemberID: ids[0], Data: assignment("t", 0, 1)}})
	return r.Generation
}

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
	fetched(e.c, "10.0.0.1:6000", "c1", 1, 0)
	fetched(e.c, "10.0.0.1:6000", "c1", 1, 40)
	fetched(e.c, "10.0.0.1:6001", "c0", 1, 99)
	fetched(e.c, "10.0.0.9:6000", "c1", 1, 77) // another host
	recv(t, e.c.Commit(commit("g", gen, ids[1], at(1, 30))))

	// c1 leaves; c0 takes partition 1 over in the next generation.
	gen1 := e.takeOver(ids, "c0")

	h, _ = e.c.History("g")
	ho := handoffs(h, 1)
	if len(ho) != 2 || len(handoffs(h, 0)) != 1 {
		t.Fatalf("%+v", h.Handoffs)
	}
	move := ho[1]
	if move.From.MemberID != ids[1] || move.To.MemberID != ids[0] || move.Committed != 30 ||
		move.LastFetched != 40 || move.FirstFetched != -1 || move.Generation != gen1 {
		t.Fatalf("hand-off: %+v", move)
	}
	// c0 starts reading partition 1: the first fetch is recorded, later
	// ones are not.
	fetched(e.c, "10.0.0.1:6001", "c0", 1, 30)
	fetched(e.c, "10.0.0.1:6001", "c0", 1, 35)
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
	fetched(e.c, "10.0.0.1:7000", "c0", 1, 12)
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

// TestHandoffFigures: a hand-off's figures from the previous owner's
// fetches and commit and the new owner's first fetch: what the new owner
// is sent again (duplicate risk), what it started past (skipped) or
// below the commit (rewound), and how long the partition went unread.
func TestHandoffFigures(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		start                  int64 // the new owner's first fetch offset
		risk, skipped, rewound int64
	}{
		{name: "from the commit", start: 60, risk: 20},
		{name: "seek forward", start: 90, skipped: 30},
		{name: "rewind", start: 40, risk: 20, rewound: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ids, gen := e.stableGroup("g", 2, 2) // c0 owns 0, c1 owns 1
			// c1 is sent records up to 80 and commits 60.
			e.c.Fetched("10.0.0.1:6000", "c1", time.Time{}, time.Time{}, []group.FetchReport{{Topic: "t", Partition: 1, Offset: 0, SentEnd: 50}})
			e.clock.Advance(100 * time.Millisecond)
			lastFetch := e.clock.Now()
			e.c.Fetched("10.0.0.1:6000", "c1", time.Time{}, time.Time{}, []group.FetchReport{{Topic: "t", Partition: 1, Offset: 50, SentEnd: 80}})
			recv(t, e.c.Commit(commit("g", gen, ids[1], at(1, 60))))
			e.takeOver(ids, "c0")
			e.clock.Advance(300 * time.Millisecond)
			e.c.Fetched("10.0.0.1:6001", "c0", time.Time{}, time.Time{}, []group.FetchReport{{Topic: "t", Partition: 1, Offset: tc.start, SentEnd: tc.start + 5}})

			h, _ := e.c.History("g")
			ho := handoffs(h, 1)[1]
			if ho.Reason != string(group.EventMemberLeft) || ho.LastFetched != 50 || ho.LastSent != 80 || ho.Committed != 60 ||
				ho.FirstFetched != tc.start || !ho.LastFetchedAt.Equal(lastFetch) {
				t.Fatalf("hand-off %+v", ho)
			}
			if ho.DuplicateRisk() != tc.risk || ho.Skipped() != tc.skipped || ho.Rewound() != tc.rewound {
				t.Fatalf("duplicate risk %d, skipped %d, rewound %d; want %d, %d, %d",
					ho.DuplicateRisk(), ho.Skipped(), ho.Rewound(), tc.risk, tc.skipped, tc.rewound)
			}
			if got := ho.Unowned(); got != 300*time.Millisecond {
				t.Fatalf("unowned %v, want 300ms", got)
			}
		})
	}
}

// TestHandoffFiguresReportedElsewhere: in a cluster the partition's
// leader reports its fetches late, in spans, and a span's order is not
// known: the previous owner's last reads count even when they come with
// (and after) the new owner's first fetch.
func TestHandoffFiguresReportedElsewhere(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 2, 2) // c0 owns 0, c1 owns 1
	start := e.clock.Now()
	e.clock.Advance(100 * time.Millisecond)
	lastFetch := e.clock.Now()
	recv(t, e.c.Commit(commit("g", gen, ids[1], at(1, 60))))
	e.takeOver(ids, "c0")
	e.clock.Advance(300 * time.Millisecond)
	firstArrived := e.clock.Now()
	e.c.FetchedElsewhere([]group.Span{
		{ClientAddr: "10.0.0.1:6001", ClientID: "c0", First: group.FetchReport{Topic: "t", Partition: 1, Offset: 60, SentEnd: 70},
			FirstArrived: firstArrived, Offset: 70, SentEnd: 90, Answered: firstArrived},
		{ClientAddr: "10.0.0.1:6000", ClientID: "c1", First: group.FetchReport{Topic: "t", Partition: 1, Offset: 0, SentEnd: 50},
			FirstArrived: start, Offset: 50, SentEnd: 80, Answered: lastFetch},
	})

	h, _ := e.c.History("g")
	ho := handoffs(h, 1)[1]
	if ho.LastFetched != 50 || ho.LastSent != 80 || ho.Committed != 60 || ho.FirstFetched != 60 ||
		!ho.LastFetchedAt.Equal(lastFetch) || !ho.FirstFetchedAt.Equal(firstArrived) {
		t.Fatalf("hand-off %+v", ho)
	}
	if ho.DuplicateRisk() != 20 || ho.Skipped() != 0 {
		t.Fatalf("duplicate risk %d, skipped %d; want 20, 0", ho.DuplicateRisk(), ho.Skipped())
	}
	if got := ho.Unowned(); got != 300*time.Millisecond {
		t.Fatalf("unowned %v, want 300ms", got)
	}
}

// TestHandoffUnownedAfterParkedFetch: an owner with nothing new to read
// parks each fetch for its MaxWait, reading its partitions all along; the
// partition goes unread from the answer to its last fetch, not from when
// that fetch arrived.
func TestHandoffUnownedAfterParkedFetch(t *testing.T) {
	e := newEnv(t, nil)
	ids, _ := e.stableGroup("g", 2, 2) // c0 owns 0, c1 owns 1
	arrived := e.clock.Now()
	e.clock.Advance(5 * time.Second)
	answered := e.clock.Now()
	e.c.Fetched("10.0.0.1:6000", "c1", arrived, answered, []group.FetchReport{{Topic: "t", Partition: 1, Offset: 50, SentEnd: 50}})
	e.takeOver(ids, "c0")
	e.clock.Advance(300 * time.Millisecond)
	firstArrived := e.clock.Now()
	e.clock.Advance(5 * time.Second) // the new owner's first fetch parks too
	e.c.Fetched("10.0.0.1:6001", "c0", firstArrived, e.clock.Now(), []group.FetchReport{{Topic: "t", Partition: 1, Offset: 50, SentEnd: 50}})

	h, _ := e.c.History("g")
	ho := handoffs(h, 1)[1]
	if !ho.LastFetchedAt.Equal(answered) || !ho.FirstFetchedAt.Equal(firstArrived) {
		t.Fatalf("last fetched at %v (want %v), first fetched at %v (want %v)", ho.LastFetchedAt, answered, ho.FirstFetchedAt, firstArrived)
	}
	if got := ho.Unowned(); got != 300*time.Millisecond {
		t.Fatalf("unowned %v, want 300ms", got)
	}
}

// TestHandoffUnownedOfACleanLeave: a member that leaves cleanly read its
// partitions until its LeaveGroup, even when its last fetch was answered
// long before (a parked fetch answered after it left is not counted).
func TestHandoffUnownedOfACleanLeave(t *testing.T) {
	e := newEnv(t, nil)
	ids, _ := e.stableGroup("g", 2, 2) // c0 owns 0, c1 owns 1
	fetched(e.c, "10.0.0.1:6000", "c1", 1, 50)
	e.clock.Advance(2 * time.Second)
	left := e.clock.Now()
	e.takeOver(ids, "c0")
	e.clock.Advance(300 * time.Millisecond)
	fetched(e.c, "10.0.0.1:6001", "c0", 1, 50)

	h, _ := e.c.History("g")
	ho := handoffs(h, 1)[1]
	if ho.Reason != string(group.EventMemberLeft) || !ho.LostAt.Equal(left) {
		t.Fatalf("reason %s, lost at %v; want member-left at %v", ho.Reason, ho.LostAt, left)
	}
	if got := ho.Unowned(); got != 300*time.Millisecond {
		t.Fatalf("unowned %v, want 300ms (from the leave)", got)
	}
}

// TestHandoffFetchesOfOneClientID: two members of one host and one client
// id are told apart by what they own: each one's fetches count for its
// own partitions only.
func TestHandoffFetchesOfOneClientID(t *testing.T) {
	e := newEnv(t, nil)
	var ids []string
	var chs []<-chan group.JoinResult
	for range 2 {
		id, ch := e.firstJoin(joinReq("g", "same"))
		ids, chs = append(ids, id), append(chs, ch)
	}
	e.clock.Advance(delay)
	e.clock.Advance(delay)
	var gen int32
	for _, ch := range chs {
		gen = recv(t, ch).Generation
	}
	as := []group.Assignment{{MemberID: ids[0], Data: assignment("t", 0)}, {MemberID: ids[1], Data: assignment("t", 1)}}
	var syncs []<-chan group.SyncResult
	for i, id := range ids {
		req := group.SyncRequest{Client: group.Client{ID: "same", Addr: "10.0.0.1:5001"}, Group: "g", Generation: gen, MemberID: id}
		if i == 0 {
			req.Assignments = as
		}
		syncs = append(syncs, e.c.Sync(req))
	}
	for _, ch := range syncs {
		recv(t, ch)
	}
	// The process reads partition 0 up to 100 and partition 1 up to 10.
	e.c.Fetched("10.0.0.1:6000", "same", time.Time{}, time.Time{}, []group.FetchReport{{Topic: "t", Partition: 0, Offset: 90, SentEnd: 100}})
	e.c.Fetched("10.0.0.1:6000", "same", time.Time{}, time.Time{}, []group.FetchReport{{Topic: "t", Partition: 1, Offset: 5, SentEnd: 10}})
	// Member 1 leaves; member 0 takes partition 1 over.
	e.takeOver(ids, "same")
	h, _ := e.c.History("g")
	if ho := handoffs(h, 1)[1]; ho.From.MemberID != ids[1] || ho.LastSent != 10 || ho.LastFetched != 5 {
		t.Fatalf("hand-off of partition 1: %+v", ho)
	}
}

// TestHandoffFirstAssignmentSkipped: a partition without a committed
// offset that its first owner starts reading at the log end (an offset
// reset to latest) is reported as skipped from the log start.
func TestHandoffFirstAssignmentSkipped(t *testing.T) {
	e := newEnv(t, nil)
	e.stableGroup("g", 1, 1)
	e.c.Fetched("10.0.0.1:6000", "c0", time.Time{}, time.Time{}, []group.FetchReport{{Topic: "t", Partition: 0, Offset: 120, SentEnd: 120, LogStart: 20}})
	h, _ := e.c.History("g")
	if ho := handoffs(h, 0)[0]; ho.Skipped() != 100 || ho.DuplicateRisk() != 0 || ho.Reason != "" {
		t.Fatalf("first assignment %+v: skipped %d, duplicate risk %d", ho, ho.Skipped(), ho.DuplicateRisk())
	}
}

// ledgerRecorder is a group.Ledger that keeps what it is given.
type ledgerRecorder struct {
	mu       sync.Mutex
	entries  []group.Handoff
	commits  []group.NotOwnedCommit
	presence []group.PresenceChange
}

func (l *ledgerRecorder) Presence(g string, c group.PresenceChange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g == "g" {
		l.presence = append(l.presence, c)
	}
}

func (l *ledgerRecorder) presenceSteps() []group.PresenceChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.presence)
}

func (l *ledgerRecorder) Handoff(g string, h group.Handoff) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g == "g" {
		l.entries = append(l.entries, h)
	}
}

func (l *ledgerRecorder) CommitNotOwned(g string, c group.NotOwnedCommit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g == "g" {
		l.commits = append(l.commits, c)
	}
}

func (l *ledgerRecorder) notOwned() []group.NotOwnedCommit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.commits)
}

func (l *ledgerRecorder) got() []group.Handoff {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

// TestHandoffsGoToTheLedger: a hand-off reaches the ledger once its new
// owner fetched the partition, or left without fetching it.
func TestHandoffsGoToTheLedger(t *testing.T) {
	l := &ledgerRecorder{}
	e := newEnv(t, func(c *group.Config) { c.Ledger = l })
	ids, _ := e.stableGroup("g", 2, 2) // c0 owns 0, c1 owns 1
	if got := l.got(); len(got) != 0 {
		t.Fatalf("entries before any fetch: %+v", got)
	}
	fetched(e.c, "10.0.0.1:6001", "c0", 0, 7)
	got := l.got()
	if len(got) != 1 || got[0].Partition != 0 || got[0].FirstFetched != 7 {
		t.Fatalf("after c0's fetch: %+v", got)
	}
	// c1 leaves without having fetched partition 1: its entry is written
	// then. c0 takes the partition over and reads it.
	<-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: ids[1]}}})
	got = l.got()
	if len(got) != 2 || got[1].Partition != 1 || got[1].To.MemberID != ids[1] || got[1].FirstFetched != -1 {
		t.Fatalf("after c1 left: %+v", got)
	}
	req := joinReq("g", "c0")
	req.MemberID = ids[0]
	r := recv(t, e.c.Join(req))
	gen := r.Generation
	e.sync("g", gen, ids[:1], []group.Assignment{{MemberID: ids[0], Data: assignment("t", 0, 1)}})
	fetched(e.c, "10.0.0.1:6001", "c0", 1, 0)
	got = l.got()
	if len(got) != 3 || got[2].Partition != 1 || got[2].From.MemberID != ids[1] || got[2].Reason != string(group.EventMemberLeft) ||
		got[2].Generation != gen || got[2].FirstFetched != 0 {
		t.Fatalf("after c0 read partition 1: %+v", got)
	}
}

// TestHandoffWaitsForLateReports: in a cluster a member's first fetch
// may be reported after it left; its hand-off waits the report delay for
// it, then is done without it.
func TestHandoffWaitsForLateReports(t *testing.T) {
	l := &ledgerRecorder{}
	e := newEnv(t, func(c *group.Config) { c.Ledger, c.FetchReportDelay = l, time.Second })
	ids, _ := e.stableGroup("g", 2, 2) // c0 owns 0, c1 owns 1
	<-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: ids[1]}}})
	if got := l.got(); len(got) != 0 {
		t.Fatalf("entries before the report: %+v", got)
	}
	e.clock.Advance(300 * time.Millisecond)
	now := e.clock.Now()
	e.c.FetchedElsewhere([]group.Span{{ClientAddr: "10.0.0.1:6000", ClientID: "c1",
		First: group.FetchReport{Topic: "t", Partition: 1, Offset: 5, SentEnd: 9}, FirstArrived: now, Offset: 5, SentEnd: 9, Answered: now}})
	got := l.got()
	if len(got) != 1 || got[0].Partition != 1 || got[0].FirstFetched != 5 {
		t.Fatalf("after c1's late report: %+v", got)
	}
	// c0 leaves too and no report of its comes: done after the delay.
	<-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: ids[0]}}})
	e.clock.Advance(900 * time.Millisecond)
	if got := l.got(); len(got) != 1 {
		t.Fatalf("entries before the delay passed: %+v", got)
	}
	e.clock.Advance(200 * time.Millisecond)
	got = l.got()
	if len(got) != 2 || got[1].Partition != 0 || got[1].To.MemberID != ids[0] || got[1].FirstFetched != -1 {
		t.Fatalf("after the delay: %+v", got)
	}
}
