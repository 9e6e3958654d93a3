package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// TestClusterDecommission: `strand cluster decommission 3` on four brokers
// moves every replica broker 3 holds (a topic of three replicas, and
// __consumer_offsets) to the other three and waits until it holds none;
// broker 3 is then killed and the cluster stays healthy, with every record
// and the group's commits. Asked of a broker whose partitions have nowhere
// left to go, it refuses and names one.
func TestClusterDecommission(t *testing.T) {
	t.Parallel()
	c := testutil.StartProcessCluster(t, 4, append(clusterArgs, "--broker-session-timeout", "3s")...)
	strand := strandCLI(t, c.Procs[0].Addr, "cluster")
	cl := client(t, c.Procs[0].Addr, kgo.DefaultProduceTopic("orders"), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, 8, 3, nil, "orders"); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	const n = 200
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// A group's commits, so that __consumer_offsets exists too.
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 7})
	if _, err := adm.CommitOffsets(ctx, "keepers", offsets); err != nil {
		t.Fatal(err)
	}

	r := strand("decommission", "3", "--timeout", "90s")
	wantCLI(t, r, true, "partition replicas off broker 3", "broker 3 holds no replica: it can be stopped")
	r = strand("info", "--format", "json")
	var info struct {
		Brokers []struct {
			NodeID     int32    `json:"node_id"`
			Partitions []string `json:"partitions"`
		} `json:"brokers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("cluster info: %v\n%v", err, r)
	}
	for _, b := range info.Brokers {
		if b.NodeID == 3 && len(b.Partitions) != 0 {
			t.Fatalf("broker 3 still holds %v", b.Partitions)
		}
	}

	c.Procs[3].Kill()
	testutil.Eventually(t, 30*time.Second, func() error {
		if r := strand("health"); r.err != nil {
			return fmt.Errorf("%v", r)
		}
		if r := strand("info"); !strings.Contains(r.stdout, "(1 down)") {
			return fmt.Errorf("broker 3 not down yet:\n%s", r.stdout)
		}
		return nil
	})
	ends, err := adm.ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != n {
		t.Errorf("%d records after broker 3 is gone, want %d", total, n)
	}
	committed, err := adm.FetchOffsets(ctx, "keepers")
	if o, ok := committed.Lookup("orders", 0); err != nil || !ok || o.At != 7 {
		t.Errorf("the group's commit after broker 3 is gone: %+v %v", o, err)
	}

	// With three brokers left, a partition of three replicas has nowhere to go.
	wantCLI(t, strand("decommission", "2"), false, "has a replica on every other live broker")
}
