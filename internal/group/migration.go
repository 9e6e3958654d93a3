package group

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// Live migration between the two protocols, as Kafka 4's
// GroupMetadataManager does it:
//
//   - Upgrade. A ConsumerGroupHeartbeat joining a classic group that has
//     members converts it, when group.consumer.migration.policy allows
//     upgrades, the group uses the consumer protocol type and it fits
//     group.consumer.max.size. The classic members become members of the
//     consumer group at the classic generation, holding what their last
//     assignment gave them; that assignment is also the first target.
//     Their parked JoinGroup and SyncGroup requests are answered
//     REBALANCE_IN_PROGRESS, so they rejoin into the consumer group.
//   - Classic members of a consumer group keep speaking JoinGroup,
//     SyncGroup, Heartbeat and LeaveGroup. A JoinGroup is their heartbeat
//     with a subscription: it is answered at once, with the member epoch as
//     the generation and no leader; the SyncGroup that follows gets the
//     member's assigned partitions from the server-side assignor. A
//     Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin to
//     move on: the group epoch passed it, it must revoke, or partitions it
//     waited for are free.
//   - Downgrade. When the last member of the consumer protocol leaves (or
//     is fenced) and classic members remain, the group becomes classic
//     again if the policy allows downgrades and it fits group.max.size:
//     the members keep what they hold as their assignment, at the group
//     epoch as generation, and a rebalance starts so that a leader assigns
//     again.
//
// Ownership. The classic assignment of a converted group may give one
// partition to two members (a leader's bug, or a generation that was
// still settling: KAFKA-21684). The first member by id keeps it; for the
// others it is a partition to revoke. The owners index counts every
// holder, so the partition goes to nobody else before all have let go.

// MigrationPolicy is group.consumer.migration.policy.
type MigrationPolicy string

// Kafka's policies; "both" is read as bidirectional.
const (
	MigrationBidirectional MigrationPolicy = "bidirectional"
	MigrationUpgrade       MigrationPolicy = "upgrade"
	MigrationDowngrade     MigrationPolicy = "downgrade"
	MigrationDisabled      MigrationPolicy = "disabled"
)

// ParseMigrationPolicy reads a policy, case-insensitively.
func ParseMigrationPolicy(s string) (MigrationPolicy, error) {
	switch p := MigrationPolicy(strings.ToLower(s)); p {
	case MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled:
		return p, nil
	case "both":
		return MigrationBidirectional, nil
	}
	return "", fmt.Errorf("group.consumer.migration.policy %q: want bidirectional, upgrade, downgrade or disabled", s)
}

func (p MigrationPolicy) upgrades() bool {
	return p == MigrationBidirectional || p == MigrationUpgrade
}

