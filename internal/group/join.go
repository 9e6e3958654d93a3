package group

import (
	"crypto/rand"
	"fmt"
	"time"
)

// JoinRequest is a JoinGroup request.
type JoinRequest struct {
	Client           Client
	Group            string
	MemberID         string // "" for a member's first join
	InstanceID       *string
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	ProtocolType     string
	Protocols        []Protocol
	Reason           string
	// RequireKnownMemberID: JoinGroup v4+ answers a dynamic member's first
	// join MEMBER_ID_REQUIRED with its id, to be joined with (KIP-394).
	RequireKnownMemberID bool
	// SupportsSkipAssignment: JoinGroup v9+ (KIP-814).
	SupportsSkipAssignment bool
}

// JoinMember is a member as the leader sees it.
type JoinMember struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte
}

// JoinResult is the answer to a JoinGroup. Err nil or ErrMemberIDRequired
// (with MemberID set to the id to join with) or another error.
type JoinResult struct {
	Err            error
	MemberID       string
	Generation     int32
	ProtocolType   *string
	ProtocolName   *string
	Leader         string
	SkipAssignment bool
	Members        []JoinMember // the leader's answer only
}

// Join serves a JoinGroup. The answer comes on the channel, at once or
// when the rebalance's join phase completes.
func (c *Coordinator) Join(req JoinRequest) <-chan JoinResult {
	ch := make(chan JoinResult, 1)
	fail := func(err error, memberID string) <-chan JoinResult {
		ch <- JoinResult{Err: err, MemberID: memberID, Generation: -1}
		return ch
	}
	if req.Group == "" {
		return fail(ErrInvalidGroupID, req.MemberID)
	}
	if req.SessionTimeout < c.cfg.MinSessionTimeout || req.SessionTimeout > c.cfg.MaxSessionTimeout {
		return fail(ErrInvalidSessionTimeout, req.MemberID)
	}
	if err := c.serves(req.Group); err != nil {
		return fail(err, req.MemberID)
	}
	unknown := req.MemberID == ""
	g, ok := c.lookup(req.Group, unknown)
	if !ok {
		if c.isClosed() {
			return fail(ErrNotCoordinator, req.MemberID)
		}
		return fail(ErrUnknownMemberID, req.MemberID)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.state == stateDead:
		// Deleted meanwhile: the client retries and finds a new group.
		return fail(ErrCoordinatorNotAvailable, req.MemberID)
	case g.unloaded:
		return fail(ErrNotCoordinator, req.MemberID)
	case g.modern != nil && len(g.modern.members) > 0 && g.c.cfg.ConsumerMigrationPolicy == MigrationDisabled:
		// No mixed groups: a disabled policy refuses every step of a
		// migration.
		return fail(fmt.Errorf("%w: group %s is a consumer group", ErrInconsistentGroupProtocol, req.Group), req.MemberID)
	case g.modern != nil && len(g.modern.members) > 0:
		// A classic member of a consumer group (migration.go).
		g.classicJoin(req, ch)
		return ch
	case !g.acceptsJoin(req.MemberID):
		// Over group.max.size (lowered, say): the member is let go.
		if m, ok := g.members[req.MemberID]; ok {
			g.answerJoin(m, JoinResult{Err: ErrGroupMaxSizeReached, Generation: -1})
			g.answerSync(m, SyncResult{Err: ErrGroupMaxSizeReached})
		}
		g.remove(req.MemberID)
		return fail(ErrGroupMaxSizeReached, "")
	case !g.supports(req.ProtocolType, req.Protocols):
		return fail(ErrInconsistentGroupProtocol, req.MemberID)
	}
	if g.modern != nil {
		// An empty consumer group becomes a classic one; its offsets stay
		// and its records go.
		g.writeConsumer(g.modern.tombstones(), nil)
		g.modern, g.protocolType = nil, ""
	}
	switch {
	case unknown:
		g.joinNew(req, ch)
	default:
		g.joinExisting(req, ch)
	}
	return ch
}

func (c *Coordinator) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// acceptsJoin applies group.max.size: in a rebalance, existing members
// rejoin and new ones come in while fewer than the maximum await; otherwise
// new members come in while the group is below it.
func (g *group) acceptsJoin(memberID string) bool {
	max := g.c.cfg.MaxSize
	switch g.state {
	case statePreparingRebalance:
		if m, ok := g.members[memberID]; ok && m.awaitingJoin() {
			return true
		}
		return g.awaitingJoinCount() < max
	case stateCompletingRebalance, stateStable:
		_, ok := g.members[memberID]
		return ok || len(g.members) < max
	}
	return true
}

