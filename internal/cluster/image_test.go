package cluster

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// applyAll applies records to a fresh image, as a broker replaying the
// metadata log does, and returns the image and the last result.
func applyAll(t *testing.T, recs ...[]byte) (*image, result) {
	t.Helper()
	im := &image{}
	im.index()
	var res result
	for i, r := range recs {
		res = im.apply(uint64(i+1), r)
	}
	return im, res
}

func rec(t *testing.T, kind string, body any) []byte {
	t.Helper()
	b, err := encodeRecord(kind, body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func registerAll(t *testing.T, racks ...string) [][]byte {
	var recs [][]byte
	for i, r := range racks {
		recs = append(recs, rec(t, kindRegisterBroker, registerBrokerRecord{NodeID: int32(i + 1), Host: "h", Port: 1, Rack: r, Unfenced: true}))
	}
	return recs
}

func TestPlacementSpreadsLeaders(t *testing.T) {
	for _, tc := range []struct {
		name       string
		racks      []string
		partitions int32
	}{
		{"3 brokers", []string{"", "", ""}, 6},
		{"5 brokers", []string{"", "", "", "", ""}, 10},
		{"5 brokers, uneven", []string{"", "", "", "", ""}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := registerAll(t, tc.racks...)
			recs = append(recs, rec(t, kindCreateTopic, createTopicRecord{Name: "t", ID: TopicID{9}, Partitions: tc.partitions, Factor: 1, Seed: 7}))
			im, res := applyAll(t, recs...)
			if res.err != nil {
				t.Fatal(res.err)
			}
			counts := map[int32]int{}
			for _, st := range im.byName["t"].States {
				counts[st.Leader]++
			}
			n := int32(len(tc.racks))
			lo, hi := int(tc.partitions/n), int((tc.partitions+n-1)/n)
			for node := int32(1); node <= n; node++ {
				if c := counts[node]; c < lo || c > hi {
					t.Fatalf("broker %d leads %d partitions, want %d-%d: %v", node, c, lo, hi, counts)
				}
			}
		})
	}
}

func TestRackOrderAlternates(t *testing.T) {
	recs := registerAll(t, "a", "a", "b", "b", "c")
	im, _ := applyAll(t, recs...)
	got := im.rackOrder(im.live())
	if want := []int32{1, 3, 5, 2, 4}; !reflect.DeepEqual(got, want) {
		t.Fatalf("rack order %v, want %v", got, want)
	}
}

// Two brokers that apply the same records hold equal images, whatever the
// records' outcomes, and a record that fails changes nothing.
func TestApplyIsDeterministic(t *testing.T) {
	recs := registerAll(t, "", "", "")
	recs = append(recs,
		rec(t, kindCreateTopic, createTopicRecord{Name: "a", ID: TopicID{1}, Partitions: 4, Factor: 1, Seed: 3}),
		rec(t, kindCreateTopic, createTopicRecord{Name: "a", ID: TopicID{2}, Partitions: 4, Factor: 1}), // exists
		rec(t, kindCreateTopic, createTopicRecord{Name: "b", ID: TopicID{1}, Partitions: 4, Factor: 1}), // id taken
		rec(t, kindFenceBroker, fenceRecord{NodeID: 2, Epoch: 2}),
		rec(t, kindCreatePartitions, createPartitionsRecord{Name: "a", Count: 6, Seed: 1}),
		[]byte("not json"),
		rec(t, "unknown-kind", struct{}{}),
		rec(t, kindUnfenceBroker, fenceRecord{NodeID: 2, Epoch: 2}),
		rec(t, kindProducerIDs, producerIDsRecord{NodeID: 3}),
	)
	one, _ := applyAll(t, recs...)
	two, _ := applyAll(t, recs...)
	a, _ := json.Marshal(one)
	b, _ := json.Marshal(two)
	if string(a) != string(b) {
		t.Fatalf("images differ:\n%s\n%s", a, b)
	}
	if len(one.Topics) != 1 || one.Topics[0].Partitions != 6 || one.ProducerIDBlockEnd != ProducerIDBlockSize {
		t.Fatalf("image %s", a)
	}
	// Partitions added while broker 2 was fenced are not placed on it.
	for i, st := range one.Topics[0].States[4:] {
		if st.Leader == 2 {
			t.Fatalf("new partition %d placed on a fenced broker: %+v", i+4, st)
		}
	}
}

// A metadata file from before partitions had placements loads with every
// partition on this node.
func TestOpenFileBeforePlacements(t *testing.T) {
	dir := t.TempDir()
	old := `{"cluster_id":"abc","topics":[{"name":"t","id":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"partitions":2}],"producer_id_block_end":2000}`
	if err := os.WriteFile(filepath.Join(dir, fileName), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFile(dir, 4)
	if err != nil {
		t.Fatal(err)
	}
	tp, ok := s.Topic("t")
	if !ok || len(tp.States) != 2 || s.ClusterID() != "abc" {
		t.Fatalf("%+v %v", tp, ok)
	}
	for _, st := range tp.States {
		if st.Leader != 4 || !reflect.DeepEqual(st.Replicas, []int32{4}) || !reflect.DeepEqual(st.ISR, []int32{4}) {
			t.Fatalf("%+v", st)
		}
	}
	if id, err := s.NextProducerID(); err != nil || id != 2000 {
		t.Fatalf("producer id %d %v, want 2000", id, err)
	}
}

// Another process of a node registers only once the registration it
// replaces is fenced; the same process may register again, and a single
// node's takeover replaces whatever its last run left.
func TestRegistrationOfAnotherProcess(t *testing.T) {
	reg := func(inc string, takeover bool) []byte {
		return rec(t, kindRegisterBroker, registerBrokerRecord{NodeID: 1, Incarnation: inc, Host: "h", Port: 1, Takeover: takeover})
	}
	unfence := func(epoch int64) []byte { return rec(t, kindUnfenceBroker, fenceRecord{NodeID: 1, Epoch: epoch}) }
	fence := func(epoch int64) []byte { return rec(t, kindFenceBroker, fenceRecord{NodeID: 1, Epoch: epoch}) }
	for _, tc := range []struct {
		name string
		recs [][]byte
		err  error
	}{
		{"over a live registration", [][]byte{reg("a", false), unfence(1), reg("b", false)}, ErrDuplicateBrokerRegistration},
		{"over a fenced registration", [][]byte{reg("a", false), unfence(1), fence(1), reg("b", false)}, nil},
		{"over a registration never unfenced", [][]byte{reg("a", false), reg("b", false)}, nil},
		{"the same process again", [][]byte{reg("a", false), unfence(1), reg("a", false)}, nil},
		{"a single node's takeover", [][]byte{reg("a", true), unfence(1), reg("b", true)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, res := applyAll(t, tc.recs...)
			if !errors.Is(res.err, tc.err) {
				t.Fatalf("registering: %v, want %v", res.err, tc.err)
			}
			want := "b"
			if tc.err != nil || tc.name == "the same process again" {
				want = "a"
			}
			if b := im.broker(1); b.Incarnation != want {
				t.Fatalf("registered %+v, want incarnation %s", *b, want)
			}
		})
	}
}

// Fencing a broker takes it out of every in-sync set and moves what it led
// to the first live in-sync replica; the last member of an in-sync set
// stays, leaderless, until it returns.
func TestFenceShrinksInSyncSets(t *testing.T) {
	recs := registerAll(t, "", "", "")
	recs = append(recs, rec(t, kindCreateTopic, createTopicRecord{Name: "t", ID: TopicID{1}, Partitions: 1,
		Assignment: [][]int32{{1, 2, 3}}}))
	fence := func(n int32) []byte { return rec(t, kindFenceBroker, fenceRecord{NodeID: n, Epoch: int64(n)}) }
	im, res := applyAll(t, append(recs, fence(2))...)
	if res.err != nil {
		t.Fatal(res.err)
	}
	if p := im.byName["t"].States[0]; p.Leader != 1 || !reflect.DeepEqual(p.ISR, []int32{1, 3}) || p.LeaderEpoch != 0 || p.PartitionEpoch != 1 {
		t.Fatalf("follower fenced: %+v", p)
	}
	im, _ = applyAll(t, append(recs, fence(2), fence(1))...)
	if p := im.byName["t"].States[0]; p.Leader != 3 || !reflect.DeepEqual(p.ISR, []int32{3}) || p.LeaderEpoch != 1 || p.PartitionEpoch != 2 {
		t.Fatalf("leader fenced: %+v", p)
	}
	im, _ = applyAll(t, append(recs, fence(2), fence(1), fence(3))...)
	if p := im.byName["t"].States[0]; p.Leader != NoLeader || !reflect.DeepEqual(p.ISR, []int32{3}) || p.LeaderEpoch != 2 {
		t.Fatalf("last in-sync replica fenced: %+v", p)
	}
	unfence := func(n int32) []byte { return rec(t, kindUnfenceBroker, fenceRecord{NodeID: n, Epoch: int64(n)}) }
	im, _ = applyAll(t, append(recs, fence(2), fence(1), fence(3), unfence(1), unfence(3))...)
	if p := im.byName["t"].States[0]; p.Leader != 3 || p.LeaderEpoch != 3 {
		t.Fatalf("only the last in-sync replica may lead again: %+v", p)
	}
}

// An in-sync set change applies only on the view it was decided on.
func TestAlterPartitionFences(t *testing.T) {
	recs := registerAll(t, "", "", "")
	recs = append(recs, rec(t, kindCreateTopic, createTopicRecord{Name: "t", ID: TopicID{1}, Partitions: 1,
		Assignment: [][]int32{{1, 2, 3}}}))
	alter := func(leader, leaderEpoch, partitionEpoch int32, isr ...int32) []byte {
		return rec(t, kindAlterPartition, alterPartitionRecord{Topic: "t", TopicID: TopicID{1}, Leader: leader,
			LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: isr})
	}
	for _, tc := range []struct {
		name string
		recs [][]byte
		err  error
		isr  []int32
	}{
		{"shrink", [][]byte{alter(1, 0, 0, 1, 3)}, nil, []int32{1, 3}},
		{"shrink then expand, in replica order", [][]byte{alter(1, 0, 0, 1, 3), alter(1, 0, 1, 3, 2, 1)}, nil, []int32{1, 2, 3}},
		{"stale partition epoch", [][]byte{alter(1, 0, 0, 1, 3), alter(1, 0, 0, 1)}, ErrInvalidUpdateVersion, []int32{1, 3}},
		{"not the leader", [][]byte{alter(2, 0, 0, 2)}, ErrFencedLeaderEpoch, []int32{1, 2, 3}},
		{"old leader epoch", [][]byte{alter(1, 1, 0, 1)}, ErrFencedLeaderEpoch, []int32{1, 2, 3}},
		{"leaves out the leader", [][]byte{alter(1, 0, 0, 2, 3)}, ErrInvalidRequest, []int32{1, 2, 3}},
		{"not a replica", [][]byte{alter(1, 0, 0, 1, 4)}, ErrInvalidRequest, []int32{1, 2, 3}},
		{"adds a fenced broker", [][]byte{alter(1, 0, 0, 1), rec(t, kindFenceBroker, fenceRecord{NodeID: 2, Epoch: 2}),
			alter(1, 0, 1, 1, 2)}, ErrIneligibleReplica, []int32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, res := applyAll(t, append(slices.Clone(recs), tc.recs...)...)
			if !errors.Is(res.err, tc.err) {
				t.Fatalf("altering: %v, want %v", res.err, tc.err)
			}
			if p := im.byName["t"].States[0]; !reflect.DeepEqual(p.ISR, tc.isr) {
				t.Fatalf("in-sync set %v, want %v", p.ISR, tc.isr)
			}
		})
	}
}

// With unclean.leader.election.enable, a partition whose in-sync replicas
// are all gone is led by a live out-of-sync one, counted; without it, it
// waits for its last in-sync replica.
func TestUncleanElection(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		recs := registerAll(t, "", "", "")
		configs := map[string]string{}
		if unclean {
			configs[uncleanElectionConfig] = "true"
		}
		recs = append(recs, rec(t, kindCreateTopic, createTopicRecord{Name: "t", ID: TopicID{1}, Partitions: 1,
			Assignment: [][]int32{{1, 2}}, Configs: configs}),
			rec(t, kindFenceBroker, fenceRecord{NodeID: 2, Epoch: 2}), // the follower leaves the in-sync set
			rec(t, kindUnfenceBroker, fenceRecord{NodeID: 2, Epoch: 2}),
			rec(t, kindFenceBroker, fenceRecord{NodeID: 1, Epoch: 1})) // then the last in-sync replica goes
		im, res := applyAll(t, recs...)
		if res.err != nil {
			t.Fatal(res.err)
		}
		p := im.byName["t"].States[0]
		switch {
		case unclean && (p.Leader != 2 || !reflect.DeepEqual(p.ISR, []int32{2}) || p.UncleanElections != 1):
			t.Fatalf("unclean election allowed: %+v", p)
		case !unclean && (p.Leader != NoLeader || !reflect.DeepEqual(p.ISR, []int32{1}) || p.UncleanElections != 0):
			t.Fatalf("unclean election not allowed: %+v", p)
		}
	}
}

