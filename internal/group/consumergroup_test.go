package group_test

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/group"
)

// fakeTopics is the cluster's topics for consumer groups.
type fakeTopics struct {
	mu      sync.Mutex
	topics  map[string]group.TopicInfo
	version int64
}

func (f *fakeTopics) add(name string, partitions int32) [16]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.topics == nil {
		f.topics = map[string]group.TopicInfo{}
	}
	id := [16]byte{byte(len(f.topics) + 1), 'i', 'd'}
	f.topics[name] = group.TopicInfo{ID: id, Partitions: partitions}
	f.version++
	return id
}

func (f *fakeTopics) Lookup(names []string) map[string]group.TopicInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]group.TopicInfo{}
	for _, n := range names {
		if t, ok := f.topics[n]; ok {
			out[n] = t
		}
	}
	return out
}

func (f *fakeTopics) Version() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version
}

func (f *fakeTopics) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.topics))
}

type cgEnv struct {
	*env
	topics *fakeTopics
}

func newCGEnv(t *testing.T) *cgEnv {
	topics := &fakeTopics{}
	e := newEnv(t, func(c *group.Config) { c.Topics = topics })
	return &cgEnv{env: e, topics: topics}
}

// cgMember is a client's view of its membership.
type cgMember struct {
	id    string
	epoch int32
	owned map[[16]byte][]int32
}

func join(id string, topics ...string) group.ConsumerHeartbeatRequest {
	return group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: id, MemberEpoch: 0,
		RebalanceTimeout: rebalance, TopicNames: append([]string{}, topics...), Owned: []group.OwnedTopic{},
		Client: group.Client{ID: "client-" + id, Addr: "127.0.0.1:1000"}}
}

// beat sends m's heartbeat listing what it owns, and applies the answer as
// a client does: the assignment in the answer is what it owns from then on.
func (e *cgEnv) beat(m *cgMember) group.ConsumerHeartbeatResult {
	e.t.Helper()
	req := group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: m.id, MemberEpoch: m.epoch,
		RebalanceTimeout: -1, Owned: owned(m.owned), Client: group.Client{ID: "client-" + m.id, Addr: "127.0.0.1:1000"}}
	res := <-e.c.ConsumerHeartbeat(req)
	if res.Err != nil {
		e.t.Fatalf("heartbeat of %s at epoch %d: %v", m.id, m.epoch, res.Err)
	}
	m.apply(res)
	return res
}

func (m *cgMember) apply(res group.ConsumerHeartbeatResult) {
	m.epoch = res.MemberEpoch
	if res.Assignment != nil {
		m.owned = map[[16]byte][]int32{}
		for _, t := range *res.Assignment {
			m.owned[t.TopicID] = slices.Clone(t.Partitions)
		}
	}
}

func owned(o map[[16]byte][]int32) []group.OwnedTopic {
	out := []group.OwnedTopic{}
	for id, ps := range o {
		out = append(out, group.OwnedTopic{TopicID: id, Partitions: ps})
	}
	return out
}

func (e *cgEnv) joinMember(id string, topics ...string) *cgMember {
	e.t.Helper()
	res := <-e.c.ConsumerHeartbeat(join(id, topics...))
	if res.Err != nil {
		e.t.Fatalf("join of %s: %v", id, res.Err)
	}
	m := &cgMember{id: res.MemberID}
	m.apply(res)
	return m
}

func (e *cgEnv) cgState() string {
	return e.c.DescribeConsumerGroups([]string{"g"})[0].State
}

func count(o map[[16]byte][]int32) int {
	n := 0
	for _, ps := range o {
		n += len(ps)
	}
	return n
}

// noDoubleOwners fails if two members own one partition.
func noDoubleOwners(t *testing.T, ms ...*cgMember) {
	t.Helper()
	seen := map[[16]byte]map[int32]string{}
	for _, m := range ms {
		for id, ps := range m.owned {
			if seen[id] == nil {
				seen[id] = map[int32]string{}
			}
			for _, p := range ps {
				if other, ok := seen[id][p]; ok {
					t.Fatalf("partition %d owned by %s and %s", p, other, m.id)
				}
				seen[id][p] = m.id
			}
		}
	}
}

