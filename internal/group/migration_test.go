package group_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/group"
)

// classicClient is an eager classic consumer's view of its membership: on
// REBALANCE_IN_PROGRESS it gives up everything and rejoins.
type classicClient struct {
	id    string
	name  string
	gen   int32
	owned []int32 // partitions of "t"
}

// views is every member's view of what it owns, to check that a partition
// is only ever handed to a member while nobody else holds it.
type views struct {
	t       *testing.T
	topic   [16]byte
	classic []*classicClient
	modern  []*cgMember
}

func (v *views) holders(p int32, except string) []string {
	var out []string
	for _, c := range v.classic {
		if c.id != except && slices.Contains(c.owned, p) {
			out = append(out, c.id)
		}
	}
	for _, m := range v.modern {
		if m.id != except && slices.Contains(m.owned[v.topic], p) {
			out = append(out, m.id)
		}
	}
	return out
}

// grant checks that what member id is about to own, beyond what it owned,
// nobody else holds.
func (v *views) grant(id string, before, after []int32) {
	v.t.Helper()
	for _, p := range after {
		if slices.Contains(before, p) {
			continue
		}
		if hs := v.holders(p, id); len(hs) > 0 {
			v.t.Fatalf("partition %d handed to %s while %v hold it", p, id, hs)
		}
	}
}

func (v *views) beat(e *cgEnv, m *cgMember) {
	v.t.Helper()
	before := slices.Clone(m.owned[v.topic])
	req := group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: m.id, MemberEpoch: m.epoch,
		RebalanceTimeout: -1, Owned: owned(m.owned), Client: group.Client{ID: "client-" + m.id, Addr: "127.0.0.1:1000"}}
	res := <-e.c.ConsumerHeartbeat(req)
	if res.Err != nil {
		v.t.Fatalf("heartbeat of %s: %v", m.id, res.Err)
	}
	if res.Assignment != nil {
		var now []int32
		for _, t := range *res.Assignment {
			if t.TopicID == v.topic {
				now = t.Partitions
			}
		}
		v.grant(m.id, before, now)
	}
	m.apply(res)
}

// classicRound is one classic member's turn: a heartbeat, and on
// REBALANCE_IN_PROGRESS (or ILLEGAL_GENERATION) the eager protocol's
// revoke-all, JoinGroup and SyncGroup.
func (v *views) classicRound(e *cgEnv, c *classicClient) {
	v.t.Helper()
	err := e.c.Heartbeat(group.HeartbeatRequest{Group: "g", Generation: c.gen, MemberID: c.id})
	switch {
	case err == nil:
		return
	case !errors.Is(err, group.ErrRebalanceInProgress) && !errors.Is(err, group.ErrIllegalGeneration):
		v.t.Fatalf("heartbeat of classic %s: %v", c.id, err)
	}
	c.owned = nil
	v.rejoin(e, c)
}

func (v *views) rejoin(e *cgEnv, c *classicClient) {
	v.t.Helper()
	req := joinReq("g", c.name)
	req.MemberID = c.id
	req.Protocols = []group.Protocol{{Name: "range", Metadata: subscription("t")}}
	j := recv(v.t, e.c.Join(req))
	if j.Err != nil {
		v.t.Fatalf("rejoin of classic %s: %v", c.id, j.Err)
	}
	c.gen = j.Generation
	if j.Leader == c.id {
		// A classic group again: the leader assigns round robin.
		var as []group.Assignment
		for i, m := range j.Members {
			var ps []int32
			for p := int32(i); p < 4; p += int32(len(j.Members)) {
				ps = append(ps, p)
			}
			as = append(as, group.Assignment{MemberID: m.MemberID, Data: assignment("t", ps...)})
		}
		v.syncClassic(e, c, as)
		return
	}
	v.syncClassic(e, c, nil)
}

func (v *views) syncClassic(e *cgEnv, c *classicClient, as []group.Assignment) {
	v.t.Helper()
	s := recv(v.t, e.c.Sync(group.SyncRequest{Group: "g", Generation: c.gen, MemberID: c.id, Assignments: as,
		Client: group.Client{ID: c.name, Addr: "10.0.0.1:5001"}}))
	if errors.Is(s.Err, group.ErrRebalanceInProgress) {
		return // it rejoins on its next round
	}
	if s.Err != nil {
		v.t.Fatalf("sync of classic %s: %v", c.id, s.Err)
	}
	var a kmsg.ConsumerMemberAssignment
	if len(s.Assignment) > 0 {
		if err := a.ReadFrom(s.Assignment); err != nil {
			v.t.Fatal(err)
		}
	}
	var now []int32
	for _, t := range a.Topics {
		if t.Topic == "t" {
			now = t.Partitions
		}
	}
	v.grant(c.id, c.owned, now)
	c.owned = now
}

