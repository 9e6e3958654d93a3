package mirrorcheck

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// The Kafka Reader against franz-go's fake cluster: the requests are
// Kafka's, answered by leaders on three brokers.

func fakeKafka(t *testing.T, opts ...kgo.Opt) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl
}

// produce writes n records to each partition in batches of 10, the
// values the same for the same arguments. The batches are made here and
// sent to each partition's leader as they are, so that their bounds do not
// depend on how a client batches on a loaded machine.
func produce(t *testing.T, c *kfake.Cluster, cl *kgo.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		for i := 0; i < n; i += 10 {
			var recs []model.KeyValue
			for j := i; j < min(n, i+10); j++ {
				recs = append(recs, model.KeyValue{Key: fmt.Appendf(nil, "k%d", j), Value: fmt.Appendf(nil, "v%d-%d", p, j)})
			}
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = "t", topics["t"].ID // newer versions name the topic by its id
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, model.EncodeBatch(recs, 1_700_000_000_000+int64(i), model.NoProducer)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := cl.Broker(int(c.LeaderFor("t", p))).Request(ctx, req)
			if err == nil {
				err = kerr.ErrorForCode(resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
			}
			if err != nil {
				t.Fatalf("producing to partition %d: %v", p, err)
			}
		}
	}
}

func TestKafkaReaderComparesAClusterWithItself(t *testing.T) {
	c, cl := fakeKafka(t)
	produce(t, c, cl, 45)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := CompareTopic(ctx, cl, cl, "t", Options{FetchBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Equal() || rep.SourceID == ([16]byte{}) || rep.SourcePartitions != 3 {
		t.Fatalf("a cluster compared with itself: %s", rep)
	}
	for _, p := range rep.Partitions {
		if p.Records != 45 || p.Batches != 5 || p.Source.HighWatermark != 45 || p.End != 45 {
			t.Errorf("partition %d: %d records in %d batches, high watermark %d (want 45 in 5, 45)",
				p.Partition, p.Records, p.Batches, p.Source.HighWatermark)
		}
	}

	// Leadership moved under a reader that knew the old leader: it looks
	// the leader up again.
	reader := NewReader(cl)
	if _, err := CompareLogs(ctx, reader, reader, "t", Options{}); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if err := c.MoveTopicPartition("t", p, (c.LeaderFor("t", p)+1)%3); err != nil {
			t.Fatal(err)
		}
	}
	rep, err = CompareLogs(ctx, reader, reader, "t", Options{})
	if err != nil || !rep.Equal() {
		t.Fatalf("after the leaders moved: %v %s", err, rep)
	}

	if _, err := CompareTopic(ctx, cl, cl, "absent", Options{}); err == nil {
		t.Error("an absent topic compared without error")
	}
}

func TestKafkaReaderTellsTwoClustersApart(t *testing.T) {
	// Without a producer id the same records make the same batches.
	ca, a := fakeKafka(t, kgo.DisableIdempotentWrite())
	cb, b := fakeKafka(t, kgo.DisableIdempotentWrite())
	produce(t, ca, a, 20)
	produce(t, cb, b, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := CompareTopic(ctx, a, b, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Equal() || rep.SourceID == rep.MirrorID {
		t.Fatalf("two clusters' topics of other ids equal: %s", rep)
	}
	for _, p := range rep.Partitions {
		if p.MismatchCount != 0 || p.Records != 20 {
			t.Errorf("partition %d: %d mismatches over %d records: %v", p.Partition, p.MismatchCount, p.Records, p.Mismatches)
		}
	}

	// One more record on the mirror's partition 1.
	if err := b.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("more")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rep, err = CompareTopic(ctx, a, b, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Partitions[1]
	if len(p.Mismatches) != 2 || p.Mismatches[0].Kind != HighWatermark || p.Mismatches[1].Kind != Extra || p.Mismatches[1].Offset != 20 {
		t.Errorf("a record more on the mirror: %s", rep)
	}
	// Bounded at the source's end, the mirror's partition 1 is ahead, which is no mismatch of offsets below it.
	rep, err = CompareTopic(ctx, a, b, "t", Options{Ends: map[int32]int64{0: 20, 1: 20, 2: 20}})
	if err != nil || rep.Partitions[1].MismatchCount != 0 {
		t.Errorf("bounded: %v %s", err, rep)
	}

	// An idempotent producer gets a producer id of each cluster.
	for _, c := range []*kfake.Cluster{ca, cb} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		err = cl.ProduceSync(ctx, &kgo.Record{Partition: 2, Value: []byte("v"), Timestamp: time.UnixMilli(1)}).FirstErr()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	rep, err = CompareTopic(ctx, a, b, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Partitions[2]; len(p.Mismatches) != 1 || p.Mismatches[0].Offset != 20 || !slices.Contains(p.Mismatches[0].Fields, "ProducerID") {
		t.Errorf("batches of two producer ids: %s", rep)
	}

	// Committed offsets through kadm.
	adA, adB := kadm.NewClient(a), kadm.NewClient(b)
	commit := func(ad *kadm.Client, at int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "t", Partition: 0, At: at, LeaderEpoch: -1, Metadata: "x"})
		os.Add(kadm.Offset{Topic: "t", Partition: 2, At: 7, LeaderEpoch: -1})
		if err := ad.CommitAllOffsets(ctx, "g", os); err != nil {
			t.Fatal(err)
		}
	}
	commit(adA, 10)
	commit(adB, 10)
	grep, err := CompareGroupOffsets(ctx, adA, adB, "g")
	if err != nil || !grep.Equal() || grep.Committed["g"] != 2 {
		t.Fatalf("same commits: %v %s", err, grep)
	}
	commit(adB, 11)
	grep, err = CompareGroupOffsets(ctx, adA, adB, "g")
	if err != nil || grep.Equal() || len(grep.Mismatches) != 1 || grep.Mismatches[0].Partition != 0 {
		t.Fatalf("a commit ahead on the mirror: %v %s", err, grep)
	}
}
