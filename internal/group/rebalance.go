package group

import (
	"errors"
	"fmt"
	"time"
)

// The rebalance machinery, as Kafka's GroupMetadataManager runs classic
// groups. Every function here expects g.mu held.

// timer is a cancellable callback run under g.mu. Stopping it under g.mu
// guarantees it will not run, even if its clock already fired.
type timer struct {
	stopped bool // g.mu
	s       Stopper
}

func (g *group) after(d time.Duration, fn func()) *timer {
	t := &timer{}
	t.s = g.c.clock.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if t.stopped || g.unloaded || g.state == stateDead {
			return
		}
		t.stopped = true
		fn()
	})
	return t
}

func (t *timer) stop() {
	if t != nil && !t.stopped {
		t.stopped = true
		t.s.Stop()
	}
}

// scheduleHeartbeat (re)starts a member's session timer.
func (g *group) scheduleHeartbeat(m *member, d time.Duration) {
	m.heartbeat.stop()
	m.heartbeat = g.after(d, func() { g.expireHeartbeat(m.id) })
}

// expireHeartbeat removes a member whose session ended, unless it is
// parked in a rebalance (then its session restarts when the rebalance
// completes).
func (g *group) expireHeartbeat(id string) {
	if _, ok := g.pending[id]; ok {
		g.c.log.Info("pending member expired", "group", g.id, "member", id)
		g.remove(id)
		if g.state == statePreparingRebalance && g.allJoined() {
			g.completeJoin()
		}
		return
	}
	m, ok := g.members[id]
	if !ok || m.satisfiedHeartbeat() {
		return
	}
	g.c.log.Info("member session expired", "group", g.id, "member", id)
	g.event(EventMemberExpired, m, fmt.Sprintf("no heartbeat within %v", m.sessionTimeout))
	g.removeAndUpdate(m, "removing member "+id+" on heartbeat expiration")
}

// removeAndUpdate removes a member and moves the group on: a rebalance if
// it was Stable or awaiting syncs, or the end of the join phase if the
// member was the last one awaited.
func (g *group) removeAndUpdate(m *member, reason string) {
	// A new member may time out with its JoinGroup parked: answer it, so
	// that a live client retries.
	g.answerJoin(m, JoinResult{Err: ErrUnknownMemberID, Generation: -1})
	g.answerSync(m, SyncResult{Err: ErrUnknownMemberID})
	g.remove(m.id)
	switch {
	case g.state == stateStable || g.state == stateCompletingRebalance:
		g.maybeRebalance(reason)
	case g.state == statePreparingRebalance && g.allJoined():
		g.completeJoin()
	}
}

// maybeRebalance starts a rebalance if the state allows one, or else tries
// to complete the join phase.
func (g *group) maybeRebalance(reason string) {
	if g.canRebalance() {
		g.prepareRebalance(reason)
		return
	}
	g.maybeCompleteJoin()
}

// maybeCompleteJoin ends the join phase once every member has rejoined,
// except in the initial rebalance, which waits out its delay.
func (g *group) maybeCompleteJoin() {
	if g.state == statePreparingRebalance && g.allJoined() && g.prevState != stateEmpty {
		g.completeJoin()
	}
}

func (g *group) prepareRebalance(reason string) {
	if g.state == stateCompletingRebalance {
		g.resetAssignments(ErrRebalanceInProgress)
	}
	g.syncTimer.stop()
	clear(g.pendingSync)

	initial := g.state == stateEmpty
	if initial {
		// A new group: give more members the chance to join first.
		delay := g.c.cfg.InitialRebalanceDelay
		remaining := max(g.rebalanceTimeout()-delay, 0)
		g.joinTimer.stop()
		g.joinTimer = g.after(delay, func() { g.initialDelayDone(delay, remaining) })
	}
	g.transition(statePreparingRebalance)
	g.c.log.Info("preparing to rebalance", "group", g.id, "generation", g.generation, "reason", reason)
	g.hist.event(Event{Time: g.stateTime, Kind: EventRebalance, Generation: g.generation, Reason: reason})
	if initial {
		return
	}
	if g.allJoined() {
		g.completeJoin()
		return
	}
	g.joinTimer.stop()
	g.joinTimer = g.after(g.rebalanceTimeout(), g.completeJoin)
}

