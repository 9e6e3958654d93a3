package group_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/group"
)

// connOf is client i's connection number n.
func connOf(i, n int) string { return fmt.Sprintf("10.0.0.%d:%d", i+1, 6000+n) }

// ownClients puts member i on host 10.0.0.(i+1) with client id c<i>.
func ownClients(i, conn int) group.Client {
	return group.Client{ID: clientName(i), Addr: connOf(i, conn)}
}

// sharedClient puts every member on host 10.0.0.1 with client id
// "rdkafka" (librdkafka's default), member i's connection n on port
// 7000+10i+n: members one host runs, told apart only by their connections.
func sharedClient(i, conn int) group.Client {
	return group.Client{ID: "rdkafka", Addr: fmt.Sprintf("10.0.0.1:%d", 7000+10*i+conn)}
}

// classicOnConns forms a stable classic group of n members, member i on
// host 10.0.0.(i+1) and connection 0 of its client, and returns the ids
// and generation.
func (e *env) classicOnConns(n int, static bool) ([]string, int32) {
	return e.classicOn(n, static, ownClients)
}

// classicOn forms a stable classic group of n members, member i sending
// its group requests as client(i, 0) and assigned partition i of "t", and
// returns the ids and generation.
func (e *env) classicOn(n int, static bool, client func(i, conn int) group.Client) ([]string, int32) {
	e.t.Helper()
	var ids []string
	var chs []<-chan group.JoinResult
	for i := range n {
		req := joinReq("g", client(i, 0).ID)
		req.Client = client(i, 0)
		if static {
			req.InstanceID = ptr("instance-" + clientName(i))
			r := e.c.Join(req)
			chs = append(chs, r)
			continue
		}
		id, ch := e.firstJoin(req)
		ids = append(ids, id)
		chs = append(chs, ch)
	}
	for i := range n {
		e.c.ClientConnected(client(i, 0).Addr, client(i, 0).ID)
	}
	e.clock.Advance(delay)
	e.clock.Advance(delay)
	var gen int32
	for i, ch := range chs {
		r := recv(e.t, ch)
		if r.Err != nil {
			e.t.Fatalf("join %d: %v", i, r.Err)
		}
		gen = r.Generation
		if static {
			ids = append(ids, r.MemberID)
		}
	}
	var as []group.Assignment
	for i, id := range ids {
		as = append(as, group.Assignment{MemberID: id, Data: assignment("t", int32(i))})
	}
	var syncs []<-chan group.SyncResult
	for i, id := range ids {
		req := group.SyncRequest{Client: client(i, 0), Group: "g", Generation: gen, MemberID: id}
		if i == 0 {
			req.Assignments = as
		}
		syncs = append(syncs, e.c.Sync(req))
	}
	for i, ch := range syncs {
		if r := recv(e.t, ch); r.Err != nil {
			e.t.Fatalf("sync %d: %v", i, r.Err)
		}
	}
	return ids, gen
}

// fetchOn reports a fetch of partition p of "t" by client on its
// connection, which the server reports open first.
func (e *env) fetchOn(client group.Client, p int32) {
	e.c.ClientConnected(client.Addr, client.ID)
	e.c.Fetched(client.Addr, client.ID, e.clock.Now(), e.clock.Now(),
		[]group.FetchReport{{Topic: "t", Partition: p, Offset: 10, SentEnd: 10}})
}

// TestDisconnectGraceClassic: a classic member whose connection closes is
// removed once the grace has passed, long before its session would end,
// and the group rebalances; one that comes back in time, by a group
// request or by another connection of its client, keeps its place.
func TestDisconnectGraceClassic(t *testing.T) {
	grace := 2 * time.Second
	e := newEnv(t, func(c *group.Config) { c.DisconnectGrace = grace })
	ids, gen := e.classicOnConns(3, false)

	// Member 2 is killed: every connection of its client closes.
	e.c.ClientDisconnected(connOf(2, 0))
	e.clock.Advance(grace - time.Millisecond)
	if err := e.heartbeat("g", gen, ids[0]); err != nil {
		t.Fatalf("heartbeat before the grace ended: %v", err)
	}
	e.clock.Advance(time.Millisecond)
	if err := e.heartbeat("g", gen, ids[0]); !errors.Is(err, group.ErrRebalanceInProgress) {
		t.Fatalf("heartbeat after the grace: %v, want REBALANCE_IN_PROGRESS", err)
	}
	if got := len(e.c.Describe([]string{"g"})[0].Members); got != 2 {
		t.Fatalf("%d members after the grace, want 2", got)
	}
	if h, _ := e.c.History("g"); !hasEvent(h, group.EventMemberDisconnected, ids[2]) {
		t.Fatalf("no %s event for %s: %+v", group.EventMemberDisconnected, ids[2], h.Events)
	}
}

