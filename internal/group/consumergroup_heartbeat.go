package group

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// TopicInfo is a topic as the consumer groups' assignors see it.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
	Racks      [][]string // per partition, its replicas' racks; nil when unknown
}

// Topics is the cluster's topics as the coordinator reads them for
// consumer groups; the server implements it over the metadata image.
type Topics interface {
	// Lookup returns the topics of names that exist.
	Lookup(names []string) map[string]TopicInfo
	// Names lists every topic, for subscriptions by pattern.
	Names() []string
	// Version changes whenever the topics may have: a group reads them
	// again only then (or when its subscriptions change).
	Version() int64
}

// OwnedTopic is a topic's partitions in a heartbeat or its answer.
type OwnedTopic struct {
	TopicID    [16]byte
	Partitions []int32
}

// ConsumerHeartbeatRequest is a ConsumerGroupHeartbeat request. Pointer
// and slice fields are nil when the request left them out (which keeps
// what the coordinator knows).
type ConsumerHeartbeatRequest struct {
	Client           Client
	Version          int16
	Group            string
	MemberID         string
	MemberEpoch      int32
	InstanceID       *string
	RackID           *string
	RebalanceTimeout time.Duration // negative: not given
	TopicNames       []string
	TopicRegex       *string
	ServerAssignor   *string
	Owned            []OwnedTopic // nil: not given
}

// ConsumerHeartbeatResult is the answer to a ConsumerGroupHeartbeat.
// Assignment is set (maybe empty) only when the member must be told it.
type ConsumerHeartbeatResult struct {
	Err               error
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	Assignment        *[]OwnedTopic
}

// firstGeneratedMemberIDVersion: from ConsumerGroupHeartbeat v1 the
// member makes up its own id (KIP-1082).
const firstGeneratedMemberIDVersion = 1