// TestConsumerGroupReconciliation walks a second member's join: the first
// must revoke half its partitions before the second gets them, and no
// partition has two owners at any step.
func TestConsumerGroupReconciliation(t *testing.T) {
	e := newCGEnv(t)
	e.topics.add("t", 4)
	a := e.joinMember("a", "t")
	if a.epoch != 1 || count(a.owned) != 4 {
		t.Fatalf("first member: epoch %d, %d partitions; want 1 and 4", a.epoch, count(a.owned))
	}
	b := e.joinMember("b", "t")
	if b.epoch != 2 || count(b.owned) != 0 {
		t.Fatalf("second member: epoch %d, %d partitions; want 2 and none while a holds them", b.epoch, count(b.owned))
	}
	noDoubleOwners(t, a, b)
	if e.cgState() != "Reconciling" {
		t.Fatalf("state %s, want Reconciling", e.cgState())
	}

	// a is asked to revoke: it stays at epoch 1 with half.
	e.beat(a)
	if a.epoch != 1 || count(a.owned) != 2 {
		t.Fatalf("a asked to revoke: epoch %d, %d partitions; want 1 and 2", a.epoch, count(a.owned))
	}
	e.beat(b)
	if count(b.owned) != 0 {
		t.Fatalf("b got %d partitions a has not acknowledged revoking", count(b.owned))
	}
	noDoubleOwners(t, a, b)
	// a's next heartbeat lists only what it kept: it moves to epoch 2.
	e.beat(a)
	if a.epoch != 2 || count(a.owned) != 2 {
		t.Fatalf("a after revoking: epoch %d, %d partitions; want 2 and 2", a.epoch, count(a.owned))
	}
	e.beat(b)
	if b.epoch != 2 || count(b.owned) != 2 {
		t.Fatalf("b after a revoked: epoch %d, %d partitions; want 2 and 2", b.epoch, count(b.owned))
	}
	noDoubleOwners(t, a, b)
	if e.cgState() != "Stable" {
		t.Fatalf("state %s, want Stable", e.cgState())
	}
	// The history has each partition's first owner and the two moves.
	h, _ := e.c.History("g")
	moves := 0
	for _, ho := range h.Handoffs {
		if ho.From.MemberID == a.id && ho.To.MemberID == b.id {
			moves++
		}
	}
	if len(h.Handoffs) != 6 || moves != 2 {
		t.Fatalf("hand-offs %+v: want 4 first assignments and 2 moves from a to b", h.Handoffs)
	}

	// b leaves: a gets everything back at the next epoch.
	if res := <-e.c.ConsumerHeartbeat(group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: b.id, MemberEpoch: -1}); res.Err != nil || res.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", res)
	}
	e.beat(a)
	if a.epoch != 3 || count(a.owned) != 4 {
		t.Fatalf("a after b left: epoch %d, %d partitions; want 3 and 4", a.epoch, count(a.owned))
	}
}

// TestConsumerGroupEpochFencing checks Kafka's epoch rules.
func TestConsumerGroupEpochFencing(t *testing.T) {
	e := newCGEnv(t)
	e.topics.add("t", 2)
	a := e.joinMember("a", "t")
	req := func(epoch int32, owned []group.OwnedTopic) group.ConsumerHeartbeatRequest {
		return group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: a.id, MemberEpoch: epoch, RebalanceTimeout: -1, Owned: owned}
	}
	if res := <-e.c.ConsumerHeartbeat(req(a.epoch+1, nil)); !errors.Is(res.Err, group.ErrFencedMemberEpoch) {
		t.Fatalf("epoch ahead: %v, want FENCED_MEMBER_EPOCH", res.Err)
	}
	b := e.joinMember("b", "t") // epoch 2; a must revoke one
	_ = b
	e.beat(a) // revoke asked
	e.beat(a) // revoked: epoch 2
	if a.epoch != 2 {
		t.Fatalf("a at epoch %d, want 2", a.epoch)
	}
	// The answer that moved a to epoch 2 was lost: epoch 1 with a subset
	// of its assignment is accepted.
	if res := <-e.c.ConsumerHeartbeat(req(1, owned(a.owned))); res.Err != nil || res.MemberEpoch != 2 {
		t.Fatalf("previous epoch with a subset: %+v, want epoch 2", res)
	}
	if res := <-e.c.ConsumerHeartbeat(req(0+1, nil)); !errors.Is(res.Err, group.ErrFencedMemberEpoch) {
		t.Fatalf("previous epoch without owned partitions: %v, want FENCED_MEMBER_EPOCH", res.Err)
	}
	unknown := group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: "nobody", MemberEpoch: 3, RebalanceTimeout: -1}
	if res := <-e.c.ConsumerHeartbeat(unknown); !errors.Is(res.Err, group.ErrUnknownMemberID) {
		t.Fatalf("unknown member: %v, want UNKNOWN_MEMBER_ID", res.Err)
	}
}