// A reassignment adds its new replicas at once, and leaves the partition
// with its target only when every target replica is in sync: the old
// leader hands over if it is not in the target. It can be replaced, and
// cancelled back to the replicas it started from.
func TestReassignment(t *testing.T) {
	recs := registerAll(t, "", "", "", "")
	recs = append(recs, rec(t, kindCreateTopic, createTopicRecord{Name: "t", ID: TopicID{1}, Partitions: 1,
		Assignment: [][]int32{{1, 2, 3}}}))
	move := func(target ...int32) []byte {
		return rec(t, kindReassignPartition, reassignRecord{Topic: "t", Target: target})
	}
	alter := func(leader, leaderEpoch, partitionEpoch int32, isr ...int32) []byte {
		return rec(t, kindAlterPartition, alterPartitionRecord{Topic: "t", TopicID: TopicID{1}, Leader: leader,
			LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: isr})
	}
	state := func(recs ...[]byte) (Partition, error) {
		im, res := applyAll(t, recs...)
		return im.byName["t"].States[0], res.err
	}
	// Onto broker 4, off broker 1, the leader.
	started := append(slices.Clone(recs), move(4, 2, 3))
	p, err := state(started...)
	if err != nil || !reflect.DeepEqual(p.Replicas, []int32{4, 2, 3, 1}) || !reflect.DeepEqual(p.Adding, []int32{4}) ||
		!reflect.DeepEqual(p.Removing, []int32{1}) || p.Leader != 1 || !reflect.DeepEqual(p.ISR, []int32{1, 2, 3}) {
		t.Fatalf("started: %+v, %v", p, err)
	}
	// Broker 4 catches up and joins: the reassignment completes, and the
	// target's first in-sync replica leads.
	done := append(slices.Clone(started), alter(1, 0, 1, 1, 2, 3, 4))
	p, err = state(done...)
	if err != nil || !reflect.DeepEqual(p.Replicas, []int32{4, 2, 3}) || p.Reassigning() || p.Leader != 4 ||
		p.LeaderEpoch != 1 || !reflect.DeepEqual(p.ISR, []int32{4, 2, 3}) {
		t.Fatalf("completed: %+v, %v", p, err)
	}
	// Cancelled before it completes: back to the replicas it started from.
	p, err = state(append(slices.Clone(started), move(nil...))...)
	if err != nil || !slices.Equal(slicesSorted(p.Replicas), []int32{1, 2, 3}) || p.Reassigning() || p.Leader != 1 {
		t.Fatalf("cancelled: %+v, %v", p, err)
	}
	// Replaced: the new target starts from the original replicas.
	p, err = state(append(slices.Clone(started), move(1, 2, 4))...)
	if err != nil || !reflect.DeepEqual(p.Adding, []int32{4}) || !reflect.DeepEqual(p.Removing, []int32{3}) {
		t.Fatalf("replaced: %+v, %v", p, err)
	}
	// A new order alone completes at once.
	p, err = state(append(slices.Clone(recs), move(3, 2, 1))...)
	if err != nil || !reflect.DeepEqual(p.Replicas, []int32{3, 2, 1}) || p.Reassigning() || p.Leader != 1 {
		t.Fatalf("reordered: %+v, %v", p, err)
	}
	for _, tc := range []struct {
		name string
		recs [][]byte
		err  error
	}{
		{"nothing to cancel", [][]byte{move(nil...)}, ErrNoReassignmentInProgress},
		{"empty", [][]byte{move([]int32{}...)}, ErrInvalidReplicaAssignment},
		{"twice", [][]byte{move(1, 1, 2)}, ErrInvalidReplicaAssignment},
		{"unknown broker", [][]byte{move(1, 2, 9)}, ErrInvalidReplicaAssignment},
	} {
		if _, err := state(append(slices.Clone(recs), tc.recs...)...); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
}

func slicesSorted(s []int32) []int32 { return slices.Sorted(slices.Values(s)) }