func (g *group) joinNew(req JoinRequest, ch chan JoinResult) {
	id := newMemberID(req.Client.ID, req.InstanceID)
	switch {
	case req.InstanceID != nil:
		if old, ok := g.static[*req.InstanceID]; ok {
			g.replaceStatic(req, old, id, ch)
			return
		}
		g.addMember(req, id, ch)
	case req.RequireKnownMemberID:
		// Answered at once; the member joins with this id, which it
		// must do within its session timeout.
		g.pending[id] = g.after(req.SessionTimeout, func() { g.expireHeartbeat(id) })
		ch <- JoinResult{Err: ErrMemberIDRequired, MemberID: id, Generation: -1}
	default:
		g.addMember(req, id, ch)
	}
}

func (g *group) joinExisting(req JoinRequest, ch chan JoinResult) {
	if _, ok := g.pending[req.MemberID]; ok {
		// The second join of KIP-394. Pending members are never static.
		g.addMember(req, req.MemberID, ch)
		return
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		ch <- JoinResult{Err: err, MemberID: req.MemberID, Generation: -1}
		return
	}
	m := g.members[req.MemberID]
	g.seen(m, req.Client)
	switch g.state {
	case statePreparingRebalance:
		g.updateMember(m, req, ch)
		g.maybeRebalance("member " + m.id + " rejoining" + reasonSuffix(req.Reason))
	case stateCompletingRebalance:
		if m.matches(req.Protocols) {
			// A retry of a join whose answer was lost: the same answer.
			ch <- g.joinResult(m.id, m.id == g.leader, false)
			return
		}
		g.updateMember(m, req, ch)
		g.maybeRebalance("member " + m.id + " changed its metadata" + reasonSuffix(req.Reason))
	case stateStable:
		if m.id != g.leader && m.matches(req.Protocols) {
			// A follower with nothing new gets the current generation
			// and goes on to SyncGroup.
			ch <- g.joinResult(m.id, false, false)
			return
		}
		// The leader rejoins to have the assignment recomputed (topic
		// metadata changed, say); any member does when its metadata
		// changed.
		g.updateMember(m, req, ch)
		g.maybeRebalance("member " + m.id + " rejoining a stable group" + reasonSuffix(req.Reason))
	default:
		// Empty: its members were removed. The member starts over.
		ch <- JoinResult{Err: ErrUnknownMemberID, MemberID: req.MemberID, Generation: -1}
	}
}

// seen records the client a member's request came from: the fetch hook
// matches fetches to members by it (a member may reconnect from elsewhere).
func (g *group) seen(m *member, c Client) {
	if c.Addr == "" {
		return // not from a connection (a test's request)
	}
	g.heardFrom(m.id, &m.presence, c)
	m.software = softwareOf(c, m.software)
	k := keyOf(c)
	if k == m.key {
		return
	}
	g.c.fetchers.remove(m.key, g)
	g.c.fetchers.add(k, g)
	m.key, m.clientID, m.clientHost = k, c.ID, "/"+k.host
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return "; client reason: " + r
}

// addMember adds a member whose join is parked until the join phase ends.
func (g *group) addMember(req JoinRequest, id string, ch chan JoinResult) {
	k := keyOf(req.Client)
	m := &member{
		id: id, instanceID: req.InstanceID, clientID: req.Client.ID, clientHost: "/" + k.host, key: k,
		software:       softwareOf(req.Client, software{}),
		sessionTimeout: req.SessionTimeout, rebalanceTimeout: req.RebalanceTimeout,
		protocolType: req.ProtocolType, protocols: req.Protocols, joinCh: ch, isNew: true,
	}
	if g.state == statePreparingRebalance && g.prevState == stateEmpty {
		g.newMemberAdded = true // extends the initial delay
	}
	g.add(m)
	if req.Client.Addr != "" {
		g.heardFrom(id, &m.presence, req.Client)
	}
	g.event(EventMemberJoined, m, req.Reason)
	// A new member cannot heartbeat before its join is answered, and a
	// client that gave up on its join retries with a new one: bound how
	// long a parked new member stays.
	g.scheduleHeartbeat(m, g.c.cfg.NewMemberJoinTimeout)
	g.maybeRebalance(fmt.Sprintf("adding member %s with instance id %v%s", id, m.instance(), reasonSuffix(req.Reason)))
}

