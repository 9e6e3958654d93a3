package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/testutil"
)

func newClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RetryTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// A topic created through one broker is known to every broker, its leaders
// spread evenly over them; records produced through a client that knows
// only one seed reach every leader and read back in order.
func TestClusterSpreadsAndServes(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d brokers", n), func(t *testing.T) {
			c := testutil.StartCluster(t, n, 0, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			adm := kadm.NewClient(newClient(t, c.Seeds()[:1]))
			partitions := int32(2 * n)
			if _, err := adm.CreateTopic(ctx, partitions, 1, nil, "spread"); err != nil {
				t.Fatal(err)
			}
			// Every broker's metadata agrees, and leaders spread evenly.
			var first kmsg.MetadataResponse
			for i, seed := range c.Seeds() {
				md := metadata(t, ctx, seed, "spread")
				if len(md.Brokers) != n {
					t.Fatalf("broker %d lists %d brokers, want %d", i, len(md.Brokers), n)
				}
				if i == 0 {
					first = md
					continue
				}
				if !sameLeaders(first, md) {
					t.Fatalf("broker %d disagrees on leaders", i)
				}
			}
			per := map[int32]int{}
			for _, p := range first.Topics[0].Partitions {
				per[p.Leader]++
			}
			for node := range int32(n) {
				if per[node] != 2 {
					t.Fatalf("leaders per broker %v, want 2 each", per)
				}
			}

			cl := newClient(t, c.Seeds()[:1], kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			const perPartition = 50
			var acked []*kgo.Record
			for i := range perPartition {
				for p := range partitions {
					r := &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)}
					if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
						t.Fatalf("produce: %v", err)
					}
					acked = append(acked, r)
				}
			}
			reader := newClient(t, c.Seeds()[n-1:], kgo.ConsumeTopics("spread"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := map[int32][]string{}
			for total := 0; total < len(acked); {
				fs := reader.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("read %d of %d: %v", total, len(acked), err)
				}
				fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
				fs.EachRecord(func(r *kgo.Record) {
					got[r.Partition] = append(got[r.Partition], string(r.Value))
					total++
				})
			}
			for p := range partitions {
				for i, v := range got[p] {
					if want := fmt.Sprintf("%d-%d", p, i); v != want {
						t.Fatalf("partition %d offset %d holds %q, want %q", p, i, v, want)
					}
				}
			}
		})
	}
}

// A broker asked for a partition it does not lead answers
// NOT_LEADER_OR_FOLLOWER and names the leader (KIP-951), for produce and
// fetch alike.
func TestClusterNotLeaderNamesLeader(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "led"); err != nil {
		t.Fatal(err)
	}
	md := metadata(t, ctx, c.Seeds()[0], "led")
	p := md.Topics[0].Partitions[0]
	other := (p.Leader + 1) % 3
	metadata(t, ctx, c.Brokers[other].Addr, "led") // it knows the topic
	cl := newClient(t, []string{c.Brokers[other].Addr})
	br := cl.Broker(int(other))

	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "led"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = p.Partition
	pp.Records = oneRecordBatch()
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	presp, err := pr.RequestWith(ctx, br)
	if err != nil {
		t.Fatal(err)
	}
	sp := presp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != p.Leader ||
		sp.CurrentLeader.LeaderEpoch != p.LeaderEpoch {
		t.Fatalf("produce to a follower: code %d, current leader %+v; want %d, leader %d epoch %d",
			sp.ErrorCode, sp.CurrentLeader, kerr.NotLeaderForPartition.Code, p.Leader, p.LeaderEpoch)
	}
	if len(presp.Brokers) != 1 || presp.Brokers[0].NodeID != p.Leader || presp.Brokers[0].Port == 0 {
		t.Fatalf("produce answer's node endpoints %+v, want the leader %d", presp.Brokers, p.Leader)
	}

	fr := kmsg.NewPtrFetchRequest()
	fr.MaxWaitMillis, fr.MaxBytes = 10, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "led", md.Topics[0].TopicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p.Partition, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	fresp, err := fr.RequestWith(ctx, br)
	if err != nil {
		t.Fatal(err)
	}
	fpr := fresp.Topics[0].Partitions[0]
	if fpr.ErrorCode != kerr.NotLeaderForPartition.Code || fpr.CurrentLeader.LeaderID != p.Leader {
		t.Fatalf("fetch from a follower: code %d, current leader %+v", fpr.ErrorCode, fpr.CurrentLeader)
	}
	if fresp.Version >= 16 && (len(fresp.Brokers) != 1 || fresp.Brokers[0].NodeID != p.Leader) {
		t.Fatalf("fetch answer's node endpoints %+v", fresp.Brokers)
	}
}

