package reader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/ledger"
)

// Read returns the ledger's entries of group (every group when it is
// empty) from since on (everything when it is zero), ordered by time: it
// reads every partition of the ledger topic from its start to the end it
// has when Read begins. No ledger topic means no entries.
func Read(ctx context.Context, brokers []string, group string, since time.Time, opts ...kgo.Opt) ([]ledger.Entry, error) {
	t, err := NewTail(brokers, group, since, opts...)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	es, err := t.Next(ctx, 0)
	if err != nil {
		return nil, err
	}
	return es, nil
}

// Tail follows the ledger's entries of a group as they are written, for a
// live view. It is not safe for concurrent use.
type Tail struct {
	cl    *kgo.Client
	group string
	since time.Time
	// started once the ledger's partitions are being read; behind holds,
	// until the first Next has read them, the ends they had then.
	started bool
	behind  map[int32]int64
}

// NewTail follows group's entries (every group's when it is empty) from
// since on (everything when it is zero); opts are more client options
// (TLS, SASL).
func NewTail(brokers []string, group string, since time.Time, opts ...kgo.Opt) (*Tail, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &Tail{cl: cl, group: group, since: since}, nil
}

// Next returns the entries not yet returned, ordered by time. The first
// call that finds the ledger reads it to the end it has then; later calls
// wait up to wait for new entries. Before the ledger topic exists (no
// group has had an assignment yet) it returns none. With an error it
// returns the entries it read before it, which are not returned again.
func (t *Tail) Next(ctx context.Context, wait time.Duration) ([]ledger.Entry, error) {
	if !t.started {
		if err := t.start(ctx); err != nil || !t.started {
			return nil, err
		}
	}
	var out []ledger.Entry
	var err error
	for len(t.behind) > 0 && err == nil {
		err = t.poll(ctx, &out)
	}
	if wait > 0 && err == nil {
		pollCtx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		if err = t.poll(pollCtx, &out); ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = nil // nothing new within wait
		}
	}
	slices.SortStableFunc(out, func(a, b ledger.Entry) int { return a.Time.Compare(b.Time) })
	return out, err
}

// start finds where each ledger partition's entries from since on begin,
// and the ends they have now.
func (t *Tail) start(ctx context.Context) error {
	adm := kadm.NewClient(t.cl)
	ends, err := adm.ListEndOffsets(ctx, ledger.Topic)
	if err != nil {
		return fmt.Errorf("listing the ends of %s: %w", ledger.Topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, ledger.Topic)
	if !t.since.IsZero() && err == nil {
		// Records are stamped when written, after their entry's time.
		starts, err = adm.ListOffsetsAfterMilli(ctx, t.since.UnixMilli(), ledger.Topic)
	}
	if err != nil {
		return fmt.Errorf("listing the starts of %s: %w", ledger.Topic, err)
	}
	offsets := map[int32]kgo.Offset{}
	t.behind = map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		start, ok := starts.Lookup(ledger.Topic, o.Partition)
		if o.Err != nil || !ok || start.Err != nil || start.Offset < 0 {
			return // a missing topic, or a partition that could not be listed
		}
		offsets[o.Partition] = kgo.NewOffset().At(start.Offset)
		if start.Offset < o.Offset {
			t.behind[o.Partition] = o.Offset
		}
	})
	if len(offsets) > 0 {
		t.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{ledger.Topic: offsets})
		t.started = true
	}
	return nil
}

// poll adds one fetch's entries to out.
func (t *Tail) poll(ctx context.Context, out *[]ledger.Entry) error {
	fs := t.cl.PollFetches(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	var bad error
	fs.EachError(func(_ string, p int32, err error) {
		bad = fmt.Errorf("reading %s partition %d: %w", ledger.Topic, p, err)
	})
	fs.EachRecord(func(r *kgo.Record) {
		if end, ok := t.behind[r.Partition]; ok && r.Offset+1 >= end {
			delete(t.behind, r.Partition)
		}
		e, err := ledger.Decode(r.Value)
		if err != nil {
			bad = fmt.Errorf("%s partition %d offset %d: %w", ledger.Topic, r.Partition, r.Offset, err)
			return
		}
		if (t.group == "" || e.Group == t.group) && !e.Time.Before(t.since) {
			*out = append(*out, e)
		}
	})
	return bad
}

// Close closes the tail's client.
func (t *Tail) Close() { t.cl.Close() }
