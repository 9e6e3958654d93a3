package share

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
)

// Errors of ShareGroupHeartbeat, each one of Kafka's codes.
var (
	ErrUnknownMember  = errors.New("share: unknown member")      // UNKNOWN_MEMBER_ID
	ErrFencedEpoch    = errors.New("share: fenced member epoch") // FENCED_MEMBER_EPOCH
	ErrGroupFull      = errors.New("share: the group is full")   // GROUP_MAX_SIZE_REACHED
	ErrInvalidRequest = errors.New("share: invalid request")     // INVALID_REQUEST
	ErrNotShareGroup  = errors.New("share: not a share group")   // GROUP_ID_NOT_FOUND
)

// GroupLimits are the broker's share-group settings.
type GroupLimits struct {
	SessionTimeout    time.Duration // group.share.session.timeout.ms
	HeartbeatInterval time.Duration // group.share.heartbeat.interval.ms
	MaxSize           int           // group.share.max.size
	// Timings, when set, gives a group's own session timeout and
	// heartbeat interval (its share.session.timeout.ms and
	// share.heartbeat.interval.ms configs, else the two above).
	Timings func(group string) (session, heartbeat time.Duration)
}

// timings are group's session timeout and heartbeat interval.
func (l GroupLimits) timings(group string) (session, heartbeat time.Duration) {
	if l.Timings != nil {
		return l.Timings(group)
	}
	return l.SessionTimeout, l.HeartbeatInterval
}

// TopicInfo is what the assignor knows of a topic.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
}

// Topics finds the cluster's topics by name; a name not found is left
// out. It is called under the coordinator's lock and must take no lock
// above it.
type Topics func(names []string) map[string]TopicInfo

// Assignment is a member's partitions by topic id.
type Assignment map[[16]byte][]int32

// Heartbeat is a ShareGroupHeartbeat: Epoch 0 joins, -1 leaves; Topics is
// nil when the subscription is unchanged.
type Heartbeat struct {
	Group, Member string
	Epoch         int32
	Rack          string
	Topics        []string
}

// HeartbeatAnswer is what the member is told: its epoch, how often to
// heartbeat, and its assignment when it changed (nil otherwise).
type HeartbeatAnswer struct {
	Epoch      int32
	Interval   time.Duration
	Assignment Assignment
}

// Member is a share group member as DescribeGroups shows it.
type Member struct {
	ID, Rack, ClientID, ClientHost string
	Epoch                          int32
	Topics                         []string
	Assignment                     Assignment
}

// GroupInfo describes a share group.
type GroupInfo struct {
	Name            string
	Epoch           int32 // the group epoch
	AssignmentEpoch int32
	Members         []Member
}

type member struct {
	Member
	prevEpoch  int32 // its epoch before the last: a heartbeat whose answer was lost comes with it
	assignedAt int32 // the group epoch of the assignment it was told
	expires    time.Time
}

type group struct {
	name            string
	epoch           int32
	assignmentEpoch int32
	members         map[string]*member
	partitions      map[string]TopicInfo // the subscribed topics as last assigned
	everSubscribed  map[string]bool      // every topic a member subscribed to, for the group's offsets
	// written says the group's records in __consumer_offsets are there,
	// saying writtenAs (grouprecords.go).
	written   bool
	writtenAs string
}

// Coordinator keeps the share groups' members and assigns them
// partitions (KIP-932): several members may share a partition. It is the
// share groups' part of the group coordinator.
//
// Locking: mu guards groups; it ranks with the other coordinators' locks.
type Coordinator struct {
	limits GroupLimits
	topics Topics
	log    *slog.Logger

	mu     lockrank.Mutex[lockrank.Coordinator]
	groups map[string]*group
}

// NewCoordinator is a coordinator with no groups; logger reports the
// records of __consumer_offsets it cannot read (nil: none reported).
func NewCoordinator(limits GroupLimits, topics Topics, logger *slog.Logger) *Coordinator {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{limits: limits, topics: topics, log: logger, groups: map[string]*group{}}
}

// Heartbeat serves one member's heartbeat at time now.
func (c *Coordinator) Heartbeat(h Heartbeat, clientID, clientHost string, now time.Time) (HeartbeatAnswer, error) {
	if h.Group == "" || h.Member == "" || h.Epoch < -1 {
		return HeartbeatAnswer{}, ErrInvalidRequest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(now)
	g := c.groups[h.Group]
	if g == nil {
		if h.Epoch != 0 {
			return HeartbeatAnswer{}, ErrUnknownMember
		}
		g = &group{name: h.Group, members: map[string]*member{}}
		c.groups[h.Group] = g
	}
	m := g.members[h.Member]
	changed := false // the membership or a subscription: a new group epoch
	switch {
	case h.Epoch == -1:
		if m != nil {
			delete(g.members, h.Member)
			c.reassign(g)
		}
		return HeartbeatAnswer{Epoch: -1}, nil
	case h.Epoch == 0:
		if m == nil {
			if len(g.members) >= c.limits.MaxSize {
				return HeartbeatAnswer{}, ErrGroupFull
			}
			if h.Topics == nil {
				return HeartbeatAnswer{}, ErrInvalidRequest // a joining member names its topics
			}
			m = &member{Member: Member{ID: h.Member}}
			g.members[h.Member] = m
			changed = true
		}
	case m == nil:
		return HeartbeatAnswer{}, ErrUnknownMember
	case h.Epoch != m.Epoch && h.Epoch != m.prevEpoch:
		return HeartbeatAnswer{}, ErrFencedEpoch
	}
	resend := h.Epoch == 0 || h.Epoch != m.Epoch // the answer that told it its epoch was lost
	m.Rack, m.ClientID, m.ClientHost = h.Rack, clientID, clientHost
	session, interval := c.limits.timings(h.Group)
	m.expires = now.Add(session)
	if h.Topics != nil {
		topics := slices.Clone(h.Topics)
		slices.Sort(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.Topics) {
			m.Topics = topics
			changed = true
		}
		if g.everSubscribed == nil {
			g.everSubscribed = map[string]bool{}
		}
		for _, t := range topics {
			g.everSubscribed[t] = true
		}
	}
	if changed || c.topicsChanged(g) {
		c.reassign(g)
	}
	answer := HeartbeatAnswer{Epoch: m.Epoch, Interval: interval}
	if resend || m.assignedAt != g.assignmentEpoch {
		m.assignedAt = g.assignmentEpoch
		if m.Epoch != g.assignmentEpoch {
			m.prevEpoch, m.Epoch = m.Epoch, g.assignmentEpoch
		}
		answer.Epoch = m.Epoch
		answer.Assignment = m.Assignment
		if answer.Assignment == nil {
			answer.Assignment = Assignment{}
		}
	}
	return answer, nil
}

// Expire removes the members whose session ran out by now, and reports
// their ids by group.
func (c *Coordinator) Expire(now time.Time) map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expireLocked(now)
}

