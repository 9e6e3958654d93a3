package group

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// The rebalance history: per group, a bounded timeline of membership
// changes and generations, and a bounded list of partition hand-offs, each
// with the offsets that say what a change of owner may have read twice or
// skipped. It lives in memory only (a restart starts it afresh) and is
// read through Coordinator.History.

// EventKind names a change in a group.
type EventKind string

const (
	EventMemberJoined   EventKind = "member-joined"   // a member joined (its first JoinGroup with a member id)
	EventMemberReplaced EventKind = "member-replaced" // a static member came back under a new member id
	EventMemberLeft     EventKind = "member-left"     // LeaveGroup
	EventMemberExpired  EventKind = "member-expired"  // no heartbeat within the session timeout
	EventMemberRemoved  EventKind = "member-removed"  // did not rejoin or sync within the rebalance timeout
	// EventMemberDisconnected: its connection closed without a LeaveGroup
	// and it was not heard from within the disconnect grace.
	EventMemberDisconnected EventKind = "member-disconnected"
	EventRebalance          EventKind = "rebalance"       // PreparingRebalance began
	EventGeneration         EventKind = "generation"      // a generation's members are known (CompletingRebalance)
	EventStable             EventKind = "stable"          // the leader's assignment reached the members
	EventEmpty              EventKind = "empty"           // a generation with no members
	EventLoaded             EventKind = "loaded"          // the group was read back from __consumer_offsets
	EventUpgraded           EventKind = "upgraded"        // a classic group became a consumer group (KIP-848)
	EventDowngraded         EventKind = "downgraded"      // a consumer group became a classic group
	EventGroupDeleted       EventKind = "deleted"         // DeleteGroups, or expiry of an empty group
	EventOffsetsExpired     EventKind = "offsets-expired" // offsets.retention.minutes passed
	EventOffsetsDeleted     EventKind = "offsets-deleted" // OffsetDelete
)

// Event is one entry of a group's timeline. Member fields are set for
// member events, Members and Leader for generations.
type Event struct {
	Time       time.Time
	Kind       EventKind
	Generation int32
	Member     Owner
	Reason     string
	Protocol   string
	Leader     string
	Members    []string
}

// Owner is a member as the history names it.
type Owner struct {
	MemberID   string
	InstanceID string
	ClientID   string
	ClientHost string
}

// Handoff is one partition changing owner: the group's first assignment of
// it (From is zero), or a move from one member to another, which with
// cooperative rebalancing may span generations (the partition is revoked
// in one and assigned in the next).
type Handoff struct {
	Time       time.Time
	Generation int32
	Topic      string
	Partition  int32
	From, To   Owner
	// Committed is the group's committed offset when To got the
	// partition; -1 if none.
	Committed int64
	// LastFetched is the highest fetch offset From asked for while it
	// owned the partition (everything below was delivered to it; the last
	// answer may have carried more); -1 if unknown.
	LastFetched int64
	// FirstFetched is the first fetch offset To asked for after the
	// hand-off; -1 until it fetches. Below Committed means re-reading what
	// was committed; above LastFetched means skipping what From was given.
	FirstFetched int64
}

// History is a copy of a group's rebalance history, oldest first.
type History struct {
	Events   []Event
	Handoffs []Handoff
}

// history is the per-group record. It has its own lock so that the fetch
// hook never waits for the group: h.mu is taken after group.mu, never
// before.
type history struct {
	maxEvents, maxHandoffs int

	mu       sync.Mutex
	events   []Event
	handoffs []*Handoff
	// fetched is the highest fetch offset per client and partition,
	// since the client's member got the partition.
	fetched map[clientKey]map[model.TopicPartition]int64
	// open are the hand-offs whose new owner has not fetched yet.
	open map[clientKey]map[model.TopicPartition]*Handoff
}

func newHistory(maxEvents, maxHandoffs int) *history {
	return &history{maxEvents: maxEvents, maxHandoffs: maxHandoffs,
		fetched: map[clientKey]map[model.TopicPartition]int64{}, open: map[clientKey]map[model.TopicPartition]*Handoff{}}
}

