package testutil

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/config"
)

// Cluster is N in-process brokers sharing a metadata quorum: every broker
// is a voter (Kafka's combined mode) unless the cluster was started with
// fewer voters.
type Cluster struct {
	Brokers []*Broker
}

// StartCluster starts n brokers (node ids 0..n-1) on free loopback ports,
// the first voters of them voting in the metadata quorum (all when voters
// is 0), and waits until every broker is registered and unfenced. edit
// applies settings to each broker's config first.
func StartCluster(t testing.TB, n, voters int, edit func(node int, cfg *config.Broker)) *Cluster {
	t.Helper()
	if voters <= 0 || voters > n {
		voters = n
	}
	controllers := make([]string, n)
	var quorum []string
	for i := range n {
		controllers[i] = FreePort(t)
		if i < voters {
			quorum = append(quorum, fmt.Sprintf("%d@%s", i, controllers[i]))
		}
	}
	c := &Cluster{}
	for i := range n {
		cfg := config.Defaults()
		cfg.DataDir = t.TempDir()
		cfg.Listen = FreePort(t) // fixed, so a restart keeps it
		cfg.AdminListen = ""
		cfg.NodeID = int32(i)
		cfg.QuorumVoters = strings.Join(quorum, ",")
		cfg.ControllerListen = controllers[i]
		cfg.BrokerSessionTimeout = 3 * time.Second
		if edit != nil {
			edit(i, &cfg)
		}
		b := &Broker{DataDir: cfg.DataDir, Config: cfg}
		b.start(t)
		t.Cleanup(func() { b.Stop(t) })
		c.Brokers = append(c.Brokers, b)
	}
	c.WaitLive(t, n, 30*time.Second)
	return c
}

// Seeds lists every broker's address, for a client's seed brokers.
func (c *Cluster) Seeds() []string {
	var out []string
	for _, b := range c.Brokers {
		out = append(out, b.Addr)
	}
	return out
}

// WaitLive waits until every running broker sees want brokers registered
// and unfenced.
func (c *Cluster) WaitLive(t testing.TB, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok := true
		for _, b := range c.Brokers {
			if b.srv == nil {
				continue
			}
			if b.srv.Metadata().LiveBrokers() != want {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var states []string
			for _, b := range c.Brokers {
				if b.srv != nil {
					states = append(states, fmt.Sprintf("node %d: %+v", b.Config.NodeID, b.srv.Metadata().Brokers()))
				}
			}
			t.Fatalf("not %d live brokers after %v:\n%s", want, timeout, strings.Join(states, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
