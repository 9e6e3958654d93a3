package group

import (
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
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
	EventAssignment         EventKind = "assignment"      // a consumer group's target assignment was computed for a new epoch
	EventEmpty              EventKind = "empty"           // a generation with no members
	EventLoaded             EventKind = "loaded"          // the group was read back from __consumer_offsets
	EventUpgraded           EventKind = "upgraded"        // a classic group became a consumer group (KIP-848)
	EventDowngraded         EventKind = "downgraded"      // a consumer group became a classic group
	EventGroupDeleted       EventKind = "deleted"         // DeleteGroups, or expiry of an empty group
	EventOffsetsExpired     EventKind = "offsets-expired" // offsets.retention.minutes passed
	EventOffsetsDeleted     EventKind = "offsets-deleted" // OffsetDelete
	// EventCommitNotOwned: a member committed offsets of partitions it
	// does not own (ownership.go).
	EventCommitNotOwned EventKind = "commit-not-owned"
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
	// SoftwareName and SoftwareVersion are the client library's, from
	// its ApiVersions (KIP-511); empty if it sent none.
	SoftwareName, SoftwareVersion string
}

// Handoff is one partition changing owner: the group's first assignment of
// it (From is zero), or a move from one member to another, which with
// cooperative rebalancing may span generations (the partition is revoked
// in one and assigned in the next). The offsets come from the group's
// commits and from the fetches of the members' clients (FetchObserver),
// kept per client (host and client id) and partition: a hand-off starts
// the new owner's positions of the partition afresh and reads the previous
// owner's, so two members of one host and client id are told apart by
// what they own.
type Handoff struct {
	Time       time.Time
	Generation int32 // the generation, or the new owner's member epoch
	Topic      string
	Partition  int32
	From, To   Owner
	// Reason says how From lost the partition: revoked (it stayed in the
	// group), or its departure: member-left, member-expired,
	// member-removed, member-disconnected. Empty for a first assignment.
	Reason string
	// LostAt is when From lost the partition: when it departed, or when
	// the partition was handed on (revoked). Zero for a first assignment.
	LostAt time.Time
	// Committed is the group's committed offset when To got the
	// partition; -1 if none.
	Committed int64
	// LastFetched is the highest fetch offset From asked for while it
	// owned the partition (everything below was delivered to it); -1 if
	// unknown. LastSent is the offset after the last record sent to it
	// (at least LastFetched: the last answer may have carried more), and
	// LastFetchedAt when its last fetch of the partition was answered.
	LastFetched, LastSent int64
	LastFetchedAt         time.Time
	// FirstFetched is the first fetch offset To asked for after the
	// hand-off, in a fetch that arrived at FirstFetchedAt; -1 until it
	// fetches. LogStart is the
	// partition's log start offset then.
	FirstFetched   int64
	FirstFetchedAt time.Time
	LogStart       int64
}

// DuplicateRisk is how many records sent to the previous owner the new
// one is sent again: those beyond the committed offset (or beyond where
// the new owner started, if that is higher). -1 while unknown.
func (h Handoff) DuplicateRisk() int64 {
	if h.From == (Owner{}) || h.LastSent < 0 {
		return 0
	}
	from := h.Committed
	if h.FirstFetched >= 0 {
		from = max(from, h.FirstFetched)
	}
	if from < 0 {
		return -1
	}
	return max(0, h.LastSent-from)
}

// FirstStart says whether the hand-off is the group's first start on the
// partition: nobody owned it and nothing was committed, so where the new
// owner started is its offset reset's choice, not a hand-off's.
func (h Handoff) FirstStart() bool { return h.From == (Owner{}) && h.Committed < 0 }

// Skipped is how many records the new owner started past: between the
// committed offset (without one, the end of what the previous owner was
// sent, or else the log start) and its first fetch. An offset reset to
// the end, a seek, a commit from someone else. -1 while it has not
// fetched.
func (h Handoff) Skipped() int64 {
	if h.FirstFetched < 0 {
		return -1
	}
	base := h.Committed
	switch {
	case base >= 0:
	case h.From != (Owner{}) && h.LastSent >= 0:
		base = h.LastSent
	default:
		base = h.LogStart
	}
	return max(0, h.FirstFetched-base)
}

// Rewound is how far below the committed offset the new owner started
// (it reads again what was committed); 0 if it did not, -1 while it has
// not fetched.
func (h Handoff) Rewound() int64 {
	if h.FirstFetched < 0 {
		return -1
	}
	if h.Committed < 0 {
		return 0
	}
	return max(0, h.Committed-h.FirstFetched)
}

