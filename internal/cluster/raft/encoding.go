package raft

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
)

// The bytes this package puts inside Raft entries and snapshots. Raft itself
// sees them as opaque; every node decodes them the same way, so they are part
// of the replicated state and change only with a new version byte.

// proposalTag opens every normal entry this package proposes.
const proposalTag = 1

// proposalHeader is the tag, the proposing node and its request id.
const proposalHeader = 1 + 8 + 8

// encodeProposal wraps the state machine's data with who proposed it, so the
// proposer can be woken when it applies (and nobody else is).
func encodeProposal(proposer, req uint64, data []byte) []byte {
	b := make([]byte, proposalHeader, proposalHeader+len(data))
	b[0] = proposalTag
	binary.BigEndian.PutUint64(b[1:], proposer)
	binary.BigEndian.PutUint64(b[9:], req)
	return append(b, data...)
}

func decodeProposal(b []byte) (proposer, req uint64, data []byte, err error) {
	if len(b) < proposalHeader || b[0] != proposalTag {
		return 0, 0, nil, fmt.Errorf("%w: normal entry of %d bytes is not a proposal of this package", ErrCorrupt, len(b))
	}
	return binary.BigEndian.Uint64(b[1:]), binary.BigEndian.Uint64(b[9:]), b[proposalHeader:], nil
}

// changeContext is the Context of every ConfChange this package proposes:
// the member's transport address, so every node learns every member's
// address from the log, and the proposer and request id to wake (zero when
// nobody waits).
type changeContext struct {
	Addr     string
	Proposer uint64
	Req      uint64
}

const changeContextVersion = 1

func (c changeContext) encode() []byte {
	b := []byte{changeContextVersion}
	b = binary.AppendUvarint(b, c.Proposer)
	b = binary.AppendUvarint(b, c.Req)
	return append(b, c.Addr...)
}

func decodeChangeContext(b []byte) (changeContext, error) {
	if len(b) == 0 {
		return changeContext{}, nil // a change made by another tool: no address, no waiter
	}
	if b[0] != changeContextVersion {
		return changeContext{}, fmt.Errorf("%w: conf change context version %d", ErrCorrupt, b[0])
	}
	b = b[1:]
	var c changeContext
	var n int
	if c.Proposer, n = binary.Uvarint(b); n <= 0 {
		return changeContext{}, fmt.Errorf("%w: conf change context: bad proposer", ErrCorrupt)
	}
	b = b[n:]
	if c.Req, n = binary.Uvarint(b); n <= 0 {
		return changeContext{}, fmt.Errorf("%w: conf change context: bad request id", ErrCorrupt)
	}
	c.Addr = string(b[n:])
	return c, nil
}

// snapshotData is what this package keeps in a Raft snapshot's Data: the
// member addresses known as of the snapshot, and the state machine's bytes.
// Format: version byte, uvarint count, then per member uvarint id, uvarint
// length and the address; the state machine's bytes are the rest.
type snapshotData struct {
	Members map[uint64]string
	State   []byte
}

const snapshotDataVersion = 1

func (s snapshotData) encode() []byte {
	b := []byte{snapshotDataVersion}
	b = binary.AppendUvarint(b, uint64(len(s.Members)))
	for _, id := range slices.Sorted(maps.Keys(s.Members)) {
		b = binary.AppendUvarint(b, id)
		b = binary.AppendUvarint(b, uint64(len(s.Members[id])))
		b = append(b, s.Members[id]...)
	}
	return append(b, s.State...)
}

var errSnapshotData = fmt.Errorf("%w: snapshot data is malformed", ErrCorrupt)

func decodeSnapshotData(b []byte) (snapshotData, error) {
	if len(b) == 0 || b[0] != snapshotDataVersion {
		return snapshotData{}, errSnapshotData
	}
	b = b[1:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return snapshotData{}, errSnapshotData
	}
	b = b[n:]
	s := snapshotData{Members: make(map[uint64]string, count)}
	for range count {
		id, n := binary.Uvarint(b)
		if n <= 0 {
			return snapshotData{}, errSnapshotData
		}
		b = b[n:]
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return snapshotData{}, errSnapshotData
		}
		b = b[n:]
		s.Members[id] = string(b[:l])
		b = b[l:]
	}
	s.State = b
	return s, nil
}