// initialDelayDone extends the initial delay while members keep joining,
// up to the rebalance timeout.
func (g *group) initialDelayDone(delay, remaining time.Duration) {
	if g.newMemberAdded && remaining > 0 {
		g.newMemberAdded = false
		next := min(g.c.cfg.InitialRebalanceDelay, remaining)
		left := max(remaining-delay, 0)
		g.joinTimer = g.after(next, func() { g.initialDelayDone(next, left) })
		return
	}
	g.completeJoin()
}

// completeJoin ends the join phase: dynamic members that did not rejoin
// are removed, and the next generation begins, Empty or awaiting the
// leader's assignment.
func (g *group) completeJoin() {
	g.joinTimer.stop()
	for _, m := range g.sortedMembers() {
		if !m.awaitingJoin() && m.instanceID == nil {
			g.event(EventMemberRemoved, m, "did not rejoin within the rebalance timeout")
			g.remove(m.id)
		}
	}
	if g.state == stateDead {
		return
	}
	if len(g.members) > 0 && !g.electJoinedLeader() {
		// Only static members remain and none rejoined: wait for them
		// until their sessions expire.
		g.c.log.Warn("no member rejoined; waiting again", "group", g.id)
		g.joinTimer = g.after(g.rebalanceTimeout(), g.completeJoin)
		return
	}
	g.generation++
	g.newMemberAdded = false
	clear(g.pendingSync)
	if len(g.members) == 0 {
		g.protocolName = ""
		g.subscribed = g.computeSubscribed()
		g.transition(stateEmpty)
		g.c.log.Info("group is empty", "group", g.id, "generation", g.generation)
		g.hist.event(Event{Time: g.stateTime, Kind: EventEmpty, Generation: g.generation})
		// Not waited for: a lost write only brings back an older
		// generation, which has no members either.
		if err := g.writeMetadata(nil, func(error) {}); err != nil {
			g.c.log.Warn("writing empty group metadata failed", "group", g.id, "err", err)
		}
		return
	}
	g.protocolName = g.selectProtocol()
	g.subscribed = g.computeSubscribed()
	g.transition(stateCompletingRebalance)
	ms := g.sortedMembers()
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.id
	}
	g.c.log.Info("group generation formed", "group", g.id, "generation", g.generation,
		"members", len(ms), "protocol", g.protocolName, "leader", g.leader)
	g.hist.event(Event{Time: g.stateTime, Kind: EventGeneration, Generation: g.generation,
		Protocol: g.protocolName, Leader: g.leader, Members: ids})
	for _, m := range ms {
		g.answerJoin(m, g.joinResult(m.id, m.id == g.leader, false))
		g.scheduleHeartbeat(m, m.sessionTimeout)
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	gen := g.generation
	g.syncTimer = g.after(g.rebalanceTimeout(), func() { g.expirePendingSync(gen) })
}

// electJoinedLeader keeps the leader if it rejoined, or else makes the
// oldest rejoined member leader; false if none rejoined.
func (g *group) electJoinedLeader() bool {
	if l, ok := g.members[g.leader]; ok && l.awaitingJoin() {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.awaitingJoin() {
			g.c.log.Info("leader did not rejoin; electing another", "group", g.id, "old", g.leader, "new", m.id)
			g.leader = m.id
			return true
		}
	}
	return false
}

