package raft

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// MemNetwork connects nodes in one process, for tests. It can lose messages
// (with a probability), delay them by a random time (which reorders them),
// partition the nodes into sets that cannot reach each other, cut single
// links (a partial partition), and kill a
// node (drop everything to and from it). Messages are marshalled on send
// and unmarshalled on delivery, so nodes share no memory, as over a wire.
// Its random choices come from one seeded source.
type MemNetwork struct {
	mu       sync.Mutex
	rng      *rand.Rand
	loss     float64
	minDelay time.Duration
	maxDelay time.Duration
	group    map[uint64]int     // partition set of each listed node; unlisted nodes are in set 0
	cut      map[[2]uint64]bool // pairs of nodes that cannot reach each other, either way
	eps      map[uint64]*memEndpoint
}

// NewMemNetwork returns a network that delivers everything at once.
func NewMemNetwork(seed uint64) *MemNetwork {
	return &MemNetwork{
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		group: map[uint64]int{},
		cut:   map[[2]uint64]bool{},
		eps:   map[uint64]*memEndpoint{},
	}
}

// Endpoint returns a transport for node id. Starting it replaces the
// node's previous endpoint, so a restarted node gets a fresh, live one:
// messages to the id go to the newest endpoint. A previous endpoint whose
// node still runs (a stale process) can still send.
func (n *MemNetwork) Endpoint(id uint64) Transport { return &memEndpoint{net: n, id: id} }

// Reroute makes a started endpoint its node id's destination again, as
// when an address moves back to an older process.
func (n *MemNetwork) Reroute(t Transport) {
	e := t.(*memEndpoint)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.eps[e.id] = e
}

// SetLoss makes each message lost with probability p.
func (n *MemNetwork) SetLoss(p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.loss = p
}

// SetDelay delays each message by a random time in [min, max].
func (n *MemNetwork) SetDelay(min, max time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.minDelay, n.maxDelay = min, max
}

// Partition splits the network: each set of nodes can reach only itself,
// and the nodes in no set reach only each other.
func (n *MemNetwork) Partition(sets ...[]uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = map[uint64]int{}
	for i, set := range sets {
		for _, id := range set {
			n.group[id] = i + 1
		}
	}
}

// Cut breaks the link between nodes a and b alone, both ways.
func (n *MemNetwork) Cut(a, b uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[[2]uint64{min(a, b), max(a, b)}] = true
}

// Heal ends any partition and restores every cut link.
func (n *MemNetwork) Heal() {
	n.Partition()
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
}

// Kill drops every message to and from node id's current endpoint, as if
// the process were gone; messages already in flight are dropped too.
func (n *MemNetwork) Kill(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ep := n.eps[id]; ep != nil {
		ep.dead = true
	}
}

// deliverable reports whether from can reach to now. n.mu must be held.
func (n *MemNetwork) deliverable(from, to *memEndpoint) bool {
	return from != nil && to != nil && !from.dead && !to.dead && n.group[from.id] == n.group[to.id] &&
		!n.cut[[2]uint64{min(from.id, to.id), max(from.id, to.id)}]
}

type memEndpoint struct {
	net *MemNetwork
	id  uint64
	inc string // the incarnation its node gave at start
	h   handler
	// dead is guarded by net.mu.
	dead bool

	mu     sync.Mutex // guards q, seq, closed
	q      memQueue
	seq    uint64
	closed bool
	notify chan struct{}
	done   chan struct{}
}

// memQueueLimit bounds the messages waiting for delivery to one node.
const memQueueLimit = 10000

func (e *memEndpoint) start(self uint64, incarnation string, h handler, spawn func(func())) error {
	if self != e.id {
		return fmt.Errorf("cluster/raft: endpoint of node %d started by node %d", e.id, self)
	}
	e.h, e.inc = h, incarnation
	e.notify = make(chan struct{}, 1)
	e.done = make(chan struct{})
	e.net.mu.Lock()
	e.net.eps[e.id] = e
	e.net.mu.Unlock()
	spawn(e.deliver)
	return nil
}

func (e *memEndpoint) send(msgs []*pb.Message) {
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			panic(err) // Raft's own messages always marshal
		}
		to := m.GetTo()
		n := e.net
		n.mu.Lock()
		dst := n.eps[to]
		// A killed node's address refuses connections, as a dead
		// process's port does; a partition drops messages silently.
		gone := dst == nil || dst.dead
		ok := n.deliverable(e, dst) && n.rng.Float64() >= n.loss
		delay := n.minDelay
		if n.maxDelay > n.minDelay {
			delay += time.Duration(n.rng.Int64N(int64(n.maxDelay - n.minDelay + 1)))
		}
		n.mu.Unlock()
		e.h.refused(to, gone)
		if ok {
			ok = dst.enqueue(time.Now().Add(delay), b, e.inc)
		}
		if m.GetType() == pb.MsgSnap {
			e.h.snapshotStatus(to, !ok)
		}
		if !ok && dst == nil {
			e.h.unreachable(to)
		}
	}
}

func (e *memEndpoint) enqueue(due time.Time, b []byte, from string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || len(e.q) >= memQueueLimit {
		return false
	}
	e.seq++
	heap.Push(&e.q, memMsg{due: due, seq: e.seq, b: b, from: from})
	select {
	case e.notify <- struct{}{}:
	default:
	}
	return true
}

// deliver hands queued messages to the node when they are due.
func (e *memEndpoint) deliver() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var b []byte
		var from string
		wait := time.Duration(-1)
		e.mu.Lock()
		if len(e.q) > 0 {
			if d := time.Until(e.q[0].due); d <= 0 {
				mm := heap.Pop(&e.q).(memMsg)
				b, from = mm.b, mm.from
			} else {
				wait = d
			}
		}
		e.mu.Unlock()
		if b != nil {
			e.net.mu.Lock()
			dead := e.dead
			e.net.mu.Unlock()
			if dead {
				continue
			}
			m := &pb.Message{}
			if err := proto.Unmarshal(b, m); err != nil {
				panic(err)
			}
			e.h.receive(m, from)
			continue
		}
		if wait >= 0 {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-e.notify:
			timer.Stop()
		case <-e.done:
			return
		}
	}
}

func (e *memEndpoint) addPeer(uint64, string) {}
func (e *memEndpoint) removePeer(uint64)      {}

func (e *memEndpoint) close() error {
	if e.done == nil {
		return nil // never started
	}
	e.net.mu.Lock()
	if e.net.eps[e.id] == e {
		delete(e.net.eps, e.id)
	}
	e.net.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		e.q = nil
		close(e.done)
	}
	return nil
}

type memMsg struct {
	due time.Time
	seq uint64
	b   []byte
	// from is the sender's incarnation.
	from string
}

// memQueue is a heap of messages by due time, then by send order.
type memQueue []memMsg

func (q memQueue) Len() int { return len(q) }
func (q memQueue) Less(i, j int) bool {
	if !q[i].due.Equal(q[j].due) {
		return q[i].due.Before(q[j].due)
	}
	return q[i].seq < q[j].seq
}
func (q memQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *memQueue) Push(x any)   { *q = append(*q, x.(memMsg)) }
func (q *memQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
