package raft

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/internal/log/vfs"
)

// Restoring a quorum from a copy of one member's storage, when every
// voter's storage is lost:
//
//  1. Replay reads the copy as Start would recover it and gives a state
//     machine what it holds: the newest snapshot, then every committed
//     entry after it. Entries not committed in the copy are left out: the
//     old quorum may never have committed them either.
//  2. Seed writes, on each voter of the new quorum, storage that holds
//     that state as a snapshot at the index Replay reached, in term 1,
//     with the new voters as its membership, and a log that follows it
//     with the snapshot committed.
//
// Every voter is seeded with the same index, state and voters, so their
// logs agree (the same snapshot, and no entry after it); they start as
// after a restart and elect a leader in term 2. Nothing of the old
// quorum's log survives but its state: request ids and terms start anew.

// Replay gives sm the state the storage in dir holds: its snapshot
// restored, then its committed entries applied in order. It returns the
// index of the last one. The storage is recovered as Start recovers it,
// so a torn tail is cut: give it a copy.
func Replay(fsys vfs.FS, dir string, sm StateMachine) (uint64, error) {
	store, err := openStorage(fsys, dir, 64<<20, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return 0, err
	}
	defer store.close()
	if store.empty() {
		return 0, fmt.Errorf("cluster/raft: %s holds no metadata log", dir)
	}
	snap, err := store.ms.Snapshot()
	if err != nil {
		return 0, err
	}
	var applied uint64
	if !etcdraft.IsEmptySnap(snap) {
		sd, err := decodeSnapshotData(snap.GetData())
		if err != nil {
			return 0, err
		}
		applied = snap.GetMetadata().GetIndex()
		if err := sm.Restore(applied, sd.State); err != nil {
			return 0, err
		}
	}
	commit := store.hs.GetCommit()
	if commit <= applied {
		return applied, nil
	}
	ents, err := store.ms.Entries(applied+1, commit+1, math.MaxUint64)
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		if e.GetType() == pb.EntryNormal && len(e.GetData()) > 0 {
			_, _, data, err := decodeProposal(e.GetData())
			if err != nil {
				return 0, fmt.Errorf("entry %d: %w", e.GetIndex(), err)
			}
			sm.Apply(e.GetIndex(), data)
		}
		applied = e.GetIndex()
	}
	return applied, nil
}

// ErrNotEmpty is Seed's refusal of storage that holds a log already.
var ErrNotEmpty = errors.New("cluster/raft: the metadata log is not empty")

// Seed writes storage in dir that holds state as a snapshot at index, in
// term 1, with voters (Raft ids and their transport addresses) as its
// membership, and a log that follows the snapshot with it committed. Dir
// must hold no storage (ErrNotEmpty).
func Seed(fsys vfs.FS, dir string, index uint64, voters map[uint64]string, state []byte) error {
	if index == 0 || len(voters) == 0 {
		return fmt.Errorf("cluster/raft: seeding needs an index above 0 and voters (index %d, %d voters)", index, len(voters))
	}
	store, err := openStorage(fsys, dir, 64<<20, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	defer store.close()
	if !store.empty() {
		return fmt.Errorf("%w: %s", ErrNotEmpty, dir)
	}
	snap := &pb.Snapshot{
		Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(index), Term: proto.Uint64(1),
			ConfState: &pb.ConfState{Voters: slices.Sorted(maps.Keys(voters))}},
		Data: snapshotData{Members: maps.Clone(voters), State: state}.encode(),
	}
	// The snapshot file first, then the segment that follows it: the
	// order a snapshot compacts the log in (doc.go), so that a crash
	// between the two leaves a state recovery reads.
	if err := store.writeSnapshotFile(snap); err != nil {
		return err
	}
	// cut removes the empty first segment, as a snapshot's cut removes
	// the segments it replaced.
	return store.cut(index, 1, nil, &pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(index)})
}
