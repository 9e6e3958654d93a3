package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
)

// TestClosestReplicaJava (KIP-392): three brokers in three racks with
// Kafka's rack-aware replica selector. The Java client's consumer with
// client.rack set to a follower's rack reads every record, and the bytes
// sent to consumers (strand_fetch_bytes_total) all come from that
// follower: the leader only points it there.
func TestClosestReplicaJava(t *testing.T) {
	t.Parallel()
	javatest.Helper(t)
	c := testutil.StartProcessClusterEach(t, clusterBrokers, func(node int) []string {
		return []string{"--rack", fmt.Sprintf("rack-%d", node)}
	}, append(clusterArgs, "--replica-selector", config.RackAwareSelector)...)
	seed := c.Procs[0].Addr
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("near"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, nil, "near"); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	var leader int32
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, p := range c.Procs {
			l, err := leadersAt(p.Addr, "near")
			if err != nil || l[0] < 0 {
				return fmt.Errorf("%s: leaders %v %v", p.Addr, l, err)
			}
			leader = l[0]
		}
		return nil
	})
	follower := (leader + 1) % clusterBrokers
	const n = 300
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	m := javatest.GroupMember(t, seed, "near", "near-readers", "java-near", 10*time.Second,
		fmt.Sprintf("client.rack=rack-%d", follower))
	testutil.Eventually(t, time.Minute, func() error {
		if err := m.Crashed(); err != nil {
			return err
		}
		if got := m.Log().Count(grouptest.Processed); got < n {
			return fmt.Errorf("%d of %d records processed", got, n)
		}
		return nil
	})
	sent := map[int32]float64{}
	for i, p := range c.Procs {
		v, _ := grouptest.Sample(grouptest.Scrape(t, p.Admin), "strand_fetch_bytes_total", map[string]string{"topic": "near"})
		sent[int32(i)] = v
	}
	if sent[follower] == 0 || sent[leader] != 0 {
		t.Errorf("record bytes sent to consumers by broker %v; the follower in the consumer's rack is %d, the leader %d", sent, follower, leader)
	}
}
