package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/testutil"
)

// TestReadClusterFollowsBrokers: a client that stays open (the console's)
// sees a broker leave the cluster on its next read, not when the client's
// own metadata next refreshes.
func TestReadClusterFollowsBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	c := testutil.StartCluster(t, 3, 0, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if info, err := inspect.ReadCluster(ctx, adm); err != nil || len(info.Brokers) != 3 {
		t.Fatalf("ReadCluster: %+v %v, want 3 brokers", info, err)
	}

	c.Brokers[2].Stop(t) // controlled shutdown: fenced at once
	var info inspect.Cluster
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		info, err = inspect.ReadCluster(ctx, adm)
		if err == nil && len(info.Brokers) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ReadCluster 10 s after broker 2 stopped: %+v %v, want brokers 0 and 1", info, err)
		}
	}
	for _, b := range info.Brokers {
		if b.NodeID == 2 {
			t.Errorf("broker 2 still listed: %+v", info.Brokers)
		}
	}
}
