package inspect

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxLagSeconds bounds the partitions whose lag in seconds one reading
// asks for: each is a fetch of the first record not committed.
const maxLagSeconds = 64

// LagSeconds is how far behind in time the group is on each partition:
// how long ago the first record past its commit was written. A partition
// without lag is 0 s behind. At most maxLagSeconds lagging partitions
// are read, for at most a second, by a client made with opts (the
// cluster's seeds and what its clients need).
func LagSeconds(ctx context.Context, g Group, opts ...kgo.Opt) map[Partition]float64 {
	out := map[Partition]float64{}
	at := map[string]map[int32]kgo.Offset{}
	n := 0
	for _, p := range g.Partitions {
		tp := Partition{Topic: p.Topic, Partition: p.Partition}
		switch {
		case p.Lag == 0:
			out[tp] = 0
		case p.Lag > 0 && p.Committed >= 0 && n < maxLagSeconds:
			if at[p.Topic] == nil {
				at[p.Topic] = map[int32]kgo.Offset{}
			}
			at[p.Topic][p.Partition] = kgo.NewOffset().At(p.Committed)
			n++
		}
	}
	if n == 0 {
		return out
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ConsumePartitions(at)}, opts...)...)
	if err != nil {
		return out
	}
	defer cl.Close()
	now := time.Now()
	deadline := now.Add(time.Second)
	for found := 0; found < n && time.Now().Before(deadline); {
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			tp := Partition{Topic: p.Topic, Partition: p.Partition}
			if _, seen := out[tp]; seen || len(p.Records) == 0 {
				return
			}
			out[tp] = max(0, now.Sub(p.Records[0].Timestamp).Seconds())
			found++
			cl.PauseFetchPartitions(map[string][]int32{p.Topic: {p.Partition}})
		})
		if ctx.Err() != nil {
			break
		}
	}
	return out
}
