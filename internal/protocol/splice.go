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
		i := bytes.Index(body, s.Marker)
		if i < prefix {
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
