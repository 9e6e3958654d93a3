package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/testutil"
)

// A partition moves onto a broker that did not hold it, off its leader,
// while it takes writes: the new replica copies it, then the old one
// leaves (its data removed) and leadership passes to the target; every
// acknowledged record is still there. Cancelling with nothing in progress
// and moving onto an unknown broker are refused with Kafka's codes.
func TestClusterReassignsPartitions(t *testing.T) {
	c := testutil.StartCluster(t, 4, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "moving"); err != nil {
		t.Fatal(err)
	}
	st := partitionState(t, c, 0, "moving", 0)
	out := st.Replicas[0]
	spare := spareBroker(st, 4)
	target := []int32{spare, st.Replicas[1], st.Replicas[2]}
	cl := newClient(t, c.Seeds(), kgo.DefaultProduceTopic("moving"))
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 200)

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moving", 0, target)
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := resps.Error(); err != nil {
		t.Fatalf("reassigning %v onto %v: %v", st.Replicas, target, err)
	}
	produce(200, 300) // writes go on while it copies
	var moved cluster.Partition
	testutil.EventuallyEvery(t, 30*time.Second, 50*time.Millisecond, func() error {
		listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"moving": {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		moved, _ = c.Brokers[0].Server().Metadata().Partition("moving", 0)
		if len(listed) != 0 || !slices.Equal(moved.Replicas, target) {
			return fmt.Errorf("the reassignment of %v onto %v did not complete: %+v, listed %+v", st.Replicas, target, moved, listed)
		}
		return nil
	})
	if !slices.Contains(target, moved.Leader) || moved.LeaderEpoch <= st.LeaderEpoch {
		t.Fatalf("after the move: %+v", moved)
	}
	waitIdentical(t, c, "moving", 0, target)
	dir := filepath.Join(c.Brokers[out].DataDir, "moving-0")
	testutil.EventuallyEvery(t, 10*time.Second, 50*time.Millisecond, func() error {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("broker %d, moved off, still holds %s", out, dir)
		}
		return nil
	})
	produce(300, 350)
	rd := newClient(t, c.Seeds(), kgo.ConsumeTopics("moving"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for seen := map[string]bool{}; len(seen) < 350; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 350 records after the move", len(seen))
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}

	var none kadm.AlterPartitionAssignmentsReq
	none.CancelAssign("moving", 0)
	resps, err = adm.AlterPartitionAssignments(ctx, none)
	if err != nil || !errors.Is(resps.Error(), kerr.NoReassignmentInProgress) {
		t.Fatalf("cancelling nothing: %v, %v", err, resps.Error())
	}
	var bad kadm.AlterPartitionAssignmentsReq
	bad.Assign("moving", 0, []int32{0, 1, 99})
	resps, err = adm.AlterPartitionAssignments(ctx, bad)
	if err != nil || !errors.Is(resps.Error(), kerr.InvalidReplicaAssignment) {
		t.Fatalf("moving onto an unknown broker: %v, %v", err, resps.Error())
	}
}

// kafka-reassign-partitions.sh --throttle, as the configs it sets: the new
// replica copies no faster than follower.replication.throttled.rate on its
// broker, or leader.replication.throttled.rate on the leader's, while it is
// out of sync, and joins all the same.
func TestClusterReassignmentThrottled(t *testing.T) {
	for _, side := range []string{"follower", "leader"} {
		t.Run(side, func(t *testing.T) { reassignThrottled(t, side) })
	}
}

func reassignThrottled(t *testing.T, side string) {
	c := testutil.StartCluster(t, 4, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "throttled"); err != nil {
		t.Fatal(err)
	}
	st := partitionState(t, c, 0, "throttled", 0)
	spare := spareBroker(st, 4)
	// 5 MiB to copy at 1 MiB a second: after the first second's worth and
	// one fetch's overshoot (1 MiB), at least 3 s.
	const rate, size, record = 1 << 20, 5 << 20, 100 << 10
	cl := newClient(t, c.Seeds(), kgo.DefaultProduceTopic("throttled"), kgo.ProducerBatchMaxBytes(2*record))
	value := make([]byte, record)
	rand.Read(value) // incompressible
	for range size / record {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	set := func(v string) *string { return &v }
	throttled := spare // the follower side: the new replica's broker
	if side == "leader" {
		throttled = st.Leader
	}
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: side + ".replication.throttled.replicas",
		Value: set(fmt.Sprintf("0:%d", throttled))}}, "throttled"); err != nil {
		t.Fatal(err)
	}
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: side + ".replication.throttled.rate",
		Value: set(fmt.Sprint(rate))}}, throttled)
	if err != nil || resps[0].Err != nil {
		t.Fatalf("setting the rate: %v, %+v", err, resps)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if c.Brokers[throttled].Server().Metadata().NodeConfigs(throttled)[side+".replication.throttled.rate"] == "" {
			return fmt.Errorf("broker %d has no %s.replication.throttled.rate yet", throttled, side)
		}
		return nil
	})
	target := []int32{st.Replicas[0], st.Replicas[1], spare}
	if st.Leader == st.Replicas[2] {
		target = []int32{st.Replicas[2], st.Replicas[0], spare} // the leader stays, and sends
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("throttled", 0, target)
	start := time.Now()
	if resps, err := adm.AlterPartitionAssignments(ctx, req); err != nil || resps.Error() != nil {
		t.Fatalf("reassigning: %v, %v", err, resps.Error())
	}
	testutil.EventuallyEvery(t, 40*time.Second, 50*time.Millisecond, func() error {
		if now, _ := c.Brokers[0].Server().Metadata().Partition("throttled", 0); !slices.Equal(now.Replicas, target) {
			return fmt.Errorf("the throttled reassignment onto %v did not complete: %+v", target, now)
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("%d MiB copied at a throttle of %d MiB/s in %v", size>>20, rate>>20, took.Round(time.Millisecond))
	if took < 3*time.Second {
		t.Fatalf("%d MiB copied in %v: faster than the throttle allows", size>>20, took)
	}
	waitIdentical(t, c, "throttled", 0, target)
}

// spareBroker is a broker of the n that holds no replica of st.
func spareBroker(st cluster.Partition, n int32) int32 {
	for b := range n {
		if !slices.Contains(st.Replicas, b) {
			return b
		}
	}
	return -1
}
