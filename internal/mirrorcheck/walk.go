package mirrorcheck

import (
	"context"
	"fmt"

	"github.com/strandlog/strand/internal/model"
)

// maxFetchBytes caps the growth of a fetch that could not hold one whole
// batch: Kafka's largest batch by default is 1 MiB, and no broker sends
// one bigger than its message.max.bytes.
const maxFetchBytes = 64 << 20

// batchWalk reads one partition's batches in offset order, from the
// batch holding offset next up to (not including) the first batch that
// starts at or past end, fetching as it goes.
type batchWalk struct {
	r         Reader
	topic     string
	partition int32
	next      int64 // the first offset not yet returned
	end       int64
	maxBytes  int32
	limit     int32  // the largest fetch asked for
	pending   []byte // the rest of the last fetch
	done      bool
}

func newBatchWalk(r Reader, topic string, partition int32, from, end int64, maxBytes int32) *batchWalk {
	return &batchWalk{r: r, topic: topic, partition: partition, next: from, end: end, maxBytes: maxBytes, limit: maxFetchBytes}
}

// Next returns the next batch, or nil when the walk is over.
func (w *batchWalk) Next(ctx context.Context) (model.Batch, error) {
	for !w.done {
		b, err := w.take()
		if err != nil {
			return nil, err
		}
		if b != nil {
			if b.BaseOffset() >= w.end {
				w.done = true
				return nil, nil
			}
			w.next = b.LastOffset() + 1
			return b, nil
		}
		if err := w.fetch(ctx); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// take cuts the next whole batch past w.next off the pending bytes; nil
// when they hold none (a batch cut short is dropped: the next fetch
// starts at it).
func (w *batchWalk) take() (model.Batch, error) {
	r := model.NewBatchReader(w.pending)
	for {
		b, err := nextBatch(r)
		if err != nil {
			return nil, fmt.Errorf("%s/%d after offset %d: %w", w.topic, w.partition, w.next-1, err)
		}
		if b == nil {
			w.pending = nil
			return nil, nil
		}
		w.pending = r.Rest()
		// A fetch from the middle of a batch starts with that batch; one
		// wholly before w.next was returned already.
		if b.LastOffset() >= w.next {
			return b, nil
		}
	}
}

// nextBatch is r's next whole batch, or nil when the rest does not hold
// one whole. A length below a header's, or a format other than v2, is an
// error.
func nextBatch(r *model.BatchReader) (model.Batch, error) {
	b, ok := r.Next()
	if !ok {
		if r.Stop() == model.MalformedBatch {
			rest := model.Batch(r.Rest())
			return nil, fmt.Errorf("batch at offset %d: length %d is shorter than a header", rest.BaseOffset(), rest.Length())
		}
		return nil, nil
	}
	if m := b.Magic(); m != model.BatchMagic {
		return nil, fmt.Errorf("batch at offset %d: record format v%d (only v2 is compared)", b.BaseOffset(), m)
	}
	return b, nil
}

// fetch reads from w.next on. An empty answer ends the walk: nothing is
// stored between w.next and the high watermark. An answer with no whole
// batch holding an offset from w.next on is asked again with twice the
// size.
func (w *batchWalk) fetch(ctx context.Context) error {
	if w.next >= w.end {
		w.done = true
		return nil
	}
	for {
		data, err := w.r.Fetch(ctx, w.topic, w.partition, w.next, w.maxBytes)
		if err != nil {
			return fmt.Errorf("fetch %s/%d at %d: %w", w.topic, w.partition, w.next, err)
		}
		if len(data) == 0 {
			w.done = true
			return nil
		}
		last, err := lastWholeOffset(data)
		if err != nil {
			return fmt.Errorf("fetch %s/%d at %d: %w", w.topic, w.partition, w.next, err)
		}
		if last >= w.next {
			w.pending = data
			return nil
		}
		// No whole batch past w.next: ask for more.
		if w.maxBytes >= w.limit {
			return fmt.Errorf("fetch %s/%d at %d: no whole batch holding it in %d bytes", w.topic, w.partition, w.next, w.maxBytes)
		}
		w.maxBytes = min(2*w.maxBytes, w.limit)
	}
}

// lastWholeOffset is the last offset of the last whole batch in data, -1
// when there is none.
func lastWholeOffset(data []byte) (int64, error) {
	last := int64(-1)
	r := model.NewBatchReader(data)
	for {
		b, err := nextBatch(r)
		if err != nil || b == nil {
			return last, err
		}
		last = b.LastOffset()
	}
}
