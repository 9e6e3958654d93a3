package share

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/model"
)

func TestStateRecords(t *testing.T) {
	k := Key{Group: "g", TopicID: [16]byte{1, 2, 3}, Partition: 4}
	saved := Saved{StateEpoch: 2, LeaderEpoch: 7, Start: 100, snapshotEpoch: 3,
		Batches: []StateBatch{{100, 101, Available, 1}, {102, 104, Acknowledged, 2}}}
	key, value := EncodeSnapshot(k, saved, 1_800_000_000_000)
	typ, gotKey, err := decodeStateKey(key)
	if err != nil || typ != snapshotType || gotKey != k {
		t.Fatalf("key %d %+v %v", typ, gotKey, err)
	}
	got, err := decodeStateValue(typ, value)
	if err != nil || got.Start != 100 || got.LeaderEpoch != 7 || got.StateEpoch != 2 || got.snapshotEpoch != 3 ||
		!slices.Equal(got.Batches, saved.Batches) {
		t.Fatalf("value %+v %v", got, err)
	}
	if _, err := decodeStateValue(typ, value[:len(value)-3]); err == nil {
		t.Fatal("a cut value decoded")
	}
	// Kafka's coordinator key prints the topic id as its Uuid does.
	if got := CoordinatorKey(k); got != "g:AQIDAAAAAAAAAAAAAAAAAA:4" {
		t.Fatalf("coordinator key %q", got)
	}
	// And it reads back, a group with colons too (a FindCoordinator key).
	for _, group := range []string{"g", "a:b", "a::"} {
		want := Key{Group: group, TopicID: k.TopicID, Partition: 4}
		if got, ok := ParseCoordinatorKey(CoordinatorKey(want)); !ok || got != want {
			t.Fatalf("parsing %q: %+v %v", CoordinatorKey(want), got, ok)
		}
	}
	for _, bad := range []string{"", "g", "g:4", ":AQIDAAAAAAAAAAAAAAAAAA:4", "g:AQIDAAAAAAAAAAAAAAAAAA:-1",
		"g:AQIDAAAAAAAAAAAAAAAAAA:x", "g:AQIDAAAAAAAAAAAAAAAA:4", "g:AQIDAAAAAAAAAAAAAAAAAA==:4"} {
		if got, ok := ParseCoordinatorKey(bad); ok {
			t.Fatalf("parsing %q: %+v, want a refusal", bad, got)
		}
	}
}

// update encodes an update record, as Kafka's share coordinator writes
// them between snapshots.
func update(k Key, start int64, batches []StateBatch) (key, value []byte) {
	v := kbin.AppendInt16(nil, 0)
	v = kbin.AppendInt32(v, 1) // snapshot epoch
	v = kbin.AppendInt32(v, 7) // leader epoch
	v = kbin.AppendInt64(v, start)
	v = appendBatches(v, batches)
	v = kbin.AppendUvarint(v, 0)
	return encodeStateKey(updateType, k), v
}