// updateMember records a rejoining member's protocols and timeouts and
// parks its join (ch nil unparks it).
func (cl *classicGroup) updateMember(m *member, req JoinRequest, ch chan JoinResult) {
	m.protocols = req.Protocols
	m.sessionTimeout, m.rebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	m.joinCh = ch
}

// replaceStatic serves the join of a static member under a new member id
// (a restarted instance): the old id is fenced, and in a stable group whose
// protocol would not change the member takes over the old one's assignment
// without a rebalance (KIP-345), once the new member id is stored.
func (g *group) replaceStatic(req JoinRequest, oldID, newID string, ch chan JoinResult) {
	old := g.members[oldID]
	prevLeader := g.leader
	m := g.swapStatic(old, newID)
	g.scheduleHeartbeat(m, m.sessionTimeout)
	oldProtocols, oldSession, oldRebalance := m.protocols, m.sessionTimeout, m.rebalanceTimeout
	g.updateMember(m, req, ch)
	g.seen(m, req.Client)
	g.event(EventMemberReplaced, m, "instance "+m.instance()+" rejoined; fenced "+oldID)

	revert := func() {
		m.protocols, m.sessionTimeout, m.rebalanceTimeout = oldProtocols, oldSession, oldRebalance
		m.joinCh = nil
		back := g.swapStatic(m, oldID)
		g.scheduleHeartbeat(back, back.sessionTimeout)
	}
	switch g.state {
	case stateStable:
		if g.selectProtocol() != g.protocolName {
			g.maybeRebalance("static member " + newID + " joined with other protocols" + reasonSuffix(req.Reason))
			return
		}
		err := g.writeMetadata(g.assignments(), func(err error) {
			if m.joinCh != ch || g.state != stateStable {
				return // replaced again, or a rebalance began and will answer it
			}
			if err != nil {
				g.c.log.Warn("storing a replaced static member failed; reverting", "group", g.id, "member", newID, "err", err)
				revert()
				ch <- JoinResult{Err: storeError(err), Generation: g.generation, Leader: prevLeader,
					ProtocolType: ptr(g.protocolType), ProtocolName: ptr(g.protocolName)}
				return
			}
			var r JoinResult
			if req.SupportsSkipAssignment {
				// The leader learns it leads but keeps the assignment
				// it has (KIP-814).
				leads := g.leader == newID
				r = g.joinResult(newID, leads, leads)
			} else {
				// The old leader id keeps a restarted leader from
				// computing an assignment a stable group would not
				// send out.
				r = g.joinResult(newID, false, false)
				r.Leader = prevLeader
			}
			g.answerJoin(m, r)
		})
		if err != nil {
			revert()
			ch <- JoinResult{Err: storeError(err), Generation: -1}
		}
	case stateCompletingRebalance:
		// The leader may already have the old id in its member list:
		// its assignment would miss the new one. Start over.
		g.prepareRebalance("static member " + newID + " rejoined during CompletingRebalance" + reasonSuffix(req.Reason))
	default:
		g.maybeCompleteJoin()
	}
}

// swapStatic moves a static member to a new member id, answering the old
// id's parked requests FENCED_INSTANCE_ID.
func (g *group) swapStatic(old *member, newID string) *member {
	g.answerJoin(old, JoinResult{Err: ErrFencedInstanceID, MemberID: old.id, Generation: -1})
	g.answerSync(old, SyncResult{Err: ErrFencedInstanceID})
	old.heartbeat.stop()
	g.forget(old.id, &old.presence)
	delete(g.members, old.id)
	m := *old
	m.id, m.heartbeat, m.joinCh, m.syncCh = newID, nil, nil, nil
	g.members[newID] = &m
	g.static[*m.instanceID] = newID
	if g.leader == old.id {
		g.leader = newID
	}
	if g.pendingSync[old.id] {
		delete(g.pendingSync, old.id)
		g.pendingSync[newID] = true
	}
	for tp, o := range g.owners {
		if o.MemberID == old.id {
			o.MemberID = newID
			g.owners[tp] = o
		}
	}
	return &m
}

// newMemberID is Kafka's: the client id (or the instance id of a static
// member), a dash and a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	return prefix + "-" + newUUID()
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // IETF variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
