package group

import (
	"cmp"
	"net"
	"slices"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
)

// state is a classic group's state, as Kafka's ClassicGroupState.
type state int8

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s state) String() string { return stateNames[s] }

// Protocol is one assignment protocol a member supports, with its metadata
// (for the consumer protocol, the subscription).
type Protocol struct {
	Name     string
	Metadata []byte
}

// Client is the connection a request came on.
type Client struct {
	ID   string // the request header's client id
	Addr string // the remote host:port
	// SoftwareName and SoftwareVersion are the client library's, from
	// the connection's ApiVersions; empty if unknown.
	SoftwareName, SoftwareVersion string
}

// software is a client's library name and version.
type software struct{ name, version string }

// softwareOf is c's library, keeping what was known when c names none
// (a connection that sent no ApiVersions v3).
func softwareOf(c Client, known software) software {
	if c.SoftwareName == "" && c.SoftwareVersion == "" {
		return known
	}
	return software{c.SoftwareName, c.SoftwareVersion}
}

// clientKey identifies a consumer's connections for the fetch hook: the
// fetch request names no member, so a fetch is matched to members by the
// client's host and client id (see doc.go).
type clientKey struct {
	host, clientID string
}

func keyOf(c Client) clientKey {
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		host = c.Addr
	}
	return clientKey{host: host, clientID: c.ID}
}

// member is one member of a group.
type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string // "/" + the host, as Kafka's InetAddress.toString shows it
	software         software
	key              clientKey
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []Protocol
	assignment       []byte
	joinCh           chan JoinResult // set while a JoinGroup is parked
	syncCh           chan SyncResult // set while a SyncGroup is parked
	isNew            bool            // joined in this rebalance: its parked join may time out
	heartbeat        *timer
	seq              uint64 // join order: the oldest member leads when the leader goes
	presence                // its connection, for the disconnect grace
}

func (m *member) awaitingJoin() bool { return m.joinCh != nil }
func (m *member) awaitingSync() bool { return m.syncCh != nil }

// satisfiedHeartbeat: members parked in a rebalance need not heartbeat,
// except new ones, whose joins time out.
func (m *member) satisfiedHeartbeat() bool {
	return !m.isNew && (m.awaitingJoin() || m.awaitingSync())
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protocols are the member's, in the same order
// and with the same metadata.
func (m *member) matches(protocols []Protocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b Protocol) bool {
		return a.Name == b.Name && string(a.Metadata) == string(b.Metadata)
	})
}

// vote is the member's preferred protocol among candidates.
func (m *member) vote(candidates map[string]bool) string {
	for _, p := range m.protocols {
		if candidates[p.Name] {
			return p.Name
		}
	}
	return ""
}

func (m *member) instance() string {
	if m.instanceID == nil {
		return ""
	}
	return *m.instanceID
}

// offset is one committed offset.
type offset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  int64 // ms
	ExpireTime  int64 // ms; -1: expires by the retention rule
	logOffset   int64 // where in __consumer_offsets it was written
}

// group is one group: what every group has whichever protocol its
// members speak (its committed offsets, the partitions' owners, the
// rebalance history), and that protocol's state behind groupKind: the
// classic group's (classicGroup, embedded) or, while the group is a
// consumer group (KIP-848), the consumer group's (modern). Migration
// between them (migration.go) is a conversion from one to the other. Every
// field after mu is guarded by it.
type group struct {
	c  *Coordinator
	id string

	mu lockrank.Mutex[lockrank.GroupOrTxn]
	// classicGroup is the classic protocol's state. Its state is also the
	// group's life: Empty while the group is a consumer group, Dead once
	// deleted.
	classicGroup
	// modern is set while the group is a consumer group: its members (of
	// either protocol) are served by the consumer group's rules.
	modern *consumerGroup
	// offsets is the group's committed offsets and those pending in open
	// transactions (offsetstore.go).
	offsets  offsetStore
	unloaded bool // the coordinator closed; timers do nothing
	owners   map[model.TopicPartition]Owner
	hist     *history
}

