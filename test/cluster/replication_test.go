package cluster

import (
	"bytes"
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

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
)

// waitIdentical waits until every running replica of the partition holds
// the same bytes, the leader's.
func waitIdentical(t *testing.T, c *testutil.Cluster, topic string, partition int32, replicas []int32) {
	t.Helper()
	testutil.EventuallyEvery(t, 20*time.Second, 50*time.Millisecond, func() error {
		sizes := make([]int, len(replicas))
		same := true
		var first []byte
		for i, r := range replicas {
			b := testutil.ReplicaBytes(t, c.Brokers[r].DataDir, topic, partition)
			sizes[i] = len(b)
			if i == 0 {
				first = b
			} else if !bytes.Equal(b, first) {
				same = false
			}
		}
		if !same || len(first) == 0 {
			return fmt.Errorf("%s-%d: replicas %v differ or are empty, sizes %v", topic, partition, replicas, sizes)
		}
		return nil
	})
}

// partitionState is the partition as broker from knows it, once it knows
// it (brokers learn of a new topic a moment apart).
func partitionState(t *testing.T, c *testutil.Cluster, from int, topic string, partition int32) cluster.Partition {
	t.Helper()
	var st cluster.Partition
	testutil.Eventually(t, 10*time.Second, func() error {
		var ok bool
		if st, ok = c.Brokers[from].Server().Metadata().Partition(topic, partition); !ok {
			return fmt.Errorf("broker %d does not know %s-%d", from, topic, partition)
		}
		return nil
	})
	return st
}

// Partitions with three replicas: acks=all records reach every in-sync
// replica byte for byte; when a leader stops, an in-sync follower leads
// and every acknowledged record is still there at its offset; the stopped
// broker comes back, truncates what it alone had, catches up and rejoins
// the in-sync set.
func TestClusterReplicatesAndFailsOver(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	minISR := "2"
	if _, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": &minISR}, "rep"); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if st := partitionState(t, c, 0, "rep", p); len(st.Replicas) != 3 || len(st.ISR) != 3 {
			t.Fatalf("partition %d: %+v", p, st)
		}
	}
	cl := newClient(t, c.Seeds(), kgo.DefaultProduceTopic("rep"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(100*time.Millisecond))
	acked := map[int32]map[int64]string{0: {}, 1: {}, 2: {}}
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			v := fmt.Sprintf("v%d", i)
			r, err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%17)), Value: []byte(v)}).First()
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			acked[r.Partition][r.Offset] = v
		}
	}
	produce(0, 300)
	for p := range int32(3) {
		waitIdentical(t, c, "rep", p, []int32{0, 1, 2})
	}

	// Stop the leader of partition 0: a follower in sync takes over.
	before := partitionState(t, c, 0, "rep", 0)
	down := c.Brokers[before.Leader]
	down.Stop(t)
	start := time.Now()
	survivor := int((before.Leader + 1) % 3)
	produce(300, 301)
	t.Logf("the first record after the leader stopped was acknowledged after %v", time.Since(start).Round(time.Millisecond))
	produce(301, 400)
	after := partitionState(t, c, survivor, "rep", 0)
	if after.Leader == before.Leader || after.Leader == cluster.NoLeader || after.LeaderEpoch <= before.LeaderEpoch ||
		!slices.Contains(before.ISR, after.Leader) || slices.Contains(after.ISR, before.Leader) {
		t.Fatalf("after the leader stopped: %+v, before %+v", after, before)
	}

	// It comes back and rejoins the in-sync sets once caught up.
	down.Restart(t)
	c.WaitLive(t, 3, 30*time.Second)
	produce(400, 450)
	for p := range int32(3) {
		testutil.EventuallyEvery(t, 30*time.Second, 50*time.Millisecond, func() error {
			if st := partitionState(t, c, survivor, "rep", p); len(st.ISR) != 3 {
				return fmt.Errorf("partition %d not fully in sync: %+v", p, st)
			}
			return nil
		})
		waitIdentical(t, c, "rep", p, []int32{0, 1, 2})
	}

	// Every acknowledged record is read back at its offset.
	reader := newClient(t, c.Seeds(), kgo.ConsumeTopics("rep"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := 0
	for seen < 450 {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 450 acknowledged records", seen)
		}
		fs.EachRecord(func(r *kgo.Record) {
			want, ok := acked[r.Partition][r.Offset]
			if !ok || want != string(r.Value) {
				t.Fatalf("%d@%d holds %q, acknowledged %q (%v)", r.Partition, r.Offset, r.Value, want, ok)
			}
			seen++
		})
	}
}

