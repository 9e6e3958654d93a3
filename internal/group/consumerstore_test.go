package group_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/strandlog/strand/internal/group"
)

// recordTypes lists the record type (the key's first int16) of each
// record the coordinator wrote, in log order; tombstones are negated.
func (e *cgEnv) recordTypes() []int {
	var out []int
	for _, r := range offsetsRecords(e.t, e.topic) {
		typ := int(r.keyType)
		if r.tombstone {
			typ = -typ
		}
		out = append(out, typ)
	}
	return out
}

// TestConsumerGroupSurvivesRestart: a stable group of three and a group in
// the middle of a reconciliation come back from __consumer_offsets with
// their epochs, assignments and revocations, so the members carry on with
// their next heartbeat and no partition gets a second owner.
func TestConsumerGroupSurvivesRestart(t *testing.T) {
	e := newCGEnv(t)
	e.topics.add("t", 6)
	a := e.joinMember("a", "t")
	b := e.joinMember("b", "t")
	for range 3 {
		e.beat(a)
		e.beat(b)
	}
	if e.cgState() != "Stable" || count(a.owned) != 3 || count(b.owned) != 3 {
		t.Fatalf("before restart: %s, a %d b %d partitions", e.cgState(), count(a.owned), count(b.owned))
	}
	before := e.c.DescribeConsumerGroups([]string{"g"})[0]
	// A third member joins; a and b are asked to revoke one each, and a
	// acknowledges only after the restart.
	c := e.joinMember("c", "t")
	e.beat(a)
	e.beat(b)
	e.beat(b) // b revoked
	if count(a.owned) != 2 || a.epoch != before.Epoch {
		t.Fatalf("a asked to revoke: epoch %d with %d partitions", a.epoch, count(a.owned))
	}
	mid := e.c.DescribeConsumerGroups([]string{"g"})[0]

	e.restart()

	after := e.c.DescribeConsumerGroups([]string{"g"})[0]
	if after.Epoch != mid.Epoch || after.AssignmentEpoch != mid.AssignmentEpoch || after.State != mid.State || len(after.Members) != 3 {
		t.Fatalf("after restart %+v, want it as before %+v", after, mid)
	}
	for i, m := range after.Members {
		w := mid.Members[i]
		if m.MemberID != w.MemberID || m.MemberEpoch != w.MemberEpoch || !slices.EqualFunc(m.Assignment, w.Assignment, sameOwnedTopic) ||
			!slices.EqualFunc(m.Target, w.Target, sameOwnedTopic) {
			t.Fatalf("member after restart %+v, want %+v", m, w)
		}
	}
	// c gets b's partition but still waits for a's: a has not
	// acknowledged giving it up.
	e.beat(c)
	if count(c.owned) != 1 {
		t.Fatalf("c holds %d partitions before a acknowledged its revocation, want b's one", count(c.owned))
	}
	noDoubleOwners(t, a, b, c)
	e.beat(a) // a acknowledges: now at the new epoch
	e.beat(c)
	e.beat(a)
	e.beat(b)
	noDoubleOwners(t, a, b, c)
	if e.cgState() != "Stable" || count(a.owned)+count(b.owned)+count(c.owned) != 6 || count(c.owned) != 2 {
		t.Fatalf("after reconciling: %s, a %d b %d c %d", e.cgState(), count(a.owned), count(b.owned), count(c.owned))
	}
	// A further restart with the group stable moves no epoch.
	stable := e.c.DescribeConsumerGroups([]string{"g"})[0]
	e.restart()
	epochs := []int32{a.epoch, b.epoch, c.epoch}
	for _, m := range []*cgMember{a, b, c} {
		e.beat(m)
	}
	if got := []int32{a.epoch, b.epoch, c.epoch}; !slices.Equal(got, epochs) || e.c.DescribeConsumerGroups([]string{"g"})[0].Epoch != stable.Epoch {
		t.Fatalf("epochs after a stable restart %v (group %d), want %v (%d)", got, e.c.DescribeConsumerGroups([]string{"g"})[0].Epoch, epochs, stable.Epoch)
	}
}

func sameOwnedTopic(a, b group.DescribedTopic) bool {
	return a.ID == b.ID && slices.Equal(a.Partitions, b.Partitions)
}

// TestConsumerGroupRecords: the records are Kafka's types, a heartbeat
// that changes nothing writes nothing, a leave deletes the member's
// records, and a deleted group stays deleted across a restart.
func TestConsumerGroupRecords(t *testing.T) {
	e := newCGEnv(t)
	e.topics.add("t", 2)
	a := e.joinMember("a", "t")
	// The join: group epoch, topics, member, target, current, target epoch.
	if got, want := e.recordTypes(), []int{3, 4, 5, 7, 8, 6}; !slices.Equal(got, want) {
		t.Fatalf("records of a join %v, want %v", got, want)
	}
	n := len(e.recordTypes())
	e.beat(a)
	if got := len(e.recordTypes()); got != n {
		t.Fatalf("a heartbeat that changed nothing wrote %d records", got-n)
	}
	b := e.joinMember("b", "t")
	if err := e.leave(b); err != nil {
		t.Fatal(err)
	}
	types := e.recordTypes()
	if tail := types[len(types)-4:]; !slices.Equal(tail, []int{3, -8, -7, -5}) {
		t.Fatalf("records of a leave end %v, want the new group epoch and the member's current, target and metadata deleted", tail)
	}
	e.restart()
	if d := e.c.DescribeConsumerGroups([]string{"g"})[0]; len(d.Members) != 1 || d.Members[0].MemberID != a.id {
		t.Fatalf("after restart: %+v, want a alone", d)
	}
	// Kill a's session and delete the group: a restart finds nothing.
	e.clock.Advance(group.Defaults().ConsumerSessionTimeout + 1)
	if err := recv(t, e.c.DeleteGroup("g")); err != nil {
		t.Fatal(err)
	}
	e.restart()
	if d := e.c.DescribeConsumerGroups([]string{"g"})[0]; !errors.Is(d.Err, group.ErrGroupIDNotFound) {
		t.Fatalf("a deleted group after restart: %+v", d)
	}
}

// TestEmptyConsumerGroupBecomesClassicAcrossRestart: a consumer group that
// emptied and was joined by a classic member is classic after a restart,
// and the reverse.
func TestEmptyConsumerGroupBecomesClassicAcrossRestart(t *testing.T) {
	e := newCGEnv(t)
	e.topics.add("t", 2)
	a := e.joinMember("a", "t")
	if err := e.leave(a); err != nil {
		t.Fatal(err)
	}
	e.stableGroup("g", 1, 2)
	e.restart()
	if d := e.c.Describe([]string{"g"})[0]; d.Err != nil || d.State != "Stable" {
		t.Fatalf("classic group after restart: %+v", d)
	}
	if d := e.c.DescribeConsumerGroups([]string{"g"})[0]; !errors.Is(d.Err, group.ErrGroupIDNotFound) {
		t.Fatalf("ConsumerGroupDescribe of the classic group: %+v", d)
	}
}

func (e *cgEnv) leave(m *cgMember) error {
	res := <-e.c.ConsumerHeartbeat(group.ConsumerHeartbeatRequest{Version: 1, Group: "g", MemberID: m.id, MemberEpoch: -1})
	return res.Err
}