// classicGroup is the state of the classic protocol (JoinGroup,
// SyncGroup, Heartbeat): its generations and members. Its rules are in
// join.go, membership.go and rebalance.go.
type classicGroup struct {
	state          state
	prevState      state
	stateTime      time.Time // when state was entered; zero if unknown (loaded from old records)
	generation     int32
	protocolType   string // "" for a group that only commits offsets
	protocolName   string // "" between generations
	leader         string
	members        map[string]*member
	static         map[string]string // instance id -> member id
	pending        map[string]*timer // member ids handed out with MEMBER_ID_REQUIRED, until they join
	pendingSync    map[string]bool   // members yet to SyncGroup in this generation
	newMemberAdded bool              // a member joined during the initial delay
	joinTimer      *timer
	syncTimer      *timer
	seq            uint64
	subscribed     map[string]bool // topics the consumer members subscribe to; nil if unknown
}

func newClassicGroup(now time.Time) classicGroup {
	return classicGroup{state: stateEmpty, prevState: stateDead, stateTime: now,
		members: map[string]*member{}, static: map[string]string{}, pending: map[string]*timer{},
		pendingSync: map[string]bool{}}
}

// groupKind is what the coordinator asks of a group's protocol state,
// whichever protocol it is.
type groupKind interface {
	// typeName is ListGroups' group type: classic or consumer.
	typeName() string
	// stateName is the group's state as ListGroups reports it.
	stateName() string
	// memberCount counts the members.
	memberCount() int
	// subscribedTo says whether offsets of topic belong to a live
	// subscription (they neither expire nor may be deleted).
	subscribedTo(topic string) bool
	// checkCommit validates a commit's member and generation (or member
	// epoch), as Kafka's validateOffsetCommit of that kind.
	checkCommit(c commitCheck) error
	// expiryBase says from when an offset's retention counts (emptySince:
	// when the group last became empty), or false when the group's
	// offsets do not expire now.
	expiryBase(emptySince time.Time) (func(offset) int64, bool)
	// deleteRecords are the records that delete the kind's state from
	// __consumer_offsets.
	deleteRecords(groupID string) []model.KeyValue
	// memberViews describes the members for View (view.go): the
	// protocol, the generation or epoch, the members and their ids.
	memberViews() (string, int32, []MemberView, map[string]bool)
}

// kind is the group's protocol state.
func (g *group) kind() groupKind {
	if g.modern != nil {
		return g.modern
	}
	return &g.classicGroup
}

func (cl *classicGroup) typeName() string  { return "classic" }
func (cl *classicGroup) stateName() string { return cl.state.String() }
func (cl *classicGroup) memberCount() int  { return len(cl.members) }

// subscribedTo: unknown subscriptions count as subscribed for a group of
// the consumer protocol type.
func (cl *classicGroup) subscribedTo(topic string) bool {
	if cl.subscribed == nil {
		return cl.protocolType == consumerProtocolType
	}
	return cl.subscribed[topic]
}

func (cl *classicGroup) deleteRecords(groupID string) []model.KeyValue {
	return []model.KeyValue{{Key: groupKey(groupID)}}
}

func (cg *consumerGroup) typeName() string { return "consumer" }
func (cg *consumerGroup) deleteRecords(string) []model.KeyValue {
	return cg.tombstones()
}
func (cg *consumerGroup) memberCount() int { return len(cg.members) }
func (cg *consumerGroup) subscribedTo(topic string) bool {
	return cg.subscribedTopics()[topic]
}

func (c *Coordinator) newGroup(id string) *group {
	hist := newHistory(c.cfg.HistoryEvents, c.cfg.HistoryHandoffs, c.handoffDone(id), c.eventSeen(id))
	hist.reportDelay = c.cfg.FetchReportDelay
	hist.after = func(d time.Duration, f func()) { c.clock.AfterFunc(d, f) }
	return &group{
		c: c, id: id, classicGroup: newClassicGroup(c.clock.Now()),
		offsets: newOffsetStore(), owners: map[model.TopicPartition]Owner{},
		hist: hist,
	}
}

func (g *group) transition(s state) {
	g.prevState, g.state = g.state, s
	g.stateTime = g.c.clock.Now()
}

// sortedMembers lists the members in join order.
func (cl *classicGroup) sortedMembers() []*member {
	ms := make([]*member, 0, len(cl.members))
	for _, m := range cl.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return cmp.Compare(a.seq, b.seq) })
	return ms
}

func (cl *classicGroup) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range cl.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

func (cl *classicGroup) allJoined() bool {
	if len(cl.pending) > 0 {
		return false
	}
	for _, m := range cl.members {
		if !m.awaitingJoin() {
			return false
		}
	}
	return true
}

func (cl *classicGroup) awaitingJoinCount() int {
	n := 0
	for _, m := range cl.members {
		if m.awaitingJoin() {
			n++
		}
	}
	return n
}

