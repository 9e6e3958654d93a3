package group

import (
	"fmt"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
)

// Instant rollback: a member whose client went away without a LeaveGroup
// (killed, crashed, cut off) is removed once the grace
// (Config.DisconnectGrace) has passed since the connection it sends its
// group requests on closed, instead of at the end of its session.
//
// A member's presence follows its own connections, never its host and
// client id, which many deployments share between instances:
//
//   - its group connection: the one its last group request came on. When
//     it closes, the grace starts; a group request on any connection
//     within the grace ends it.
//   - its fetches: the latest fetch of each partition it owns, by a client
//     of its host and client id (a fetch names no member; the partition's
//     owner is the one member that fetches it). When the grace ends the
//     member stays if such a fetch came on a connection of this broker that
//     is still open, or, reported by another broker (which cannot say
//     whether the connection is open), arrived after the group connection
//     closed. Then it is looked at again one grace later, until it is
//     heard from or its session ends.
//
// A killed process closes all its connections at once, so its siblings on
// the same host with the same client id keep nothing of it alive: their
// fetches are of their own partitions, on their own connections.
//
// While a member is held, the broker logs it, and the ledger (Ledger's
// Presence) records the connection's loss, with when the member will be
// removed, and its return, so that the tools and the console can show it.

// presence is what the coordinator knows of a member's connection: the
// address of the one its last group request came on, and, once that
// closed, when, the grace timer and the fetch connection that kept it.
type presence struct {
	addr     string
	grace    *timer
	lostAt   time.Time // when addr closed; zero while the member is heard from
	fetching string    // the connection whose fetches kept it past a grace; "" if none
}

// PresenceState is a step in a member's presence the ledger records.
type PresenceState string

const (
	// PresenceLost: its group connection closed without a LeaveGroup; it is
	// removed at RemoveAt unless heard from or still fetching.
	PresenceLost PresenceState = "connection-lost"
	// PresenceFetching: the grace ended but its fetches go on (on
	// Connection); it is looked at again at RemoveAt.
	PresenceFetching PresenceState = "still-fetching"
	// PresenceReturned: it sent a group request again and keeps its place.
	PresenceReturned PresenceState = "returned"
	// PresenceRemoved: it was removed at the end of its grace.
	PresenceRemoved PresenceState = "removed"
)

// PresenceChange is a step in a member's presence.
type PresenceChange struct {
	Time       time.Time
	Member     Owner
	State      PresenceState
	RemoveAt   time.Time // PresenceLost and PresenceFetching: when it is removed, or looked at again
	Connection string    // the connection lost, or the one whose fetches keep it
}

// memberRef names a member for the connection index.
type memberRef struct {
	g  *group
	id string
}

// connIndex is the coordinator's view of the clients' connections: which
// are open, and the members whose last group request came on each. Its
// lock comes after any group's.
type connIndex struct {
	mu      lockrank.Mutex[lockrank.Leaf]
	open    map[string]bool                   // connection addresses open
	members map[string]map[memberRef]struct{} // connection address -> members
}

// ClientConnected reports that the connection from addr carries requests
// of client id clientID: its first request, or one under another id.
func (c *Coordinator) ClientConnected(addr, clientID string) {
	x := &c.conns
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.open == nil {
		x.open = map[string]bool{}
	}
	x.open[addr] = true
}

// ClientDisconnected reports that the connection from addr closed. Each
// member whose last group request came on it is removed after the
// disconnect grace, unless it is heard from first or its fetches go on.
func (c *Coordinator) ClientDisconnected(addr string) {
	x := &c.conns
	x.mu.Lock()
	delete(x.open, addr)
	refs := x.members[addr]
	delete(x.members, addr)
	x.mu.Unlock()
	if c.cfg.DisconnectGrace <= 0 {
		return
	}
	for ref := range refs {
		ref.g.disconnected(ref.id, addr)
	}
}

// isOpen reports whether the connection from addr is open.
func (x *connIndex) isOpen(addr string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.open[addr]
}

// move files ref under the connection at to instead of the one at from.
func (x *connIndex) move(ref memberRef, from, to string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.drop(ref, from)
	if to == "" {
		return
	}
	if x.members == nil {
		x.members = map[string]map[memberRef]struct{}{}
	}
	ms := x.members[to]
	if ms == nil {
		ms = map[memberRef]struct{}{}
		x.members[to] = ms
	}
	ms[ref] = struct{}{}
}

func (x *connIndex) drop(ref memberRef, addr string) {
	if ms := x.members[addr]; ms != nil {
		delete(ms, ref)
		if len(ms) == 0 {
			delete(x.members, addr)
		}
	}
}

// heardFrom notes a group request of member id on client's connection:
// the connection its presence follows from now on, and the end of any
// grace. Caller holds g.mu.
func (g *group) heardFrom(id string, p *presence, client Client) {
	p.grace.stop()
	p.grace = nil
	if !p.lostAt.IsZero() {
		g.c.log.Info("a disconnected member is back", "group", g.id, "member", id, "connection", client.Addr,
			"away", g.c.clock.Now().Sub(p.lostAt).Round(time.Millisecond))
		g.presenceChanged(id, PresenceChange{State: PresenceReturned, Connection: client.Addr})
		p.lostAt, p.fetching = time.Time{}, ""
	}
	if p.addr != client.Addr {
		g.c.conns.move(memberRef{g, id}, p.addr, client.Addr)
		p.addr = client.Addr
	}
}

