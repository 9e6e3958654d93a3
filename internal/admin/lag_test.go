package admin

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/model"
)

// fakePartitions answers from maps: a partition missing from ends has a
// leader that cannot be asked, one missing from written has no batch
// found at the committed offset.
type fakePartitions struct {
	ends    map[model.TopicPartition]int64
	written map[model.TopicPartition]time.Time
}

func (f fakePartitions) HighWatermarks(_ context.Context, tps []model.TopicPartition) map[model.TopicPartition]int64 {
	out := map[model.TopicPartition]int64{}
	for _, tp := range tps {
		if end, ok := f.ends[tp]; ok {
			out[tp] = end
		}
	}
	return out
}

func (f fakePartitions) Timestamp(_ context.Context, tp model.TopicPartition, _ int64) (time.Time, bool) {
	ts, ok := f.written[tp]
	return ts, ok
}

// TestLagOf: lag is known only when both the commit and the end are, its
// age only when the batch at the commit is found, and a partition without
// lag is 0 seconds behind.
func TestLagOf(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tp := func(p int32) model.TopicPartition { return model.TopicPartition{Topic: "t", Partition: p} }
	parts := fakePartitions{
		ends:    map[model.TopicPartition]int64{tp(0): 100, tp(1): 50, tp(2): 10, tp(4): 30},
		written: map[model.TopicPartition]time.Time{tp(0): now.Add(-90 * time.Second)},
	}
	v := group.View{Offsets: []group.OffsetView{
		{TopicPartition: tp(0), Committed: 40, Owner: "m1"}, // 60 behind, 90 s old
		{TopicPartition: tp(1), Committed: 20},              // behind, age unknown
		{TopicPartition: tp(2), Committed: 10},              // caught up
		{TopicPartition: tp(3), Committed: 5},               // leader unreachable
		{TopicPartition: tp(4), Committed: -1},              // owned, never committed
	}}
	got := lagOf(context.Background(), parts, v, now)
	want := []PartitionLag{
		{Topic: "t", Partition: 0, Committed: 40, End: 100, Lag: 60, LagSeconds: 90, Owner: "m1"},
		{Topic: "t", Partition: 1, Committed: 20, End: 50, Lag: 30, LagSeconds: -1},
		{Topic: "t", Partition: 2, Committed: 10, End: 10, Lag: 0, LagSeconds: 0},
		{Topic: "t", Partition: 3, Committed: 5, End: -1, Lag: -1, LagSeconds: -1},
		{Topic: "t", Partition: 4, Committed: -1, End: 30, Lag: -1, LagSeconds: -1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d partitions, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("partition %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if n := totalLag(got); n != 90 {
		t.Errorf("total lag %d, want 90 (unknown lags left out)", n)
	}
}