// A broker that stops is fenced after its session timeout: its partitions
// have no leader (one replica each) and produce to them fails with a
// retriable error; once it is back it is unfenced, leads them again at a
// higher epoch and has every record acknowledged before.
func TestClusterFencesAndReturns(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "fence"); err != nil {
		t.Fatal(err)
	}
	before := metadata(t, ctx, c.Seeds()[0], "fence")
	victim := before.Topics[0].Partitions[0]
	down := c.Brokers[victim.Leader]
	cl := newClient(t, c.Seeds(), kgo.DefaultProduceTopic("fence"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: victim.Partition, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	down.Stop(t)
	survivor := c.Seeds()[(victim.Leader+1)%3]
	var fenced kmsg.MetadataResponse
	testutil.EventuallyEvery(t, 20*time.Second, 50*time.Millisecond, func() error {
		fenced = metadata(t, ctx, survivor, "fence")
		if p := fenced.Topics[0].Partitions[victim.Partition]; p.Leader != -1 {
			return fmt.Errorf("broker %d stopped, partition %d still led by %d", victim.Leader, victim.Partition, p.Leader)
		}
		return nil
	})
	if p := fenced.Topics[0].Partitions[victim.Partition]; p.ErrorCode != kerr.LeaderNotAvailable.Code ||
		!slices.Contains(p.OfflineReplicas, victim.Leader) || len(fenced.Brokers) != 2 {
		t.Fatalf("fenced partition %+v, brokers %d", p, len(fenced.Brokers))
	}
	down.Restart(t)
	c.WaitLive(t, 3, 30*time.Second)
	after := metadata(t, ctx, survivor, "fence")
	p := after.Topics[0].Partitions[victim.Partition]
	if p.Leader != victim.Leader || p.LeaderEpoch <= victim.LeaderEpoch {
		t.Fatalf("after return: %+v, before %+v", p, victim)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: victim.Partition, Value: []byte("10")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	reader := newClient(t, c.Seeds(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"fence": {victim.Partition: kgo.NewOffset().AtStart()}}))
	for want := 0; want <= 10; {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 11", want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != fmt.Sprint(want) || r.Offset != int64(want) {
				t.Fatalf("offset %d holds %q, want %d", r.Offset, r.Value, want)
			}
			want++
		})
	}
}

// Topic changes made on different brokers at once are ordered by the
// metadata log: a name created twice is created once, and every broker
// ends with the same topics.
func TestClusterConcurrentCreates(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type outcome struct {
		broker int
		err    error
	}
	results := make(chan outcome, 3*10)
	for b := range 3 {
		adm := kadm.NewClient(newClient(t, c.Seeds()[b:b+1]))
		go func() {
			for i := range 10 {
				_, err := adm.CreateTopic(ctx, 1, 1, nil, fmt.Sprintf("race-%d", i))
				results <- outcome{b, err}
			}
		}()
	}
	created := 0
	for range 30 {
		o := <-results
		switch {
		case o.err == nil:
			created++
		case errors.Is(o.err, kerr.TopicAlreadyExists):
		default:
			t.Fatalf("broker %d: %v", o.broker, o.err)
		}
	}
	if created != 10 {
		t.Fatalf("%d creations succeeded, want 10", created)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, b := range c.Brokers {
			if n := len(b.Server().Metadata().Topics()); n != 10 {
				return fmt.Errorf("broker %d has %d topics", b.Config.NodeID, n)
			}
		}
		return nil
	})
}