// forget drops a departing member from the connection index. Caller holds
// g.mu.
func (g *group) forget(id string, p *presence) {
	p.grace.stop()
	p.grace = nil
	p.lostAt, p.fetching = time.Time{}, ""
	if p.addr != "" {
		g.c.conns.move(memberRef{g, id}, p.addr, "")
		p.addr = ""
	}
}

// disconnected starts the grace of member id, whose group requests came on
// the connection at addr, which closed. Static members keep Kafka's
// semantics (they exist to survive restarts) unless
// Config.DisconnectGraceStatic.
func (g *group) disconnected(id, addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unloaded || g.state == stateDead {
		return
	}
	p, static, _, ok := g.presenceOf(id)
	if !ok || p.addr != addr || static && !g.c.cfg.DisconnectGraceStatic {
		return
	}
	grace := g.c.cfg.DisconnectGrace
	p.grace.stop()
	p.lostAt, p.fetching = g.c.clock.Now(), ""
	p.grace = g.after(grace, func() { g.graceEnded(id, p) })
	g.c.log.Info("a member's connection closed without a LeaveGroup: it is removed unless it returns or still fetches",
		"group", g.id, "member", id, "connection", addr, "removed_in", grace)
	g.presenceChanged(id, PresenceChange{State: PresenceLost, Connection: addr, RemoveAt: p.lostAt.Add(grace)})
}

// presenceOf finds member id of either protocol: its presence, whether it
// is static, and its client.
func (g *group) presenceOf(id string) (p *presence, static bool, key clientKey, ok bool) {
	if g.modern != nil {
		m, ok := g.modern.members[id]
		if !ok {
			return nil, false, clientKey{}, false
		}
		return &m.presence, m.instanceID != "", m.key, true
	}
	m, ok := g.members[id]
	if !ok {
		return nil, false, clientKey{}, false
	}
	return &m.presence, m.instanceID != nil, m.key, true
}

// graceEnded removes member id unless its fetches show it is still there.
// Caller holds g.mu (a timer callback).
func (g *group) graceEnded(id string, p *presence) {
	cur, _, key, ok := g.presenceOf(id)
	if !ok || cur != p {
		return // gone, or converted to the other kind meanwhile
	}
	grace := g.c.cfg.DisconnectGrace
	p.grace = nil
	if conn := g.fetchingSince(id, key, p.lostAt); conn != "" {
		p.grace = g.after(grace, func() { g.graceEnded(id, p) })
		if p.fetching != conn {
			p.fetching = conn
			g.c.log.Info("a member whose connection closed still fetches: it keeps its place while it does",
				"group", g.id, "member", id, "fetching_on", conn)
			g.presenceChanged(id, PresenceChange{State: PresenceFetching, Connection: conn,
				RemoveAt: g.c.clock.Now().Add(grace)})
		}
		return
	}
	reason := fmt.Sprintf("its connection closed without a LeaveGroup and it did not return within %v", grace)
	g.c.log.Info("removing a disconnected member", "group", g.id, "member", id, "grace", grace)
	g.presenceChanged(id, PresenceChange{State: PresenceRemoved, Connection: p.addr})
	if g.modern != nil {
		g.consumerMemberGone(g.modern.members[id], EventMemberDisconnected, reason)
		g.flushConsumer(nil)
		return
	}
	m := g.members[id]
	g.event(EventMemberDisconnected, m, reason)
	g.removeAndUpdate(m, "removing member "+id+": its connection closed")
}

// fetchingSince names a connection on which member id (of client key)
// still fetches a partition it owns: one of this broker's that is open,
// or one another broker reported a fetch on after since. "" for none.
// Caller holds g.mu.
func (g *group) fetchingSince(id string, key clientKey, since time.Time) string {
	for _, tp := range g.ownedBy(id) {
		last, ok := g.hist.lastFetchOf(key, tp)
		switch {
		case !ok:
		case last.local && g.c.conns.isOpen(last.addr):
			return last.addr
		case !last.local && last.arrived.After(since):
			return last.addr
		}
	}
	return ""
}

// ownedBy lists the partitions member id holds: assigned to it, or (in a
// consumer group) still to be revoked. Caller holds g.mu.
func (g *group) ownedBy(id string) []model.TopicPartition {
	var out []model.TopicPartition
	if cg := g.modern; cg != nil {
		m, ok := cg.members[id]
		if !ok {
			return nil
		}
		names := map[[16]byte]string{}
		for name, t := range cg.topics {
			names[t.ID] = name
		}
		for _, tp := range ownedBy(m) {
			if name, ok := names[tp.topic]; ok {
				out = append(out, model.TopicPartition{Topic: name, Partition: tp.partition})
			}
		}
		return out
	}
	m, ok := g.members[id]
	if !ok {
		return nil
	}
	if assigned, ok := assignedPartitions(m.assignment); ok {
		return assigned
	}
	for tp, o := range g.owners {
		if o.MemberID == id {
			out = append(out, tp)
		}
	}
	return out
}

// presenceChanged gives a step of member id's presence to the ledger.
// Caller holds g.mu.
func (g *group) presenceChanged(id string, c PresenceChange) {
	if g.c.cfg.Ledger == nil {
		return
	}
	if g.modern != nil {
		m, ok := g.modern.members[id]
		if !ok {
			return
		}
		c.Member = m.owner()
	} else {
		m, ok := g.members[id]
		if !ok {
			return
		}
		c.Member = ownerOf(m)
	}
	c.Time = g.c.clock.Now()
	g.c.cfg.Ledger.Presence(g.id, c)
}
