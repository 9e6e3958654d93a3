package reader

import (
	"context"
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
func Read(ctx context.Context, brokers []string, group string, since time.Time) ([]ledger.Entry, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, ledger.Topic)
	if err != nil {
		return nil, fmt.Errorf("listing the ends of %s: %w", ledger.Topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, ledger.Topic)
	if !since.IsZero() && err == nil {
		// Records are stamped when written, after their entry's time.
		starts, err = adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), ledger.Topic)
	}
	if err != nil {
		return nil, fmt.Errorf("listing the starts of %s: %w", ledger.Topic, err)
	}
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		start, ok := starts.Lookup(ledger.Topic, o.Partition)
		if o.Err == nil && ok && start.Err == nil && start.Offset >= 0 && start.Offset < o.Offset {
			want[o.Partition] = o.Offset
			offsets[o.Partition] = kgo.NewOffset().At(start.Offset)
		}
	})
	var out []ledger.Entry
	if len(want) == 0 {
		return out, nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{ledger.Topic: offsets})
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var bad error
		fs.EachError(func(_ string, p int32, err error) {
			bad = fmt.Errorf("reading %s partition %d: %w", ledger.Topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
			e, err := ledger.Decode(r.Value)
			if err != nil {
				bad = fmt.Errorf("%s partition %d offset %d: %w", ledger.Topic, r.Partition, r.Offset, err)
				return
			}
			if (group == "" || e.Group == group) && !e.Time.Before(since) {
				out = append(out, e)
			}
		})
		if bad != nil {
			return nil, bad
		}
	}
	slices.SortStableFunc(out, func(a, b ledger.Entry) int { return a.Time.Compare(b.Time) })
	return out, nil
}