// TestDisconnectGraceComeback: a member whose connection flaps keeps its
// place: it reconnects and heartbeats within the grace, or it still fetches
// its partitions on a connection that is open when the grace ends; once
// that one closes too, it is removed one grace later.
func TestDisconnectGraceComeback(t *testing.T) {
	grace := 2 * time.Second
	e := newEnv(t, func(c *group.Config) { c.DisconnectGrace = grace })
	ids, gen := e.classicOnConns(3, false)

	// Member 1's connection drops; it reconnects and heartbeats on the new
	// connection within the grace (the heartbeat alone keeps it: the
	// server has not reported the new connection).
	e.c.ClientDisconnected(connOf(1, 0))
	e.clock.Advance(grace / 2)
	if err := e.c.Heartbeat(group.HeartbeatRequest{Client: group.Client{ID: clientName(1), Addr: connOf(1, 1)},
		Group: "g", Generation: gen, MemberID: ids[1]}); err != nil {
		t.Fatalf("heartbeat on the new connection: %v", err)
	}
	// Member 2's group connection drops, but the connection it fetches
	// its partition on is open when the grace ends.
	e.fetchOn(ownClients(2, 1), 2)
	e.c.ClientDisconnected(connOf(2, 0))
	e.clock.Advance(grace)
	for i, id := range ids {
		if err := e.heartbeat("g", gen, id); err != nil {
			t.Fatalf("heartbeat of member %d after the grace: %v", i, err)
		}
	}
	// A closed connection that is no longer the member's does not start
	// a grace: member 1 heartbeats on connection 1 now.
	e.c.ClientDisconnected(connOf(1, 0))
	e.clock.Advance(2 * grace)
	if err := e.heartbeat("g", gen, ids[1]); err != nil {
		t.Fatalf("member 1 after its old connection closed again: %v", err)
	}
	// Member 2's fetch connection closes: at the next look it is removed.
	e.c.ClientDisconnected(connOf(2, 1))
	e.clock.Advance(grace)
	if err := e.heartbeat("g", gen, ids[0]); !errors.Is(err, group.ErrRebalanceInProgress) {
		t.Fatalf("heartbeat once member 2 stopped fetching: %v, want REBALANCE_IN_PROGRESS", err)
	}
}

// TestDisconnectGraceSharedClientID: members on one host with one client
// id (kcat's default "rdkafka") are told apart by their connections. A
// killed one is removed after the grace although its siblings, of the
// same host and client id, still have connections open and fetch; the
// ledger is told the member's connection was lost, when it will be
// removed, and that it was; a sibling whose group connection flaps and
// comes back is recorded as returned.
func TestDisconnectGraceSharedClientID(t *testing.T) {
	grace := 2 * time.Second
	l := &ledgerRecorder{}
	e := newEnv(t, func(c *group.Config) { c.DisconnectGrace, c.Ledger = grace, l })
	ids, gen := e.classicOn(3, false, sharedClient)
	for i := range 3 {
		e.fetchOn(sharedClient(i, 1), int32(i))
	}

	// Member 2 is killed: both its connections close.
	lost := e.clock.Now()
	e.c.ClientDisconnected(sharedClient(2, 0).Addr)
	e.c.ClientDisconnected(sharedClient(2, 1).Addr)
	for i := range 2 {
		e.fetchOn(sharedClient(i, 1), int32(i)) // the siblings go on
	}
	e.clock.Advance(grace - time.Millisecond)
	if err := e.heartbeat("g", gen, ids[0]); err != nil {
		t.Fatalf("heartbeat before the grace ended: %v", err)
	}
	e.clock.Advance(time.Millisecond)
	if err := e.heartbeat("g", gen, ids[0]); !errors.Is(err, group.ErrRebalanceInProgress) {
		t.Fatalf("heartbeat after the grace: %v, want REBALANCE_IN_PROGRESS: the killed member was kept by its siblings", err)
	}
	if got := len(e.c.Describe([]string{"g"})[0].Members); got != 2 {
		t.Fatalf("%d members after the grace, want 2", got)
	}
	steps := l.presenceSteps()
	if len(steps) != 2 || steps[0].State != group.PresenceLost || steps[1].State != group.PresenceRemoved {
		t.Fatalf("presence steps %+v, want connection-lost then removed", steps)
	}
	if s := steps[0]; s.Member.MemberID != ids[2] || s.Connection != sharedClient(2, 0).Addr ||
		!s.Time.Equal(lost) || !s.RemoveAt.Equal(lost.Add(grace)) {
		t.Errorf("connection-lost step %+v: want member %s, connection %s, removed at %v", s, ids[2],
			sharedClient(2, 0).Addr, lost.Add(grace))
	}
}

