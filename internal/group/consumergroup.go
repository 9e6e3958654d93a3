package group

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/strandlog/strand/internal/group/assign"
	"github.com/strandlog/strand/internal/model"
)

// A consumer group (KIP-848) is a group whose members speak
// ConsumerGroupHeartbeat: the coordinator computes the assignment with a
// server-side assignor and hands each member its part as the previous
// owners release it. Its rules follow Kafka 4's GroupMetadataManager,
// ConsumerGroup and CurrentAssignmentBuilder.
//
// Epochs. The group epoch counts changes that call for a new assignment: a
// member joining or leaving, a subscription changing, a subscribed topic
// gaining partitions or being created or deleted. The assignment epoch is
// the group epoch the target assignment was computed at. Each member has
// an epoch of its own, which reaches the assignment epoch once the member
// holds no partition the target takes from it.
//
// Reconciliation. A member gets a partition of its target only when no
// other member holds it (assigned or waiting to revoke it), so no partition
// is ever owned by two members. A member that must give partitions up
// stays at its epoch until a heartbeat lists its owned partitions without
// them (UNREVOKED_PARTITIONS), bounded by its rebalance timeout; a member
// whose new partitions are still held elsewhere moves to the new epoch and
// picks them up on later heartbeats (UNRELEASED_PARTITIONS).

// Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
const (
	leaveGroupEpoch       = -1 // the member leaves
	leaveGroupStaticEpoch = -2 // a static member leaves for a while and keeps its partitions
)

// memberState is a member's reconciliation state.
type memberState int8

const (
	memberStable memberState = iota
	memberUnrevokedPartitions
	memberUnreleasedPartitions
)

// partitionEpochs maps a topic id to its partitions and, for each, the
// epoch at which it was assigned to the member (KIP-1251: a commit at an
// older member epoch is accepted for a partition held since then).
type partitionEpochs map[[16]byte]map[int32]int32

func (p partitionEpochs) clone() partitionEpochs {
	c := make(partitionEpochs, len(p))
	for t, ps := range p {
		c[t] = maps.Clone(ps)
	}
	return c
}

func (p partitionEpochs) has(topic [16]byte, partition int32) bool {
	_, ok := p[topic][partition]
	return ok
}

func (p partitionEpochs) count() int {
	n := 0
	for _, ps := range p {
		n += len(ps)
	}
	return n
}

// samePartitions says whether a and b hold the same partitions, whatever
// their assignment epochs.
func samePartitions(a, b partitionEpochs) bool {
	if a.count() != b.count() {
		return false
	}
	for t, ps := range a {
		for p := range ps {
			if !b.has(t, p) {
				return false
			}
		}
	}
	return true
}

// consumerMember is one member of a consumer group.
type consumerMember struct {
	id               string
	instanceID       string // "" for a dynamic member
	rackID           string
	clientID         string
	clientHost       string
	software         software
	rebalanceTimeout time.Duration
	topicNames       []string // subscribed by name, sorted
	topicRegex       string   // subscribed by pattern; "" for none
	assignor         string   // the server assignor it asked for; "" for the default
	epoch            int32
	prevEpoch        int32
	state            memberState
	assigned         partitionEpochs
	revoking         partitionEpochs // still owned, to be given up
	session          *timer
	rebalance        *timer    // set while it must revoke partitions
	key              clientKey // for the fetch hook
	presence                   // its connection, for the disconnect grace
	// classic is set for a member that speaks the classic protocol
	// (JoinGroup, SyncGroup, Heartbeat) in a consumer group.
	classic *classicState
}

// owner is m as the history names it.
func (m *consumerMember) owner() Owner {
	return Owner{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
		SoftwareName: m.software.name, SoftwareVersion: m.software.version}
}

// classicState is what the coordinator keeps of a classic member of a
// consumer group.
type classicState struct {
	sessionTimeout time.Duration
	protocols      []Protocol
	// deadline fences the member unless it syncs after its join, or
	// rejoins after being asked to, within its rebalance timeout.
	deadline *timer
}

