package group_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/group"
)

func commit(g string, gen int32, member string, offsets ...group.CommitOffset) group.CommitRequest {
	return group.CommitRequest{Group: g, Generation: gen, MemberID: member, RetentionTime: -1, Offsets: offsets}
}

func at(p int32, off int64) group.CommitOffset {
	return group.CommitOffset{Topic: "t", Partition: p, Offset: off, LeaderEpoch: -1}
}

func (e *env) committed(g string, p int32) int64 {
	e.t.Helper()
	offs, err := e.c.FetchOffsets(g, []group.FetchTopic{{Topic: "t", Partitions: []int32{p}}}, false)
	if err != nil {
		e.t.Fatal(err)
	}
	return offs[0].Offset
}

func TestCommitFencing(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 2, 2)
	meta := strings.Repeat("m", 4097)
	for _, tc := range []struct {
		name string
		req  group.CommitRequest
		want error
	}{
		{"member in its generation", commit("g", gen, ids[0], at(0, 10)), nil},
		{"stale generation", commit("g", gen-1, ids[0], at(0, 11)), group.ErrIllegalGeneration},
		{"future generation", commit("g", gen+1, ids[0], at(0, 11)), group.ErrIllegalGeneration},
		{"unknown member", commit("g", gen, "nobody", at(0, 11)), group.ErrUnknownMemberID},
		{"simple commit to a group with members", commit("g", -1, "", at(0, 11)), group.ErrUnknownMemberID},
		{"member id without generation", commit("g", -1, ids[0], at(0, 11)), group.ErrIllegalGeneration},
		{"unknown group with a generation", commit("nope", 1, "x", at(0, 1)), group.ErrIllegalGeneration},
		{"invalid group", commit("", -1, "", at(0, 1)), group.ErrInvalidGroupID},
		{"metadata too large", commit("g", gen, ids[0], group.CommitOffset{Topic: "t", Partition: 1, Offset: 3, Metadata: &meta}), group.ErrOffsetMetadataTooLarge},
	} {
		errs := recv(t, e.c.Commit(tc.req))
		if !errors.Is(errs[0], tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, errs[0], tc.want)
		}
	}
	if got := e.committed("g", 0); got != 10 {
		t.Fatalf("committed %d, want 10", got)
	}
	// v9: an unknown group is GROUP_ID_NOT_FOUND.
	req := commit("nope", 1, "x", at(0, 1))
	req.GroupMustExist = true
	if errs := recv(t, e.c.Commit(req)); errs[0] != group.ErrGroupIDNotFound {
		t.Fatal(errs)
	}
}

func TestSimpleCommitCreatesGroup(t *testing.T) {
	e := newEnv(t, nil)
	meta := "hello"
	errs := recv(t, e.c.Commit(commit("simple", -1, "", at(0, 5), group.CommitOffset{Topic: "t", Partition: 1, Offset: 7, LeaderEpoch: 3, Metadata: &meta})))
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	offs, err := e.c.FetchOffsets("simple", nil, false)
	if err != nil || len(offs) != 2 || offs[1] != (group.FetchedOffset{Topic: "t", Partition: 1, Offset: 7, LeaderEpoch: 3, Metadata: "hello"}) {
		t.Fatalf("%+v %v", offs, err)
	}
	d := e.c.Describe([]string{"simple"})[0]
	if d.State != "Empty" || d.ProtocolType != "" {
		t.Fatalf("%+v", d)
	}
	l := e.c.List(nil, nil)
	if len(l) != 1 || l[0].Group != "simple" || l[0].State != "Empty" || l[0].Type != "classic" {
		t.Fatalf("%+v", l)
	}
	// A group nobody committed to has no offsets, and no error.
	offs, err = e.c.FetchOffsets("unknown", []group.FetchTopic{{Topic: "t", Partitions: []int32{0}}}, false)
	if err != nil || offs[0].Offset != -1 || offs[0].LeaderEpoch != -1 {
		t.Fatalf("%+v %v", offs, err)
	}
}

func TestCommitVisibleOnlyWhenDurable(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 1, 1)
	part := e.topic.Partition(int(e.c.PartitionFor("g")))
	gate := make(chan struct{})
	part.HoldDurability(gate)
	ch := e.c.Commit(commit("g", gen, ids[0], at(0, 42)))
	parked(t, ch)
	if got := e.committed("g", 0); got != -1 {
		t.Fatalf("seen before durable: %d", got)
	}
	stable := e.c.AwaitStable("g")
	select {
	case <-stable:
		t.Fatal("stable with a commit in flight")
	default:
	}
	close(gate)
	if errs := recv(t, ch); errs[0] != nil {
		t.Fatal(errs)
	}
	recv(t, stable)
	if got := e.committed("g", 0); got != 42 {
		t.Fatalf("committed %d", got)
	}
}