func (p MigrationPolicy) downgrades() bool {
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// upgrade converts the classic group, which has members, into a consumer
// group, or says why it cannot. Caller holds g.mu.
func (g *group) upgrade() error {
	c := g.c
	notConsumer := func(why string) error {
		c.log.Info("cannot upgrade a classic group to a consumer group", "group", g.id, "reason", why)
		return fmt.Errorf("%w: group %s is not a consumer group (%s)", ErrGroupIDNotFound, g.id, why)
	}
	switch {
	case !c.cfg.ConsumerMigrationPolicy.upgrades():
		return notConsumer("online upgrade is disabled by group.consumer.migration.policy")
	case g.protocolType != consumerProtocolType:
		return notConsumer("it does not use the consumer protocol type")
	case len(g.members) > c.cfg.ConsumerMaxSize:
		return notConsumer("it has more members than group.consumer.max.size")
	}
	type parsed struct {
		m        *member
		meta     kmsg.ConsumerMemberMetadata
		assigned []model.TopicPartition
	}
	var ms []parsed
	names := map[string]bool{}
	for _, m := range g.sortedMembers() {
		p := parsed{m: m}
		protocol := g.protocolName
		if protocol == "" && len(m.protocols) > 0 {
			protocol = m.protocols[0].Name
		}
		if err := p.meta.ReadFrom(m.metadata(protocol)); err != nil {
			return notConsumer("a member's subscription does not parse")
		}
		var ok bool
		if p.assigned, ok = assignedPartitions(m.assignment); !ok {
			return notConsumer("a member's assignment does not parse")
		}
		for _, t := range p.meta.Topics {
			names[t] = true
		}
		for _, tp := range p.assigned {
			names[tp.Topic] = true
		}
		ms = append(ms, p)
	}

	// Parked requests learn that a new rebalance began: they rejoin.
	for _, m := range g.members {
		g.answerJoin(m, JoinResult{Err: ErrRebalanceInProgress, MemberID: m.id, Generation: -1})
		g.answerSync(m, SyncResult{Err: ErrRebalanceInProgress})
		m.heartbeat.stop()
	}
	for id, t := range g.pending {
		t.stop()
		delete(g.pending, id)
	}
	g.joinTimer.stop()
	g.syncTimer.stop()

	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch = g.generation, g.generation
	cg.dropClassic, cg.topicsDirty = true, true
	if c.topics != nil {
		cg.topics = c.topics.Lookup(slices.Sorted(maps.Keys(names)))
		cg.metaVersion = c.topics.Version()
	}
	for name, t := range cg.topics {
		cg.names[t.ID] = name
	}
	for _, p := range ms {
		m := p.m
		cm := &consumerMember{id: m.id, instanceID: m.instance(), clientID: m.clientID, clientHost: m.clientHost, software: m.software,
			key: m.key, rebalanceTimeout: m.rebalanceTimeout, epoch: g.generation, prevEpoch: g.generation,
			assigned: partitionEpochs{}, revoking: partitionEpochs{},
			classic:  &classicState{sessionTimeout: m.sessionTimeout, protocols: m.protocols},
			presence: presence{addr: m.addr}} // the same entry of the connection index
		m.grace.stop()
		cm.topicNames = slices.Compact(slices.Sorted(slices.Values(p.meta.Topics)))
		if p.meta.Rack != nil {
			cm.rackID = *p.meta.Rack
		}
		target := map[[16]byte][]int32{}
		for _, tp := range p.assigned {
			t, ok := cg.topics[tp.Topic]
			if !ok || tp.Partition < 0 || tp.Partition >= t.Partitions {
				continue
			}
			set := cm.assigned
			if _, held := cg.owners[partitionID{t.ID, tp.Partition}]; held {
				set = cm.revoking // given to an earlier member too
				cm.state = memberUnrevokedPartitions
			} else {
				target[t.ID] = append(target[t.ID], tp.Partition)
			}
			if set[t.ID] == nil {
				set[t.ID] = map[int32]int32{}
			}
			set[t.ID][tp.Partition] = g.generation
			cg.hold(partitionID{t.ID, tp.Partition}, m.id)
		}
		for id := range target {
			slices.Sort(target[id])
		}
		cg.target[m.id] = target
		cg.members[m.id] = cm
		if cm.instanceID != "" {
			cg.static[cm.instanceID] = m.id
		}
	}
	cg.touchAll()

	// The classic state starts again, Empty; the fetch hook's
	// registrations pass to the consumer members as they are.
	g.classicGroup = newClassicGroup(c.clock.Now())
	g.modern = cg
	g.protocolType = consumerProtocolType
	for _, m := range cg.members {
		g.scheduleConsumerSession(m)
		g.trackRebalanceTimeout(m)
	}
	c.log.Info("upgraded a classic group to a consumer group", "group", g.id, "epoch", cg.epoch, "members", len(cg.members))
	g.hist.event(Event{Time: g.c.clock.Now(), Kind: EventUpgraded, Generation: cg.epoch, Protocol: "consumer",
		Members: slices.Sorted(maps.Keys(cg.members))})
	return nil
}

// consumerMemberGone takes m out of the consumer group (it left, or was
// fenced), or downgrades the group when m was the last member of the
// consumer protocol. Caller holds g.mu; the caller flushes.
func (g *group) consumerMemberGone(m *consumerMember, kind EventKind, reason string) {
	cg := g.modern
	g.hist.event(Event{Time: g.c.clock.Now(), Kind: kind, Generation: m.epoch, Member: m.owner(), Reason: reason})
	m.classicDeadline().stop()
	if m.classic == nil && g.downgradesWithout(m) {
		cg.dropMember(m)
		g.untrack(m)
		g.downgrade()
		return
	}
	cg.removeMember(m)
	g.untrack(m)
}

// downgradesWithout says whether the group turns classic once m, of the
// consumer protocol, is gone: the others are all classic and the policy
// allows it. Caller holds g.mu.
func (g *group) downgradesWithout(m *consumerMember) bool {
	cg := g.modern
	if len(cg.members) <= 1 {
		return false // an empty group converts when it is joined
	}
	for _, o := range cg.members {
		if o != m && o.classic == nil {
			return false
		}
	}
	switch {
	case !g.c.cfg.ConsumerMigrationPolicy.downgrades():
		g.c.log.Info("not downgrading a consumer group whose members are all classic: online downgrade is disabled by group.consumer.migration.policy", "group", g.id)
		return false
	case len(cg.members)-1 > g.c.cfg.MaxSize:
		g.c.log.Info("not downgrading a consumer group whose members are all classic: it has more members than group.max.size", "group", g.id)
		return false
	}
	return true
}

// downgrade turns the consumer group, whose members are all classic,
// into a classic group at the group epoch as generation (the one its
// members joined at), and starts a rebalance. Caller holds g.mu.
func (g *group) downgrade() {
	cg := g.modern
	g.writeConsumer(cg.tombstones(), nil)

	g.classicGroup = newClassicGroup(g.c.clock.Now())
	g.generation = cg.epoch
	g.protocolType = consumerProtocolType
	for _, cm := range cg.sortedMembers() {
		cm.session.stop()
		cm.rebalance.stop()
		cm.classicDeadline().stop()
		addr := cm.addr
		g.untrack(cm)
		m := &member{id: cm.id, clientID: cm.clientID, clientHost: cm.clientHost, key: cm.key, software: cm.software,
			sessionTimeout: cm.classic.sessionTimeout, rebalanceTimeout: cm.rebalanceTimeout,
			protocolType: consumerProtocolType, protocols: cm.classic.protocols}
		if cm.instanceID != "" {
			m.instanceID = ptr(cm.instanceID)
		}
		m.assignment = encodeAssignment(cm.assigned, cg.names, protocolVersion(cm.classic.protocols))
		g.add(m)
		if addr != "" {
			g.heardFrom(m.id, &m.presence, Client{Addr: addr})
		}
		g.scheduleHeartbeat(m, m.sessionTimeout)
	}
	g.modern = nil
	g.protocolName = g.selectProtocol()
	g.transition(stateStable)
	g.subscribed = g.computeSubscribed()
	g.c.log.Info("downgraded a consumer group to a classic group", "group", g.id, "generation", g.generation, "members", len(g.members))
	g.hist.event(Event{Time: g.c.clock.Now(), Kind: EventDowngraded, Generation: g.generation, Protocol: g.protocolName})
	if err := g.writeMetadata(g.assignments(), func(error) {}); err != nil {
		g.c.log.Warn("writing a downgraded group failed", "group", g.id, "err", err)
	}
	g.prepareRebalance("downgrade of group " + g.id + " from consumer to classic")
}

func (m *consumerMember) classicDeadline() *timer {
	if m.classic == nil {
		return nil
	}
	return m.classic.deadline
}

// protocolVersion is the ConsumerProtocol version a classic member's
// first protocol is written in; its assignment is answered in it.
func protocolVersion(ps []Protocol) int16 {
	if len(ps) == 0 || len(ps[0].Metadata) < 2 {
		return 0
	}
	return min(int16(ps[0].Metadata[0])<<8|int16(ps[0].Metadata[1]), 3)
}

// encodeAssignment writes partitions as a ConsumerProtocol assignment.
func encodeAssignment(ps partitionEpochs, names map[[16]byte]string, version int16) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = max(version, 0)
	for _, id := range sortedIDs(ps) {
		name, ok := names[id]
		if !ok {
			continue
		}
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = name, slices.Sorted(maps.Keys(ps[id]))
		a.Topics = append(a.Topics, t)
	}
	slices.SortFunc(a.Topics, func(x, y kmsg.ConsumerMemberAssignmentTopic) int { return strings.Compare(x.Topic, y.Topic) })
	return a.AppendTo(nil)
}