// joinResult is the answer for a member in the current generation; the
// leader (withMembers) gets every member's metadata for its protocol.
func (cl *classicGroup) joinResult(id string, withMembers, skipAssignment bool) JoinResult {
	r := JoinResult{MemberID: id, Generation: cl.generation, Leader: cl.leader, SkipAssignment: skipAssignment,
		ProtocolType: ptr(cl.protocolType), ProtocolName: ptr(cl.protocolName)}
	if withMembers {
		for _, m := range cl.sortedMembers() {
			r.Members = append(r.Members, JoinMember{MemberID: m.id, InstanceID: m.instanceID, Metadata: m.metadata(cl.protocolName)})
		}
	}
	return r
}

// expirePendingSync removes the members that did not SyncGroup within
// the rebalance timeout of generation gen, and rebalances.
func (g *group) expirePendingSync(gen int32) {
	if gen != g.generation || (g.state != stateCompletingRebalance && g.state != stateStable) || len(g.pendingSync) == 0 {
		return
	}
	var ids []string
	for id := range g.pendingSync {
		if m, ok := g.members[id]; ok {
			g.event(EventMemberRemoved, m, "did not sync within the rebalance timeout")
		}
		g.remove(id)
		ids = append(ids, id)
	}
	g.prepareRebalance(fmt.Sprintf("removing %v on pending sync expiration", ids))
}

// resetAssignments clears the assignments and answers parked syncs with
// err (a rebalance began, or storing the assignment failed).
func (g *group) resetAssignments(err error) {
	for _, m := range g.members {
		m.assignment = nil
	}
	g.propagate(err)
}

// propagate answers every parked SyncGroup with its member's assignment
// (or err), restarting each session.
func (g *group) propagate(err error) {
	for _, m := range g.members {
		if !m.awaitingSync() {
			continue
		}
		r := SyncResult{Err: err, Assignment: m.assignment}
		if err == nil {
			r.ProtocolType, r.ProtocolName = ptr(g.protocolType), ptr(g.protocolName)
		}
		g.answerSync(m, r)
		g.scheduleHeartbeat(m, m.sessionTimeout)
	}
}

func (cl *classicGroup) answerJoin(m *member, r JoinResult) bool {
	if m.joinCh == nil {
		return false
	}
	m.joinCh <- r
	m.joinCh = nil
	return true
}

func (cl *classicGroup) answerSync(m *member, r SyncResult) {
	if m.syncCh != nil {
		m.syncCh <- r
		m.syncCh = nil
	}
}

// unload answers the parked requests with NOT_COORDINATOR and stops the
// timers: the coordinator is closing.
func (g *group) unload() {
	g.unloaded = true
	g.joinTimer.stop()
	g.syncTimer.stop()
	for _, t := range g.pending {
		t.stop()
	}
	for _, m := range g.members {
		m.heartbeat.stop()
		g.answerJoin(m, JoinResult{Err: ErrNotCoordinator, MemberID: m.id, Generation: -1})
		g.answerSync(m, SyncResult{Err: ErrNotCoordinator})
	}
}

// event records a member event in the history.
func (g *group) event(kind EventKind, m *member, reason string) {
	g.hist.event(Event{Time: g.c.clock.Now(), Kind: kind, Generation: g.generation, Member: ownerOf(m), Reason: reason})
}

func ownerOf(m *member) Owner {
	return Owner{MemberID: m.id, InstanceID: m.instance(), ClientID: m.clientID, ClientHost: m.clientHost,
		SoftwareName: m.software.name, SoftwareVersion: m.software.version}
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// storeError turns a failed write of group metadata into the error Kafka
// answers (appendGroupMetadataErrorToResponseError); nil stays nil.
func storeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrRecordTooLarge):
		return fmt.Errorf("%w: %v", ErrUnknownServerError, err)
	case errors.Is(err, ErrNotCoordinator), errors.Is(err, ErrCoordinatorNotAvailable):
		return err
	}
	return fmt.Errorf("%w: %v", ErrNotCoordinator, err)
}