// Unowned is how long the partition went unread: from the answer to the
// previous owner's last fetch of it to the arrival of the new owner's
// first; 0 when either is unknown. A member that left cleanly read until
// it left: a fetch of its that was parked then is answered after the
// group has forgotten it.
func (h Handoff) Unowned() time.Duration {
	if h.LastFetchedAt.IsZero() || h.FirstFetchedAt.IsZero() {
		return 0
	}
	stopped := h.LastFetchedAt
	if h.Reason == string(EventMemberLeft) && h.LostAt.After(stopped) {
		stopped = h.LostAt
	}
	return max(0, h.FirstFetchedAt.Sub(stopped))
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
	// done is given each hand-off once its figures are known: the new
	// owner fetched, or the partition moved on before it did.
	done func(Handoff)
	// seen is given each event as it is recorded.
	seen func(Event)

	mu       lockrank.Mutex[lockrank.History]
	events   []Event
	handoffs []*Handoff
	// fetched is where each client read each partition, since the
	// client's member got the partition (a hand-off starts it afresh for
	// the new owner, and reads the previous owner's).
	fetched map[clientKey]map[model.TopicPartition]fetchPos
	// open are the hand-offs whose new owner has not fetched yet.
	open map[clientKey]map[model.TopicPartition]*openHandoff
	// departed says how members that left the group went (an event
	// kind), for the hand-offs of their partitions.
	departed map[string]departure
	// reportDelay is how long another broker's report of a fetch may take
	// (FetchedElsewhere): a departed member's open hand-offs wait that
	// long for its first fetch before they are done without one. after
	// runs such a wait.
	reportDelay time.Duration
	after       func(time.Duration, func())
}

// openHandoff is a hand-off waiting for its new owner's first fetch,
// with the previous owner's client: what it was sent may still be
// reported (a fetch answered after the hand-off, or one reported late by
// the partition's leader on another broker).
type openHandoff struct {
	*Handoff
	from, to clientKey
	hasFrom  bool
}

// fetchPos is how far a client read a partition, and where its latest
// fetch of it came from: the presence of the partition's owner follows
// its fetches (presence.go).
type fetchPos struct {
	offset, sent int64 // the highest fetch offset, and the highest end sent
	at           time.Time
	last         lastFetch
}

// lastFetch is the latest fetch of a partition by a client: the
// connection it came on, whether that connection is this broker's (so its
// closing is reported here), and when it arrived.
type lastFetch struct {
	addr    string
	local   bool
	arrived time.Time
}

func newHistory(maxEvents, maxHandoffs int, done func(Handoff), seen func(Event)) *history {
	return &history{maxEvents: maxEvents, maxHandoffs: maxHandoffs, done: done, seen: seen,
		fetched: map[clientKey]map[model.TopicPartition]fetchPos{}, open: map[clientKey]map[model.TopicPartition]*openHandoff{},
		departed: map[string]departure{}}
}

// departure is how and when a member left the group.
type departure struct {
	how EventKind
	at  time.Time
}

// departures are the events by which a member leaves the group.
var departures = map[EventKind]bool{EventMemberLeft: true, EventMemberExpired: true, EventMemberRemoved: true,
	EventMemberDisconnected: true}

func (h *history) event(e Event) {
	h.seen(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) >= h.maxEvents {
		h.events = append(h.events[:0], h.events[1:]...)
	}
	h.events = append(h.events, e)
	if departures[e.Kind] && e.Member.MemberID != "" {
		if len(h.departed) >= h.maxHandoffs {
			clear(h.departed) // members whose partitions nobody took over
		}
		h.departed[e.Member.MemberID] = departure{e.Kind, e.Time}
		if h.reportDelay <= 0 {
			h.completeOpen(e.Member.MemberID)
			return
		}
		id := e.Member.MemberID
		h.after(h.reportDelay, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.completeOpen(id)
		})
	}
}

// completeOpen finishes the open hand-offs of a departed member: what it
// got and never fetched is as known as it will be.
func (h *history) completeOpen(memberID string) {
	for _, open := range h.open {
		for tp, ho := range open {
			if ho.To.MemberID == memberID {
				delete(open, tp)
				h.complete(tp, ho)
			}
		}
	}
}

// awaitsReport says whether an open hand-off's new owner departed less
// than the report delay ago: its first fetch may yet be reported.
func (h *history) awaitsReport(ho *openHandoff) bool {
	_, gone := h.departed[ho.To.MemberID]
	return gone && h.reportDelay > 0
}