// settle runs rounds until every partition of "t" (4) is owned once.
func (v *views) settle(e *cgEnv) {
	v.t.Helper()
	for range 10 {
		for _, m := range v.modern {
			v.beat(e, m)
		}
		for _, c := range v.classic {
			v.classicRound(e, c)
		}
		n := 0
		for p := range int32(4) {
			if len(v.holders(p, "")) == 1 {
				n++
			}
		}
		if n == 4 {
			return
		}
	}
	v.t.Fatalf("not settled: classic %+v", v.classic)
}

func classicClients(ids []string, gen int32, parts int32) []*classicClient {
	var out []*classicClient
	for i, id := range ids {
		c := &classicClient{id: id, name: clientName(i), gen: gen}
		for p := int32(i); p < parts; p += int32(len(ids)) {
			c.owned = append(c.owned, p)
		}
		out = append(out, c)
	}
	return out
}

// TestUpgradeAndDowngrade: a stable classic group of two gets a member of
// the consumer protocol; the group converts with its offsets, the classic
// members rejoin and get their partitions from the server's assignor, no
// partition is handed to a member while another holds it, and when the
// consumer member leaves the group is classic again and rebalances.
func TestUpgradeAndDowngrade(t *testing.T) {
	e := newCGEnv(t)
	tid := e.topics.add("t", 4)
	ids, gen := e.stableGroup("g", 2, 4)
	if errs := recv(t, e.c.Commit(group.CommitRequest{Group: "g", Generation: gen, MemberID: ids[0], RetentionTime: -1, Version: 8,
		Offsets: []group.CommitOffset{{Topic: "t", Partition: 0, Offset: 42, LeaderEpoch: -1}}})); errs[0] != nil {
		t.Fatal(errs[0])
	}
	v := &views{t: t, topic: tid, classic: classicClients(ids, gen, 4)}

	x := e.joinMember("x", "t")
	v.modern = append(v.modern, x)
	v.grant(x.id, nil, x.owned[tid])
	d := e.c.DescribeConsumerGroups([]string{"g"})[0]
	if d.Err != nil || d.Epoch != gen+1 || len(d.Members) != 3 {
		t.Fatalf("after the upgrade: %+v, want 3 members at epoch %d", d, gen+1)
	}
	if l := e.c.List(nil, nil); len(l) != 1 || l[0].Type != "consumer" {
		t.Fatalf("listed %+v, want a consumer group", l)
	}
	// A classic member's commit at its generation (its member epoch) is
	// taken; one at another is ILLEGAL_GENERATION.
	if errs := recv(t, e.c.Commit(group.CommitRequest{Group: "g", Generation: gen, MemberID: ids[0], RetentionTime: -1, Version: 8,
		Offsets: []group.CommitOffset{{Topic: "t", Partition: 0, Offset: 43, LeaderEpoch: -1}}})); errs[0] != nil {
		t.Fatalf("classic member's commit in the consumer group: %v", errs[0])
	}
	if errs := recv(t, e.c.Commit(group.CommitRequest{Group: "g", Generation: gen - 1, MemberID: ids[0], RetentionTime: -1, Version: 8,
		Offsets: []group.CommitOffset{{Topic: "t", Partition: 0, Offset: 44, LeaderEpoch: -1}}})); !errors.Is(errs[0], group.ErrIllegalGeneration) {
		t.Fatalf("classic member's commit at an old generation: %v, want ILLEGAL_GENERATION", errs[0])
	}
	v.settle(e)
	if count(x.owned) == 0 {
		t.Fatalf("the consumer member got nothing: classic %+v", v.classic)
	}
	offs, err := e.c.FetchOffsets("g", nil, false)
	if err != nil || len(offs) != 1 || offs[0].Offset != 43 {
		t.Fatalf("offsets after the upgrade: %+v %v, want 43", offs, err)
	}

	// x leaves: the group is classic again, rebalancing among the two.
	epoch := e.c.DescribeConsumerGroups([]string{"g"})[0].Epoch
	if err := e.leave(x); err != nil {
		t.Fatal(err)
	}
	x.owned = nil
	if l := e.c.List(nil, nil); len(l) != 1 || l[0].Type != "classic" {
		t.Fatalf("listed %+v after the downgrade, want a classic group", l)
	}
	if st := e.state("g"); st != "PreparingRebalance" {
		t.Fatalf("downgraded group %s, want PreparingRebalance", st)
	}
	v.modern = nil
	// Both rejoin; the join phase completes when the second does.
	for _, c := range v.classic {
		if err := e.c.Heartbeat(group.HeartbeatRequest{Group: "g", Generation: c.gen, MemberID: c.id}); !errors.Is(err, group.ErrRebalanceInProgress) {
			t.Fatalf("classic heartbeat after the downgrade: %v, want REBALANCE_IN_PROGRESS", err)
		}
		c.owned = nil
	}
	var chs []<-chan group.JoinResult
	for _, c := range v.classic {
		req := joinReq("g", c.name)
		req.MemberID = c.id
		chs = append(chs, e.c.Join(req))
	}
	var res []group.JoinResult
	for _, ch := range chs {
		res = append(res, recv(t, ch))
	}
	if res[0].Err != nil || res[0].Generation != epoch+1 {
		t.Fatalf("join after the downgrade: %+v, want generation %d", res[0], epoch+1)
	}
	if offs, _ := e.c.FetchOffsets("g", nil, false); len(offs) != 1 || offs[0].Offset != 43 {
		t.Fatalf("offsets after the downgrade: %+v", offs)
	}
}

