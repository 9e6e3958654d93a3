package raft

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
)

// TestSeedRestoresAQuorum: a quorum whose every voter is lost comes back
// from a copy of one voter's storage. Replay reads the copy (its snapshot
// and the committed entries after it) into the state it held; Seed writes
// that state on three new voters, which elect a leader, hold every entry
// the old quorum applied, and go on committing after it.
func TestSeedRestoresAQuorum(t *testing.T) {
	old := newCluster(t, 3, 11, func(cfg *Config) { cfg.SnapshotEntries = 5 })
	old.waitLeader(5 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 12 {
		if _, err := old.propose(ctx, 1, fmt.Sprintf("old-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	want := old.waitConverged(5 * time.Second)
	for _, id := range old.voters {
		old.stop(id)
	}

	sm := &testSM{}
	index, err := Replay(old.nodes[1].fs, "/raft", sm)
	if err != nil {
		t.Fatal(err)
	}
	got, last, restores, violations := sm.state()
	if !slices.Equal(got, want) || last != index || restores != 1 || len(violations) > 0 {
		t.Fatalf("replayed %v up to %d (%d restores, %v); the quorum applied %v", got, index, restores, violations, want)
	}
	state, err := sm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}

	restored := &tcluster{t: t, net: NewMemNetwork(12), nodes: map[uint64]*tnode{}, voters: []uint64{1, 2, 3}}
	members := map[uint64]string{1: addrOf(1), 2: addrOf(2), 3: addrOf(3)}
	for _, id := range restored.voters {
		fs := vfs.NewMem()
		if err := Seed(fs, "/raft", index, members, state); err != nil {
			t.Fatal(err)
		}
		if err := Seed(fs, "/raft", index, members, state); !errors.Is(err, ErrNotEmpty) {
			t.Fatalf("seeding twice: %v, want ErrNotEmpty", err)
		}
		restored.nodes[id] = &tnode{id: id, fs: fs}
	}
	restored.startAll()
	restored.waitLeader(5 * time.Second)
	at, err := restored.propose(ctx, 2, "after the restore")
	if err != nil {
		t.Fatal(err)
	}
	if at <= index {
		t.Errorf("the first entry after the restore is at %d, at or below the restored %d", at, index)
	}
	final := restored.waitConverged(5 * time.Second)
	if !slices.Equal(final[:len(want)], want) || final[len(final)-1].Data != "after the restore" {
		t.Errorf("after the restore the quorum holds %v; want %v and the new entry", final, want)
	}
	for _, n := range restored.running() {
		if _, _, _, v := n.sm.state(); len(v) > 0 {
			t.Errorf("node %d: %v", n.id, v)
		}
	}
	if _, err := Replay(vfs.NewMem(), "/raft", &testSM{}); err == nil {
		t.Errorf("replaying empty storage gave no error")
	}
}