func (c *Coordinator) expireLocked(now time.Time) map[string][]string {
	var gone map[string][]string
	for _, g := range c.groups {
		expired := false
		for id, m := range g.members {
			if !now.Before(m.expires) {
				delete(g.members, id)
				expired = true
				if gone == nil {
					gone = map[string][]string{}
				}
				gone[g.name] = append(gone[g.name], id)
			}
		}
		if expired {
			c.reassign(g)
		}
	}
	return gone
}

// Exists reports whether a share group of that name is known.
func (c *Coordinator) Exists(group string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[group] != nil
}

// Describe describes group; ok is false when no share group has the name.
func (c *Coordinator) Describe(name string) (GroupInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil {
		return GroupInfo{}, false
	}
	info := GroupInfo{Name: g.name, Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch}
	for _, id := range sortedMembers(g) {
		m := g.members[id].Member
		m.Topics = slices.Clone(m.Topics)
		info.Members = append(info.Members, m)
	}
	return info, true
}

// Topics lists the topics the group's members have subscribed to, now or
// before: those its offsets are of.
func (c *Coordinator) Topics(name string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil {
		return nil
	}
	out := make([]string, 0, len(g.everSubscribed))
	for t := range g.everSubscribed {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Groups lists the share groups' names.
func (c *Coordinator) Groups() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.groups))
	for name := range c.groups {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Members counts a share group's members; ok is false when no share
// group has the name.
func (c *Coordinator) Members(name string) (n int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil {
		return 0, false
	}
	return len(g.members), true
}

// OffsetsAltered records that an empty share group's offsets were set
// for topics (AlterShareGroupOffsets), making the group if it is unknown:
// its offsets are of those topics now. It returns the group's new epoch,
// which the share-partitions' state starts over under.
func (c *Coordinator) OffsetsAltered(name string, topics []string) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil {
		g = &group{name: name, members: map[string]*member{}}
		c.groups[name] = g
	}
	if g.everSubscribed == nil {
		g.everSubscribed = map[string]bool{}
	}
	for _, t := range topics {
		g.everSubscribed[t] = true
	}
	g.epoch++
	return g.epoch
}

// OffsetsDeleted records that a share group's offsets of topics were
// deleted (DeleteShareGroupOffsets): it has none of them now.
func (c *Coordinator) OffsetsDeleted(name string, topics []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[name]; g != nil {
		for _, t := range topics {
			delete(g.everSubscribed, t)
		}
	}
}

// Delete removes an empty share group; false when it has members or is
// unknown.
func (c *Coordinator) Delete(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil || len(g.members) > 0 {
		return false
	}
	delete(c.groups, name)
	return true
}

// topicsChanged reports whether the subscribed topics' partitions differ
// from those last assigned (a topic made, grown or deleted).
func (c *Coordinator) topicsChanged(g *group) bool {
	now := c.topics(subscribed(g))
	if len(now) != len(g.partitions) {
		return true
	}
	for name, t := range now {
		if g.partitions[name] != t {
			return true
		}
	}
	return false
}

// reassign gives every member partitions of the topics it subscribes to:
// each partition to one member while there are no more members than
// partitions, else each member one partition, shared (the simple
// assignor's outcome). The assignment epoch becomes the group epoch.
func (c *Coordinator) reassign(g *group) {
	g.epoch = max(g.epoch, g.assignmentEpoch+1)
	g.partitions = c.topics(subscribed(g))
	ids := sortedMembers(g)
	for _, id := range ids {
		g.members[id].Assignment = Assignment{}
	}
	names := make([]string, 0, len(g.partitions))
	for name := range g.partitions {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t := g.partitions[name]
		var subs []*member
		for _, id := range ids {
			if m := g.members[id]; slices.Contains(m.Topics, name) {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 || t.Partitions <= 0 {
			continue
		}
		if int32(len(subs)) <= t.Partitions {
			for p := range t.Partitions {
				m := subs[int(p)%len(subs)]
				m.Assignment[t.ID] = append(m.Assignment[t.ID], p)
			}
			continue
		}
		for i, m := range subs {
			m.Assignment[t.ID] = append(m.Assignment[t.ID], int32(i)%t.Partitions)
		}
	}
	g.assignmentEpoch = g.epoch
}

func subscribed(g *group) []string {
	var names []string
	for _, m := range g.members {
		names = append(names, m.Topics...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func sortedMembers(g *group) []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, strings.Compare)
	return ids
}
