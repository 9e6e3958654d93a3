package raft

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// WAL records (see doc.go for the format). A record is
//
//	length  uint32 big-endian: bytes of type and payload (at least 1)
//	crc     uint32 big-endian: CRC-32C of the length field, type and payload
//	type    1 byte
//	payload length-1 bytes
//
// The CRC covers the length too, so a damaged length is caught when the
// record is checked rather than sending the reader off to a wrong place
// unnoticed.

const (
	recSegment   byte = 1 // the segment's header: sequence number and the snapshot it follows
	recEntry     byte = 2 // one raftpb.Entry
	recHardState byte = 3 // one raftpb.HardState

	recHeaderLen = 8
	// maxRecord bounds a record's length so that a damaged length field
	// cannot make the reader allocate without bound. An entry is at most
	// Raft's MaxSizePerMsg, far below this.
	maxRecord = 256 << 20
	// segmentHeaderLen is the payload of a recSegment record.
	segmentHeaderLen = 24
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRecord appends one record to buf.
func appendRecord(buf []byte, typ byte, payload []byte) []byte {
	start := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, uint32(1+len(payload)))
	buf = append(buf, 0, 0, 0, 0, typ)
	buf = append(buf, payload...)
	crc := crc32.Update(0, castagnoli, buf[start:start+4])
	crc = crc32.Update(crc, castagnoli, buf[start+recHeaderLen:])
	binary.BigEndian.PutUint32(buf[start+4:], crc)
	return buf
}

// parseRecord checks the record at off in b. It returns the record and the
// offset after it, or a reason it is not a valid record.
func parseRecord(b []byte, off int) (typ byte, payload []byte, next int, reason string) {
	if len(b)-off < recHeaderLen {
		return 0, nil, 0, fmt.Sprintf("record header cut short (%d bytes)", len(b)-off)
	}
	n := int(binary.BigEndian.Uint32(b[off:]))
	if n < 1 || n > maxRecord {
		return 0, nil, 0, fmt.Sprintf("record length %d out of range", n)
	}
	if n > len(b)-off-recHeaderLen {
		return 0, nil, 0, fmt.Sprintf("record of %d bytes runs past the end of the file", n)
	}
	body := b[off+recHeaderLen : off+recHeaderLen+n]
	crc := crc32.Update(0, castagnoli, b[off:off+4])
	crc = crc32.Update(crc, castagnoli, body)
	if crc != binary.BigEndian.Uint32(b[off+4:]) {
		return 0, nil, 0, "record CRC mismatch"
	}
	typ = body[0]
	if typ < recSegment || typ > recHardState {
		return 0, nil, 0, fmt.Sprintf("unknown record type %d", typ)
	}
	return typ, body[1:], off + recHeaderLen + n, ""
}

// findRecord returns the first offset at or after from where a valid record
// starts, or -1. It tells a torn tail (nothing valid after the bad record)
// from damage to records that were durable (something valid after it).
func findRecord(b []byte, from int) int {
	for p := from; p+recHeaderLen < len(b); p++ {
		n := int(binary.BigEndian.Uint32(b[p:]))
		if n < 1 || n > len(b)-p-recHeaderLen {
			continue
		}
		if t := b[p+recHeaderLen]; t < recSegment || t > recHardState {
			continue
		}
		if _, _, _, reason := parseRecord(b, p); reason == "" {
			return p
		}
	}
	return -1
}

type walRecord struct {
	typ     byte
	payload []byte
	pos     int64
}

// scanSegment splits a segment's bytes into records. In any segment but the
// last, every byte must belong to a valid record. In the last one, a bad
// record with nothing valid after it is a torn tail: scanSegment returns the
// records before it and its position as the end. A bad record followed by a
// valid one is damage, and an error naming the file.
func scanSegment(b []byte, name string, last bool) (recs []walRecord, end int, torn bool, err error) {
	off := 0
	for off < len(b) {
		typ, payload, next, reason := parseRecord(b, off)
		if reason != "" {
			if !last {
				return nil, 0, false, &CorruptError{File: name, Pos: int64(off), Reason: reason + " in a sealed segment"}
			}
			if p := findRecord(b, off+1); p >= 0 {
				return nil, 0, false, &CorruptError{File: name, Pos: int64(off),
					Reason: fmt.Sprintf("%s, followed by a valid record at byte %d", reason, p)}
			}
			return recs, off, true, nil
		}
		recs = append(recs, walRecord{typ: typ, payload: payload, pos: int64(off)})
		off = next
	}
	return recs, off, false, nil
}

// segmentHeader is the payload of a recSegment record: the segment's
// sequence number and the snapshot (index and term) the log in it follows.
type segmentHeader struct {
	Seq, Index, Term uint64
}

func (h segmentHeader) encode() []byte {
	b := make([]byte, 0, segmentHeaderLen)
	b = binary.BigEndian.AppendUint64(b, h.Seq)
	b = binary.BigEndian.AppendUint64(b, h.Index)
	return binary.BigEndian.AppendUint64(b, h.Term)
}

func decodeSegmentHeader(b []byte) (segmentHeader, bool) {
	if len(b) != segmentHeaderLen {
		return segmentHeader{}, false
	}
	return segmentHeader{
		Seq:   binary.BigEndian.Uint64(b),
		Index: binary.BigEndian.Uint64(b[8:]),
		Term:  binary.BigEndian.Uint64(b[16:]),
	}, true
}
