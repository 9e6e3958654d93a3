package cluster

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
)

// benchClient is a client for benchmarks.
func benchClient(b *testing.B, seeds []string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// reportLatencies reports the median and 99th percentile of lats.
func reportLatencies(b *testing.B, lats []time.Duration, prefix string) {
	slices.Sort(lats)
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, prefix+"p50-ms")
	b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, prefix+"p99-ms")
}

// BenchmarkCreateTopic: CreateTopics of one topic of 3 partitions through
// a broker of a 3-voter quorum (in-process, fsync on), answered once the
// creation applied there; beside it the same on a single node.
func BenchmarkCreateTopic(b *testing.B) {
	for _, tc := range []struct {
		name  string
		seeds func(b *testing.B) []string
	}{
		{"single node", func(b *testing.B) []string { return []string{testutil.StartBroker(b, nil).Addr} }},
		{"3 voters", func(b *testing.B) []string { return testutil.StartCluster(b, 3, 0, nil).Seeds() }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			adm := kadm.NewClient(benchClient(b, tc.seeds(b)[:1]))
			ctx := context.Background()
			lats := make([]time.Duration, 0, b.N)
			i := 0
			for b.Loop() {
				start := time.Now()
				if _, err := adm.CreateTopic(ctx, 3, 1, nil, fmt.Sprintf("bench-%d", i)); err != nil {
					b.Fatal(err)
				}
				lats = append(lats, time.Since(start))
				i++
			}
			reportLatencies(b, lats, "")
		})
	}
}

// BenchmarkMetadata10k: a Metadata request for every topic of a 3-broker
// cluster holding 10,000 partitions (100 topics of 100), and what the
// metadata image costs: the heap growth of the process while the topics
// were created (three brokers' images, with their partitions' logs) and
// the image's encoded size.
func BenchmarkMetadata10k(b *testing.B) {
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := testutil.StartCluster(b, 3, 0, func(_ int, cfg *config.Broker) {
		cfg.Topic.SegmentBytes = 1 << 20
	})
	ctx := context.Background()
	cl := benchClient(b, c.Seeds())
	adm := kadm.NewClient(cl)
	for i := range 100 {
		if _, err := adm.CreateTopic(ctx, 100, 1, nil, fmt.Sprintf("wide-%03d", i)); err != nil {
			b.Fatal(err)
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	snap, err := c.Brokers[0].Server().Metadata().EncodedSize()
	if err != nil {
		b.Fatal(err)
	}
	br := cl.Broker(0)
	lats := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, br)
		if err != nil {
			b.Fatal(err)
		}
		lats = append(lats, time.Since(start))
		n := 0
		for _, t := range resp.Topics {
			n += len(t.Partitions)
		}
		if n != 10000 {
			b.Fatalf("%d partitions listed", n)
		}
	}
	reportLatencies(b, lats, "metadata-")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(snap)/(1<<20), "image-MiB")
}

// BenchmarkStartup10k: a broker of a 3-broker cluster holding 10,000
// partitions (it has a third of them) restarted cleanly: the time from
// starting it until the cluster lists it live again.
func BenchmarkStartup10k(b *testing.B) {
	c := testutil.StartCluster(b, 3, 0, func(_ int, cfg *config.Broker) {
		cfg.Topic.SegmentBytes = 1 << 20
	})
	ctx := context.Background()
	adm := kadm.NewClient(benchClient(b, c.Seeds()))
	for i := range 100 {
		if _, err := adm.CreateTopic(ctx, 100, 1, nil, fmt.Sprintf("wide-%03d", i)); err != nil {
			b.Fatal(err)
		}
	}
	lats := make([]time.Duration, 0, b.N)
	for b.Loop() {
		c.Brokers[1].Stop(b)
		c.WaitLive(b, 2, 30*time.Second)
		start := time.Now()
		c.Brokers[1].Restart(b)
		c.WaitLive(b, 3, 60*time.Second)
		lats = append(lats, time.Since(start))
	}
	reportLatencies(b, lats, "startup-")
}
