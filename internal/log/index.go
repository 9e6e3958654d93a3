package log

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// offsetIndex is a segment's sparse offset index: for a sample of batches,
// one every IndexIntervalBytes, the batch's base offset (relative to the
// segment's) and its byte position. Every batch before an entry's position
// has offsets below the entry's offset, so a lookup lands at or before the
// batch holding any offset and a short forward scan finds it.
type offsetIndex struct {
	base    int64
	entries []offsetEntry
}

type offsetEntry struct {
	rel uint32 // offset - base
	pos uint32
}

const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

func (x *offsetIndex) add(offset, pos int64) {
	x.entries = append(x.entries, offsetEntry{rel: uint32(offset - x.base), pos: uint32(pos)})
}

// lookup returns the indexed batch nearest below or at offset, or the segment
// start when there is none.
func (x *offsetIndex) lookup(offset int64) (int64, int64) {
	i := sort.Search(len(x.entries), func(i int) bool { return x.base+int64(x.entries[i].rel) > offset })
	if i == 0 {
		return x.base, 0
	}
	e := x.entries[i-1]
	return x.base + int64(e.rel), int64(e.pos)
}

// lookupPos returns the indexed batch nearest below or at byte position pos.
func (x *offsetIndex) lookupPos(pos int64) (int64, int64) {
	i := sort.Search(len(x.entries), func(i int) bool { return int64(x.entries[i].pos) > pos })
	if i == 0 {
		return x.base, 0
	}
	e := x.entries[i-1]
	return x.base + int64(e.rel), int64(e.pos)
}

// truncate drops the entries at or after byte position pos.
func (x *offsetIndex) truncate(pos int64) {
	i := sort.Search(len(x.entries), func(i int) bool { return int64(x.entries[i].pos) >= pos })
	x.entries = x.entries[:i]
}

func (x *offsetIndex) marshal() []byte {
	b := make([]byte, 0, len(x.entries)*offsetEntrySize)
	for _, e := range x.entries {
		b = binary.BigEndian.AppendUint32(b, e.rel)
		b = binary.BigEndian.AppendUint32(b, e.pos)
	}
	return b
}

// unmarshalOffsetIndex reads an index file and checks it against the
// segment's size, so that a torn or stale file is rebuilt rather than
// trusted: entries strictly increasing in offset and position, positions
// inside the log.
func unmarshalOffsetIndex(base int64, b []byte, logSize int64) (*offsetIndex, error) {
	if len(b)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("offset index size %d is not a multiple of %d", len(b), offsetEntrySize)
	}
	x := &offsetIndex{base: base, entries: make([]offsetEntry, 0, len(b)/offsetEntrySize)}
	for i := 0; i < len(b); i += offsetEntrySize {
		e := offsetEntry{rel: binary.BigEndian.Uint32(b[i:]), pos: binary.BigEndian.Uint32(b[i+4:])}
		if n := len(x.entries); n > 0 && (e.rel <= x.entries[n-1].rel || e.pos <= x.entries[n-1].pos) {
			return nil, fmt.Errorf("offset index entry %d does not increase", n)
		}
		if int64(e.pos) >= logSize {
			return nil, fmt.Errorf("offset index entry points past the log (%d >= %d)", e.pos, logSize)
		}
		x.entries = append(x.entries, e)
	}
	return x, nil
}

// timeIndex is a segment's sparse time index: entries of (largest timestamp
// so far, base offset of the batch that carried it), added only when the
// timestamp grows. Every batch before an entry's offset has a smaller max
// timestamp, so a lookup for the first batch at or after a time can start at
// the entry nearest below it.
type timeIndex struct {
	base    int64
	entries []timeEntry
}

type timeEntry struct {
	ts  int64
	rel uint32
}

func (x *timeIndex) maybeAdd(ts, offset int64) {
	if n := len(x.entries); n > 0 && ts <= x.entries[n-1].ts {
		return
	}
	x.entries = append(x.entries, timeEntry{ts: ts, rel: uint32(offset - x.base)})
}

// lookup returns the offset to start scanning from for the first batch whose
// max timestamp is at least ts.
func (x *timeIndex) lookup(ts int64) int64 {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].ts > ts })
	if i == 0 {
		return x.base
	}
	return x.base + int64(x.entries[i-1].rel)
}

// max returns the largest timestamp indexed and its batch's base offset.
func (x *timeIndex) max() (int64, int64, bool) {
	if len(x.entries) == 0 {
		return -1, -1, false
	}
	e := x.entries[len(x.entries)-1]
	return e.ts, x.base + int64(e.rel), true
}

// truncate drops the entries at or after offset.
func (x *timeIndex) truncate(offset int64) {
	i := sort.Search(len(x.entries), func(i int) bool { return x.base+int64(x.entries[i].rel) >= offset })
	x.entries = x.entries[:i]
}

func (x *timeIndex) marshal() []byte {
	b := make([]byte, 0, len(x.entries)*timeEntrySize)
	for _, e := range x.entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = binary.BigEndian.AppendUint32(b, e.rel)
	}
	return b
}

func unmarshalTimeIndex(base int64, b []byte, next int64) (*timeIndex, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("time index size %d is not a multiple of %d", len(b), timeEntrySize)
	}
	x := &timeIndex{base: base, entries: make([]timeEntry, 0, len(b)/timeEntrySize)}
	for i := 0; i < len(b); i += timeEntrySize {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(b[i:])), rel: binary.BigEndian.Uint32(b[i+8:])}
		if n := len(x.entries); n > 0 && (e.ts <= x.entries[n-1].ts || e.rel < x.entries[n-1].rel) {
			return nil, fmt.Errorf("time index entry %d does not increase", n)
		}
		if base+int64(e.rel) >= next {
			return nil, fmt.Errorf("time index entry points past the segment (offset %d >= %d)", base+int64(e.rel), next)
		}
		x.entries = append(x.entries, e)
	}
	return x, nil
}
