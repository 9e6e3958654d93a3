package share

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/model"
)

var groupLimits = GroupLimits{SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second, MaxSize: 10}

// fakeTopics is the cluster's topics, changed by the tests.
type fakeTopics map[string]TopicInfo

func (f fakeTopics) lookup(names []string) map[string]TopicInfo {
	out := map[string]TopicInfo{}
	for _, n := range names {
		if t, ok := f[n]; ok {
			out[n] = t
		}
	}
	return out
}

func join(t *testing.T, c *Coordinator, member string, now time.Time, topics ...string) HeartbeatAnswer {
	t.Helper()
	a, err := c.Heartbeat(Heartbeat{Group: "g", Member: member, Topics: topics}, "client", "/127.0.0.1", now)
	if err != nil {
		t.Fatalf("%s joins: %v", member, err)
	}
	return a
}

func beat(t *testing.T, c *Coordinator, member string, epoch int32, now time.Time) HeartbeatAnswer {
	t.Helper()
	a, err := c.Heartbeat(Heartbeat{Group: "g", Member: member, Epoch: epoch}, "client", "/127.0.0.1", now)
	if err != nil {
		t.Fatalf("%s at epoch %d: %v", member, epoch, err)
	}
	return a
}

func TestShareGroupAssignsEveryPartition(t *testing.T) {
	topics := fakeTopics{"orders": {ID: [16]byte{1}, Partitions: 3}}
	c := NewCoordinator(groupLimits, topics.lookup, nil)
	a := join(t, c, "m0", t0, "orders")
	if a.Epoch != 1 || !slices.Equal(a.Assignment[[16]byte{1}], []int32{0, 1, 2}) || a.Interval != 5*time.Second {
		t.Fatalf("first member: %+v", a)
	}
	// Eight members on three partitions: each holds one, each partition
	// read by two or three.
	epochs := map[string]int32{"m0": a.Epoch}
	for i := 1; i < 8; i++ {
		id := fmt.Sprintf("m%d", i)
		epochs[id] = join(t, c, id, t0, "orders").Epoch
	}
	readers := map[int32]int{}
	for id, e := range epochs {
		a := beat(t, c, id, e, t0)
		if a.Assignment == nil {
			// Told already at its epoch, when it joined last.
			info, _ := c.Describe("g")
			for _, m := range info.Members {
				if m.ID == id {
					a.Assignment = m.Assignment
				}
			}
		}
		ps := a.Assignment[[16]byte{1}]
		if len(ps) != 1 {
			t.Fatalf("%s holds %v", id, ps)
		}
		readers[ps[0]]++
	}
	for p := int32(0); p < 3; p++ {
		if readers[p] < 2 || readers[p] > 3 {
			t.Fatalf("readers per partition %v", readers)
		}
	}
}