// handoff records a hand-off to the member with key to; what the member
// with key from read is taken from its fetches.
func (h *history) handoff(ho Handoff, from, to clientKey, hasFrom bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tp := model.TopicPartition{Topic: ho.Topic, Partition: ho.Partition}
	ho.LastFetched, ho.LastSent, ho.FirstFetched, ho.LogStart = -1, -1, -1, -1
	if hasFrom {
		if pos, ok := h.fetched[from][tp]; ok {
			ho.LastFetched, ho.LastSent, ho.LastFetchedAt = pos.offset, pos.sent, pos.at
		}
		ho.Reason, ho.LostAt = "revoked", ho.Time
		if d, ok := h.departed[ho.From.MemberID]; ok {
			ho.Reason, ho.LostAt = string(d.how), d.at
		}
	}
	if open, ok := h.open[from][tp]; hasFrom && ok && !h.awaitsReport(open) {
		// Handed on before its owner fetched it.
		delete(h.open[from], tp)
		h.complete(tp, open)
	}
	if open, ok := h.open[to][tp]; ok {
		// Its owner's again, before a report of its first fetch came.
		delete(h.open[to], tp)
		h.complete(tp, open)
	}
	p := &ho
	if len(h.handoffs) >= h.maxHandoffs {
		h.handoffs = append(h.handoffs[:0], h.handoffs[1:]...)
	}
	h.handoffs = append(h.handoffs, p)
	// The new owner's reads of this partition count from now on.
	delete(h.fetched[to], tp)
	if h.open[to] == nil {
		h.open[to] = map[model.TopicPartition]*openHandoff{}
	}
	h.open[to][tp] = &openHandoff{Handoff: p, from: from, to: to, hasFrom: hasFrom}
}

// complete finishes an open hand-off: the previous owner's reads reported
// since it was opened count too, then its figures are done.
func (h *history) complete(tp model.TopicPartition, ho *openHandoff) {
	if pos, ok := h.fetched[ho.from][tp]; ok && ho.hasFrom && ho.from != ho.to {
		if ho.LastFetched < 0 || pos.offset > ho.LastFetched {
			ho.LastFetched = pos.offset
		}
		if ho.LastSent < 0 || pos.sent > ho.LastSent {
			ho.LastSent = pos.sent
		}
		if pos.at.After(ho.LastFetchedAt) {
			ho.LastFetchedAt = pos.at
		}
	}
	h.done(*ho.Handoff)
}

// fetchedAt notes the partitions of one fetch by the client k on its
// connection at addr: a new
// owner started reading when its first fetch arrived, and an owner read
// until its last fetch was answered.
func (h *history) fetchedAt(k clientKey, addr string, arrived, answered time.Time, reports []FetchReport) {
	h.mu.Lock()
	defer h.mu.Unlock()
	last := lastFetch{addr: addr, local: true, arrived: arrived}
	for _, f := range reports {
		h.read(k, f.Topic, f.Partition, f.Offset, f.SentEnd, answered, last)
		h.started(k, arrived, f)
	}
}

// fetchedSpans notes reads reported by another broker. The previous
// owners' reads of a span count before any new owner's first fetch of it
// completes a hand-off: within a span their order is not known.
func (h *history) fetchedSpans(spans []keyedSpan) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range spans {
		h.read(s.key, s.First.Topic, s.First.Partition, s.Offset, s.SentEnd, s.Answered,
			lastFetch{addr: s.ClientAddr, arrived: s.FirstArrived})
	}
	for _, s := range spans {
		h.started(s.key, s.FirstArrived, s.First)
	}
}

// read notes how far the client k read a partition, and its latest fetch.
func (h *history) read(k clientKey, topic string, partition int32, offset, sent int64, answered time.Time, last lastFetch) {
	tp := model.TopicPartition{Topic: topic, Partition: partition}
	m := h.fetched[k]
	if m == nil {
		m = map[model.TopicPartition]fetchPos{}
		h.fetched[k] = m
	}
	pos, ok := m[tp]
	if !ok || offset > pos.offset {
		pos.offset = offset
	}
	if !ok || sent > pos.sent {
		pos.sent = sent
	}
	if answered.After(pos.at) {
		pos.at = answered
	}
	if !last.arrived.Before(pos.last.arrived) {
		pos.last = last
	}
	m[tp] = pos
}

// lastFetchOf is the client k's latest fetch of tp, if it fetched it.
func (h *history) lastFetchOf(k clientKey, tp model.TopicPartition) (lastFetch, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	pos, ok := h.fetched[k][tp]
	return pos.last, ok && pos.last.addr != ""
}