// consumerGroup is the KIP-848 part of a group: its members, epochs and
// assignments. It is guarded by the group's lock.
type consumerGroup struct {
	epoch           int32
	assignmentEpoch int32
	members         map[string]*consumerMember
	static          map[string]string // instance id -> member id
	// target is the assignment computed at assignmentEpoch, per member.
	target map[string]map[[16]byte][]int32
	// owners holds, for each partition some member holds (assigned or
	// revoking), that member's id; extra holds the other holders of a
	// partition held by more than one (a converted classic group's).
	owners map[partitionID]string
	extra  map[partitionID][]string
	// topics is the metadata the target was computed from: the subscribed
	// topics by name, and names their names by id. A change (a topic
	// created, deleted or given more partitions) bumps the group epoch.
	topics map[string]TopicInfo
	names  map[[16]byte]string
	// regexes caches the topics each subscribed pattern matched.
	regexes map[string][]string
	// metaVersion is the topics' version (Topics.Version) the topics and
	// regexes above were read at; -1 before the first read.
	metaVersion  int64
	assignorName string // of the current target

	// stored is each record the group last wrote, by key, and dirty the
	// members whose records may have changed since (consumerstore.go);
	// topicsDirty says the topics' metadata may have. dropClassic: the
	// next flush deletes the group's classic record first.
	stored      map[string][]byte
	dirty       map[string]bool
	topicsDirty bool
	dropClassic bool
	// flushed is the group's epochs as last flushed, so that a flush
	// encodes their records only when they moved.
	flushed struct {
		epoch, assignmentEpoch int32
		valid                  bool
	}
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*consumerMember{}, static: map[string]string{},
		target: map[string]map[[16]byte][]int32{}, owners: map[partitionID]string{},
		topics: map[string]TopicInfo{}, names: map[[16]byte]string{}, regexes: map[string][]string{},
		metaVersion: -1, stored: map[string][]byte{}, dirty: map[string]bool{}}
}

// stateName is the group state ListGroups and ConsumerGroupDescribe
// report, as Kafka's ConsumerGroup derives it.
func (cg *consumerGroup) stateName() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.epoch > cg.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.state != memberStable || m.epoch != cg.assignmentEpoch {
			return "Reconciling"
		}
	}
	return "Stable"
}

// sortedMembers lists the members by id.
func (cg *consumerGroup) sortedMembers() []*consumerMember {
	ms := slices.Collect(maps.Values(cg.members))
	slices.SortFunc(ms, func(a, b *consumerMember) int { return cmp.Compare(a.id, b.id) })
	return ms
}

// subscribedTopics is every topic name some member subscribes to, by
// name or through a pattern.
func (cg *consumerGroup) subscribedTopics() map[string]bool {
	names := map[string]bool{}
	for _, m := range cg.members {
		for _, t := range m.topicNames {
			names[t] = true
		}
		if m.topicRegex != "" {
			for _, t := range cg.regexes[m.topicRegex] {
				names[t] = true
			}
		}
	}
	return names
}

// memberTopics is the topics m subscribes to that exist.
func (cg *consumerGroup) memberTopics(m *consumerMember) map[[16]byte]string {
	out := map[[16]byte]string{}
	add := func(name string) {
		if t, ok := cg.topics[name]; ok {
			out[t.ID] = name
		}
	}
	for _, name := range m.topicNames {
		add(name)
	}
	if m.topicRegex != "" {
		for _, name := range cg.regexes[m.topicRegex] {
			add(name)
		}
	}
	return out
}

// partitionID is a partition by topic id: ownership outlives a topic's
// name (a deleted topic's partitions are still released with their member).
type partitionID struct {
	topic     [16]byte
	partition int32
}

// setOwned records m's partitions in the owners index after they changed
// from before (assigned and revoking together).
func (cg *consumerGroup) setOwned(m *consumerMember, before []partitionID) {
	for _, tp := range before {
		cg.release(tp, m.id)
	}
	for _, tp := range ownedBy(m) {
		cg.hold(tp, m.id)
	}
}

// hold records that member id holds tp.
func (cg *consumerGroup) hold(tp partitionID, id string) {
	cur, held := cg.owners[tp]
	switch {
	case !held:
		cg.owners[tp] = id
	case cur != id && !slices.Contains(cg.extra[tp], id):
		if cg.extra == nil {
			cg.extra = map[partitionID][]string{}
		}
		cg.extra[tp] = append(cg.extra[tp], id)
	}
}

