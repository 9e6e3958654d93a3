package protocol

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/strandlog/strand/internal/replica"
)

// Splice puts a stored section where Marker stands in the encoded response.
// A handler sets a records field to Marker (16 random bytes); kmsg encodes it
// as a length-prefixed byte string, which Chunks replaces by the section's
// length and data.
type Splice struct {
	Marker  []byte
	Section replica.Section
}

// NewSplice returns a splice for sec with a fresh marker.
func NewSplice(sec replica.Section) Splice {
	m := make([]byte, 16)
	rand.Read(m)
	return Splice{Marker: m, Section: sec}
}

// Chunk is a piece of an encoded response: bytes, or a stored section.
type Chunk struct {
	Bytes   []byte
	Section replica.Section
}

// Chunks cuts an encoded response body at its markers. flexible says
// whether the records fields are compact bytes (uvarint length+1) or bytes
// (int32 length). The markers appear in order, as the handler added them.
func Chunks(body []byte, flexible bool, splices []Splice) ([]Chunk, error) {
	if len(splices) == 0 {
		return []Chunk{{Bytes: body}}, nil
	}
	var out []Chunk
	prefix := 4
	if flexible {
		prefix = 1 // uvarint(17) is one byte
	}
	for _, s := range splices {
		i := markerAt(body, s.Marker, flexible)
		if i < 0 {
			return nil, fmt.Errorf("protocol: splice marker not found in the encoded response")
		}
		head := body[:i-prefix]
		size := s.Section.Size
		if flexible {
			head = binary.AppendUvarint(head[:len(head):len(head)], uint64(size)+1)
		} else {
			head = binary.BigEndian.AppendUint32(head[:len(head):len(head)], uint32(size))
		}
		out = append(out, Chunk{Bytes: head}, Chunk{Section: s.Section})
		body = body[i+len(s.Marker):]
	}
	return append(out, Chunk{Bytes: body}), nil
}

// markerAt returns the index of the first occurrence of marker in body that
// is encoded as a records field, that is preceded by the length prefix of a
// 16-byte value, or -1. Checking the prefix keeps bytes that merely equal the
// marker from being taken for it (which would corrupt the response).
func markerAt(body, marker []byte, flexible bool) int {
	for off := 0; ; {
		i := bytes.Index(body[off:], marker)
		if i < 0 {
			return -1
		}
		i += off
		switch {
		case flexible && i >= 1 && body[i-1] == byte(len(marker)+1):
			return i
		case !flexible && i >= 4 && binary.BigEndian.Uint32(body[i-4:]) == uint32(len(marker)):
			return i
		}
		off = i + 1
	}
}