func (h *history) event(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) >= h.maxEvents {
		h.events = append(h.events[:0], h.events[1:]...)
	}
	h.events = append(h.events, e)
}

// handoff records a hand-off to the member with key to; lastFetched is
// read for the member with key from.
func (h *history) handoff(ho Handoff, from, to clientKey, hasFrom bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tp := model.TopicPartition{Topic: ho.Topic, Partition: ho.Partition}
	ho.LastFetched, ho.FirstFetched = -1, -1
	if hasFrom {
		if off, ok := h.fetched[from][tp]; ok {
			ho.LastFetched = off
		}
	}
	p := &ho
	if len(h.handoffs) >= h.maxHandoffs {
		h.handoffs = append(h.handoffs[:0], h.handoffs[1:]...)
	}
	h.handoffs = append(h.handoffs, p)
	// The new owner's reads of this partition count from now on.
	delete(h.fetched[to], tp)
	if h.open[to] == nil {
		h.open[to] = map[model.TopicPartition]*Handoff{}
	}
	h.open[to][tp] = p
}

// fetchedAt notes a fetch of tp at offset by the client k.
func (h *history) fetchedAt(k clientKey, tp model.TopicPartition, off int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.fetched[k]
	if m == nil {
		m = map[model.TopicPartition]int64{}
		h.fetched[k] = m
	}
	if cur, ok := m[tp]; !ok || off > cur {
		m[tp] = off
	}
	if ho, ok := h.open[k][tp]; ok {
		ho.FirstFetched = off
		delete(h.open[k], tp)
	}
}

func (h *history) copy() History {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := History{Events: make([]Event, len(h.events)), Handoffs: make([]Handoff, len(h.handoffs))}
	copy(out.Events, h.events)
	for i, p := range h.handoffs {
		out.Handoffs[i] = *p
	}
	return out
}

// FetchObserver is told where consumers read, so that hand-offs can show
// what the previous owner fetched and where the next one began. The Fetch
// handler calls it for each partition of a consumer's fetch.
type FetchObserver interface {
	Fetched(clientAddr, clientID, topic string, partition int32, offset int64)
}

// fetchIndex maps a client (host and client id) to the groups that have a
// member on it, so that the fetch hook finds them without touching the
// groups' locks. Its lock is taken under group.mu and before history.mu.
type fetchIndex struct {
	n        atomic.Int32 // entries, for the common case of none
	mu       sync.RWMutex
	byClient map[clientKey]map[*group]int // members per group
}

func (x *fetchIndex) add(k clientKey, g *group) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.byClient == nil {
		x.byClient = map[clientKey]map[*group]int{}
	}
	gs := x.byClient[k]
	if gs == nil {
		gs = map[*group]int{}
		x.byClient[k] = gs
		x.n.Add(1)
	}
	gs[g]++
}

// remove undoes add. The group's fetch positions for k stay: the hand-offs
// of a departed member's partitions, recorded later, need them.
func (x *fetchIndex) remove(k clientKey, g *group) {
	x.mu.Lock()
	defer x.mu.Unlock()
	gs := x.byClient[k]
	if gs == nil {
		return
	}
	if gs[g]--; gs[g] <= 0 {
		delete(gs, g)
		if len(gs) == 0 {
			delete(x.byClient, k)
			x.n.Add(-1)
		}
	}
}

// Fetched implements FetchObserver.
func (c *Coordinator) Fetched(clientAddr, clientID, topic string, partition int32, offset int64) {
	if c.fetchers.n.Load() == 0 {
		return
	}
	k := keyOf(Client{ID: clientID, Addr: clientAddr})
	tp := model.TopicPartition{Topic: topic, Partition: partition}
	c.fetchers.mu.RLock()
	defer c.fetchers.mu.RUnlock()
	for g := range c.fetchers.byClient[k] {
		g.hist.fetchedAt(k, tp, offset)
	}
}

// History returns a copy of a group's rebalance history.
func (c *Coordinator) History(groupID string) (History, bool) {
	c.mu.Lock()
	g, ok := c.groups[groupID]
	c.mu.Unlock()
	if !ok {
		return History{}, false
	}
	return g.hist.copy(), true
}