// release records that member id no longer holds tp.
func (cg *consumerGroup) release(tp partitionID, id string) {
	others := cg.extra[tp]
	switch {
	case cg.owners[tp] == id && len(others) == 0:
		delete(cg.owners, tp)
	case cg.owners[tp] == id:
		cg.owners[tp] = others[0]
		others = others[1:]
	default:
		others = slices.DeleteFunc(others, func(o string) bool { return o == id })
	}
	if len(others) == 0 {
		delete(cg.extra, tp)
	} else if cg.extra != nil {
		cg.extra[tp] = others
	}
}

// ownedBy lists what m holds, assigned or revoking.
func ownedBy(m *consumerMember) []partitionID {
	var out []partitionID
	for _, set := range []partitionEpochs{m.assigned, m.revoking} {
		for id, ps := range set {
			for p := range ps {
				out = append(out, partitionID{id, p})
			}
		}
	}
	return out
}

// heldByOther says whether a member other than m holds the partition.
func (cg *consumerGroup) heldByOther(m *consumerMember, id [16]byte, partition int32) bool {
	tp := partitionID{id, partition}
	owner, held := cg.owners[tp]
	return held && (owner != m.id || len(cg.extra[tp]) > 0)
}

// removeMember takes m out of the group, freeing its partitions, and bumps
// the group epoch so the target is computed again without it.
func (cg *consumerGroup) removeMember(m *consumerMember) {
	cg.dropMember(m)
	cg.epoch++
}

// dropMember takes m out of the group, freeing its partitions, without
// moving the group epoch (a downgrade keeps it as the generation).
func (cg *consumerGroup) dropMember(m *consumerMember) {
	before := ownedBy(m)
	m.assigned, m.revoking = partitionEpochs{}, partitionEpochs{}
	cg.setOwned(m, before)
	m.session.stop()
	m.rebalance.stop()
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	cg.touch(m.id)
	if m.instanceID != "" && cg.static[m.instanceID] == m.id {
		delete(cg.static, m.instanceID)
	}
}

// chooseAssignor is the server assignor the members asked for most, ties
// going to the first in the broker's list; the broker's default when none
// asked.
func (cg *consumerGroup) chooseAssignor(configured []string) string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best, most := configured[0], 0
	for _, name := range configured {
		if votes[name] > most {
			best, most = name, votes[name]
		}
	}
	return best
}

// computeTarget runs the assignor over the members and the subscribed
// topics' metadata and makes the result the target at the group epoch.
func (cg *consumerGroup) computeTarget(configured []string) error {
	name := cg.chooseAssignor(configured)
	a, ok := assign.ByName(name)
	if !ok {
		return ErrUnsupportedAssignor
	}
	spec := assign.Spec{Topics: map[string]assign.Topic{}}
	for tname, t := range cg.topics {
		spec.Topics[tname] = assign.Topic{Partitions: t.Partitions, Racks: t.Racks}
	}
	for _, m := range cg.sortedMembers() {
		topics := cg.memberTopics(m)
		am := assign.Member{ID: m.id, InstanceID: m.instanceID, Rack: m.rackID, Current: map[string][]int32{}}
		for _, tname := range topics {
			am.Topics = append(am.Topics, tname)
		}
		slices.Sort(am.Topics)
		for id, ps := range cg.target[m.id] {
			if tname, ok := topics[id]; ok {
				am.Current[tname] = slices.Clone(ps)
			}
		}
		spec.Members = append(spec.Members, am)
	}
	result, err := a.Assign(spec)
	if err != nil {
		return err
	}
	target := make(map[string]map[[16]byte][]int32, len(cg.members))
	for id := range cg.members {
		byTopic := map[[16]byte][]int32{}
		for tname, ps := range result[id] {
			if t, ok := cg.topics[tname]; ok && len(ps) > 0 {
				byTopic[t.ID] = slices.Sorted(slices.Values(ps))
			}
		}
		target[id] = byTopic
	}
	cg.target, cg.assignmentEpoch, cg.assignorName = target, cg.epoch, name
	cg.touchAll()
	return nil
}