// TestConsumerGroupInvalidRequests checks Kafka's request validation.
func TestConsumerGroupInvalidRequests(t *testing.T) {
	e := newCGEnv(t)
	empty := ""
	bad := "no-such"
	badRegex := "a("
	for _, tc := range []struct {
		name string
		edit func(*group.ConsumerHeartbeatRequest)
		want error
	}{
		{"no member id at v1", func(r *group.ConsumerHeartbeatRequest) { r.MemberID = "" }, group.ErrInvalidRequest},
		{"no group", func(r *group.ConsumerHeartbeatRequest) { r.Group = "" }, group.ErrInvalidRequest},
		{"empty instance id", func(r *group.ConsumerHeartbeatRequest) { r.InstanceID = &empty }, group.ErrInvalidRequest},
		{"empty rack", func(r *group.ConsumerHeartbeatRequest) { r.RackID = &empty }, group.ErrInvalidRequest},
		{"join without rebalance timeout", func(r *group.ConsumerHeartbeatRequest) { r.RebalanceTimeout = -1 }, group.ErrInvalidRequest},
		{"join with owned partitions", func(r *group.ConsumerHeartbeatRequest) { r.Owned = []group.OwnedTopic{{Partitions: []int32{0}}} }, group.ErrInvalidRequest},
		{"join without subscription", func(r *group.ConsumerHeartbeatRequest) { r.TopicNames = nil }, group.ErrInvalidRequest},
		{"static leave without instance", func(r *group.ConsumerHeartbeatRequest) { r.MemberEpoch = -2 }, group.ErrInvalidRequest},
		{"epoch below -2", func(r *group.ConsumerHeartbeatRequest) { r.MemberEpoch = -3 }, group.ErrInvalidRequest},
		{"unknown assignor", func(r *group.ConsumerHeartbeatRequest) { r.ServerAssignor = &bad }, group.ErrUnsupportedAssignor},
		{"bad regex", func(r *group.ConsumerHeartbeatRequest) { r.TopicNames = nil; r.TopicRegex = &badRegex }, group.ErrInvalidRegularExpression},
	} {
		req := join("m")
		tc.edit(&req)
		if res := <-e.c.ConsumerHeartbeat(req); !errors.Is(res.Err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, res.Err, tc.want)
		}
	}
	<-e.c.ConsumerHeartbeat(join("m")) // a member with no topics is fine
	e.cfg.ConsumerMaxSize = 1
	e.restart()
	<-e.c.ConsumerHeartbeat(join("m"))
	if res := <-e.c.ConsumerHeartbeat(join("n")); !errors.Is(res.Err, group.ErrGroupMaxSizeReached) {
		t.Errorf("over group.consumer.max.size: %v, want GROUP_MAX_SIZE_REACHED", res.Err)
	}
}

// TestConsumerGroupTimeouts checks that a silent member is removed after
// its session and one that keeps partitions it must revoke after its
// rebalance timeout, and that their partitions then go to the others.
func TestConsumerGroupTimeouts(t *testing.T) {
	e := newCGEnv(t)
	e.topics.add("t", 2)
	a := e.joinMember("a", "t")
	b := e.joinMember("b", "t")
	e.beat(a) // asked to revoke one; a never acknowledges
	for range 3 {
		e.clock.Advance(rebalance / 3)
		e.beat(b)
	}
	if count(b.owned) != 2 {
		t.Fatalf("b has %d partitions after a overran its rebalance timeout, want 2", count(b.owned))
	}
	res := <-e.c.ConsumerHeartbeat(group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: a.id, MemberEpoch: a.epoch, RebalanceTimeout: -1})
	if !errors.Is(res.Err, group.ErrUnknownMemberID) {
		t.Fatalf("a after its rebalance timeout: %v, want UNKNOWN_MEMBER_ID", res.Err)
	}

	c := e.joinMember("c", "t")
	e.beat(b)
	e.beat(b)
	e.beat(c)
	if count(c.owned) != 1 {
		t.Fatalf("c has %d partitions, want 1", count(c.owned))
	}
	// c goes silent past its session: b gets its partition back.
	e.clock.Advance(e.cfg.ConsumerSessionTimeout / 2)
	e.beat(b)
	e.clock.Advance(e.cfg.ConsumerSessionTimeout/2 + time.Second)
	e.beat(b)
	if count(b.owned) != 2 {
		t.Fatalf("b has %d partitions after c's session ended, want 2", count(b.owned))
	}
}

