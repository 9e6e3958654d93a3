package group

// SyncRequest is a SyncGroup request; Assignments come from the leader.
type SyncRequest struct {
	Client       Client
	Group        string
	Generation   int32
	MemberID     string
	InstanceID   *string
	ProtocolType *string // v5+; checked against the group's when set
	ProtocolName *string
	Assignments  []Assignment
}

// Assignment is the leader's assignment for one member.
type Assignment struct {
	MemberID string
	Data     []byte
}

// SyncResult is the answer to a SyncGroup.
type SyncResult struct {
	Err          error
	ProtocolType *string
	ProtocolName *string
	Assignment   []byte
}

// Sync serves a SyncGroup. Members' syncs park until the leader's
// assignment is stored; the answer comes on the channel.
func (c *Coordinator) Sync(req SyncRequest) <-chan SyncResult {
	ch := make(chan SyncResult, 1)
	fail := func(err error) <-chan SyncResult {
		ch <- SyncResult{Err: err}
		return ch
	}
	if req.Group == "" {
		return fail(ErrInvalidGroupID)
	}
	if err := c.serves(req.Group); err != nil {
		return fail(err)
	}
	g, ok := c.lookup(req.Group, false)
	if !ok {
		return fail(ErrUnknownMemberID)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.modern != nil && !g.unloaded && g.state != stateDead {
		ch <- g.classicSync(req)
		return ch
	}
	if err := g.validateSync(req); err != nil {
		return fail(err)
	}
	m := g.members[req.MemberID]
	g.seen(m, req.Client)
	switch g.state {
	case stateEmpty:
		return fail(ErrUnknownMemberID)
	case statePreparingRebalance:
		return fail(ErrRebalanceInProgress)
	case stateCompletingRebalance:
		m.syncCh = ch
		g.synced(m.id)
		if m.id == g.leader {
			g.storeAssignment(req)
		}
	case stateStable:
		g.synced(m.id)
		ch <- SyncResult{ProtocolType: ptr(g.protocolType), ProtocolName: ptr(g.protocolName), Assignment: m.assignment}
	}
	return ch
}

func (g *group) validateSync(req SyncRequest) error {
	switch {
	case g.unloaded:
		return ErrNotCoordinator
	case g.state == stateDead:
		return ErrCoordinatorNotAvailable
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	switch {
	case req.Generation != g.generation:
		return ErrIllegalGeneration
	case inconsistent(req.ProtocolType, g.protocolType), inconsistent(req.ProtocolName, g.protocolName):
		return ErrInconsistentGroupProtocol
	}
	return nil
}

func inconsistent(asked *string, have string) bool {
	return asked != nil && have != "" && *asked != have
}

// synced notes a member's SyncGroup; once all have synced, the pending
// sync timer is no longer needed.
func (cl *classicGroup) synced(id string) {
	delete(cl.pendingSync, id)
	if len(cl.pendingSync) == 0 {
		cl.syncTimer.stop()
	}
}

// storeAssignment writes the leader's assignment (members it left out get
// an empty one) and, once durable and if the generation is still awaiting
// it, hands it to the members and makes the group Stable.
func (g *group) storeAssignment(req SyncRequest) {
	assignment := make(map[string][]byte, len(g.members))
	for _, a := range req.Assignments {
		assignment[a.MemberID] = a.Data
	}
	for id := range g.members {
		if _, ok := assignment[id]; !ok {
			assignment[id] = []byte{}
		}
	}
	gen := req.Generation
	done := func(err error) {
		if g.state != stateCompletingRebalance || g.generation != gen {
			return // a new rebalance took over
		}
		if err != nil {
			err = storeError(err)
			g.c.log.Warn("storing the group assignment failed", "group", g.id, "generation", gen, "err", err)
			g.resetAssignments(err)
			g.maybeRebalance("error storing the assignment: " + err.Error())
			return
		}
		for id, m := range g.members {
			m.assignment = assignment[id]
		}
		g.transition(stateStable)
		// History first: a new owner's first fetch may follow its answer
		// at once.
		g.stable()
		g.propagate(nil)
	}
	if err := g.writeMetadata(assignment, done); err != nil {
		done(err)
	}
}

// HeartbeatRequest is a Heartbeat request.
type HeartbeatRequest struct {
	Client     Client
	Group      string
	Generation int32
	MemberID   string
	InstanceID *string
}

// Heartbeat serves a Heartbeat: it restarts the member's session and says
// whether a rebalance is under way.
func (c *Coordinator) Heartbeat(req HeartbeatRequest) error {
	if req.Group == "" {
		return ErrInvalidGroupID
	}
	if err := c.serves(req.Group); err != nil {
		return err
	}
	g, ok := c.lookup(req.Group, false)
	if !ok {
		return ErrUnknownMemberID
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.unloaded:
		return ErrNotCoordinator
	case g.state == stateDead:
		return ErrCoordinatorNotAvailable
	case g.modern != nil:
		return g.classicHeartbeat(req)
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return ErrIllegalGeneration
	}
	m := g.members[req.MemberID]
	g.seen(m, req.Client)
	switch g.state {
	case stateEmpty:
		return ErrUnknownMemberID
	case statePreparingRebalance:
		g.scheduleHeartbeat(m, m.sessionTimeout)
		return ErrRebalanceInProgress
	default:
		// CompletingRebalance too: members heartbeat once their join is
		// answered, before the leader's assignment arrives.
		g.scheduleHeartbeat(m, m.sessionTimeout)
		return nil
	}
}

// LeaveRequest is a LeaveGroup request (one member before v3).
type LeaveRequest struct {
	Group   string
	Members []LeavingMember
}

// LeavingMember is one member to remove: by member id, or (administrative
// removal, v3+) by instance id alone.
type LeavingMember struct {
	MemberID   string
	InstanceID *string
	Reason     string
}

// LeaveResult is the answer to a LeaveGroup: Err for the request, else one
// error per member, in order.
type LeaveResult struct {
	Err     error
	Members []error
}

// Leave serves a LeaveGroup; the answer comes on the channel, once what
// it changed of a consumer group is durable.
func (c *Coordinator) Leave(req LeaveRequest) <-chan LeaveResult {
	ch := make(chan LeaveResult, 1)
	fail := func(err error) <-chan LeaveResult {
		ch <- LeaveResult{Err: err}
		return ch
	}
	if req.Group == "" {
		return fail(ErrInvalidGroupID)
	}
	if err := c.serves(req.Group); err != nil {
		return fail(err)
	}
	g, ok := c.lookup(req.Group, false)
	if !ok {
		return fail(ErrUnknownMemberID)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.unloaded:
		return fail(ErrNotCoordinator)
	case g.state == stateDead:
		return fail(ErrCoordinatorNotAvailable)
	}
	res := LeaveResult{Members: make([]error, len(req.Members))}
	if g.modern != nil {
		for i, lm := range req.Members {
			res.Members[i] = g.classicLeave(lm)
		}
		g.flushConsumer(func(err error) {
			if err != nil {
				res = LeaveResult{Err: ErrNotCoordinator}
			}
			ch <- res
		})
		return ch
	}
	left := false
	for i, lm := range req.Members {
		res.Members[i] = g.leave(lm)
		left = left || res.Members[i] == nil
	}
	if left {
		reason := "explicit LeaveGroup request"
		switch g.state {
		case stateStable, stateCompletingRebalance:
			g.maybeRebalance(reason)
		case statePreparingRebalance:
			g.maybeCompleteJoin()
		}
	}
	ch <- res
	return ch
}

func (g *group) leave(lm LeavingMember) error {
	id := lm.MemberID
	switch {
	case id == "":
		// Removal by instance id (kafka-consumer-groups --delete
		// members, or a static member shutting down).
		if lm.InstanceID == nil {
			return ErrUnknownMemberID
		}
		var ok bool
		if id, ok = g.static[*lm.InstanceID]; !ok {
			return ErrUnknownMemberID
		}
	case g.pending[id] != nil:
		g.remove(id)
		return nil
	default:
		if err := g.validateMember(id, lm.InstanceID); err != nil {
			return err
		}
	}
	m := g.members[id]
	g.event(EventMemberLeft, m, lm.Reason)
	g.answerJoin(m, JoinResult{Err: ErrUnknownMemberID, Generation: -1})
	g.answerSync(m, SyncResult{Err: ErrUnknownMemberID})
	g.remove(id)
	return nil
}
