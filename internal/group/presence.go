package group

import (
	"fmt"
	"sync"
)

// Instant rollback: a member whose client went away without a LeaveGroup
// (killed, crashed, cut off) is removed once the grace
// (Config.DisconnectGrace) has passed since the connection it sends its
// group requests on closed, instead of at the end of its session. The
// server reports connections as they learn their client id and as they
// close. A member keeps its place if, within the grace, it sends a group
// request again, or its client (the same host and client id) has another
// connection open: a client whose one connection dropped is alive, and
// reconnects before its session would end. Two members on one host with
// one client id cannot be told apart, so while one of them is connected
// the other waits out its session, as in Kafka.

// presence is what the coordinator knows of a member's connection: the
// address of the one its last group request came on, and the grace timer
// started when that connection closed.
type presence struct {
	addr  string
	grace *timer
}

// memberRef names a member for the connection index.
type memberRef struct {
	g  *group
	id string
}

// connIndex is the coordinator's view of the clients' connections: per
// connection, its client and the members whose last group request came on
// it; per client, how many of its connections are open. Its lock comes
// after any group's.
type connIndex struct {
	mu      sync.Mutex
	clients map[string]clientKey              // connection address -> its client
	open    map[clientKey]int                 // connections open per client
	members map[string]map[memberRef]struct{} // connection address -> members
}

// ClientConnected reports that the connection from addr carries requests
// of client id clientID: its first request, or one under another id.
func (c *Coordinator) ClientConnected(addr, clientID string) {
	k := keyOf(Client{ID: clientID, Addr: addr})
	x := &c.conns
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.clients[addr]; ok {
		x.closeClient(old)
	}
	if x.clients == nil {
		x.clients, x.open = map[string]clientKey{}, map[clientKey]int{}
	}
	x.clients[addr] = k
	x.open[k]++
}

func (x *connIndex) closeClient(k clientKey) {
	if x.open[k]--; x.open[k] <= 0 {
		delete(x.open, k)
	}
}

// ClientDisconnected reports that the connection from addr closed. Each
// member whose last group request came on it is removed after the
// disconnect grace, unless it is heard from first.
func (c *Coordinator) ClientDisconnected(addr string) {
	x := &c.conns
	x.mu.Lock()
	if k, ok := x.clients[addr]; ok {
		delete(x.clients, addr)
		x.closeClient(k)
	}
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

// connected reports whether a connection of client k is open.
func (x *connIndex) connected(k clientKey) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.open[k] > 0
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
	p.grace.stop()
	p.grace = g.after(g.c.cfg.DisconnectGrace, func() { g.graceEnded(id, p) })
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

// graceEnded removes member id unless its client still has a connection
// open. Caller holds g.mu (a timer callback).
func (g *group) graceEnded(id string, p *presence) {
	cur, _, key, ok := g.presenceOf(id)
	if !ok || cur != p {
		return // gone, or converted to the other kind meanwhile
	}
	p.grace = nil
	if g.c.conns.connected(key) {
		return
	}
	reason := fmt.Sprintf("its connection closed without a LeaveGroup and it did not return within %v", g.c.cfg.DisconnectGrace)
	g.c.log.Info("removing a disconnected member", "group", g.id, "member", id, "grace", g.c.cfg.DisconnectGrace)
	if g.modern != nil {
		g.consumerMemberGone(g.modern.members[id], EventMemberDisconnected, reason)
		g.flushConsumer(nil)
		return
	}
	m := g.members[id]
	g.event(EventMemberDisconnected, m, reason)
	g.removeAndUpdate(m, "removing member "+id+": its connection closed")
}
