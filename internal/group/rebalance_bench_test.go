package group_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/group"
)

// classicBenchGroup is a classic group of eager members on topic "t",
// driven through whole rebalances without a test's checks.
type classicBenchGroup struct {
	b     *testing.B
	c     *group.Coordinator
	clock *coordinator.ManualClock
	parts int32
	ids   []string
	gen   int32
}

func newClassicBenchGroup(b *testing.B, n int, parts int32) *classicBenchGroup {
	b.Helper()
	cfg := group.Defaults()
	clock := coordinator.NewManualClock()
	cfg.Clock = clock
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.OffsetsPartitions = 1
	cfg.InitialRebalanceDelay = time.Second
	c := group.New(cfg, &coordinator.MemTopic{})
	if err := c.Load(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	g := &classicBenchGroup{b: b, c: c, clock: clock, parts: parts}
	for range n {
		g.ids = append(g.ids, g.memberID(fmt.Sprintf("m%04d", len(g.ids))))
	}
	g.rebalance(g.ids)
	return g
}

// memberID is a new member's id, from its first JoinGroup.
func (g *classicBenchGroup) memberID(client string) string {
	r := <-g.c.Join(benchJoin(client, ""))
	if !errors.Is(r.Err, group.ErrMemberIDRequired) {
		g.b.Fatalf("first join: %v", r.Err)
	}
	return r.MemberID
}

func benchJoin(client, id string) group.JoinRequest {
	req := joinReq("g", client)
	req.MemberID = id
	return req
}

// rebalance forms the group: members join, the initial delay passes
// (extended once, as members kept joining), then finish.
func (g *classicBenchGroup) rebalance(members []string) {
	chs := make([]<-chan group.JoinResult, len(members))
	for i, id := range members {
		chs[i] = g.c.Join(benchJoin(fmt.Sprintf("m%04d", i), id))
	}
	g.clock.Advance(time.Second)
	g.clock.Advance(time.Second)
	g.finish(chs)
}

// heartbeats has every member heartbeat, as they do once an interval; it
// says whether they were all told to rejoin.
func (g *classicBenchGroup) heartbeats() bool {
	all := true
	for _, id := range g.ids {
		err := g.c.Heartbeat(group.HeartbeatRequest{Group: "g", Generation: g.gen, MemberID: id})
		all = all && errors.Is(err, group.ErrRebalanceInProgress)
	}
	return all
}

// BenchmarkClassicRebalance is BenchmarkConsumerRebalance for a classic
// group of 50 eager members on 100 partitions: one member joins ("join"),
// or leaves ("leave"), each time a whole rebalance: a round of heartbeats
// tells the others, all rejoin (the join phase waits for the last), the
// leader assigns and all sync. Every member holds nothing from its rejoin
// to its sync. It takes one round of heartbeats by construction (the
// round fails the benchmark unless it tells every member to rejoin), so
// it reports no rounds/op.
func BenchmarkClassicRebalance(b *testing.B) {
	b.Run("join", func(b *testing.B) {
		g := newClassicBenchGroup(b, 50, 100)
		b.ResetTimer()
		for i := range b.N {
			g.joinOne(i)
			b.StopTimer()
			g.leaveLast()
			b.StartTimer()
		}
	})
	b.Run("leave", func(b *testing.B) {
		g := newClassicBenchGroup(b, 50, 100)
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			g.joinOne(i)
			b.StartTimer()
			g.leaveLast()
		}
	})
}

// joinOne has a new member join: one round of heartbeats tells the others
// to rejoin, then the whole group rejoins and syncs.
func (g *classicBenchGroup) joinOne(i int) {
	extra := g.memberID(fmt.Sprintf("extra%d", i))
	parked := g.c.Join(benchJoin(fmt.Sprintf("extra%d", i), extra))
	if !g.heartbeats() {
		g.b.Fatal("the members were not told to rejoin")
	}
	chs := g.rejoin()
	g.ids = append(g.ids, extra)
	g.finish(append(chs, parked))
}

// leaveLast has the newest member leave: LeaveGroup starts the rebalance,
// a round of heartbeats tells the others, and they rejoin and sync.
func (g *classicBenchGroup) leaveLast() {
	last := g.ids[len(g.ids)-1]
	if res := <-g.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: last}}}); res.Err != nil || res.Members[0] != nil {
		g.b.Fatalf("leave: %+v", res)
	}
	g.ids = g.ids[:len(g.ids)-1]
	if !g.heartbeats() {
		g.b.Fatal("the members were not told to rejoin")
	}
	g.finish(g.rejoin())
}

// rejoin sends every member's JoinGroup.
func (g *classicBenchGroup) rejoin() []<-chan group.JoinResult {
	chs := make([]<-chan group.JoinResult, 0, len(g.ids)+1)
	for j, id := range g.ids {
		chs = append(chs, g.c.Join(benchJoin(fmt.Sprintf("m%04d", j), id)))
	}
	return chs
}

// finish completes a rebalance whose joins are parked on chs: the leader
// assigns round robin and every member syncs.
func (g *classicBenchGroup) finish(chs []<-chan group.JoinResult) {
	var leader group.JoinResult
	for _, ch := range chs {
		r := <-ch
		if r.Err != nil {
			g.b.Fatalf("join: %v", r.Err)
		}
		if len(r.Members) > 0 {
			leader = r
		}
		g.gen = r.Generation
	}
	var as []group.Assignment
	for i, m := range leader.Members {
		var ps []int32
		for p := int32(i); p < g.parts; p += int32(len(leader.Members)) {
			ps = append(ps, p)
		}
		as = append(as, group.Assignment{MemberID: m.MemberID, Data: assignment("t", ps...)})
	}
	syncs := make([]<-chan group.SyncResult, 0, len(g.ids))
	for _, id := range g.ids {
		req := group.SyncRequest{Group: "g", Generation: g.gen, MemberID: id}
		if id == leader.Leader {
			req.Assignments = as
		}
		syncs = append(syncs, g.c.Sync(req))
	}
	for _, ch := range syncs {
		if r := <-ch; r.Err != nil {
			g.b.Fatalf("sync: %v", r.Err)
		}
	}
}