// __consumer_offsets has three replicas: when the coordinator's broker
// stops, a follower leads its partition, loads it, and answers with every
// committed offset.
func TestClusterGroupCoordinatorFailsOver(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds(), kgo.MetadataMinAge(100*time.Millisecond)))
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "offs"); err != nil {
		t.Fatal(err)
	}
	// Brokers learn of a topic a moment apart, as in Kafka: the
	// coordinator refuses offsets of a topic it does not know yet.
	for i := range c.Brokers {
		partitionState(t, c, i, "offs", 0)
	}
	offsets := kadm.Offsets{}
	for p := range int32(3) {
		offsets.Add(kadm.Offset{Topic: "offs", Partition: p, At: int64(10 + p), LeaderEpoch: -1})
	}
	if err := adm.CommitAllOffsets(ctx, "g", offsets); err != nil {
		t.Fatal(err)
	}
	found := adm.FindGroupCoordinators(ctx, "g")
	if found["g"].Err != nil {
		t.Fatal(found["g"].Err)
	}
	coord := found["g"].NodeID
	st := partitionState(t, c, int((coord+1)%3), "__consumer_offsets", 0)
	if len(st.Replicas) != 3 {
		t.Fatalf("__consumer_offsets has replicas %v", st.Replicas)
	}
	c.Brokers[coord].Stop(t)
	var survivors []string
	for i, seed := range c.Seeds() {
		if int32(i) != coord {
			survivors = append(survivors, seed)
		}
	}
	// A fresh client: franz-go keeps a group's coordinator until asked
	// again.
	adm = kadm.NewClient(newClient(t, survivors, kgo.RetryTimeout(3*time.Second)))
	var fetched kadm.OffsetResponses
	testutil.EventuallyEvery(t, 20*time.Second, 50*time.Millisecond, func() error {
		var err error
		if fetched, err = adm.FetchOffsets(ctx, "g"); err != nil {
			return fmt.Errorf("fetching offsets after the coordinator stopped: %w", err)
		}
		if err := fetched.Error(); err != nil {
			return fmt.Errorf("fetching offsets after the coordinator stopped: %w", err)
		}
		return nil
	})
	for p := range int32(3) {
		if o, ok := fetched.Lookup("offs", p); !ok || o.At != int64(10+p) {
			t.Fatalf("partition %d: offset %+v after the coordinator moved", p, o)
		}
	}
	if moved := adm.FindGroupCoordinators(ctx, "g"); moved["g"].Err != nil || moved["g"].NodeID == coord {
		t.Fatalf("coordinator after the stop: %+v", moved)
	}
}

// Leadership goes back to preferred replicas: by ElectLeaders (kadm, as
// kafka-leader-election.sh) and by the controller's balancing.
func TestClusterPreferredLeaders(t *testing.T) {
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("auto=%v", auto), func(t *testing.T) {
			c := testutil.StartCluster(t, 3, 0, func(_ int, cfg *config.Broker) {
				cfg.AutoLeaderRebalance, cfg.LeaderImbalanceCheck = auto, 300*time.Millisecond
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			adm := kadm.NewClient(newClient(t, c.Seeds(), kgo.MetadataMinAge(100*time.Millisecond)))
			if _, err := adm.CreateTopic(ctx, 3, 3, nil, "pref"); err != nil {
				t.Fatal(err)
			}
			st := partitionState(t, c, 0, "pref", 0)
			preferred := st.Replicas[0]
			other := int((preferred + 1) % 3)
			c.Brokers[preferred].Stop(t)
			c.Brokers[preferred].Restart(t)
			c.WaitLive(t, 3, 30*time.Second)
			led := func() bool { return partitionState(t, c, other, "pref", 0).Leader == preferred }
			testutil.Eventually(t, 20*time.Second, func() error {
				if st := partitionState(t, c, other, "pref", 0); len(st.ISR) != 3 {
					return fmt.Errorf("not in sync again: %+v", st)
				}
				return nil
			})
			if !auto {
				time.Sleep(time.Second) // no balancing without it
				if led() {
					t.Fatal("the preferred replica leads again without an election")
				}
				set := kadm.TopicsSet{}
				set.Add("pref", 0)
				res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
				if err != nil || res["pref"][0].Err != nil {
					t.Fatalf("electing the preferred leader: %v %+v", err, res)
				}
				res, _ = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
				if !errors.Is(res["pref"][0].Err, kerr.ElectionNotNeeded) {
					t.Fatalf("electing it again: %+v", res["pref"][0])
				}
			}
			testutil.Eventually(t, 10*time.Second, func() error {
				if st := partitionState(t, c, other, "pref", 0); st.Leader != preferred {
					return fmt.Errorf("the preferred replica %d does not lead: %+v", preferred, st)
				}
				return nil
			})
		})
	}
}