// TestUpgradeMidRebalance (KAFKA-21582's case): a consumer member joins
// while the classic group is rebalancing; the parked joins are answered
// REBALANCE_IN_PROGRESS and their members rejoin into the consumer group.
func TestUpgradeMidRebalance(t *testing.T) {
	e := newCGEnv(t)
	tid := e.topics.add("t", 4)
	ids, gen := e.stableGroup("g", 2, 4)
	// A third classic member starts a rebalance; c0 rejoins and parks.
	id3, parked3 := e.firstJoin(joinReq("g", clientName(2)))
	if err := e.heartbeat("g", gen, ids[0]); !errors.Is(err, group.ErrRebalanceInProgress) {
		t.Fatalf("heartbeat during the rebalance: %v", err)
	}
	req := joinReq("g", clientName(0))
	req.MemberID = ids[0]
	parked0 := e.c.Join(req)
	parked(t, parked0)

	x := e.joinMember("x", "t")
	for _, ch := range []<-chan group.JoinResult{parked0, parked3} {
		if r := recv(t, ch); !errors.Is(r.Err, group.ErrRebalanceInProgress) {
			t.Fatalf("parked join after the upgrade: %+v, want REBALANCE_IN_PROGRESS", r)
		}
	}
	cs := classicClients(ids, gen, 4)
	cs[0].owned = nil // it revoked before rejoining
	cs = append(cs, &classicClient{id: id3, name: clientName(2), gen: -1})
	v := &views{t: t, topic: tid, classic: cs, modern: []*cgMember{x}}
	v.settle(e)
	if d := e.c.DescribeConsumerGroups([]string{"g"})[0]; d.State != "Stable" || len(d.Members) != 4 {
		t.Fatalf("after the upgrade mid-rebalance: %+v", d)
	}
}

// TestUpgradeWithDoubleAssignment (KAFKA-21684's case): the classic
// assignment gave partition 0 to both members. After the upgrade nobody
// else gets it before both have given it up.
func TestUpgradeWithDoubleAssignment(t *testing.T) {
	e := newCGEnv(t)
	tid := e.topics.add("t", 4)
	id0, ch0 := e.firstJoin(joinReq("g", clientName(0)))
	id1, ch1 := e.firstJoin(joinReq("g", clientName(1)))
	e.clock.Advance(delay)
	e.clock.Advance(delay)
	gen := recv(t, ch0).Generation
	recv(t, ch1)
	e.sync("g", gen, []string{id0, id1}, []group.Assignment{
		{MemberID: id0, Data: assignment("t", 0, 1)}, {MemberID: id1, Data: assignment("t", 0, 2, 3)}})
	v := &views{t: t, topic: tid, classic: []*classicClient{
		{id: id0, name: clientName(0), gen: gen, owned: []int32{0, 1}},
		{id: id1, name: clientName(1), gen: gen, owned: []int32{0, 2, 3}}}}
	x := e.joinMember("x", "t")
	v.grant(x.id, nil, x.owned[tid])
	v.modern = []*cgMember{x}
	v.settle(e)
}

// TestMigrationPolicy: upgrade only keeps a group of classic members a
// consumer group; downgrade only refuses the upgrade.
func TestMigrationPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy              group.MigrationPolicy
		upgrades, downgrade bool
	}{
		{group.MigrationUpgrade, true, false},
		{group.MigrationDowngrade, false, true},
		{group.MigrationBidirectional, true, true},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			e := newCGEnvWithPolicy(t, tc.policy)
			e.topics.add("t", 4)
			e.stableGroup("g", 2, 4)
			res := <-e.c.ConsumerHeartbeat(join("x", "t"))
			if !tc.upgrades {
				if !errors.Is(res.Err, group.ErrGroupIDNotFound) {
					t.Fatalf("upgrade under %s: %v, want GROUP_ID_NOT_FOUND", tc.policy, res.Err)
				}
				return
			}
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			x := &cgMember{id: res.MemberID}
			x.apply(res)
			if err := e.leave(x); err != nil {
				t.Fatal(err)
			}
			want := "consumer"
			if tc.downgrade {
				want = "classic"
			}
			if l := e.c.List(nil, nil); len(l) != 1 || l[0].Type != want {
				t.Fatalf("after the last consumer member left under %s: %+v, want %s", tc.policy, l, want)
			}
		})
	}
}