func TestShareGroupEpochsAndFencing(t *testing.T) {
	topics := fakeTopics{"a": {ID: [16]byte{1}, Partitions: 2}, "b": {ID: [16]byte{2}, Partitions: 1}}
	c := NewCoordinator(groupLimits, topics.lookup, nil)
	a1 := join(t, c, "x", t0, "a")
	// Nothing changed: the same epoch, no assignment sent again.
	if a := beat(t, c, "x", a1.Epoch, t0); a.Epoch != a1.Epoch || a.Assignment != nil {
		t.Fatalf("steady heartbeat: %+v", a)
	}
	a2 := join(t, c, "y", t0, "a")
	if a2.Epoch <= a1.Epoch {
		t.Fatalf("second member's epoch %d after %d", a2.Epoch, a1.Epoch)
	}
	// x learns its new assignment at the new epoch.
	ax := beat(t, c, "x", a1.Epoch, t0)
	if ax.Epoch != a2.Epoch || len(ax.Assignment[[16]byte{1}]) != 1 {
		t.Fatalf("x after y joined: %+v", ax)
	}
	// The answer that told x its epoch may be lost: its previous epoch
	// gets the assignment again. An older one is fenced, an unknown
	// member refused.
	if a := beat(t, c, "x", a1.Epoch, t0); a.Epoch != ax.Epoch || len(a.Assignment[[16]byte{1}]) != 1 {
		t.Fatalf("x again at its previous epoch: %+v", a)
	}
	join(t, c, "z", t0, "b")
	ax = beat(t, c, "x", ax.Epoch, t0)
	if _, err := c.Heartbeat(Heartbeat{Group: "g", Member: "x", Epoch: a1.Epoch}, "", "", t0); !errors.Is(err, ErrFencedEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	beat(t, c, "z", -1, t0)
	if _, err := c.Heartbeat(Heartbeat{Group: "g", Member: "x", Epoch: ax.Epoch + 1}, "", "", t0); !errors.Is(err, ErrFencedEpoch) {
		t.Fatalf("an epoch from the future: %v", err)
	}
	if _, err := c.Heartbeat(Heartbeat{Group: "g", Member: "z", Epoch: 3}, "", "", t0); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("unknown member: %v", err)
	}
	// A new subscription and a topic that grows are assigned at once.
	ay, err := c.Heartbeat(Heartbeat{Group: "g", Member: "y", Epoch: a2.Epoch, Topics: []string{"a", "b"}}, "", "", t0)
	if err != nil || !slices.Equal(ay.Assignment[[16]byte{2}], []int32{0}) {
		t.Fatalf("y subscribes to b: %+v %v", ay, err)
	}
	topics["b"] = TopicInfo{ID: [16]byte{2}, Partitions: 2}
	ay2 := beat(t, c, "y", ay.Epoch, t0)
	if ay2.Epoch <= ay.Epoch || !slices.Equal(ay2.Assignment[[16]byte{2}], []int32{0, 1}) {
		t.Fatalf("after b grew: %+v", ay2)
	}
	if got := c.Topics("g"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("topics subscribed %v", got)
	}
	// Leaving hands the partitions to those left.
	if a, err := c.Heartbeat(Heartbeat{Group: "g", Member: "y", Epoch: -1}, "", "", t0); err != nil || a.Epoch != -1 {
		t.Fatalf("leave: %+v %v", a, err)
	}
	if a := beat(t, c, "x", ax.Epoch, t0); !slices.Equal(a.Assignment[[16]byte{1}], []int32{0, 1}) {
		t.Fatalf("x after y left: %+v", a)
	}
}

func TestShareGroupSessionsAndSize(t *testing.T) {
	topics := fakeTopics{"a": {ID: [16]byte{1}, Partitions: 4}}
	c := NewCoordinator(GroupLimits{SessionTimeout: 10 * time.Second, HeartbeatInterval: time.Second, MaxSize: 2}, topics.lookup, nil)
	ax := join(t, c, "x", t0, "a")
	join(t, c, "y", t0.Add(5*time.Second), "a")
	if _, err := c.Heartbeat(Heartbeat{Group: "g", Member: "z", Topics: []string{"a"}}, "", "", t0); !errors.Is(err, ErrGroupFull) {
		t.Fatalf("a third member: %v", err)
	}
	// x goes silent: its session runs out, and y gets every partition.
	gone := c.Expire(t0.Add(10 * time.Second))
	if !slices.Equal(gone["g"], []string{"x"}) {
		t.Fatalf("expired %v", gone)
	}
	info, _ := c.Describe("g")
	if len(info.Members) != 1 || len(info.Members[0].Assignment[[16]byte{1}]) != 4 {
		t.Fatalf("after x expired: %+v", info)
	}
	if _, err := c.Heartbeat(Heartbeat{Group: "g", Member: "x", Epoch: ax.Epoch}, "", "", t0.Add(11*time.Second)); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("x after it expired: %v", err)
	}
	// A joining member names its topics; a group with members is not deleted.
	if _, err := c.Heartbeat(Heartbeat{Group: "g", Member: "w"}, "", "", t0.Add(11*time.Second)); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("join without topics: %v", err)
	}
	if c.Delete("g") || !c.Exists("g") {
		t.Fatal("deleted a group with a member")
	}
	c.Expire(t0.Add(time.Minute))
	if !c.Delete("g") || c.Exists("g") {
		t.Fatal("an empty group was not deleted")
	}
}

