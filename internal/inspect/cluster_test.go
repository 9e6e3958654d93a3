package inspect_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/testutil"
)

// TestReadClusterNamesTheQuorumLeader: whichever broker is asked, and
// however often, the controller is the metadata quorum's leader (Metadata
// names the broker asked); a broker that stops is listed as down with the
// partitions it holds, read afresh by a client that stays open (the
// console's), in the cluster's info and in its health.
func TestReadClusterNamesTheQuorumLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	c := testutil.StartCluster(t, 4, 3, nil) // broker 3 does not vote
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clients := make([]*kgo.Client, len(c.Brokers))
	for i, seed := range c.Seeds() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		clients[i] = cl
	}
	if _, err := kadm.NewClient(clients[0]).CreateTopic(ctx, 6, 2, nil, "held"); err != nil {
		t.Fatal(err)
	}
	// sameController reads the cluster and its health through every
	// running broker's client, three times, and wants the quorum's leader
	// each time, as broker `from` knows it then. The rounds are tried
	// again while the quorum elects (a broker knows no leader, or another
	// since the read began): under load a follower's election timer can
	// fire, and a broker that names itself or -1 for good still fails.
	sameController := func(from int, running ...int) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, func() error {
			leader := c.Brokers[from].Server().Metadata().Controller()
			for range 3 {
				for _, i := range running {
					info, err := inspect.ReadCluster(ctx, clients[i])
					if err != nil {
						return err
					}
					h, err := inspect.ReadHealth(ctx, clients[i])
					if err != nil {
						return err
					}
					if info.Controller != leader || h.Controller != leader {
						return fmt.Errorf("through broker %d: cluster info names controller %d, health %d; the quorum's leader is %d",
							i, info.Controller, h.Controller, leader)
					}
				}
			}
			if now := c.Brokers[from].Server().Metadata().Controller(); now != leader {
				return fmt.Errorf("the quorum's leader moved from %d to %d during the reads", leader, now)
			}
			return nil
		})
	}
	leader := c.Brokers[0].Server().Metadata().Controller()
	sameController(0, 0, 1, 2, 3)

	// Stop a broker that is not the controller, so that the controller
	// stays as it was; then the controller, so that another voter leads.
	for _, stop := range []int{3, int(leader)} {
		var running []int
		for i, b := range c.Brokers {
			if i != stop && b.Server() != nil {
				running = append(running, i)
			}
		}
		// Each topic's partitions held on the broker, as the survivors'
		// metadata places them.
		var held []string
		for _, topic := range []string{"__consumer_offsets", "held"} {
			tp, ok := c.Brokers[running[0]].Server().Metadata().Topic(topic)
			if !ok {
				continue
			}
			for p, st := range tp.States {
				if slices.Contains(st.Replicas, int32(stop)) {
					held = append(held, fmt.Sprintf("%s-%d", topic, p))
				}
			}
		}
		slices.Sort(held)
		c.Brokers[stop].Stop(t) // controlled shutdown: fenced at once
		for _, i := range running {
			testutil.Eventually(t, 20*time.Second, func() error {
				info, err := inspect.ReadCluster(ctx, clients[i])
				if err != nil {
					return err
				}
				for _, b := range info.Brokers {
					if b.NodeID == int32(stop) && b.Down() {
						return nil
					}
				}
				return fmt.Errorf("through broker %d, broker %d is not listed as down: %+v", i, stop, info.Brokers)
			})
		}
		testutil.Eventually(t, 20*time.Second, func() error {
			if l := c.Brokers[running[0]].Server().Metadata().Controller(); l < 0 || l == int32(stop) {
				return fmt.Errorf("the quorum's leader is %d", l)
			}
			return nil
		})
		sameController(running[0], running...)

		info, err := inspect.ReadCluster(ctx, clients[running[0]])
		if err != nil {
			t.Fatal(err)
		}
		h, err := inspect.ReadHealth(ctx, clients[running[0]])
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(info.Brokers, func(b inspect.Broker) bool { return b.NodeID == int32(stop) })
		if i < 0 || !info.Brokers[i].Down() || !slices.Equal(info.Brokers[i].Partitions, held) || info.Brokers[i].Leads != 0 ||
			info.Brokers[i].Host == "" {
			t.Fatalf("broker %d in cluster info: %+v, want down holding %v", stop, info.Brokers, held)
		}
		j := slices.IndexFunc(h.DownBrokers, func(b inspect.Broker) bool { return b.NodeID == int32(stop) })
		if j < 0 || !slices.Equal(h.DownBrokers[j].Partitions, held) || h.Brokers != len(running) {
			t.Fatalf("health: %d up, down %+v; want %d up and broker %d down holding %v", h.Brokers, h.DownBrokers,
				len(running), stop, held)
		}
	}
}