// TestClassicMembersSurviveRestart: a consumer group with classic members
// comes back from __consumer_offsets with them: their heartbeats at their
// generation are answered, their session is their own.
func TestClassicMembersSurviveRestart(t *testing.T) {
	e := newCGEnv(t)
	tid := e.topics.add("t", 4)
	ids, gen := e.stableGroup("g", 2, 4)
	x := e.joinMember("x", "t")
	v := &views{t: t, topic: tid, classic: classicClients(ids, gen, 4), modern: []*cgMember{x}}
	v.settle(e)
	e.restart()
	for _, c := range v.classic {
		if err := e.c.Heartbeat(group.HeartbeatRequest{Group: "g", Generation: c.gen, MemberID: c.id}); err != nil {
			t.Fatalf("classic heartbeat after restart: %v", err)
		}
	}
	v.beat(e, x)
	// The classic members' session is theirs (10s), not the consumer
	// protocol's (45s): past it without heartbeats, they are gone.
	e.clock.Advance(session + 1)
	if d := e.c.DescribeConsumerGroups([]string{"g"})[0]; len(d.Members) != 1 {
		t.Fatalf("after the classic members' session: %d members, want x alone", len(d.Members))
	}
}

func newCGEnvWithPolicy(t *testing.T, p group.MigrationPolicy) *cgEnv {
	topics := &fakeTopics{}
	return &cgEnv{env: newEnv(t, func(c *group.Config) {
		c.Topics = topics
		c.ConsumerMigrationPolicy = p
	}), topics: topics}
}

// TestStaticMemberAcrossUpgrade (KAFKA-21581's ground): a static classic
// member of an upgraded group restarts under a new member id: it takes its
// predecessor's place and partitions at once, the old id is fenced, and
// the group settles with nothing handed over twice.
func TestStaticMemberAcrossUpgrade(t *testing.T) {
	e := newCGEnv(t)
	tid := e.topics.add("t", 4)
	instance := "i0"
	req0 := joinReq("g", clientName(0))
	req0.InstanceID = &instance
	ch0 := e.c.Join(req0)
	id1, ch1 := e.firstJoin(joinReq("g", clientName(1)))
	e.clock.Advance(delay)
	e.clock.Advance(delay)
	r0, r1 := recv(t, ch0), recv(t, ch1)
	if r0.Err != nil || r1.Err != nil {
		t.Fatalf("joins: %v %v", r0.Err, r1.Err)
	}
	gen := r0.Generation
	e.sync("g", gen, []string{r0.MemberID, id1}, []group.Assignment{
		{MemberID: r0.MemberID, Data: assignment("t", 0, 2)}, {MemberID: id1, Data: assignment("t", 1, 3)}})
	x := e.joinMember("x", "t")
	before := e.c.DescribeConsumerGroups([]string{"g"})[0]

	// The static member restarts: a JoinGroup without member id.
	restarted := joinReq("g", clientName(0))
	restarted.InstanceID = &instance
	j := recv(t, e.c.Join(restarted))
	if j.Err != nil || j.MemberID == r0.MemberID || j.Generation < gen {
		t.Fatalf("restarted static member's join: %+v, want a new member id at generation %d or later", j, gen)
	}
	if err := e.c.Heartbeat(group.HeartbeatRequest{Group: "g", Generation: gen, MemberID: r0.MemberID, InstanceID: &instance}); !errors.Is(err, group.ErrFencedInstanceID) {
		t.Fatalf("the replaced member's heartbeat: %v, want FENCED_INSTANCE_ID", err)
	}
	after := e.c.DescribeConsumerGroups([]string{"g"})[0]
	var was, is group.ConsumerMemberDescription
	for _, m := range before.Members {
		if m.MemberID == r0.MemberID {
			was = m
		}
	}
	for _, m := range after.Members {
		if m.MemberID == j.MemberID {
			is = m
		}
	}
	if is.InstanceID == nil || *is.InstanceID != instance || !slices.EqualFunc(is.Target, was.Target, sameOwnedTopic) || len(after.Members) != 3 {
		t.Fatalf("after the replacement %+v; before %+v", after, before)
	}
	// It synced nothing yet and owns nothing in its new life: the views
	// start from there.
	v := &views{t: t, topic: tid, modern: []*cgMember{x}, classic: []*classicClient{
		{id: j.MemberID, name: clientName(0), gen: j.Generation},
		{id: id1, name: clientName(1), gen: gen, owned: []int32{1, 3}}}}
	v.syncClassic(e, v.classic[0], nil)
	v.settle(e)
}
