package group_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/group"
)

// benchGroup is a consumer group of n members on one topic of parts
// partitions, reconciled and stable, driven without a test's checks.
type benchGroup struct {
	b       *testing.B
	c       *group.Coordinator
	members []*cgMember
}

func newBenchGroup(b *testing.B, n int, parts int32) *benchGroup {
	b.Helper()
	topics := &fakeTopics{}
	topics.add("t", parts)
	cfg := group.Defaults()
	cfg.Clock = coordinator.NewManualClock()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.OffsetsPartitions = 1
	cfg.Topics = topics
	c := group.New(cfg, &coordinator.MemTopic{})
	if err := c.Load(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	g := &benchGroup{b: b, c: c}
	for i := range n {
		g.join(fmt.Sprintf("m%04d", i))
	}
	g.settle()
	return g
}

func (g *benchGroup) join(id string) {
	res := <-g.c.ConsumerHeartbeat(join(id, "t"))
	if res.Err != nil {
		g.b.Fatal(res.Err)
	}
	m := &cgMember{id: res.MemberID}
	m.apply(res)
	g.members = append(g.members, m)
}

func (g *benchGroup) beat(m *cgMember) {
	res := <-g.c.ConsumerHeartbeat(group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: m.id,
		MemberEpoch: m.epoch, RebalanceTimeout: -1, Owned: owned(m.owned)})
	if res.Err != nil {
		g.b.Fatal(res.Err)
	}
	m.apply(res)
}

// settle heartbeats every member in turn until the group is stable, as
// the members' heartbeats would, and returns how many rounds it took.
func (g *benchGroup) settle() int {
	for round := 1; round <= 20; round++ {
		for _, m := range g.members {
			g.beat(m)
		}
		if g.c.DescribeConsumerGroups([]string{"g"})[0].State == "Stable" {
			return round
		}
	}
	g.b.Fatal("the group did not settle in 20 rounds of heartbeats")
	return 0
}

// BenchmarkConsumerHeartbeat is the coordinator's cost of one heartbeat of
// a stable member in a group of 1000 members on 1000 partitions.
func BenchmarkConsumerHeartbeat(b *testing.B) {
	g := newBenchGroup(b, 1000, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		g.beat(g.members[i%len(g.members)])
	}
}

// BenchmarkConsumerRebalance is one member joining a stable group of 50
// on 100 partitions ("join") and one leaving it ("leave"), each until
// every member is reconciled: the coordinator's work, and (rounds/op) how
// many rounds of heartbeats the group needs. At one heartbeat interval a
// round, that is the protocol's rebalance latency. Each op also does the
// other half, untimed, so the group stays at 50.
func BenchmarkConsumerRebalance(b *testing.B) {
	b.Run("join", func(b *testing.B) {
		g := newBenchGroup(b, 50, 100)
		rounds := 0
		b.ResetTimer()
		for i := range b.N {
			rounds += g.joinOne(i)
			b.StopTimer()
			g.leaveLast()
			b.StartTimer()
		}
		b.ReportMetric(float64(rounds)/float64(b.N), "rounds/op")
	})
	b.Run("leave", func(b *testing.B) {
		g := newBenchGroup(b, 50, 100)
		rounds := 0
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			g.joinOne(i)
			b.StartTimer()
			rounds += g.leaveLast()
		}
		b.ReportMetric(float64(rounds)/float64(b.N), "rounds/op")
	})
}

// joinOne adds a member and settles the group, returning the rounds.
func (g *benchGroup) joinOne(i int) int {
	g.join(fmt.Sprintf("extra%d", i))
	return g.settle()
}

// leaveLast has the newest member leave and settles the group, returning
// the rounds.
func (g *benchGroup) leaveLast() int {
	last := g.members[len(g.members)-1]
	res := <-g.c.ConsumerHeartbeat(group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: last.id, MemberEpoch: -1})
	if res.Err != nil {
		g.b.Fatal(res.Err)
	}
	g.members = g.members[:len(g.members)-1]
	return g.settle()
}
