package compat

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// Three brokers, each a real process, for the cluster_* tests: topics whose
// partitions are led by every broker, groups whose coordinator is a chosen
// broker, and the check that what a client read is exactly what was
// acknowledged.

const (
	clusterBrokers    = 3
	clusterPartitions = 6
)

// clusterArgs make groups form quickly, as groupBrokerArgs do.
var clusterArgs = []string{"--group-initial-rebalance-delay", "200ms"}

type cluster struct {
	*testutil.ProcessCluster
}

// startCluster starts three brokers and shows their output when the test
// fails.
func startCluster(t *testing.T, extra ...string) *cluster {
	t.Helper()
	c := testutil.StartProcessCluster(t, clusterBrokers, append(slices.Clone(clusterArgs), extra...)...)
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range c.Procs {
				t.Logf("broker %d (%s) output (last 6 KiB):\n%s", i, p.Addr, tail(p.Output.String(), 6<<10))
			}
		}
	})
	return &cluster{c}
}

// seed is broker i's client address, the only one a client is given.
func (c *cluster) seed(i int32) string { return c.Procs[i].Addr }

// others are the brokers but skip.
func (c *cluster) others(skip int32) []int32 {
	var out []int32
	for i := range int32(len(c.Procs)) {
		if i != skip {
			out = append(out, i)
		}
	}
	return out
}

// leadersAt is topic's partition leaders (-1: none) by broker addr's own
// metadata.
func leadersAt(addr, topic string) (map[int32]int32, error) {
	md, err := testutil.BrokerMetadata(addr)
	if err != nil {
		return nil, err
	}
	for _, tp := range md.Topics {
		if tp.Topic == nil || *tp.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(tp.ErrorCode); err != nil {
			return nil, err
		}
		out := map[int32]int32{}
		for _, p := range tp.Partitions {
			out[p.Partition] = p.Leader
			if p.ErrorCode != 0 {
				out[p.Partition] = -1
			}
		}
		return out, nil
	}
	return nil, kerr.UnknownTopicOrPartition
}

// waitLeaders waits until the metadata of each broker of ask lists topic
// with the same partitions and leaders, for which ok holds, and returns
// them.
func (c *cluster) waitLeaders(t *testing.T, topic string, ask []int32, timeout time.Duration, ok func(map[int32]int32) bool) map[int32]int32 {
	t.Helper()
	var first map[int32]int32
	testutil.EventuallyEvery(t, timeout, 50*time.Millisecond, func() error {
		first = nil
		for _, b := range ask {
			l, err := leadersAt(c.seed(b), topic)
			switch {
			case err != nil:
				return fmt.Errorf("%s: broker %d: %w", topic, b, err)
			case first == nil:
				first = l
			case !maps.Equal(first, l):
				return fmt.Errorf("%s: brokers %d and %d list leaders %v and %v", topic, ask[0], b, first, l)
			}
		}
		if !ok(first) {
			return fmt.Errorf("%s: leaders %v, not as wanted", topic, first)
		}
		return nil
	})
	return first
}

// allLed holds when n partitions are listed, each with a leader.
func allLed(n int) func(map[int32]int32) bool {
	return func(l map[int32]int32) bool {
		if len(l) != n {
			return false
		}
		for _, leader := range l {
			if leader < 0 {
				return false
			}
		}
		return true
	}
}

// spreadTopic creates topic (clusterPartitions partitions, one replica)
// through broker via alone, waits until every broker lists the same
// leaders, and checks that each broker leads some partition. It returns
// the leaders by partition.
func (c *cluster) spreadTopic(t *testing.T, via int32, topic string) map[int32]int32 {
	t.Helper()
	createTopic(t, c.seed(via), topic, clusterPartitions, nil)
	leaders := c.waitLeaders(t, topic, c.others(-1), 20*time.Second, allLed(clusterPartitions))
	if by := brokersOf(leaders); len(by) != clusterBrokers {
		t.Fatalf("%s: partitions led by brokers %v only, want all %d: %v", topic, by, clusterBrokers, leaders)
	}
	return leaders
}