// metadata asks the broker at seed for topic, waiting (up to 10 s) until
// that broker knows it: brokers apply the metadata log each at its pace.
func metadata(t *testing.T, ctx context.Context, seed, topic string) kmsg.MetadataResponse {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var known kmsg.MetadataResponse
	testutil.Eventually(t, 10*time.Second, func() error {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || (resp.Topics[0].ErrorCode != 0 && resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code) {
			return fmt.Errorf("metadata of %s from %s: %+v", topic, seed, resp.Topics)
		}
		known = *resp
		return nil
	})
	return known
}

func sameLeaders(a, b kmsg.MetadataResponse) bool {
	pa, pb := a.Topics[0].Partitions, b.Topics[0].Partitions
	if len(pa) != len(pb) {
		return false
	}
	for i := range pa {
		if pa[i].Leader != pb[i].Leader || pa[i].LeaderEpoch != pb[i].LeaderEpoch {
			return false
		}
	}
	return true
}

// oneRecordBatch is a valid record batch of one record, as a client
// would produce it.
func oneRecordBatch() []byte {
	return model.EncodeBatch([]model.KeyValue{{Value: []byte("v")}}, time.Now().UnixMilli(), model.NoProducer)
}

// DescribeQuorum (kafka-metadata-quorum.sh) gives the same answer through
// every broker: the others forward it to the quorum's leader.
func TestClusterDescribeQuorum(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leaders := map[int32]bool{}
	for i, seed := range c.Seeds() {
		cl := newClient(t, []string{seed})
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(i))
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("broker %d: %+v", i, resp)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark <= 0 || len(p.CurrentVoters) != 3 || p.LeaderEpoch <= 0 {
			t.Fatalf("broker %d: partition %+v", i, p)
		}
		for _, v := range p.CurrentVoters {
			if v.LogEndOffset < 0 {
				t.Fatalf("broker %d: voter %d has no log end: %+v", i, v.ReplicaID, p)
			}
		}
		leaders[p.LeaderID] = true
	}
	if len(leaders) != 1 {
		t.Fatalf("brokers name different leaders: %v", leaders)
	}
}

// A consumer group works when its coordinator and its partitions' leaders
// are different brokers: it reads everything, its commits are kept by the
// coordinator (the leader of its __consumer_offsets partition), and every
// broker points clients to that same coordinator.
func TestClusterConsumerGroup(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, func(_ int, cfg *config.Broker) {
		cfg.OffsetsTopicPartitions = 6
		cfg.GroupInitialRebalanceDelay = 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "grouped"); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, c.Seeds(), kgo.DefaultProduceTopic("grouped"))
	const total = 300
	for i := range total {
		if err := prod.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// __consumer_offsets made through broker 0; the group is one whose
	// partition another broker leads, which loads it as it follows the
	// metadata.
	if _, err := findCoordinator(ctx, newClient(t, c.Seeds()[:1]).Broker(0), "first"); err != nil {
		t.Fatal(err)
	}
	offsetsTopic := metadata(t, ctx, c.Seeds()[0], "__consumer_offsets").Topics[0]
	groupID := ""
	for i := 0; groupID == ""; i++ {
		id := fmt.Sprintf("cluster-group-%d", i)
		if offsetsTopic.Partitions[model.CoordinatorPartition(id, int32(len(offsetsTopic.Partitions)))].Leader != 0 {
			groupID = id
		}
	}
	consumer := newClient(t, c.Seeds()[:1], kgo.ConsumerGroup(groupID), kgo.ConsumeTopics("grouped"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	seen := 0
	for seen < total {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", seen, total)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s[%d]: %v", topic, p, err) })
		seen += fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	var coordinators []int32
	for i := range c.Brokers {
		node, err := findCoordinator(ctx, newClient(t, c.Seeds()[i:i+1]).Broker(i), groupID)
		if err != nil {
			t.Fatalf("FindCoordinator through %d: %v", i, err)
		}
		coordinators = append(coordinators, node)
	}
	if coordinators[0] != coordinators[1] || coordinators[1] != coordinators[2] || coordinators[0] == 0 {
		t.Fatalf("brokers name coordinators %v, want one broker other than 0", coordinators)
	}
	offsets, err := kadm.NewClient(newClient(t, c.Seeds()[:1])).FetchOffsets(ctx, groupID)
	if err != nil {
		t.Fatal(err)
	}
	committed := int64(0)
	offsets.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != total {
		t.Fatalf("committed offsets add up to %d, want %d", committed, total)
	}
}