// TestConsumerGroupStaticMember checks that a static member that leaves
// for a while keeps its partitions for its instance, and that a second
// member with its instance id is refused meanwhile.
func TestConsumerGroupStaticMember(t *testing.T) {
	e := newCGEnv(t)
	e.topics.add("t", 2)
	inst := "i1"
	req := join("a", "t")
	req.InstanceID = &inst
	res := <-e.c.ConsumerHeartbeat(req)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	a := &cgMember{id: res.MemberID}
	a.apply(res)
	other := join("x", "t")
	other.InstanceID = &inst
	if res := <-e.c.ConsumerHeartbeat(other); !errors.Is(res.Err, group.ErrUnreleasedInstanceID) {
		t.Fatalf("a second member with the instance id: %v, want UNRELEASED_INSTANCE_ID", res.Err)
	}
	leave := group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: a.id, MemberEpoch: -2, InstanceID: &inst}
	if res := <-e.c.ConsumerHeartbeat(leave); res.Err != nil || res.MemberEpoch != -2 {
		t.Fatalf("static leave: %+v", res)
	}
	back := join("a2", "t")
	back.InstanceID = &inst
	res = <-e.c.ConsumerHeartbeat(back)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	a2 := &cgMember{id: res.MemberID}
	a2.apply(res)
	if count(a2.owned) != 2 || a2.epoch != 1 {
		t.Fatalf("the instance back: epoch %d, %d partitions; want its predecessor's 1 and 2", a2.epoch, count(a2.owned))
	}
	// The predecessor's id is fenced now.
	old := group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: a.id, MemberEpoch: 1, InstanceID: &inst, RebalanceTimeout: -1}
	if res := <-e.c.ConsumerHeartbeat(old); !errors.Is(res.Err, group.ErrFencedInstanceID) {
		t.Fatalf("the predecessor: %v, want FENCED_INSTANCE_ID", res.Err)
	}
}

// TestConsumerGroupRegexSubscription checks that a topic created after the
// group started and matching its pattern is assigned.
func TestConsumerGroupRegexSubscription(t *testing.T) {
	e := newCGEnv(t)
	e.topics.add("orders-eu", 1)
	e.topics.add("payments", 1)
	pattern := "orders-.*"
	req := join("a")
	req.TopicNames, req.TopicRegex = nil, &pattern
	res := <-e.c.ConsumerHeartbeat(req)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	a := &cgMember{id: res.MemberID}
	a.apply(res)
	if count(a.owned) != 1 {
		t.Fatalf("%d partitions for the pattern, want orders-eu's 1", count(a.owned))
	}
	e.topics.add("orders-us", 2)
	e.beat(a)
	if count(a.owned) != 3 {
		t.Fatalf("%d partitions after orders-us was created, want 3", count(a.owned))
	}
}