// A follower fetch from a replaced process (an older broker epoch than the
// follower's registration) is refused: it must not move the high
// watermark for the follower.
func TestClusterStaleFollowerFetchRefused(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	td, err := adm.CreateTopic(ctx, 1, 3, nil, "stale")
	if err != nil {
		t.Fatal(err)
	}
	st := partitionState(t, c, 0, "stale", 0)
	follower := st.Replicas[1]
	if follower == st.Leader {
		follower = st.Replicas[2]
	}
	reg, _ := c.Brokers[0].Server().Metadata().Broker(follower)
	cl := newClient(t, []string{c.Brokers[st.Leader].Addr})
	fetch := func(epoch int64) int16 {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 15
		req.ReplicaState.ID, req.ReplicaState.Epoch = follower, epoch
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = td.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.PartitionMaxBytes = st.LeaderEpoch, -1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	if code := fetch(reg.Epoch - 1); code != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("fetch with an older broker epoch: %v", kerr.ErrorForCode(code))
	}
	if code := fetch(reg.Epoch); code != 0 {
		t.Fatalf("fetch with the current broker epoch: %v", kerr.ErrorForCode(code))
	}
}

// __consumer_offsets is made with three replicas once three brokers are
// live: with one of them down, FindCoordinator answers
// COORDINATOR_NOT_AVAILABLE (clients retry) instead of the topic being made
// with fewer replicas for good.
func TestClusterOffsetsTopicWaitsForItsReplicas(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Brokers[2].Stop(t)
	cl := newClient(t, c.Seeds()[:1], kgo.RetryTimeout(time.Second))
	find := func() (int32, int16) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = "g", []string{"g"}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Coordinators) > 0 {
			return resp.Coordinators[0].NodeID, resp.Coordinators[0].ErrorCode
		}
		return resp.NodeID, resp.ErrorCode
	}
	if _, code := find(); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("FindCoordinator with a broker down: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}
	if _, ok := c.Brokers[0].Server().Metadata().Topic("__consumer_offsets"); ok {
		t.Fatal("__consumer_offsets was made while a broker was down")
	}
	c.Brokers[2].Restart(t)
	c.WaitLive(t, 3, 30*time.Second)
	testutil.EventuallyEvery(t, 10*time.Second, 50*time.Millisecond, func() error {
		if node, code := find(); code != 0 {
			return fmt.Errorf("no coordinator with every broker back: node %d, %v", node, kerr.ErrorForCode(code))
		}
		return nil
	})
	if st := partitionState(t, c, 0, "__consumer_offsets", 0); len(st.Replicas) != 3 {
		t.Fatalf("__consumer_offsets made with replicas %v", st.Replicas)
	}
}

// Followers fetch in sessions (KIP-227): a follower of many partitions
// names them all once, then only those whose fetch state changed, and
// they replicate all the same.
func TestClusterFollowersFetchInSessions(t *testing.T) {
	c := testutil.StartCluster(t, 2, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const partitions = 24
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	if _, err := adm.CreateTopic(ctx, partitions, 2, nil, "sessions"); err != nil {
		t.Fatal(err)
	}
	st := partitionState(t, c, 0, "sessions", 0)
	partitionState(t, c, 1, "sessions", partitions-1)
	leader, follower := st.Leader, st.Replicas[0]
	if follower == leader {
		follower = st.Replicas[1]
	}
	led := 0
	for p := range int32(partitions) {
		if s := partitionState(t, c, 0, "sessions", p); s.Leader == leader {
			led++
		}
	}
	cl := newClient(t, c.Seeds(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 50 {
		r := &kgo.Record{Topic: "sessions", Partition: 0, Value: fmt.Appendf(nil, "r%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitIdentical(t, c, "sessions", 0, []int32{leader, follower})

	var mine []string
	for _, s := range c.Brokers[leader].Server().FetchSessions() {
		if s.Replica != follower {
			continue
		}
		mine = append(mine, fmt.Sprintf("%+v", s))
		if s.Partitions != led || s.Named > 1 || s.Epoch < 2 {
			t.Errorf("the follower's session %+v: want %d partitions held, at most 1 named by its last fetch", s, led)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("the leader holds %d sessions for its follower, want 1: %v", len(mine), mine)
	}
}
