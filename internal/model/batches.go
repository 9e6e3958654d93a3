package model

// BatchStop says why a walk over batches laid end to end ended.
type BatchStop int

const (
	// EndOfBatches: the data was whole batches, all of them read.
	EndOfBatches BatchStop = iota
	// PartialBatch: the rest is the start of a batch, shorter than its
	// length field or than the size its length claims. In a fetch answer
	// this is where the read stopped; in an append it is an error.
	PartialBatch
	// MalformedBatch: the rest claims a size below a batch header's.
	MalformedBatch
)

func (s BatchStop) String() string {
	switch s {
	case EndOfBatches:
		return "end of batches"
	case PartialBatch:
		return "partial batch"
	case MalformedBatch:
		return "malformed batch"
	}
	return "unknown"
}

// BatchReader walks the batches laid end to end in a buffer: a fetch
// answer, a segment read, a produce request. It hands out whole batches
// only, and when it stops it says why, since callers differ on what a
// partial or malformed rest means.
type BatchReader struct {
	data    []byte
	pos     int
	stop    BatchStop
	claimed int
}

// NewBatchReader walks data from its start.
func NewBatchReader(data []byte) *BatchReader {
	return &BatchReader{data: data}
}

// Next returns the next whole batch, sliced to its size (its capacity too,
// so appending to it cannot overwrite the batch after it), or false when
// the walk ends; Stop then says why.
func (r *BatchReader) Next() (Batch, bool) {
	rest := r.data[r.pos:]
	r.claimed = 0
	if len(rest) == 0 {
		r.stop = EndOfBatches
		return nil, false
	}
	// The length field is read as soon as it is there, before the whole
	// header is: a rest too short for a header may already claim a size
	// no batch can have.
	if len(rest) < BatchLengthOverhead {
		r.stop = PartialBatch
		return nil, false
	}
	size := Batch(rest).Size()
	r.claimed = size
	if size < BatchHeaderSize {
		r.stop = MalformedBatch
		return nil, false
	}
	if size > len(rest) {
		r.stop = PartialBatch
		return nil, false
	}
	r.pos += size
	return Batch(rest[:size:size]), true
}

// Pos is how many bytes of data the batches returned so far cover: where
// the rest starts.
func (r *BatchReader) Pos() int { return r.pos }

// Rest is the data after the last batch returned.
func (r *BatchReader) Rest() []byte { return r.data[r.pos:] }

// Stop says why the walk ended, once Next has returned false.
func (r *BatchReader) Stop() BatchStop { return r.stop }

// Claimed is the size the rest's length field claims once the walk has
// ended, header included; 0 when the rest is too short to hold the field.
func (r *BatchReader) Claimed() int { return r.claimed }
