package share

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
)

// StateTopic is the internal topic of the share-partitions' state.
const StateTopic = "__share_group_state"

// The records of StateTopic, in Kafka 4's formats (its share-coordinator
// schemas, which kmsg does not carry). A key is an int16 record type and
// the group id, topic id and partition, not flexible; a value is an int16
// version, 0, and flexible fields ending in tagged fields.
//
//	0 snapshot  value: snapshot epoch, state epoch, leader epoch, start
//	            offset, create and write times, state batches
//	            (first, last, delivery state, delivery count), and the
//	            count of offsets done with past the start (tag 0)
//	1 update    the same but the state epoch and the times: batches that
//	            changed since the last snapshot
//
// Strand writes a snapshot at every change; it reads updates too, as a log
// Kafka wrote has them.
const (
	snapshotType = 0
	updateType   = 1
)

// The refusals of a change to the state.
var (
	ErrFencedLeaderEpoch = errors.New("share: the state was written by a newer leader") // FENCED_LEADER_EPOCH
	ErrFencedStateEpoch  = errors.New("share: the state was started over")              // FENCED_STATE_EPOCH
)

// ChangeKind is what a Change does to a share-partition's state.
type ChangeKind int8

const (
	// ChangeWrite: the share-partition's leader writes its start offset
	// and in-flight batches (WriteShareGroupState).
	ChangeWrite ChangeKind = iota
	// ChangeInitialize starts the state over at an offset, under a new
	// state epoch (InitializeShareGroupState, for AlterShareGroupOffsets).
	ChangeInitialize
	// ChangeDelete removes the state (DeleteShareGroupState, for
	// DeleteShareGroupOffsets and DeleteGroups).
	ChangeDelete
)

// Change is one change to a share-partition's state.
type Change struct {
	Kind ChangeKind
	// StateEpoch is the state epoch the leader read, or the new one of a
	// start over.
	StateEpoch  int32
	LeaderEpoch int32
	Start       int64
	Batches     []StateBatch
}

// Saved is a share-partition's state as the share coordinator keeps it.
type Saved struct {
	StateEpoch  int32
	LeaderEpoch int32
	Start       int64
	Batches     []StateBatch
	// snapshotEpoch counts the snapshots of the key.
	snapshotEpoch int32
}

// Completed counts the offsets from the start whose delivery is complete:
// acknowledged, or given up.
func (s Saved) Completed() int64 {
	var n int64
	for _, b := range s.Batches {
		if b.State == Acknowledged || b.State == Archived {
			n += b.Last - b.First + 1
		}
	}
	return n
}

// StatePartition is where a share-partition's state is kept: the
// partition of StateTopic Kafka's share coordinator picks, by the Java
// hash of "group:topic id:partition".
func StatePartition(k Key, partitions int32) int32 {
	return model.CoordinatorPartition(CoordinatorKey(k), partitions)
}

// CoordinatorKey is Kafka's SharePartitionKey.asCoordinatorKey: the topic
// id as Kafka's Uuid prints it.
func CoordinatorKey(k Key) string {
	return k.Group + ":" + base64.RawURLEncoding.EncodeToString(k.TopicID[:]) + ":" + strconv.Itoa(int(k.Partition))
}

// ParseCoordinatorKey reads a key of CoordinatorKey's form, as a
// FindCoordinator of the share type (2) names a share-partition. The group
// may hold colons: the topic id and the partition are the last two parts.
func ParseCoordinatorKey(s string) (Key, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Key{}, false
	}
	part, err := strconv.ParseInt(s[i+1:], 10, 32)
	j := strings.LastIndexByte(s[:i], ':')
	if err != nil || part < 0 || j < 1 {
		return Key{}, false
	}
	id, err := base64.RawURLEncoding.DecodeString(s[j+1 : i])
	if err != nil || len(id) != 16 {
		return Key{}, false
	}
	k := Key{Group: s[:j], Partition: int32(part)}
	copy(k.TopicID[:], id)
	return k, true
}