// TestShareGroupOwnTimings: a group's own session timeout and heartbeat
// interval (its share.* configs) apply to its members; other groups keep
// the broker's.
func TestShareGroupOwnTimings(t *testing.T) {
	topics := fakeTopics{"a": {ID: [16]byte{1}, Partitions: 1}}
	limits := groupLimits
	limits.Timings = func(group string) (time.Duration, time.Duration) {
		if group == "g" {
			return 2 * time.Second, 500 * time.Millisecond
		}
		return limits.SessionTimeout, limits.HeartbeatInterval
	}
	c := NewCoordinator(limits, topics.lookup, nil)
	if a := join(t, c, "x", t0, "a"); a.Interval != 500*time.Millisecond {
		t.Fatalf("g's heartbeat interval %v", a.Interval)
	}
	other, err := c.Heartbeat(Heartbeat{Group: "h", Member: "y", Topics: []string{"a"}}, "", "", t0)
	if err != nil || other.Interval != limits.HeartbeatInterval {
		t.Fatalf("h's heartbeat interval %v %v", other.Interval, err)
	}
	gone := c.Expire(t0.Add(2 * time.Second))
	if !slices.Equal(gone["g"], []string{"x"}) || len(gone["h"]) != 0 {
		t.Fatalf("after 2s expired %v, want g's x only", gone)
	}
}

// TestShareGroupRecords: a group's records in __consumer_offsets bring
// it back, with its epoch and topics and no member, on the broker that
// loads its partition; they are written again only when its topics
// change; tombstones delete it; unloading drops the partition's groups.
func TestShareGroupRecords(t *testing.T) {
	topics := fakeTopics{"a": {ID: [16]byte{1}, Partitions: 2}, "b": {ID: [16]byte{2}, Partitions: 1}}
	c := NewCoordinator(groupLimits, topics.lookup, nil)
	join(t, c, "x", t0, "a")
	recs, written := c.Records("g", false)
	if len(recs) != 2 {
		t.Fatalf("a new group's records: %d", len(recs))
	}
	written()
	if again, _ := c.Records("g", false); again != nil {
		t.Fatal("records written again with nothing new")
	}
	if _, err := c.Heartbeat(Heartbeat{Group: "g", Member: "x", Epoch: 1, Topics: []string{"a", "b"}}, "", "", t0); err != nil {
		t.Fatal(err)
	}
	recs, _ = c.Records("g", false)
	if recs == nil {
		t.Fatal("no records after the group subscribed to b")
	}
	info, _ := c.Describe("g")

	d := NewCoordinator(groupLimits, topics.lookup, nil)
	const n = 50
	i := model.CoordinatorPartition("g", n)
	d.Loaded(i+1, n, recs) // another partition's: not this group's
	if d.Exists("g") {
		t.Fatal("loaded a group of another partition")
	}
	d.Loaded(i, n, recs)
	if got, ok := d.Describe("g"); !ok || got.Epoch != info.Epoch || len(got.Members) != 0 || !slices.Equal(d.Topics("g"), []string{"a", "b"}) {
		t.Fatalf("loaded %+v %v, topics %v; want epoch %d, topics a b", got, ok, d.Topics("g"), info.Epoch)
	}
	if again, _ := d.Records("g", false); again != nil {
		t.Fatal("a loaded group's records written again")
	}
	e := NewCoordinator(groupLimits, topics.lookup, nil)
	e.Loaded(i, n, append(recs, Tombstones("g")...))
	if e.Exists("g") {
		t.Fatal("a group with tombstones loaded")
	}
	d.Unloaded(i, n)
	if d.Exists("g") {
		t.Fatal("unloaded, yet kept")
	}
}