// findCoordinator asks br for the coordinator of a group.
func findCoordinator(ctx context.Context, br *kgo.Broker, group string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		return -1, err
	}
	code, node := resp.ErrorCode, resp.NodeID
	if len(resp.Coordinators) == 1 {
		code, node = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return -1, err
	}
	return node, nil
}

// Finalized features are the cluster's, not each broker's: brokers whose
// flags ask for different transaction.version levels all advertise the
// one the cluster finalized.
func TestClusterFeaturesAgree(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, func(node int, cfg *config.Broker) {
		cfg.TransactionVersion = int16(node % 2) // 0, 1, 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	levels := map[int16]bool{}
	for i, seed := range c.Seeds() {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "strand-test", "1"
		resp, err := req.RequestWith(ctx, newClient(t, []string{seed}).Broker(i))
		if err != nil {
			t.Fatal(err)
		}
		level := int16(0)
		for _, f := range resp.FinalizedFeatures {
			if f.Name == "transaction.version" {
				level = f.MaxVersionLevel
			}
		}
		if resp.FinalizedFeaturesEpoch <= 0 {
			t.Fatalf("broker %d: features epoch %d", i, resp.FinalizedFeaturesEpoch)
		}
		levels[level] = true
	}
	if len(levels) != 1 {
		t.Fatalf("brokers advertise transaction.version levels %v", levels)
	}
}

// A broker that is not a voter joins the metadata quorum as a learner
// (an observer in DescribeQuorum), is placed on like any broker, and
// serves its partitions.
func TestClusterLearnerBroker(t *testing.T) {
	c := testutil.StartCluster(t, 4, 3, nil) // node 3 is not a voter
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	if _, err := adm.CreateTopic(ctx, 8, 1, nil, "observed"); err != nil {
		t.Fatal(err)
	}
	md := metadata(t, ctx, c.Brokers[3].Addr, "observed")
	led := 0
	for _, p := range md.Topics[0].Partitions {
		if p.Leader == 3 {
			led++
		}
	}
	if led != 2 {
		t.Fatalf("the learner broker leads %d of 8 partitions, want 2", led)
	}
	cl := newClient(t, c.Seeds()[3:], kgo.DefaultProduceTopic("observed"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range 16 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	q, ok := c.Brokers[0].Server().Metadata().Quorum()
	if !ok {
		t.Fatal("no quorum")
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		ask := c.Brokers[0]
		if q.Leader >= 0 {
			ask = c.Brokers[q.Leader] // only the leader knows every member's progress
		}
		q, _ = ask.Server().Metadata().Quorum()
		if q.Leader < 0 || len(q.Voters) != 3 || len(q.Observers) != 1 {
			return fmt.Errorf("quorum %+v, want 3 voters and the learner", q)
		}
		return nil
	})
	if q.Observers[0].NodeID != 3 {
		t.Fatalf("observers %+v", q.Observers)
	}
}
