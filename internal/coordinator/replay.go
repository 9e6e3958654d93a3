package coordinator

import (
	"errors"
	"fmt"

	"github.com/strandlog/strand/internal/model"
)

// Record is one record of a coordinator's partition, as Replay gives it.
type Record struct {
	Offset     int64
	Key, Value []byte // Value nil: a tombstone
	// ProducerID is the producer of a transactional batch (a
	// transactional offset commit, or its marker), else -1.
	ProducerID int64
	// Control marks a control record (a transaction marker); only a
	// control batch's first record is given, as Kafka reads them.
	Control bool
}

// ErrCompressed: a coordinator's batches are never compressed, so one that
// is was not written by a coordinator and is skipped.
var ErrCompressed = errors.New("coordinator: compressed batch")

// Replay calls apply for each record of p from its start to LoadEnd, in
// order, reading about readBytes at a time, and returns how many it
// applied. A batch it cannot read (compressed, or with malformed records)
// is skipped, the records before the fault applied, and reported in the
// error: one bad batch must not keep the rest of the state from loading.
// A failed read ends the replay with its error.
func Replay(p Partition, readBytes int, apply func(Record)) (int, error) {
	var n int
	var errs error
	end := p.LoadEnd()
	for off := p.StartOffset(); off < end; {
		data, err := p.Read(off, readBytes)
		if err != nil {
			return n, errors.Join(errs, err)
		}
		next, err := eachRecord(data, func(r Record) { n++; apply(r) })
		errs = errors.Join(errs, err)
		if next <= off {
			break // nothing more below the end
		}
		off = next
	}
	return n, errs
}

// eachRecord calls fn for each record of the whole batches in data and
// returns the offset after the last whole batch (-1: none). A partial
// batch at the end is where a read stopped, not a fault.
func eachRecord(data []byte, fn func(Record)) (next int64, err error) {
	next = -1
	r := model.NewBatchReader(data)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		next = b.LastOffset() + 1
		if b.Compression() != model.CompressionNone {
			err = errors.Join(err, fmt.Errorf("%w at offsets %d-%d", ErrCompressed, b.BaseOffset(), b.LastOffset()))
			continue
		}
		r := Record{ProducerID: -1, Control: b.IsControl()}
		if b.IsTransactional() && b.ProducerID() >= 0 {
			r.ProducerID = b.ProducerID()
		}
		first := true
		rerr := model.EachRecord(b, func(offset int64, key, value []byte) {
			if first || !r.Control {
				r.Offset, r.Key, r.Value = offset, key, value
				fn(r)
			}
			first = false
		})
		if rerr != nil {
			err = errors.Join(err, fmt.Errorf("batch at offsets %d-%d: %w", b.BaseOffset(), b.LastOffset(), rerr))
		}
	}
	return next, err
}