// canRebalance: PreparingRebalance may follow Empty, Stable and
// CompletingRebalance.
func (cl *classicGroup) canRebalance() bool {
	return cl.state == stateEmpty || cl.state == stateStable || cl.state == stateCompletingRebalance
}

// supports reports whether a member with this protocol type and protocols
// could join: any non-empty set joins an empty group; otherwise the type
// must be the group's and one protocol supported by every member.
func (cl *classicGroup) supports(protocolType string, protocols []Protocol) bool {
	if cl.state == stateEmpty {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != cl.protocolType {
		return false
	}
	for _, p := range protocols {
		if cl.supportedByAll(p.Name) {
			return true
		}
	}
	return false
}

func (cl *classicGroup) supportedByAll(name string) bool {
	for _, m := range cl.members {
		if !slices.ContainsFunc(m.protocols, func(p Protocol) bool { return p.Name == name }) {
			return false
		}
	}
	return true
}

// selectProtocol picks the protocol every member supports that most
// members prefer, as Kafka does; a tie goes to the leader's preference
// (Kafka leaves ties to hash order).
func (cl *classicGroup) selectProtocol() string {
	candidates := map[string]bool{}
	ms := cl.sortedMembers()
	for _, p := range ms[0].protocols {
		if cl.supportedByAll(p.Name) {
			candidates[p.Name] = true
		}
	}
	votes := map[string]int{}
	for _, m := range ms {
		votes[m.vote(candidates)]++
	}
	prefs := ms[0].protocols
	if l, ok := cl.members[cl.leader]; ok {
		prefs = l.protocols
	}
	best, most := "", 0
	for _, p := range prefs {
		if n := votes[p.Name]; candidates[p.Name] && n > most {
			best, most = p.Name, n
		}
	}
	return best
}

// add puts m in the group; a first member sets the protocol type and the
// leader.
func (g *group) add(m *member) {
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.seq++
	m.seq = g.seq
	g.members[m.id] = m
	if t, ok := g.pending[m.id]; ok {
		t.stop() // its session timer is the member's from now on
		delete(g.pending, m.id)
	}
	g.c.fetchers.add(m.key, g)
}

// remove takes a member out; a departing leader is succeeded by the oldest
// member.
func (g *group) remove(id string) {
	if m, ok := g.members[id]; ok {
		delete(g.members, id)
		m.heartbeat.stop()
		g.forget(id, &m.presence)
		if m.instanceID != nil && g.static[*m.instanceID] == id {
			delete(g.static, *m.instanceID)
		}
		g.c.fetchers.remove(m.key, g)
	}
	if t, ok := g.pending[id]; ok {
		t.stop()
		delete(g.pending, id)
	}
	delete(g.pendingSync, id)
	if g.leader == id {
		g.leader = ""
		if ms := g.sortedMembers(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// hasMembers says whether the group has members, of either protocol.
func (g *group) hasMembers() bool {
	return g.state != stateEmpty || g.kind().memberCount() > 0
}

// validateMember checks a request's member and instance ids: an instance
// id must map to the member id given (FENCED_INSTANCE_ID if it maps to
// another), and the member must exist.
func (cl *classicGroup) validateMember(memberID string, instanceID *string) error {
	if instanceID != nil {
		existing, ok := cl.static[*instanceID]
		if !ok {
			return ErrUnknownMemberID
		}
		if existing != memberID {
			return ErrFencedInstanceID
		}
	}
	if _, ok := cl.members[memberID]; !ok {
		return ErrUnknownMemberID
	}
	return nil
}

// computeSubscribed collects the topics consumer members subscribe to (the
// first fields of ConsumerProtocol's subscription, common to every
// version); nil when the group does not use the consumer protocol or a
// subscription does not parse.
func (cl *classicGroup) computeSubscribed() map[string]bool {
	if cl.protocolType != consumerProtocolType {
		return nil
	}
	topics := map[string]bool{}
	if len(cl.members) == 0 || cl.protocolName == "" {
		return topics
	}
	for _, m := range cl.members {
		ts, ok := subscribedTopics(m.metadata(cl.protocolName))
		if !ok {
			return nil
		}
		for _, t := range ts {
			topics[t] = true
		}
	}
	return topics
}

// subscribedToTopic: whether offsets of topic belong to a live
// subscription (they neither expire nor may be deleted).
func (g *group) subscribedToTopic(topic string) bool {
	return g.kind().subscribedTo(topic)
}