// reconcile moves m towards its target, as Kafka's
// CurrentAssignmentBuilder: owned is the partitions its heartbeat listed
// (nil when it sent none, which proves nothing revoked).
func (cg *consumerGroup) reconcile(m *consumerMember, owned partitionEpochs) {
	if m.epoch == cg.assignmentEpoch && m.state == memberStable {
		cg.dropUnsubscribed(m, owned)
		return
	}
	if m.state == memberUnrevokedPartitions && stillOwns(owned, m.revoking) {
		cg.dropUnsubscribed(m, owned)
		return
	}
	cg.nextAssignment(m, owned)
}

// stillOwns says whether owned lists any of revoking; not knowing (nil)
// counts as owning.
func stillOwns(owned, revoking partitionEpochs) bool {
	if owned == nil {
		return true
	}
	for t, ps := range owned {
		for p := range ps {
			if revoking.has(t, p) {
				return true
			}
		}
	}
	return false
}

// dropUnsubscribed takes from m's assignment the topics it no longer
// subscribes to, which it must then revoke.
func (cg *consumerGroup) dropUnsubscribed(m *consumerMember, owned partitionEpochs) {
	subscribed := cg.memberTopics(m)
	var dropped bool
	assigned, revoking := m.assigned, m.revoking
	for id, ps := range m.assigned {
		if _, ok := subscribed[id]; ok {
			continue
		}
		if !dropped {
			assigned, revoking, dropped = m.assigned.clone(), m.revoking.clone(), true
		}
		delete(assigned, id)
		if revoking[id] == nil {
			revoking[id] = map[int32]int32{}
		}
		maps.Copy(revoking[id], ps)
	}
	if !dropped {
		return
	}
	before := ownedBy(m)
	m.assigned = assigned
	if len(revoking) > 0 && stillOwns(owned, revoking) {
		m.revoking, m.state = revoking, memberUnrevokedPartitions
	} else {
		m.revoking = partitionEpochs{}
	}
	cg.setOwned(m, before)
}

// nextAssignment is CurrentAssignmentBuilder's computeNextAssignment.
func (cg *consumerGroup) nextAssignment(m *consumerMember, owned partitionEpochs) {
	subscribed := cg.memberTopics(m)
	target := cg.target[m.id]
	assigned, revoking := partitionEpochs{}, partitionEpochs{}
	pending := map[[16]byte][]int32{}
	unreleased := false
	topicIDs := map[[16]byte]bool{}
	for id := range target {
		topicIDs[id] = true
	}
	for id := range m.assigned {
		topicIDs[id] = true
	}
	for id := range topicIDs {
		want := map[int32]bool{}
		if _, ok := subscribed[id]; ok {
			for _, p := range target[id] {
				want[p] = true
			}
		}
		for p, e := range m.assigned[id] {
			set := revoking
			if want[p] {
				set = assigned
			}
			if set[id] == nil {
				set[id] = map[int32]int32{}
			}
			set[id][p] = e
		}
		for p := range want {
			if assigned.has(id, p) {
				continue
			}
			// A partition m itself is revoking is not held by
			// another: only one member holds a partition.
			if cg.heldByOther(m, id, p) && !m.revoking.has(id, p) {
				unreleased = true
				continue
			}
			pending[id] = append(pending[id], p)
		}
	}
	before := ownedBy(m)
	switch {
	case len(revoking) > 0 && stillOwns(owned, revoking):
		// The member gives up partitions first, at its current epoch.
		m.assigned, m.revoking, m.state = assigned, revoking, memberUnrevokedPartitions
	default:
		for id, ps := range pending {
			if assigned[id] == nil {
				assigned[id] = map[int32]int32{}
			}
			for _, p := range ps {
				assigned[id][p] = cg.assignmentEpoch
			}
		}
		m.assigned, m.revoking = assigned, partitionEpochs{}
		m.state = memberStable
		if unreleased {
			m.state = memberUnreleasedPartitions
		}
		if m.epoch != cg.assignmentEpoch {
			m.prevEpoch, m.epoch = m.epoch, cg.assignmentEpoch
		}
	}
	cg.setOwned(m, before)
}