// TestConsumerGroupCommits checks OffsetCommit against a consumer group:
// the member epoch, KIP-1251's older epochs, and the version floor.
func TestConsumerGroupCommits(t *testing.T) {
	e := newCGEnv(t)
	e.topics.add("t", 2)
	a := e.joinMember("a", "t")
	commit := func(epoch int32, version int16, partition int32) error {
		errs := recv(t, e.c.Commit(group.CommitRequest{Group: "g", MemberID: a.id, Generation: epoch, Version: version,
			RetentionTime: -1, GroupMustExist: true, Offsets: []group.CommitOffset{{Topic: "t", Partition: partition, Offset: 5, LeaderEpoch: -1}}}))
		return errs[0]
	}
	if err := commit(a.epoch, 9, 0); err != nil {
		t.Fatalf("commit at the member's epoch: %v", err)
	}
	if err := commit(a.epoch, 8, 0); !errors.Is(err, group.ErrUnsupportedVersion) {
		t.Fatalf("commit with v8: %v, want UNSUPPORTED_VERSION", err)
	}
	if err := commit(a.epoch+1, 9, 0); !errors.Is(err, group.ErrStaleMemberEpoch) {
		t.Fatalf("commit ahead of the epoch: %v, want STALE_MEMBER_EPOCH", err)
	}
	b := e.joinMember("b", "t") // epoch 2
	e.beat(a)
	e.beat(a) // a at epoch 2, holding one partition since epoch 1
	e.beat(b) // b gets the other at epoch 2
	var aHolds, bHolds int32
	for _, ps := range a.owned {
		aHolds = ps[0]
	}
	for _, ps := range b.owned {
		bHolds = ps[0]
	}
	if err := commit(1, 9, aHolds); err != nil {
		t.Fatalf("commit at an older epoch of a partition held since: %v", err)
	}
	if err := commit(1, 9, bHolds); !errors.Is(err, group.ErrStaleMemberEpoch) {
		t.Fatalf("commit at an older epoch of a partition given away: %v, want STALE_MEMBER_EPOCH", err)
	}
	if err := e.c.CheckFetchMember("g", a.id, a.epoch); err != nil {
		t.Fatalf("OffsetFetch by a member at its epoch: %v", err)
	}
	if err := e.c.CheckFetchMember("g", a.id, a.epoch-1); !errors.Is(err, group.ErrStaleMemberEpoch) {
		t.Fatalf("OffsetFetch at an older epoch: %v, want STALE_MEMBER_EPOCH", err)
	}
	if err := e.c.CheckFetchMember("g", "nobody", 1); !errors.Is(err, group.ErrUnknownMemberID) {
		t.Fatalf("OffsetFetch by an unknown member: %v, want UNKNOWN_MEMBER_ID", err)
	}
	if err := e.c.CheckFetchMember("g", "", -1); err != nil {
		t.Fatalf("OffsetFetch without a member: %v", err)
	}
	admin := recv(t, e.c.Commit(group.CommitRequest{Group: "g", Generation: -1, RetentionTime: -1, Version: 9,
		Offsets: []group.CommitOffset{{Topic: "t", Partition: 0, Offset: 1, LeaderEpoch: -1}}}))
	if !errors.Is(admin[0], group.ErrUnknownMemberID) {
		t.Fatalf("a commit from outside the group while it has members: %v, want UNKNOWN_MEMBER_ID", admin[0])
	}
}

// TestConsumerAndClassicGroupsExclude checks that with
// group.consumer.migration.policy=disabled a group of one protocol refuses
// members of the other while it has members, and converts when empty.
func TestConsumerAndClassicGroupsExclude(t *testing.T) {
	e := newCGEnvWithPolicy(t, group.MigrationDisabled)
	e.topics.add("t", 1)
	a := e.joinMember("a", "t")
	res := recv(t, e.c.Join(joinReq("g", "c1")))
	if !errors.Is(res.Err, group.ErrInconsistentGroupProtocol) {
		t.Fatalf("classic join to a consumer group: %v, want INCONSISTENT_GROUP_PROTOCOL", res.Err)
	}
	<-e.c.ConsumerHeartbeat(group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: a.id, MemberEpoch: -1})
	if got := e.c.List(nil, nil); len(got) != 1 || got[0].Type != "consumer" || got[0].State != "Empty" {
		t.Fatalf("listed %+v, want one empty consumer group", got)
	}
	e.stableGroup("g2", 1, 1)
	if res := <-e.c.ConsumerHeartbeat(join("x", "t")); res.Err != nil {
		t.Fatalf("join to the empty consumer group: %v", res.Err)
	}
	classic := join("y", "t")
	classic.Group = "g2"
	if res := <-e.c.ConsumerHeartbeat(classic); !errors.Is(res.Err, group.ErrGroupIDNotFound) {
		t.Fatalf("consumer join to a classic group with members: %v, want GROUP_ID_NOT_FOUND", res.Err)
	}
}