// brokersOf is the distinct leaders, sorted.
func brokersOf(leaders map[int32]int32) []int32 {
	var out []int32
	for _, l := range leaders {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// findCoordinatorAt asks the broker at addr itself which broker
// coordinates group.
func findCoordinatorAt(ctx context.Context, addr, group string) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
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

// groupCoordinatedBy finds a group id (prefix-0, prefix-1, ...) whose
// coordinator satisfies want: the leader of its __consumer_offsets
// partition (model.CoordinatorPartition) by the metadata, which every
// broker's FindCoordinator must name too. It returns the group and its
// coordinator.
func (c *cluster) groupCoordinatedBy(t *testing.T, prefix string, want func(node int32) bool) (string, int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The first FindCoordinator creates __consumer_offsets.
	for {
		_, err := findCoordinatorAt(ctx, c.seed(0), prefix+"-0")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("FindCoordinator %s-0: %v", prefix, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	offsets := c.waitLeaders(t, "__consumer_offsets", c.others(-1), 20*time.Second, func(l map[int32]int32) bool {
		return len(l) > 0 && allLed(len(l))(l)
	})
	group, coord := "", int32(-1)
	for i := 0; i < 1000 && group == ""; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if l := offsets[model.CoordinatorPartition(id, int32(len(offsets)))]; want(l) {
			group, coord = id, l
		}
	}
	if group == "" {
		t.Fatalf("no group %s-N has a coordinator as wanted (__consumer_offsets leaders %v)", prefix, offsets)
	}
	for _, b := range c.others(-1) {
		for {
			node, err := findCoordinatorAt(ctx, c.seed(b), group)
			if err == nil {
				if node != coord {
					t.Fatalf("broker %d names broker %d the coordinator of %s; __consumer_offsets/%d is led by %d",
						b, node, group, model.CoordinatorPartition(group, int32(len(offsets))), coord)
				}
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("FindCoordinator %s through broker %d: %v", group, b, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return group, coord
}

// checkEveryLeader checks acknowledged records went to partitions of every
// broker.
func checkEveryLeader(t *testing.T, acked []rec, leaders map[int32]int32) {
	t.Helper()
	var on []int32
	for _, r := range acked {
		if l := leaders[r.P]; !slices.Contains(on, l) {
			on = append(on, l)
		}
	}
	if len(on) != clusterBrokers {
		slices.Sort(on)
		t.Errorf("records went to partitions led by brokers %v only (leaders %v): not every leader is read", on, leaders)
	}
}

// checkReadBack checks a consumer read exactly the acknowledged records:
// per partition, got (in the order the consumer had them) is the acked
// records of that partition by offset, each once, with its key and value.
func checkReadBack(t *testing.T, who string, acked, got []rec) {
	t.Helper()
	want := map[int32][]rec{}
	for _, r := range acked {
		want[r.P] = append(want[r.P], r)
	}
	read := map[int32][]rec{}
	for _, r := range got {
		read[r.P] = append(read[r.P], r)
	}
	bad := 0
	parts := slices.Collect(maps.Keys(want))
	for p := range read {
		if want[p] == nil {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	for _, p := range parts {
		w := slices.Clone(want[p])
		sortRecs(w)
		g := read[p]
		for i := range max(len(w), len(g)) {
			var msg string
			switch {
			case i >= len(g):
				msg = fmt.Sprintf("partition %d: read %d records, acknowledged %d; first unread %+v", p, len(g), len(w), w[i])
			case i >= len(w):
				msg = fmt.Sprintf("partition %d: record %d read is %+v, beyond the %d acknowledged", p, i, g[i], len(w))
			case g[i] != w[i]:
				msg = fmt.Sprintf("partition %d: record %d read is %+v, want %+v", p, i, g[i], w[i])
			}
			if msg != "" {
				t.Errorf("%s: %s", who, msg)
				if bad++; bad >= 5 {
					t.Fatalf("%s: and more", who)
				}
				break
			}
		}
	}
}

// processedRecs is what a member's log shows processed, in order.
func processedRecs(l *grouptest.Log) []rec {
	var out []rec
	for _, e := range l.Events {
		if e.Kind == grouptest.Processed {
			out = append(out, rec{P: e.Partition, O: e.Offset, K: e.Key, V: e.Value})
		}
	}
	return out
}

// producedOf is acked in grouptest's form.
func producedOf(acked []rec) grouptest.Produced {
	p := grouptest.Produced{}
	for _, r := range acked {
		if p[r.P] == nil {
			p[r.P] = map[int64]grouptest.Record{}
		}
		p[r.P][r.O] = grouptest.Record{Key: r.K, Value: r.V}
	}
	return p
}

// committedOffsets is a group's committed offsets of topic through the
// broker at addr alone (kadm finds the coordinator).
func committedOffsets(ctx context.Context, addr, group, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(3*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}
