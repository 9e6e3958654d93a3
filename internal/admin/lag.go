package admin

import (
	"context"
	"time"

	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/model"
)

// PartitionLag is one partition of a group with its lag.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset, -1 when none; End the
	// high watermark, -1 when its leader could not be asked.
	Committed int64 `json:"committed"`
	End       int64 `json:"end"`
	// Lag is End - Committed, -1 when either is unknown (Kafka's tools
	// show it as "-").
	Lag int64 `json:"lag"`
	// LagSeconds is how long ago the first record not yet committed was
	// written (its batch's first timestamp): 0 without lag, -1 unknown.
	LagSeconds float64 `json:"lag_seconds"`
	Owner      string  `json:"owner,omitempty"` // member id
}

// lagOf works out the lag of each partition of v.
func lagOf(ctx context.Context, parts Partitions, v group.View, now time.Time) []PartitionLag {
	tps := make([]model.TopicPartition, len(v.Offsets))
	for i, o := range v.Offsets {
		tps[i] = o.TopicPartition
	}
	ends := parts.HighWatermarks(ctx, tps)
	out := make([]PartitionLag, 0, len(v.Offsets))
	for _, o := range v.Offsets {
		pl := PartitionLag{Topic: o.Topic, Partition: o.Partition, Committed: o.Committed, End: -1, Lag: -1, LagSeconds: -1,
			Owner: o.Owner}
		if end, ok := ends[o.TopicPartition]; ok {
			pl.End = end
		}
		if pl.End >= 0 && pl.Committed >= 0 {
			pl.Lag = max(0, pl.End-pl.Committed)
			pl.LagSeconds = 0
			if pl.Lag > 0 {
				if ts, ok := parts.Timestamp(ctx, o.TopicPartition, pl.Committed); ok {
					pl.LagSeconds = max(0, now.Sub(ts).Seconds())
				} else {
					pl.LagSeconds = -1
				}
			}
		}
		out = append(out, pl)
	}
	return out
}

// totalLag sums the known lags.
func totalLag(ps []PartitionLag) int64 {
	var n int64
	for _, p := range ps {
		n += max(p.Lag, 0)
	}
	return n
}