// started completes the hand-off waiting for the client k's first fetch
// of f's partition, if there is one.
func (h *history) started(k clientKey, arrived time.Time, f FetchReport) {
	tp := model.TopicPartition{Topic: f.Topic, Partition: f.Partition}
	if ho, ok := h.open[k][tp]; ok {
		ho.FirstFetched, ho.FirstFetchedAt, ho.LogStart = f.Offset, arrived, f.LogStart
		delete(h.open[k], tp)
		h.complete(tp, ho)
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
// what the previous owner was sent and where the next one began. The Fetch
// handler calls it once per answer to a consumer, with the partitions it
// read, from the connection at clientAddr of client id clientID, for a
// request that arrived at arrived and was answered at answered (a fetch
// parks up to its MaxWait: its client reads the partitions all along).
type FetchObserver interface {
	Fetched(clientAddr, clientID string, arrived, answered time.Time, reports []FetchReport)
}

// FetchReport is one partition of a consumer's fetch.
type FetchReport struct {
	Topic     string
	Partition int32
	Offset    int64 // the fetch offset asked for
	SentEnd   int64 // the offset after the last record sent; Offset when none was
	LogStart  int64 // the partition's log start offset
}

// Span is what one client read of one partition over a stretch of its
// fetches, as the partition's leader on another broker reports it: the
// stretch's first fetch, and how far the client read by its end.
type Span struct {
	ClientAddr, ClientID string
	// First is the stretch's first fetch, which arrived at FirstArrived.
	First        FetchReport
	FirstArrived time.Time
	// Offset is the highest fetch offset asked for, SentEnd the highest
	// end sent, Answered when the stretch's last fetch was answered.
	Offset, SentEnd int64
	Answered        time.Time
}

type keyedSpan struct {
	Span
	key clientKey
}

// FetchedElsewhere notes spans of fetches that other brokers answered:
// in a cluster a partition's leader is often not its group's
// coordinator.
func (c *Coordinator) FetchedElsewhere(spans []Span) {
	byGroup := map[*group][]keyedSpan{}
	c.fetchers.mu.RLock()
	for _, s := range spans {
		k := keyOf(Client{ID: s.ClientID, Addr: s.ClientAddr})
		for g := range c.fetchers.byClient[k] {
			byGroup[g] = append(byGroup[g], keyedSpan{s, k})
		}
		// A member that has left read until it left.
		for g := range c.fetchers.gone[k] {
			if _, ok := c.fetchers.byClient[k][g]; !ok {
				byGroup[g] = append(byGroup[g], keyedSpan{s, k})
			}
		}
	}
	c.fetchers.mu.RUnlock()
	for g, ks := range byGroup {
		g.hist.fetchedSpans(ks)
	}
}

// fetchIndex maps a client (host and client id) to the groups that have a
// member on it, so that the fetch hook finds them without touching the
// groups' locks. Its lock is taken under group.mu and before history.mu.
type fetchIndex struct {
	n        atomic.Int32 // entries, for the common case of none
	mu       lockrank.RWMutex[lockrank.FetchIndex]
	byClient map[clientKey]map[*group]int // members per group
	// gone are the groups clients last had members in, for the reads
	// other brokers report late (FetchedElsewhere); bounded by maxGone.
	gone map[clientKey]map[*group]bool
}

// maxGone bounds fetchIndex.gone: past it, it starts afresh.
const maxGone = 4096

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
		if len(x.gone) >= maxGone || x.gone == nil {
			x.gone = map[clientKey]map[*group]bool{}
		}
		if x.gone[k] == nil {
			x.gone[k] = map[*group]bool{}
		}
		x.gone[k][g] = true
		if len(gs) == 0 {
			delete(x.byClient, k)
			x.n.Add(-1)
		}
	}
}

// Fetched implements FetchObserver.
func (c *Coordinator) Fetched(clientAddr, clientID string, arrived, answered time.Time, reports []FetchReport) {
	if c.fetchers.n.Load() == 0 || len(reports) == 0 {
		return
	}
	if answered.IsZero() {
		answered = c.clock.Now()
	}
	if arrived.IsZero() {
		arrived = answered
	}
	k := keyOf(Client{ID: clientID, Addr: clientAddr})
	c.fetchers.mu.RLock()
	defer c.fetchers.mu.RUnlock()
	for g := range c.fetchers.byClient[k] {
		g.hist.fetchedAt(k, clientAddr, arrived, answered, reports)
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

// handoffDone is what group id's history does with a hand-off whose
// figures are known: it goes to the ledger and the watcher, if set.
func (c *Coordinator) handoffDone(id string) func(Handoff) {
	return func(h Handoff) {
		if c.cfg.Ledger != nil {
			c.cfg.Ledger.Handoff(id, h)
		}
		if c.cfg.Watch != nil {
			c.cfg.Watch.Handoff(id, h)
		}
	}
}

// eventSeen is what group id's history does with each event: the
// watcher, if there is one, is told.
func (c *Coordinator) eventSeen(id string) func(Event) {
	if c.cfg.Watch == nil {
		return func(Event) {}
	}
	return func(e Event) { c.cfg.Watch.Event(id, e) }
}