// supportsClassic says whether a classic member with these protocols may
// join the consumer group: the consumer protocol type, and a protocol every
// classic member supports.
func (cg *consumerGroup) supportsClassic(protocolType string, protocols []Protocol) bool {
	if protocolType != consumerProtocolType || len(protocols) == 0 {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range cg.members {
			if m.classic != nil && !slices.ContainsFunc(m.classic.protocols, func(q Protocol) bool { return q.Name == p.Name }) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// classicJoin serves a JoinGroup of a classic member to a consumer group
// with members. Caller holds g.mu.
func (g *group) classicJoin(req JoinRequest, ch chan JoinResult) {
	cg := g.modern
	fail := func(err error, id string) { ch <- JoinResult{Err: err, MemberID: id, Generation: -1} }
	if !cg.supportsClassic(req.ProtocolType, req.Protocols) {
		fail(ErrInconsistentGroupProtocol, req.MemberID)
		return
	}
	unknown := req.MemberID == ""
	id := req.MemberID
	if unknown {
		id = newMemberID(req.Client.ID, req.InstanceID)
	}
	if unknown && req.RequireKnownMemberID && req.InstanceID == nil {
		ch <- JoinResult{Err: ErrMemberIDRequired, MemberID: id, Generation: -1}
		return
	}
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(req.Protocols[0].Metadata); err != nil {
		fail(fmt.Errorf("%w: the subscription does not parse: %v", ErrInconsistentGroupProtocol, err), req.MemberID)
		return
	}
	m, bump, err := g.classicMemberFor(req, id, unknown)
	if err != nil {
		fail(err, req.MemberID)
		return
	}
	m.classic.sessionTimeout, m.classic.protocols = req.SessionTimeout, req.Protocols
	m.rebalanceTimeout = req.RebalanceTimeout
	if meta.Rack != nil {
		m.rackID = *meta.Rack
	}
	if names := slices.Compact(slices.Sorted(slices.Values(meta.Topics))); !slices.Equal(names, m.topicNames) {
		m.topicNames, bump = names, true
	}
	m.clientID, m.clientHost = req.Client.ID, "/"+keyOf(req.Client).host
	m.software = softwareOf(req.Client, m.software)
	g.heardFromConsumer(m, req.Client)
	g.refreshAndAssign(bump, false)
	// What it still owns, by its subscription (nothing for an eager
	// member, which gave everything up before joining).
	ownedTopics := []OwnedTopic{}
	for _, t := range meta.OwnedPartitions {
		if info, ok := cg.topics[t.Topic]; ok {
			ownedTopics = append(ownedTopics, OwnedTopic{TopicID: info.ID, Partitions: t.Partitions})
		}
	}
	owned := ownedFromRequest(ownedTopics)
	cg.dropShared(m, owned)
	if err := g.reconcileMember(m, owned, nil); err != nil {
		fail(err, m.id)
		return
	}
	// It must sync within its rebalance timeout.
	m.classic.deadline.stop()
	m.classic.deadline = g.classicFence(m, m.rebalanceTimeout, "did not sync within its rebalance timeout")
	res := JoinResult{MemberID: m.id, Generation: m.epoch, ProtocolType: ptr(consumerProtocolType),
		ProtocolName: ptr(m.classic.protocols[0].Name)}
	g.flushConsumer(func(err error) {
		if err != nil {
			fail(ErrNotCoordinator, m.id)
			return
		}
		ch <- res
	})
}

// dropShared takes from m the partitions it holds with another member
// and its JoinGroup shows it gave up: it gets them back only once nobody
// else holds them.
func (cg *consumerGroup) dropShared(m *consumerMember, owned partitionEpochs) {
	if len(cg.extra) == 0 {
		return
	}
	before := ownedBy(m)
	changed := false
	for id, ps := range m.assigned {
		for p := range ps {
			if len(cg.extra[partitionID{id, p}]) > 0 && !owned.has(id, p) {
				delete(ps, p)
				changed = true
			}
		}
		if len(ps) == 0 {
			delete(m.assigned, id)
		}
	}
	if changed {
		cg.setOwned(m, before)
	}
}

// classicMemberFor finds or creates the classic member a JoinGroup is
// from; bump says whether the group changed (a member came in).
func (g *group) classicMemberFor(req JoinRequest, id string, unknown bool) (*consumerMember, bool, error) {
	cg := g.modern
	newMember := func() (*consumerMember, bool, error) {
		if len(cg.members) >= g.c.cfg.ConsumerMaxSize {
			return nil, false, fmt.Errorf("%w: the consumer group has reached its maximum capacity of %d members", ErrGroupMaxSizeReached, g.c.cfg.ConsumerMaxSize)
		}
		instance := ""
		if req.InstanceID != nil {
			instance = *req.InstanceID
		}
		m := g.addConsumerMember(id, instance, req.Client)
		m.classic = &classicState{}
		return m, true, nil
	}
	if req.InstanceID == nil {
		m, ok := cg.members[id]
		switch {
		case !ok:
			return newMember()
		case m.classic == nil:
			return nil, false, fmt.Errorf("%w: member %s uses the consumer group protocol", ErrUnknownMemberID, id)
		}
		return m, false, nil
	}
	existingID, ok := cg.static[*req.InstanceID]
	existing := cg.members[existingID]
	switch {
	case !ok || existing == nil:
		return newMember()
	case existing.id == id:
		if existing.classic == nil {
			return nil, false, fmt.Errorf("%w: member %s uses the consumer group protocol", ErrUnknownMemberID, id)
		}
		return existing, false, nil
	case !unknown:
		return nil, false, fmt.Errorf("%w: static member %s with instance id %s was fenced by member %s", ErrFencedInstanceID, id, *req.InstanceID, existing.id)
	}
	// A static instance comes back under a new member id: it takes its
	// predecessor's place and assignment.
	old := existing.id
	existing.session.stop()
	existing.classicDeadline().stop()
	delete(cg.members, old)
	g.untrack(existing)
	before := ownedBy(existing)
	existing.id = id
	for _, tp := range before {
		cg.release(tp, old)
		cg.hold(tp, id)
	}
	if t, ok := cg.target[old]; ok {
		delete(cg.target, old)
		cg.target[id] = t
	}
	cg.touch(old)
	cg.members[id] = existing
	cg.static[*req.InstanceID] = id
	if existing.classic == nil {
		existing.classic = &classicState{}
	}
	g.track(existing, req.Client)
	return existing, false, nil
}

// refreshAndAssign reads the subscribed topics again when they may have
// changed and bumps the group epoch when the group changed.
func (g *group) refreshAndAssign(bump, regexChanged bool) {
	cg, c := g.modern, g.c
	if cg.epoch == 0 {
		bump = true // a new group moves off epoch 0
	}
	if c.topics != nil {
		version := c.topics.Version()
		if regexChanged || version != cg.metaVersion {
			cg.resolveRegexes(c.topics.Names())
		}
		if (bump || version != cg.metaVersion) && g.refreshConsumerTopics() {
			bump = true
		}
		cg.metaVersion = version
	}
	if bump {
		cg.epoch++
	}
}

// classicFence fences classic member m after d unless stopped first.
func (g *group) classicFence(m *consumerMember, d time.Duration, why string) *timer {
	id := m.id
	return g.after(d, func() {
		if cur := g.modern; cur != nil && cur.members[id] == m {
			g.c.log.Info("classic member of a consumer group fenced", "group", g.id, "member", id, "reason", why)
			g.consumerMemberGone(m, EventMemberRemoved, why)
			if g.modern != nil {
				g.flushConsumer(nil)
			}
		}
	})
}

// classicSync serves a SyncGroup of a classic member of a consumer group:
// its assigned partitions, in its ConsumerProtocol version. Caller holds
// g.mu.
func (g *group) classicSync(req SyncRequest) SyncResult {
	cg := g.modern
	m, err := cg.classicMember(req.MemberID, req.InstanceID)
	switch {
	case err != nil:
		return SyncResult{Err: err}
	case req.Generation != m.epoch:
		return SyncResult{Err: ErrIllegalGeneration}
	case inconsistent(req.ProtocolType, consumerProtocolType), inconsistent(req.ProtocolName, m.classic.protocols[0].Name):
		return SyncResult{Err: ErrInconsistentGroupProtocol}
	case cg.epoch > m.epoch && m.state != memberUnrevokedPartitions:
		// A rebalance began since its join: it rejoins first.
		g.classicMustRejoin(m)
		return SyncResult{Err: ErrRebalanceInProgress}
	}
	m.classic.deadline.stop()
	m.classic.deadline = nil
	g.heardFromConsumer(m, req.Client)
	g.scheduleConsumerSession(m)
	return SyncResult{ProtocolType: ptr(consumerProtocolType), ProtocolName: ptr(m.classic.protocols[0].Name),
		Assignment: encodeAssignment(m.assigned, cg.names, protocolVersion(m.classic.protocols))}
}

// classicMustRejoin gives m its rebalance timeout to rejoin, unless it
// already has a deadline.
func (g *group) classicMustRejoin(m *consumerMember) {
	if m.classic.deadline == nil || m.classic.deadline.stopped {
		m.classic.deadline = g.classicFence(m, m.rebalanceTimeout, "did not rejoin within its rebalance timeout")
	}
}

// classicMember finds a classic member by member and instance id.
func (cg *consumerGroup) classicMember(memberID string, instanceID *string) (*consumerMember, error) {
	var m *consumerMember
	if instanceID != nil {
		id, ok := cg.static[*instanceID]
		if !ok {
			return nil, fmt.Errorf("%w: instance id %s is unknown", ErrUnknownMemberID, *instanceID)
		}
		if id != memberID {
			return nil, ErrFencedInstanceID
		}
		m = cg.members[id]
	} else {
		m = cg.members[memberID]
	}
	switch {
	case m == nil:
		return nil, ErrUnknownMemberID
	case m.classic == nil:
		return nil, fmt.Errorf("%w: member %s does not use the classic protocol", ErrUnknownMemberID, memberID)
	}
	return m, nil
}

// classicHeartbeat serves a Heartbeat of a classic member of a consumer
// group. Caller holds g.mu.
func (g *group) classicHeartbeat(req HeartbeatRequest) error {
	cg := g.modern
	m, err := cg.classicMember(req.MemberID, req.InstanceID)
	if err != nil {
		return err
	}
	if req.Generation != m.epoch {
		return ErrIllegalGeneration
	}
	g.heardFromConsumer(m, req.Client)
	g.scheduleConsumerSession(m)
	if m.epoch < cg.epoch || m.state == memberUnrevokedPartitions ||
		m.state == memberUnreleasedPartitions && !cg.waitingOnUnreleased(m) {
		g.classicMustRejoin(m)
		return ErrRebalanceInProgress
	}
	return nil
}

// waitingOnUnreleased says whether a partition of m's target is still
// held by another member.
func (cg *consumerGroup) waitingOnUnreleased(m *consumerMember) bool {
	for id, ps := range cg.target[m.id] {
		for _, p := range ps {
			if !m.assigned.has(id, p) && cg.heldByOther(m, id, p) {
				return true
			}
		}
	}
	return false
}

// classicLeave serves one member of a LeaveGroup to a consumer group.
// Caller holds g.mu and flushes.
func (g *group) classicLeave(lm LeavingMember) error {
	cg := g.modern
	var m *consumerMember
	if lm.MemberID == "" {
		if lm.InstanceID == nil {
			return ErrUnknownMemberID
		}
		m = cg.members[cg.static[*lm.InstanceID]]
		if m == nil {
			return ErrUnknownMemberID
		}
		if m.classic == nil {
			return fmt.Errorf("%w: member %s does not use the classic protocol", ErrUnknownMemberID, m.id)
		}
	} else {
		var err error
		if m, err = cg.classicMember(lm.MemberID, lm.InstanceID); err != nil {
			return err
		}
	}
	g.c.log.Info("classic member left a consumer group", "group", g.id, "member", m.id, "reason", lm.Reason)
	g.consumerMemberGone(m, EventMemberLeft, lm.Reason)
	return nil
}