func TestCommitWriteFailure(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 1, 1)
	part := e.topic.Partition(int(e.c.PartitionFor("g")))
	part.FailAppends(errors.New("disk on fire"))
	if errs := recv(t, e.c.Commit(commit("g", gen, ids[0], at(0, 1)))); !errors.Is(errs[0], group.ErrNotCoordinator) {
		t.Fatal(errs)
	}
	part.FailAppends(coordinator.ErrTooLarge)
	if errs := recv(t, e.c.Commit(commit("g", gen, ids[0], at(0, 1)))); !errors.Is(errs[0], group.ErrInvalidCommitOffsetSize) {
		t.Fatal(errs)
	}
	// Appended, then not on every in-sync replica: the client retries
	// (COORDINATOR_NOT_AVAILABLE); or the partition moved: it looks for
	// the coordinator again (NOT_COORDINATOR).
	part.FailAppends(nil)
	for _, tc := range []struct{ waitErr, want error }{
		{coordinator.ErrNotReplicated, group.ErrCoordinatorNotAvailable},
		{coordinator.ErrNotLeader, group.ErrNotCoordinator},
	} {
		part.FailWaits(tc.waitErr)
		if errs := recv(t, e.c.Commit(commit("g", gen, ids[0], at(0, 1)))); !errors.Is(errs[0], tc.want) {
			t.Errorf("wait failing with %v: %v, want %v", tc.waitErr, errs, tc.want)
		}
	}
}

func TestRecordsAreKafkas(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 2, 4)
	recv(t, e.c.Commit(commit("g", gen, ids[1], group.CommitOffset{Topic: "t", Partition: 1, Offset: 9, LeaderEpoch: 2})))
	req := commit("g", gen, ids[1], at(3, 11))
	req.RetentionTime = time.Hour
	recv(t, e.c.Commit(req))
	recs := offsetsRecords(t, e.topic)
	want := e.c.PartitionFor("g")
	var sawGroup, sawOffset, sawExpiring bool
	for _, r := range recs {
		if r.batchVersion != 2 {
			t.Fatalf("record batch magic %d", r.batchVersion)
		}
		if r.partition != want {
			t.Fatalf("record in partition %d, want %d", r.partition, want)
		}
		switch {
		case r.groupKey != nil:
			if r.groupKey.Version != 2 || r.groupValue.Version != 3 {
				t.Fatalf("group metadata versions %d/%d", r.groupKey.Version, r.groupValue.Version)
			}
			v := r.groupValue
			if v.Generation == gen {
				sawGroup = true
				if v.ProtocolType != "consumer" || *v.Protocol != "range" || *v.Leader != ids[0] || len(v.Members) != 2 ||
					v.Members[1].MemberID != ids[1] || string(v.Members[1].Assignment) != string(assignment("t", 1, 3)) ||
					v.Members[1].ClientHost != "/10.0.0.1" || v.Members[1].SessionTimeoutMillis != 10000 ||
					v.Members[1].RebalanceTimeoutMillis != 30000 || string(v.Members[1].Subscription) != string(subscription("t")) ||
					v.CurrentStateTimestamp != e.clock.Now().UnixMilli() {
					t.Fatalf("group metadata %+v", v)
				}
			}
		case r.offsetKey != nil:
			k, v := r.offsetKey, r.offsetValue
			if k.Version != 1 || k.Group != "g" || k.Topic != "t" {
				t.Fatalf("offset key %+v", k)
			}
			switch k.Partition {
			case 1:
				sawOffset = v.Version == 3 && v.Offset == 9 && v.LeaderEpoch == 2 && v.CommitTimestamp == e.clock.Now().UnixMilli()
			case 3:
				sawExpiring = v.Version == 1 && v.Offset == 11 && v.ExpireTimestamp == e.clock.Now().Add(time.Hour).UnixMilli()
			}
		}
	}
	if !sawGroup || !sawOffset || !sawExpiring {
		t.Fatalf("group %v offset %v expiring %v in %+v", sawGroup, sawOffset, sawExpiring, recs)
	}
}