// validate applies Kafka's checks of a heartbeat that need no group.
func (c *Coordinator) validateConsumerHeartbeat(req *ConsumerHeartbeatRequest) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
	}
	switch {
	case req.MemberID == "" && (req.Version >= firstGeneratedMemberIDVersion || req.MemberEpoch > 0 || req.MemberEpoch == leaveGroupEpoch):
		return bad("MemberId can't be empty.")
	case req.Group == "":
		return bad("GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return bad("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return bad("RackId can't be empty.")
	}
	switch {
	case req.MemberEpoch == 0:
		if req.RebalanceTimeout < 0 {
			return bad("RebalanceTimeoutMs must be provided in first request.")
		}
		if req.Owned == nil || len(req.Owned) > 0 {
			return bad("TopicPartitions must be empty when (re-)joining.")
		}
		if req.TopicNames == nil && req.TopicRegex == nil {
			return bad("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case req.MemberEpoch == leaveGroupStaticEpoch:
		if req.InstanceID == nil {
			return bad("InstanceId can't be null.")
		}
	case req.MemberEpoch < leaveGroupStaticEpoch:
		return bad("MemberEpoch is invalid.")
	}
	if req.TopicRegex != nil && *req.TopicRegex != "" {
		if _, err := regexp.Compile(*req.TopicRegex); err != nil {
			return fmt.Errorf("%w: SubscribedTopicRegex `%s` is not a valid regular expression: %v", ErrInvalidRegularExpression, *req.TopicRegex, err)
		}
	}
	if req.ServerAssignor != nil && !slices.Contains(c.cfg.ConsumerAssignors, *req.ServerAssignor) {
		return fmt.Errorf("%w: ServerAssignor %s is not supported. Supported assignors: %v", ErrUnsupportedAssignor, *req.ServerAssignor, c.cfg.ConsumerAssignors)
	}
	return nil
}

// ConsumerHeartbeat serves a ConsumerGroupHeartbeat: it creates or
// updates the member, computes the target assignment when the group epoch
// moved past it, and reconciles the member towards it.
func (c *Coordinator) ConsumerHeartbeat(req ConsumerHeartbeatRequest) <-chan ConsumerHeartbeatResult {
	ch := make(chan ConsumerHeartbeatResult, 1)
	res, g := c.consumerHeartbeat(req)
	if g == nil {
		ch <- res
		return ch
	}
	// The answer waits until the state it reports is durable; g.mu is
	// held from the change to the flush, so records keep its order.
	defer g.mu.Unlock()
	g.flushConsumer(func(err error) {
		if err != nil {
			g.c.log.Warn("writing a consumer group's state failed", "group", g.id, "err", err)
			res = ConsumerHeartbeatResult{Err: ErrNotCoordinator, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
		}
		ch <- res
	})
	return ch
}

// consumerHeartbeat applies a heartbeat. When it returns a group, the
// group is a consumer group, its lock is held, and the answer waits for
// the flush of what changed.
func (c *Coordinator) consumerHeartbeat(req ConsumerHeartbeatRequest) (ConsumerHeartbeatResult, *group) {
	fail := func(err error) (ConsumerHeartbeatResult, *group) {
		return ConsumerHeartbeatResult{Err: err, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}, nil
	}
	if err := c.validateConsumerHeartbeat(&req); err != nil {
		return fail(err)
	}
	if err := c.serves(req.Group); err != nil {
		return fail(err)
	}
	joining := req.MemberEpoch == 0
	g, ok := c.lookup(req.Group, joining)
	if !ok {
		if c.isClosed() {
			return fail(ErrNotCoordinator)
		}
		// A member of a group this coordinator does not know (its state
		// was lost with the previous coordinator): it rejoins.
		return fail(ErrUnknownMemberID)
	}
	g.mu.Lock()
	locked := true
	defer func() {
		if locked {
			g.mu.Unlock()
		}
	}()
	switch {
	case g.state == stateDead:
		return fail(ErrCoordinatorNotAvailable)
	case g.unloaded:
		return fail(ErrNotCoordinator)
	case g.modern == nil && g.state != stateEmpty && !joining:
		return fail(fmt.Errorf("%w: group %s is not a consumer group", ErrGroupIDNotFound, req.Group))
	case g.modern == nil && g.state != stateEmpty:
		// A member of the new protocol joins a classic group with members.
		if err := g.upgrade(); err != nil {
			return fail(err)
		}
	case g.modern == nil && !joining:
		return fail(ErrUnknownMemberID)
	case g.modern == nil:
		// An empty classic group (or a new one) becomes a consumer group;
		// its committed offsets stay.
		g.modern = newConsumerGroup()
		g.modern.dropClassic = g.generation > 0 || g.protocolType != ""
		g.protocolType = consumerProtocolType
	}
	var res ConsumerHeartbeatResult
	if req.MemberEpoch == leaveGroupEpoch || req.MemberEpoch == leaveGroupStaticEpoch {
		res = g.consumerLeave(req)
	} else {
		res = g.consumerHeartbeat(req)
	}
	locked = false
	return res, g
}

// consumerLeave serves a heartbeat with epoch -1 (leave) or -2 (a static
// member leaves for a while and keeps its partitions until its session
// ends or its instance comes back).
func (g *group) consumerLeave(req ConsumerHeartbeatRequest) ConsumerHeartbeatResult {
	cg := g.modern
	var m *consumerMember
	if req.InstanceID != nil {
		id, ok := cg.static[*req.InstanceID]
		if !ok {
			return ConsumerHeartbeatResult{Err: fmt.Errorf("%w: instance id %s is unknown", ErrUnknownMemberID, *req.InstanceID), MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
		}
		if id != req.MemberID {
			return ConsumerHeartbeatResult{Err: ErrFencedInstanceID, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
		}
		m = cg.members[id]
	} else {
		m = cg.members[req.MemberID]
	}
	if m == nil {
		return ConsumerHeartbeatResult{Err: ErrUnknownMemberID, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	if req.MemberEpoch == leaveGroupStaticEpoch {
		// It keeps its assignment, held from epoch 0 for its next
		// incarnation, and gives up what it was revoking.
		before := ownedBy(m)
		m.revoking = partitionEpochs{}
		for _, ps := range m.assigned {
			for p := range ps {
				ps[p] = 0
			}
		}
		m.prevEpoch, m.epoch, m.state = m.epoch, leaveGroupStaticEpoch, memberStable
		m.rebalance.stop()
		m.rebalance = nil
		cg.setOwned(m, before)
		cg.touch(m.id)
		g.scheduleConsumerSession(m)
		return ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: leaveGroupStaticEpoch}
	}
	g.consumerMemberGone(m, EventMemberLeft, "")
	return ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: leaveGroupEpoch}
}

func (g *group) consumerHeartbeat(req ConsumerHeartbeatRequest) ConsumerHeartbeatResult {
	cg := g.modern
	c := g.c
	fail := func(err error) ConsumerHeartbeatResult {
		return ConsumerHeartbeatResult{Err: err, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	joining := req.MemberEpoch == 0
	if req.MemberID == "" {
		req.MemberID = newConsumerMemberID()
	}
	if len(cg.members) >= c.cfg.ConsumerMaxSize && cg.members[req.MemberID] == nil {
		return fail(fmt.Errorf("%w: the consumer group has reached its maximum capacity of %d members", ErrGroupMaxSizeReached, c.cfg.ConsumerMaxSize))
	}
	owned := ownedFromRequest(req.Owned)
	m, bump, err := g.consumerMemberFor(req, owned)
	if err != nil {
		return fail(err)
	}
	before := *m
	// Update the member from the request; a change of what it subscribes
	// to calls for a new assignment.
	if req.InstanceID != nil {
		m.instanceID = *req.InstanceID
	}
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	if req.RebalanceTimeout >= 0 {
		m.rebalanceTimeout = req.RebalanceTimeout
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor = *req.ServerAssignor
		bump = true
	}
	if req.TopicNames != nil {
		names := slices.Sorted(slices.Values(req.TopicNames))
		names = slices.Compact(names)
		if !slices.Equal(names, m.topicNames) {
			m.topicNames = names
			bump = true
		}
	}
	regexChanged := false
	if req.TopicRegex != nil && *req.TopicRegex != m.topicRegex {
		m.topicRegex = *req.TopicRegex
		bump, regexChanged = true, true
	}
	m.clientID, m.clientHost = req.Client.ID, "/"+keyOf(req.Client).host
	m.software = softwareOf(req.Client, m.software)
	g.heardFromConsumer(m, req.Client)
	g.refreshAndAssign(bump, regexChanged)
	prev := &before
	if joining {
		prev = nil
	}
	if err := g.reconcileMember(m, owned, prev); err != nil {
		return fail(err)
	}

	_, interval := g.consumerTimings()
	res := ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: interval}
	full := joining || req.RebalanceTimeout >= 0 && req.TopicNames != nil && req.Owned != nil
	if full || !samePartitions(before.assigned, m.assigned) {
		a := assignmentOf(m)
		res.Assignment = &a
	}
	return res
}

// reconcileMember computes the target if the group epoch moved past it,
// reconciles m with what it owns and restarts its timers; m's records are
// marked for the flush when they differ from before's (always when before
// is nil). Both protocols' members go through it.
func (g *group) reconcileMember(m *consumerMember, owned partitionEpochs, before *consumerMember) error {
	cg := g.modern
	if cg.epoch > cg.assignmentEpoch {
		if err := cg.computeTarget(g.c.cfg.ConsumerAssignors); err != nil {
			return err
		}
		g.hist.event(Event{Time: g.c.clock.Now(), Kind: EventAssignment, Generation: cg.assignmentEpoch,
			Protocol: "consumer", Reason: cg.assignorName})
	}
	cg.reconcile(m, owned)
	if before == nil || recordsDiffer(before, m) {
		cg.touch(m.id)
	}
	g.trackRebalanceTimeout(m)
	g.scheduleConsumerSession(m)
	g.recordConsumerOwners(m)
	return nil
}

// consumerMemberFor finds or creates the member a heartbeat is from, with
// Kafka's checks of its epoch and instance id; bump says whether the
// group changed (a member came in).
func (g *group) consumerMemberFor(req ConsumerHeartbeatRequest, owned partitionEpochs) (*consumerMember, bool, error) {
	cg := g.modern
	joining := req.MemberEpoch == 0
	if req.InstanceID == nil {
		m, ok := cg.members[req.MemberID]
		switch {
		case !ok && !joining:
			return nil, false, fmt.Errorf("%w: member %s is not a member of group %s", ErrUnknownMemberID, req.MemberID, g.id)
		case !ok:
			m = g.addConsumerMember(req.MemberID, "", req.Client)
			return m, true, nil
		case !joining:
			return m, false, checkMemberEpoch(m, req.MemberEpoch, owned)
		}
		return m, false, nil
	}
	instance := *req.InstanceID
	existingID, exists := cg.static[instance]
	existing := cg.members[existingID]
	if !joining {
		switch {
		case !exists || existing == nil:
			return nil, false, fmt.Errorf("%w: instance id %s is unknown", ErrUnknownMemberID, instance)
		case existing.id != req.MemberID:
			return nil, false, fmt.Errorf("%w: static member %s with instance id %s was fenced by member %s", ErrFencedInstanceID, req.MemberID, instance, existing.id)
		}
		return existing, false, checkMemberEpoch(existing, req.MemberEpoch, owned)
	}
	if !exists || existing == nil {
		return g.addConsumerMember(req.MemberID, instance, req.Client), true, nil
	}
	if existing.epoch != leaveGroupStaticEpoch {
		return nil, false, fmt.Errorf("%w: static member %s with instance id %s cannot join the group because the instance id is owned by %s",
			ErrUnreleasedInstanceID, req.MemberID, instance, existing.id)
	}
	// The instance comes back under a new member id: it takes its
	// predecessor's place and assignment, without a rebalance.
	old := existing.id
	before := ownedBy(existing)
	existing.session.stop()
	delete(cg.members, old)
	g.untrack(existing)
	existing.id, existing.epoch, existing.prevEpoch = req.MemberID, 0, 0
	cg.touch(old)
	for _, tp := range before {
		cg.owners[tp] = existing.id
	}
	if t, ok := cg.target[old]; ok {
		delete(cg.target, old)
		cg.target[existing.id] = t
	}
	cg.members[existing.id] = existing
	cg.static[instance] = existing.id
	g.track(existing, req.Client)
	return existing, false, nil
}

func (g *group) addConsumerMember(id, instance string, client Client) *consumerMember {
	m := &consumerMember{id: id, instanceID: instance, assigned: partitionEpochs{}, revoking: partitionEpochs{}}
	g.modern.members[id] = m
	if instance != "" {
		g.modern.static[instance] = id
	}
	g.track(m, client)
	return m
}

// checkMemberEpoch is Kafka's: an epoch ahead of the member's is fenced;
// one behind only when it is the previous epoch and the member owns no
// more than it is assigned (the answer that moved it on was lost).
func checkMemberEpoch(m *consumerMember, epoch int32, owned partitionEpochs) error {
	switch {
	case epoch > m.epoch:
		return fmt.Errorf("%w: the member epoch %d is ahead of the coordinator's %d; the member must abandon its partitions and rejoin", ErrFencedMemberEpoch, epoch, m.epoch)
	case epoch < m.epoch && (epoch != m.prevEpoch || !ownsSubset(owned, m.assigned)):
		return fmt.Errorf("%w: the member epoch %d is behind the coordinator's %d; the member must abandon its partitions and rejoin", ErrFencedMemberEpoch, epoch, m.epoch)
	}
	return nil
}

// ownsSubset says whether owned (which must be given) lists only
// partitions of assigned.
func ownsSubset(owned, assigned partitionEpochs) bool {
	if owned == nil {
		return false
	}
	for t, ps := range owned {
		for p := range ps {
			if !assigned.has(t, p) {
				return false
			}
		}
	}
	return true
}

func ownedFromRequest(ts []OwnedTopic) partitionEpochs {
	if ts == nil {
		return nil
	}
	out := partitionEpochs{}
	for _, t := range ts {
		ps := out[t.TopicID]
		if ps == nil {
			ps = map[int32]int32{}
			out[t.TopicID] = ps
		}
		for _, p := range t.Partitions {
			ps[p] = 0
		}
	}
	return out
}

// assignmentOf is m's assigned partitions as the heartbeat answer lists
// them, sorted.
func assignmentOf(m *consumerMember) []OwnedTopic {
	out := make([]OwnedTopic, 0, len(m.assigned))
	for id, ps := range m.assigned {
		out = append(out, OwnedTopic{TopicID: id, Partitions: slices.Sorted(maps.Keys(ps))})
	}
	slices.SortFunc(out, func(a, b OwnedTopic) int { return bytes.Compare(a.TopicID[:], b.TopicID[:]) })
	return out
}

// refreshConsumerTopics reads the metadata of the topics the members
// subscribe to and says whether it changed since the target was computed.
func (g *group) refreshConsumerTopics() bool {
	cg := g.modern
	if g.c.topics == nil {
		return false
	}
	names := slices.Sorted(maps.Keys(cg.subscribedTopics()))
	now := g.c.topics.Lookup(names)
	changed := len(now) != len(cg.topics)
	for name, t := range now {
		old, ok := cg.topics[name]
		if !ok || old.ID != t.ID || old.Partitions != t.Partitions || !slices.EqualFunc(old.Racks, t.Racks, slices.Equal) {
			changed = true
		}
	}
	if changed {
		cg.topicsDirty = true
		cg.topics = now
		cg.names = make(map[[16]byte]string, len(now))
		for name, t := range now {
			cg.names[t.ID] = name
		}
	}
	return changed
}

// trackRebalanceTimeout bounds how long m may keep partitions it must
// revoke: past its rebalance timeout it is fenced, freeing them. The timer
// runs from when revocation was first asked, so more heartbeats do not
// push it back.
func (g *group) trackRebalanceTimeout(m *consumerMember) {
	if m.state != memberUnrevokedPartitions {
		m.rebalance.stop()
		m.rebalance = nil
		return
	}
	if m.rebalance != nil && !m.rebalance.stopped {
		return
	}
	id := m.id
	m.rebalance = g.after(m.rebalanceTimeout, func() {
		if cur := g.modern; cur != nil && cur.members[id] == m && m.state == memberUnrevokedPartitions {
			g.c.log.Info("consumer group member did not revoke its partitions within its rebalance timeout; fenced",
				"group", g.id, "member", id, "timeout", m.rebalanceTimeout)
			g.consumerMemberGone(m, EventMemberRemoved, fmt.Sprintf("did not revoke its partitions within its rebalance timeout %v", m.rebalanceTimeout))
			g.flushConsumer(nil)
		}
	})
}

// consumerTimings are the group's session timeout and heartbeat interval:
// its own group configs where set, else the broker's.
func (g *group) consumerTimings() (session, heartbeat time.Duration) {
	session, heartbeat = g.c.cfg.ConsumerSessionTimeout, g.c.cfg.ConsumerHeartbeatInterval
	if g.c.cfg.GroupTimings != nil {
		s, h := g.c.cfg.GroupTimings(g.id)
		if s > 0 {
			session = s
		}
		if h > 0 {
			heartbeat = h
		}
	}
	return session, heartbeat
}

// scheduleConsumerSession (re)starts m's session: without a heartbeat for
// the group's consumer.session.timeout.ms (the broker's
// group.consumer.session.timeout.ms unless the group sets its own) it is
// removed.
func (g *group) scheduleConsumerSession(m *consumerMember) {
	m.session.stop()
	id := m.id
	d, _ := g.consumerTimings()
	if m.classic != nil {
		d = m.classic.sessionTimeout // a classic member's own
	}
	m.session = g.after(d, func() {
		if cur := g.modern; cur != nil && cur.members[id] == m {
			g.c.log.Info("consumer group member's session expired", "group", g.id, "member", id)
			g.consumerMemberGone(m, EventMemberExpired, fmt.Sprintf("no heartbeat within %v", d))
			g.flushConsumer(nil)
		}
	})
}

func newConsumerMemberID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// track makes the fetch hook count m's fetches for the group's hand-off
// history, and follows its connection for the disconnect grace.
func (g *group) track(m *consumerMember, client Client) {
	m.key = keyOf(client)
	g.c.fetchers.add(m.key, g)
	g.heardFromConsumer(m, client)
}

// untrack undoes track, for a member that leaves or changes its id.
func (g *group) untrack(m *consumerMember) {
	g.c.fetchers.remove(m.key, g)
	g.forget(m.id, &m.presence)
}

// heardFromConsumer notes a request of m on client's connection.
func (g *group) heardFromConsumer(m *consumerMember, client Client) {
	if client.Addr != "" {
		g.heardFrom(m.id, &m.presence, client)
	}
}

// recordConsumerOwners records in the history each partition m now holds
// that another member held before it (or none did).
func (g *group) recordConsumerOwners(m *consumerMember) {
	cg := g.modern
	to := m.owner()
	now := g.c.clock.Now()
	for id, ps := range m.assigned {
		name, ok := cg.names[id]
		if !ok {
			continue
		}
		for p := range ps {
			g.setOwner(model.TopicPartition{Topic: name, Partition: p}, to, m.key, m.epoch, now)
		}
	}
}
