package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/share"
	"github.com/strandlog/strand/internal/testutil"
)

// consumeShared runs members franz-go share consumers of group on topic
// until want records are accepted (each value counted in accepted), or
// the deadline.
func consumeShared(t *testing.T, ctx context.Context, seeds []string, group, topic string, members, want int,
	mu *sync.Mutex, accepted map[string]int) {
	t.Helper()
	pollCtx, done := context.WithCancel(ctx)
	defer done()
	var wg sync.WaitGroup
	for range members {
		cl := newClient(t, seeds, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for pollCtx.Err() == nil {
				fs := cl.PollRecords(pollCtx, 100)
				fs.EachRecord(func(r *kgo.Record) {
					cl.MarkAcks(kgo.AckAccept, r)
					mu.Lock()
					accepted[string(r.Value)]++
					if len(accepted) >= want {
						done()
					}
					mu.Unlock()
				})
			}
			flush, stop := context.WithTimeout(context.Background(), 10*time.Second)
			defer stop()
			if err := cl.FlushAcks(flush); err != nil {
				t.Errorf("flushing acknowledgements: %v", err)
			}
		}()
	}
	wg.Wait()
}

// TestClusterShareGroup: a share group on three brokers. Each partition's
// leader keeps its share-partitions and writes their state to the broker
// leading the state's partition of __share_group_state, often another
// (WriteShareGroupState). Six members read a six-partition topic, each
// record accepted once; then a broker restarts, leadership moves, the new
// leaders read the state where it is kept, and the records produced after
// are read without any accepted record coming back.
func TestClusterShareGroup(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, nil)
	seeds := c.Seeds()
	admin := newClient(t, seeds)
	testutil.EnableShareGroups(t, admin)
	const topic, group = "jobs", "workers"
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 6, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	testutil.SetGroupConfig(t, admin, group, "share.auto.offset.reset", "earliest")
	testutil.AwaitGroupConfig(t, seeds, group, "share.auto.offset.reset", "earliest")
	prod := newClient(t, seeds, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("job-%04d", i))})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	accepted := map[string]int{}
	check := func(n int) {
		t.Helper()
		if ctx.Err() != nil {
			t.Fatalf("%d of %d records accepted in time", len(accepted), n)
		}
		for i := range n {
			v := fmt.Sprintf("job-%04d", i)
			if accepted[v] != 1 {
				t.Fatalf("%s accepted %d times", v, accepted[v])
			}
		}
	}
	produce(0, 600)
	consumeShared(t, ctx, seeds, group, topic, 6, 600, &mu, accepted)
	check(600)

	// The broker restarted is one leading a partition whose state another
	// broker keeps, so that its successor reads the state from there (any
	// broker, in the rare layout without one).
	victim := 1
	md, err := kadm.NewClient(admin).Metadata(ctx, topic, share.StateTopic)
	if err != nil {
		t.Fatal(err)
	}
	td, sd := md.Topics[topic], md.Topics[share.StateTopic]
	for p, pd := range td.Partitions {
		k := share.Key{Group: group, TopicID: [16]byte(td.ID), Partition: p}
		if keeper := sd.Partitions[share.StatePartition(k, int32(len(sd.Partitions)))]; keeper.Leader != pd.Leader {
			victim = int(pd.Leader)
			break
		}
	}
	c.Brokers[victim].Restart(t)
	// Everything is accepted: each partition's leader, reading the state
	// where it is kept, has nothing for a new member to acquire.
	for p := range int32(6) {
		var acquired []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
		testutil.Eventually(t, 30*time.Second, func() error {
			md, err := kadm.NewClient(admin).Metadata(ctx, topic)
			if err != nil {
				return err
			}
			leader := md.Topics[topic].Partitions[p].Leader
			req := kmsg.NewPtrShareFetchRequest()
			req.Version = 1
			req.GroupID, req.MemberID = kmsg.StringPtr(group), kmsg.StringPtr(fmt.Sprintf("checker-%d", p))
			req.MaxRecords, req.MaxBytes = 500, 1<<20
			rt := kmsg.NewShareFetchRequestTopic()
			rt.TopicID = [16]byte(md.Topics[topic].ID)
			rp := kmsg.NewShareFetchRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			kresp, err := admin.Broker(int(leader)).Request(ctx, req)
			if err != nil {
				return err
			}
			resp := kresp.(*kmsg.ShareFetchResponse)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				return err
			}
			for _, t := range resp.Topics {
				for _, rp := range t.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						return fmt.Errorf("partition %d on broker %d: %w", p, leader, err)
					}
					acquired = rp.AcquiredRecords
				}
			}
			return nil
		})
		if len(acquired) > 0 {
			t.Fatalf("after the restart partition %d acquired %+v, all accepted before", p, acquired)
		}
	}
	produce(600, 900)
	consumeShared(t, ctx, seeds, group, topic, 6, 900, &mu, accepted)
	check(900)
}