func TestStoreLoad(t *testing.T) {
	topic := &coordinator.MemTopic{}
	parts, _, err := topic.Create(1)
	if err != nil {
		t.Fatal(err)
	}
	a, b := Key{"g", [16]byte{1}, 0}, Key{"g", [16]byte{1}, 1}
	var recs []model.KeyValue
	add := func(k, v []byte) { recs = append(recs, model.KeyValue{Key: k, Value: v}) }
	add(EncodeSnapshot(a, Saved{Start: 10, Batches: []StateBatch{{10, 12, Available, 1}}}, 0))
	add(update(a, -1, []StateBatch{{10, 10, Acknowledged, 1}, {13, 13, Archived, 5}}))
	add(EncodeSnapshot(b, Saved{Start: 3}, 0))
	bk, _ := EncodeSnapshot(b, Saved{}, 0)
	add(bk, nil) // b deleted
	if _, _, err := parts[0].Append(model.EncodeBatch(recs, 0, model.Producer{ID: -1})); err != nil {
		t.Fatal(err)
	}
	s := NewStore()
	if err := s.Load(0, parts[0], 1); err != nil {
		t.Fatal(err)
	}
	got, ok := s.Get(a)
	want := []StateBatch{{11, 12, Available, 1}, {13, 13, Archived, 5}}
	if !ok || got.Start != 11 || !slices.Equal(got.Batches, want) {
		t.Fatalf("a after its update: %+v %v", got, ok)
	}
	if _, ok := s.Get(b); ok {
		t.Fatal("b deleted, yet kept")
	}
	if !s.Loaded(0, parts[0].LeaderEpoch()) || s.Loaded(0, parts[0].LeaderEpoch()+1) {
		t.Fatal("loaded at the wrong epoch")
	}
	next, keep, err := s.After(a, Change{Kind: ChangeWrite, StateEpoch: 0, LeaderEpoch: 9, Start: 12})
	if err != nil || !keep || next.snapshotEpoch != got.snapshotEpoch+1 || next.LeaderEpoch != 9 || next.Start != 12 {
		t.Fatalf("next %+v %v %v", next, keep, err)
	}
	s.Forget(0, 1)
	if _, ok := s.Get(a); ok || s.Loaded(0, parts[0].LeaderEpoch()) {
		t.Fatal("forgotten, yet kept")
	}
}

// TestStateChangeFences: a leader's write is refused once a newer leader
// wrote, or once the state started over under a newer state epoch; a
// start over is refused at an older state epoch; a delete removes, and a
// leader's write to a deleted key is refused, not taken as a new state.
func TestStateChangeFences(t *testing.T) {
	s := NewStore()
	k := Key{"g", [16]byte{1}, 0}
	apply := func(c Change) error {
		st, keep, err := s.After(k, c)
		if err == nil {
			s.Set(k, st, keep)
		}
		return err
	}
	steps := []struct {
		c    Change
		want error
	}{
		{Change{Kind: ChangeInitialize, Start: 5}, nil},
		{Change{Kind: ChangeWrite, LeaderEpoch: 3, Start: 6}, nil},
		{Change{Kind: ChangeWrite, LeaderEpoch: 2, Start: 7}, ErrFencedLeaderEpoch},
		{Change{Kind: ChangeInitialize, StateEpoch: 1, Start: 0}, nil},
		{Change{Kind: ChangeWrite, StateEpoch: 0, LeaderEpoch: 3, Start: 8}, ErrFencedStateEpoch},
		{Change{Kind: ChangeInitialize, StateEpoch: 0, Start: 9}, ErrFencedStateEpoch},
		{Change{Kind: ChangeWrite, StateEpoch: 1, LeaderEpoch: 3, Start: 2}, nil},
	}
	for i, st := range steps {
		if err := apply(st.c); !errors.Is(err, st.want) {
			t.Fatalf("step %d %+v: %v, want %v", i, st.c, err, st.want)
		}
	}
	if got, ok := s.Get(k); !ok || got.StateEpoch != 1 || got.Start != 2 || got.LeaderEpoch != 3 {
		t.Fatalf("after the steps: %+v %v", got, ok)
	}
	if err := apply(Change{Kind: ChangeDelete}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(k); ok {
		t.Fatal("deleted, yet kept")
	}
	// A leader that held the state before it was deleted is refused.
	if err := apply(Change{Kind: ChangeWrite, StateEpoch: 1, LeaderEpoch: 3, Start: 4}); !errors.Is(err, ErrFencedStateEpoch) {
		t.Fatalf("a write to a deleted key: %v", err)
	}
	if _, ok := s.Get(k); ok {
		t.Fatal("a refused write kept a state")
	}
	// Deleted, the key starts anew at any state epoch.
	if err := apply(Change{Kind: ChangeInitialize, StateEpoch: 0, Start: 1}); err != nil {
		t.Fatal(err)
	}
}