// resolveRegexes matches each subscribed pattern against the topics that
// exist. Patterns are RE2, as Kafka's (RE2/J), and must match a whole name.
func (cg *consumerGroup) resolveRegexes(all []string) {
	patterns := map[string]bool{}
	for _, m := range cg.members {
		if m.topicRegex != "" {
			patterns[m.topicRegex] = true
		}
	}
	resolved := map[string][]string{}
	for p := range patterns {
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			continue // refused when the member subscribed
		}
		var names []string
		for _, name := range all {
			// Internal topics too, as Kafka's coordinator matches them.
			if re.MatchString(name) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		resolved[p] = names
	}
	cg.regexes = resolved
}

// checkCommit is Kafka's ConsumerGroup.validateOffsetCommit, with the
// assignment epochs of KIP-1251: a member commits at its own epoch, and at
// an older one only partitions it has held since then, since a commit can
// cross the heartbeat that moved its epoch on.
func (cg *consumerGroup) checkCommit(c commitCheck) error {
	memberID, epoch := c.memberID, c.generation
	switch {
	case epoch < 0 && len(cg.members) == 0:
		return nil // the admin client, or a consumer without group management
	case c.transactional && epoch < 0 && memberID == "" && c.instanceID == nil:
		return nil // a producer that gave no group metadata
	}
	m, ok := cg.members[memberID]
	if !ok {
		return fmt.Errorf("%w: member %s is not in the group", ErrUnknownMemberID, memberID)
	}
	if m.classic != nil {
		// A classic member commits at its generation, its member epoch.
		if epoch != m.epoch {
			return fmt.Errorf("%w: generation %d, the member's is %d", ErrIllegalGeneration, epoch, m.epoch)
		}
		return nil
	}
	if !c.transactional && c.version < firstConsumerCommitVersion {
		return fmt.Errorf("%w: members of a consumer group commit with OffsetCommit v%d or later", ErrUnsupportedVersion, firstConsumerCommitVersion)
	}
	switch {
	case epoch == m.epoch:
		return nil
	case epoch > m.epoch:
		return fmt.Errorf("%w: epoch %d is newer than the member's %d", ErrStaleMemberEpoch, epoch, m.epoch)
	}
	for _, tp := range c.partitions {
		t, ok := cg.topics[tp.Topic]
		if !ok {
			return fmt.Errorf("%w: the member does not hold %s", ErrStaleMemberEpoch, tp)
		}
		at, held := m.assigned[t.ID][tp.Partition]
		if !held {
			at, held = m.revoking[t.ID][tp.Partition]
		}
		if !held || epoch < at {
			return fmt.Errorf("%w: epoch %d is older than the member's %d and %s was not held since", ErrStaleMemberEpoch, epoch, m.epoch, tp)
		}
	}
	return nil
}

// firstConsumerCommitVersion is the first OffsetCommit version a consumer
// group's members may use: it carries the member epoch.
const firstConsumerCommitVersion = 9

func commitPartitions(offsets []CommitOffset) []model.TopicPartition {
	out := make([]model.TopicPartition, len(offsets))
	for i, o := range offsets {
		out[i] = model.TopicPartition{Topic: o.Topic, Partition: o.Partition}
	}
	return out
}

// CheckFetchMember is the member check of an OffsetFetch v9+ that names a
// member, Kafka's ConsumerGroup.validateOffsetFetch: for a consumer group
// the member must exist (UNKNOWN_MEMBER_ID) at the epoch given
// (STALE_MEMBER_EPOCH). Classic groups, and requests without a member, are
// not checked, as in Kafka.
func (c *Coordinator) CheckFetchMember(groupID, memberID string, epoch int32) error {
	if memberID == "" && epoch < 0 {
		return nil
	}
	g, ok := c.lookup(groupID, false)
	if !ok {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.modern == nil {
		return nil
	}
	m, ok := g.modern.members[memberID]
	switch {
	case !ok:
		return fmt.Errorf("%w: member %s is not in group %s", ErrUnknownMemberID, memberID, groupID)
	case m.epoch != epoch:
		return fmt.Errorf("%w: epoch %d, the member's is %d", ErrStaleMemberEpoch, epoch, m.epoch)
	}
	return nil
}