func encodeStateKey(typ int16, k Key) []byte {
	b := kbin.AppendInt16(nil, typ)
	b = kbin.AppendString(b, k.Group)
	b = append(b, k.TopicID[:]...)
	return kbin.AppendInt32(b, k.Partition)
}

// EncodeSnapshot is the snapshot record of k's state, written at ms.
func EncodeSnapshot(k Key, s Saved, ms int64) (key, value []byte) {
	v := kbin.AppendInt16(nil, 0)
	v = kbin.AppendInt32(v, s.snapshotEpoch)
	v = kbin.AppendInt32(v, s.StateEpoch)
	v = kbin.AppendInt32(v, s.LeaderEpoch)
	v = kbin.AppendInt64(v, s.Start)
	v = kbin.AppendInt64(v, ms) // create time: Strand keeps no older one
	v = kbin.AppendInt64(v, ms)
	v = appendBatches(v, s.Batches)
	v = kbin.AppendUvarint(v, 0) // no tagged fields
	return encodeStateKey(snapshotType, k), v
}

// EncodeTombstones are the records that delete k's state: a tombstone of
// each of its record keys, so that compaction drops them all.
func EncodeTombstones(k Key) []model.KeyValue {
	return []model.KeyValue{{Key: encodeStateKey(snapshotType, k)}, {Key: encodeStateKey(updateType, k)}}
}

func appendBatches(v []byte, batches []StateBatch) []byte {
	v = kbin.AppendCompactArrayLen(v, len(batches))
	for _, sb := range batches {
		v = kbin.AppendInt64(v, sb.First)
		v = kbin.AppendInt64(v, sb.Last)
		v = kbin.AppendInt8(v, int8(sb.State))
		v = kbin.AppendInt16(v, sb.Deliveries)
		v = kbin.AppendUvarint(v, 0)
	}
	return v
}

var errBadStateRecord = errors.New("share: malformed state record")

// decodeStateKey reads a key of StateTopic.
func decodeStateKey(b []byte) (typ int16, k Key, err error) {
	r := kbin.Reader{Src: b}
	typ = r.Int16()
	k.Group = r.String()
	copy(k.TopicID[:], r.Span(16))
	k.Partition = r.Int32()
	if err := r.Complete(); err != nil {
		return 0, Key{}, fmt.Errorf("%w: key: %v", errBadStateRecord, err)
	}
	return typ, k, nil
}

// decodeStateValue reads a snapshot's or an update's value.
func decodeStateValue(typ int16, b []byte) (s Saved, err error) {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v != 0 {
		return s, fmt.Errorf("%w: value version %d", errBadStateRecord, v)
	}
	s.snapshotEpoch = r.Int32()
	if typ == snapshotType {
		s.StateEpoch = r.Int32()
	}
	s.LeaderEpoch = r.Int32()
	s.Start = r.Int64()
	if typ == snapshotType {
		r.Int64() // create time
		r.Int64() // write time
	}
	n := r.CompactArrayLen()
	for range max(n, 0) {
		sb := StateBatch{First: r.Int64(), Last: r.Int64(), State: State(r.Int8()), Deliveries: r.Int16()}
		skipTags(&r)
		s.Batches = append(s.Batches, sb)
	}
	skipTags(&r)
	if err := r.Complete(); err != nil {
		return Saved{}, fmt.Errorf("%w: value: %v", errBadStateRecord, err)
	}
	return s, nil
}

func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
}

// Store is the share-partitions' state as the share coordinator keeps it:
// the latest of each key of the StateTopic partitions loaded here.
//
// Locking: mu guards keys and loaded; nothing is taken under it.
type Store struct {
	mu     lockrank.Mutex[lockrank.Leaf]
	keys   map[Key]Saved
	loaded map[int32]int32 // a partition loaded, at the leader epoch it was loaded at
}

// NewStore holds nothing.
func NewStore() *Store {
	return &Store{keys: map[Key]Saved{}, loaded: map[int32]int32{}}
}

// Loaded reports whether partition i was loaded at leaderEpoch.
func (s *Store) Loaded(i, leaderEpoch int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.loaded[i]
	return ok && e == leaderEpoch
}