// TestDisconnectGraceFetchedElsewhere: in a cluster a member's fetches may
// go to other brokers, which report them late and cannot say whether the
// connection is open. A fetch that arrived after the member's group
// connection closed keeps it; one from before does not.
func TestDisconnectGraceFetchedElsewhere(t *testing.T) {
	grace := 2 * time.Second
	l := &ledgerRecorder{}
	e := newEnv(t, func(c *group.Config) { c.DisconnectGrace, c.Ledger = grace, l })
	ids, gen := e.classicOn(3, false, sharedClient)
	span := func(i int, at time.Time) group.Span {
		return group.Span{ClientAddr: sharedClient(i, 1).Addr, ClientID: "rdkafka", FirstArrived: at, Answered: at,
			First: group.FetchReport{Topic: "t", Partition: int32(i), Offset: 10, SentEnd: 10}, Offset: 10, SentEnd: 10}
	}
	// Member 1 fetched before its group connection closed, member 2 after.
	e.c.FetchedElsewhere([]group.Span{span(1, e.clock.Now())})
	e.clock.Advance(time.Millisecond)
	e.c.ClientDisconnected(sharedClient(1, 0).Addr)
	e.c.ClientDisconnected(sharedClient(2, 0).Addr)
	e.clock.Advance(time.Millisecond)
	e.c.FetchedElsewhere([]group.Span{span(2, e.clock.Now())})
	e.clock.Advance(grace)
	if err := e.heartbeat("g", gen, ids[0]); !errors.Is(err, group.ErrRebalanceInProgress) {
		t.Fatalf("heartbeat after the grace: %v, want REBALANCE_IN_PROGRESS", err)
	}
	members := map[string]bool{}
	for _, m := range e.c.Describe([]string{"g"})[0].Members {
		members[m.MemberID] = true
	}
	if members[ids[1]] || !members[ids[2]] {
		t.Fatalf("members %v after the grace: want member 1 (no fetch since) removed and member 2 (still fetching) kept", members)
	}
	var fetching bool
	for _, s := range l.presenceSteps() {
		fetching = fetching || s.State == group.PresenceFetching && s.Member.MemberID == ids[2] && s.Connection == sharedClient(2, 1).Addr
	}
	if !fetching {
		t.Errorf("no still-fetching step for member 2: %+v", l.presenceSteps())
	}
	// Member 2 comes back on a new connection: it is heard from again.
	if err := e.c.Heartbeat(group.HeartbeatRequest{Client: sharedClient(2, 2), Group: "g", Generation: gen, MemberID: ids[2]}); err != nil &&
		!errors.Is(err, group.ErrRebalanceInProgress) {
		t.Fatalf("member 2's heartbeat: %v", err)
	}
	steps := l.presenceSteps()
	if last := steps[len(steps)-1]; last.State != group.PresenceReturned || last.Member.MemberID != ids[2] {
		t.Errorf("last presence step %+v, want member 2 returned", last)
	}
}

// TestDisconnectGraceOffAndStatic: with no grace a member waits out its
// session, as in Kafka; static members keep Kafka's semantics unless
// configured otherwise.
func TestDisconnectGraceOffAndStatic(t *testing.T) {
	for _, tc := range []struct {
		name           string
		grace          time.Duration
		static, forAll bool
		removed        bool
	}{
		{name: "off", grace: 0},
		{name: "static", grace: time.Second, static: true},
		{name: "static-configured", grace: time.Second, static: true, forAll: true, removed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *group.Config) { c.DisconnectGrace, c.DisconnectGraceStatic = tc.grace, tc.forAll })
			ids, gen := e.classicOnConns(2, tc.static)
			e.c.ClientDisconnected(connOf(1, 0))
			e.clock.Advance(session / 2)
			err := e.heartbeat("g", gen, ids[0])
			if removed := errors.Is(err, group.ErrRebalanceInProgress); removed != tc.removed {
				t.Fatalf("heartbeat of the other member within the session: %v; want removed=%v", err, tc.removed)
			}
		})
	}
}

// TestDisconnectGraceConsumerGroup: a consumer group member that goes
// away without leaving is removed after the grace, and the survivor gets
// its partitions.
func TestDisconnectGraceConsumerGroup(t *testing.T) {
	e := newCGEnv(t)
	e.topics.add("t", 2)
	grace := e.cfg.DisconnectGrace
	if grace != 2*time.Second {
		t.Fatalf("default grace %v, want 2s", grace)
	}
	a := e.joinMember("a", "t")
	b := e.joinMember("b", "t")
	for range 3 {
		e.beat(a)
		e.beat(b)
	}
	if count(a.owned) != 1 || count(b.owned) != 1 {
		t.Fatalf("a has %d, b %d partitions, want 1 each", count(a.owned), count(b.owned))
	}
	// b's heartbeats come on a connection of its own, which then closes.
	req := group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: b.id, MemberEpoch: b.epoch,
		RebalanceTimeout: -1, Owned: owned(b.owned), Client: group.Client{ID: "client-b", Addr: "127.0.0.2:7000"}}
	e.c.ClientConnected("127.0.0.2:7000", "client-b")
	if res := <-e.c.ConsumerHeartbeat(req); res.Err != nil {
		t.Fatal(res.Err)
	}
	e.c.ClientDisconnected("127.0.0.2:7000")
	e.clock.Advance(grace)
	e.beat(a)
	if count(a.owned) != 2 {
		t.Fatalf("a has %d partitions after b's grace, want 2", count(a.owned))
	}
	req.MemberEpoch = b.epoch
	if res := <-e.c.ConsumerHeartbeat(req); !errors.Is(res.Err, group.ErrUnknownMemberID) {
		t.Fatalf("b after its grace: %v, want UNKNOWN_MEMBER_ID", res.Err)
	}
}
