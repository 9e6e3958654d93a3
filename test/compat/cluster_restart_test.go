package compat

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/testutil"
)

// TestClusterRestartedBrokerCurrentLeadership: a broker killed (SIGKILL)
// is fenced, and its partitions go to no leader at a new leader epoch. Once
// restarted, it must not act on the leadership it had when it died before
// it has caught up with the quorum (a KRaft broker opens its client
// listener only once it has caught up and is unfenced): its Metadata must
// never list it the leader of one of those partitions at an epoch older
// than the fenced one, and franz-go, given that broker alone, must not have
// a record acknowledged there at such an epoch. With one replica nothing
// is lost, but with replicas such a write would go to a deposed leader.
func TestClusterRestartedBrokerCurrentLeadership(t *testing.T) {
	c := startCluster(t, "--broker-session-timeout", "3s")
	const (
		topic  = "restarted-leadership"
		victim = int32(2)
	)
	leaders := c.spreadTopic(t, 0, topic)
	var parts []int32
	for p, l := range leaders {
		if l == victim {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	before := partitionsAt(t, c.seed(0), topic)
	c.Procs[victim].Kill()
	c.waitLeaders(t, topic, c.others(victim), 20*time.Second, func(l map[int32]int32) bool {
		for _, p := range parts {
			if l[p] != -1 {
				return false
			}
		}
		return true
	})
	fenced := partitionsAt(t, c.seed(0), topic)
	for _, p := range parts {
		if fenced[p].LeaderEpoch <= before[p].LeaderEpoch {
			t.Fatalf("partition %d: leader epoch %d after broker %d was fenced, %d before: the fencing did not bump it",
				p, fenced[p].LeaderEpoch, victim, before[p].LeaderEpoch)
		}
	}
	t.Logf("broker %d's partitions %v: leader epochs %d before the kill, %d (no leader) once it was fenced", victim, parts,
		before[parts[0]].LeaderEpoch, fenced[parts[0]].LeaderEpoch)

	c.Procs[victim].Restart(t)
	ready := time.Now()
	var stale []string
	wrote := false
	current := false
	for range 100 {
		md, err := testutil.BrokerMetadata(c.seed(victim))
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		current = true
		for _, tp := range md.Topics {
			if tp.Topic == nil || *tp.Topic != topic {
				continue
			}
			for _, pp := range tp.Partitions {
				if !slices.Contains(parts, pp.Partition) {
					continue
				}
				switch {
				case pp.ErrorCode == 0 && pp.Leader == victim && pp.LeaderEpoch < fenced[pp.Partition].LeaderEpoch:
					stale = append(stale, fmt.Sprintf("%v after the restart: partition %d led by %d at epoch %d",
						time.Since(ready).Round(time.Millisecond), pp.Partition, pp.Leader, pp.LeaderEpoch))
					current = false
					if !wrote {
						wrote = true
						if o, err := produceOne(c.seed(victim), topic, pp.Partition); err == nil {
							t.Errorf("franz-go, given broker %d alone, had a record acknowledged at %d/%d while the cluster "+
								"had that partition at epoch %d without a leader", victim, pp.Partition, o,
								fenced[pp.Partition].LeaderEpoch)
						}
					}
				case pp.ErrorCode != 0 || pp.LeaderEpoch <= fenced[pp.Partition].LeaderEpoch:
					current = false
				}
			}
		}
		if current {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(stale) > 0 {
		t.Errorf("the restarted broker listed itself leader at the epoch it had before it died %d times, first: %s; last: %s",
			len(stale), stale[0], stale[len(stale)-1])
	}
	if !current {
		t.Errorf("broker %d did not lead its partitions at a new epoch within 2 s of its restart", victim)
	}
}

// partitionsAt is topic's partitions by broker addr's own metadata.
func partitionsAt(t *testing.T, addr, topic string) map[int32]kmsg.MetadataResponseTopicPartition {
	t.Helper()
	md, err := testutil.BrokerMetadata(addr)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]kmsg.MetadataResponseTopicPartition{}
	for _, tp := range md.Topics {
		if tp.Topic != nil && *tp.Topic == topic {
			for _, p := range tp.Partitions {
				out[p.Partition] = p
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("broker %s does not list %s", addr, topic)
	}
	return out
}

// produceOne has franz-go, given addr alone, write one record to
// partition p (acks=all), and returns its offset.
func produceOne(addr, topic string, p int32) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(time.Second))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r := &kgo.Record{Partition: p, Value: []byte("after the restart")}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return -1, err
	}
	return r.Offset, nil
}