// Load replays partition i of StateTopic, led here at leaderEpoch, into
// the store, replacing what was held of it.
func (s *Store) Load(i int32, p coordinator.Partition, partitions int32) error {
	keys := map[Key]Saved{}
	_, err := coordinator.Replay(p, 1<<20, func(rec coordinator.Record) {
		if rec.Control || len(rec.Key) < 2 {
			return
		}
		typ, k, err := decodeStateKey(rec.Key)
		if err != nil || (typ != snapshotType && typ != updateType) {
			return
		}
		if rec.Value == nil {
			delete(keys, k)
			return
		}
		v, err := decodeStateValue(typ, rec.Value)
		if err != nil {
			return
		}
		if typ == updateType {
			v = merge(keys[k], v)
		}
		keys[k] = v
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.keys {
		if StatePartition(k, partitions) == i {
			delete(s.keys, k)
		}
	}
	for k, v := range keys {
		s.keys[k] = v
	}
	s.loaded[i] = p.LeaderEpoch()
	return nil
}

// merge applies an update to the state it follows: a new start offset
// (unless -1) and the batches it names over the ones before.
func merge(base, u Saved) Saved {
	out := base
	out.LeaderEpoch, out.snapshotEpoch = u.LeaderEpoch, u.snapshotEpoch
	if u.Start >= 0 {
		out.Start = u.Start
	}
	p := Restore(out.Start, out.Batches, Limits{})
	p.setBatches(u.Batches)
	out.Start, out.Batches = p.Start(), p.StateBatches()
	return out
}

// Get is the state of k, if any is kept.
func (s *Store) Get(k Key) (Saved, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.keys[k]
	return st, ok
}

// After is the state k has once c is written, or why c is refused: a
// leader's write to a key without state (deleted since the leader read
// it: only a start over makes a key's state), from an older leader epoch
// than the state's last, or of an older state epoch (the state was
// started over since the leader read it), and a start over at an older
// state epoch. ok is false when c deletes the state.
func (s *Store) After(k Key, c Change) (st Saved, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, held := s.keys[k]
	switch c.Kind {
	case ChangeDelete:
		return Saved{}, false, nil
	case ChangeInitialize:
		if held && c.StateEpoch < prev.StateEpoch {
			return Saved{}, false, fmt.Errorf("%w: the state is at state epoch %d, this one is of %d", ErrFencedStateEpoch, prev.StateEpoch, c.StateEpoch)
		}
		return Saved{StateEpoch: c.StateEpoch, LeaderEpoch: -1, Start: c.Start, snapshotEpoch: prev.snapshotEpoch + 1}, true, nil
	}
	switch {
	case !held:
		return Saved{}, false, fmt.Errorf("%w: the state is not kept (deleted, or never started)", ErrFencedStateEpoch)
	case prev.LeaderEpoch > c.LeaderEpoch:
		return Saved{}, false, fmt.Errorf("%w: the state was written at leader epoch %d, this write is of %d", ErrFencedLeaderEpoch,
			prev.LeaderEpoch, c.LeaderEpoch)
	case prev.StateEpoch > c.StateEpoch:
		return Saved{}, false, fmt.Errorf("%w: the state was started over at state epoch %d, this write is of %d", ErrFencedStateEpoch,
			prev.StateEpoch, c.StateEpoch)
	}
	return Saved{StateEpoch: prev.StateEpoch, LeaderEpoch: c.LeaderEpoch, Start: c.Start, Batches: c.Batches,
		snapshotEpoch: prev.snapshotEpoch + 1}, true, nil
}

// Set records k's state once it is written, or its removal (ok false).
func (s *Store) Set(k Key, st Saved, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		s.keys[k] = st
	} else {
		delete(s.keys, k)
	}
}

// Forget drops what was loaded of partition i: this broker leads it no
// longer.
func (s *Store) Forget(i, partitions int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.loaded, i)
	for k := range s.keys {
		if StatePartition(k, partitions) == i {
			delete(s.keys, k)
		}
	}
}