func TestPartitionForIsKafkas(t *testing.T) {
	e := newEnv(t, func(c *group.Config) { c.OffsetsPartitions = 50 })
	for _, tc := range []struct {
		group string
		want  int32
	}{
		{"hello", 99162322 % 50},                // "hello".hashCode() == 99162322
		{"polygenelubricants", 0},               // hashCode() == Integer.MIN_VALUE: abs is 0
		{"", 0},                                 // hashCode() == 0
		{"a", 97 % 50},                          //
		{"Aa", 2112 % 50},                       // "Aa" and "BB" collide in Java
		{"BB", 2112 % 50},                       //
		{"\U0001F600", (55357*31 + 56832) % 50}, // a surrogate pair
		{"ab", 3105 % 50},                       //
		{"my-group", 1906497762 % 50},           // hashCode() == -1906497762
	} {
		if got := e.c.PartitionFor(tc.group); got != tc.want {
			t.Errorf("PartitionFor(%q) = %d, want %d", tc.group, got, tc.want)
		}
	}
}

func TestDeleteGroups(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 1, 2)
	recv(t, e.c.Commit(commit("g", gen, ids[0], at(0, 5), at(1, 6))))
	if err := recv(t, e.c.DeleteGroup("g")); err != group.ErrNonEmptyGroup {
		t.Fatal(err)
	}
	if err := recv(t, e.c.DeleteGroup("nope")); err != group.ErrGroupIDNotFound {
		t.Fatal(err)
	}
	if err := recv(t, e.c.DeleteGroup("")); err != group.ErrInvalidGroupID {
		t.Fatal(err)
	}
	<-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: ids[0]}}})
	if err := recv(t, e.c.DeleteGroup("g")); err != nil {
		t.Fatal(err)
	}
	if d := e.c.Describe([]string{"g"})[0]; d.State != "Dead" || d.Err != nil {
		t.Fatalf("%+v", d)
	}
	if got := e.committed("g", 0); got != -1 {
		t.Fatal(got)
	}
	// Tombstones: both offsets, then the group.
	recs := offsetsRecords(t, e.topic)
	tail := recs[len(recs)-3:]
	if !tail[0].tombstone || tail[0].offsetKey == nil || !tail[1].tombstone || tail[1].offsetKey.Partition != 1 ||
		!tail[2].tombstone || tail[2].groupKey == nil || tail[2].groupKey.Group != "g" {
		t.Fatalf("%+v", tail)
	}
	e.restart()
	if l := e.c.List(nil, nil); len(l) != 0 {
		t.Fatalf("deleted group back after restart: %+v", l)
	}
}

func TestDeleteOffsets(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 1, 1)
	recv(t, e.c.Commit(commit("g", gen, ids[0], at(0, 5), group.CommitOffset{Topic: "old", Partition: 0, Offset: 3, LeaderEpoch: -1})))
	res := recv(t, e.c.DeleteOffsets("g", []group.FetchTopic{{Topic: "t", Partitions: []int32{0}}, {Topic: "old", Partitions: []int32{0, 1}}}))
	if res.Err != nil || res.Errs[0] != group.ErrGroupSubscribedToTopic || res.Errs[1] != nil || res.Errs[2] != nil {
		t.Fatalf("%+v", res)
	}
	offs, _ := e.c.FetchOffsets("g", nil, false)
	if len(offs) != 1 || offs[0].Topic != "t" {
		t.Fatalf("%+v", offs)
	}
	if res := recv(t, e.c.DeleteOffsets("nope", nil)); res.Err != group.ErrGroupIDNotFound {
		t.Fatal(res)
	}
	// Once the group is empty its offsets of any topic may go.
	<-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: ids[0]}}})
	if res := recv(t, e.c.DeleteOffsets("g", []group.FetchTopic{{Topic: "t", Partitions: []int32{0}}})); res.Err != nil || res.Errs[0] != nil {
		t.Fatal(res)
	}
	if got := e.committed("g", 0); got != -1 {
		t.Fatal(got)
	}
}

func TestOffsetsExpire(t *testing.T) {
	e := newEnv(t, func(c *group.Config) { c.OffsetsRetention = time.Hour; c.OffsetsRetentionCheck = time.Minute })
	// A group with members keeps the offsets of what it subscribes to.
	ids, gen := e.stableGroup("g", 1, 1)
	recv(t, e.c.Commit(commit("g", gen, ids[0], at(0, 5), group.CommitOffset{Topic: "gone", Offset: 1, LeaderEpoch: -1})))
	recv(t, e.c.Commit(commit("simple", -1, "", at(0, 1))))
	for range 61 * 12 { // to the check after the retention has passed
		e.clock.Advance(5 * time.Second)
		if err := e.heartbeat("g", gen, ids[0]); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.committed("g", 0); got != 5 {
		t.Fatalf("subscribed offset expired: %d", got)
	}
	if offs, _ := e.c.FetchOffsets("g", []group.FetchTopic{{Topic: "gone", Partitions: []int32{0}}}, false); offs[0].Offset != -1 {
		t.Fatalf("unsubscribed topic's offset kept: %+v", offs)
	}
	// The simple group lost its only offset: it is gone too.
	if d := e.c.Describe([]string{"simple"})[0]; d.State != "Dead" {
		t.Fatalf("%+v", d)
	}
	// Once empty, a group's offsets last the retention from then.
	<-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: ids[0]}}})
	e.clock.Advance(59 * time.Minute)
	if got := e.committed("g", 0); got != 5 {
		t.Fatal(got)
	}
	e.clock.Advance(2 * time.Minute)
	if got := e.committed("g", 0); got != -1 {
		t.Fatal(got)
	}
	if d := e.c.Describe([]string{"g"})[0]; d.State != "Dead" {
		t.Fatalf("%+v", d)
	}
	e.restart()
	if l := e.c.List(nil, nil); len(l) != 0 {
		t.Fatalf("expired groups back after restart: %+v", l)
	}
	var tombstones int
	for _, r := range offsetsRecords(t, e.topic) {
		if r.tombstone {
			tombstones++
		}
	}
	if tombstones != 5 { // g's two offsets and itself, simple's offset and itself
		t.Fatalf("%d tombstones", tombstones)
	}
}

func TestRestartRecoversGroups(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 2, 4)
	recv(t, e.c.Commit(commit("g", gen, ids[0], at(0, 100), at(2, 200))))
	recv(t, e.c.Commit(commit("g", gen, ids[0], at(0, 150))))
	recv(t, e.c.Commit(commit("simple", -1, "", at(1, 7))))
	e.restart()

	if got := e.committed("g", 0); got != 150 {
		t.Fatalf("offset after restart: %d", got)
	}
	if got := e.committed("g", 2); got != 200 {
		t.Fatalf("offset after restart: %d", got)
	}
	if got := e.committed("simple", 1); got != 7 {
		t.Fatalf("offset after restart: %d", got)
	}
	d := e.c.Describe([]string{"g"})[0]
	if d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 2 || d.Members[0].MemberID != ids[0] ||
		string(d.Members[1].Assignment) != string(assignment("t", 1, 3)) {
		t.Fatalf("%+v", d)
	}
	// The members carry on in their generation...
	if err := e.heartbeat("g", gen, ids[1]); err != nil {
		t.Fatal(err)
	}
	recv(t, e.c.Commit(commit("g", gen, ids[1], at(1, 300))))
	if got := e.committed("g", 1); got != 300 {
		t.Fatal(got)
	}
	// ... and one that does not come back is removed after its session.
	e.clock.Advance(session / 2)
	e.heartbeat("g", gen, ids[0])
	e.clock.Advance(session / 2)
	if err := e.heartbeat("g", gen, ids[0]); err != group.ErrRebalanceInProgress {
		t.Fatalf("%v", err)
	}
	h, _ := e.c.History("g")
	if h.Events[0].Kind != group.EventLoaded {
		t.Fatalf("%+v", h.Events)
	}
}

func TestRestartAfterEmptyGeneration(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := e.stableGroup("g", 1, 1)
	recv(t, e.c.Commit(commit("g", gen, ids[0], at(0, 10))))
	<-e.c.Leave(group.LeaveRequest{Group: "g", Members: []group.LeavingMember{{MemberID: ids[0]}}})
	time.Sleep(10 * time.Millisecond) // the empty generation's record is not waited for
	e.restart()
	d := e.c.Describe([]string{"g"})[0]
	if d.State != "Empty" || d.ProtocolType != "consumer" || len(d.Members) != 0 {
		t.Fatalf("%+v", d)
	}
	// A new member joins the next generation, from the committed offset.
	_, ch := e.firstJoin(joinReq("g", "c5"))
	e.clock.Advance(delay)
	if r := recv(t, ch); r.Generation != gen+2 {
		t.Fatalf("%+v, want generation %d", r, gen+2)
	}
	if got := e.committed("g", 0); got != 10 {
		t.Fatal(got)
	}
}

func TestAwaitStableOfUnknownGroup(t *testing.T) {
	e := newEnv(t, nil)
	select {
	case <-e.c.AwaitStable("nothing"):
	default:
		t.Fatal("a group nobody committed to has commits in flight")
	}
}
