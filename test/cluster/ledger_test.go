package cluster

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// TestClusterLedgerWrittenThroughLeader: a group's coordinator that leads
// no partition of the hand-off ledger still records its hand-offs, on the
// partitions' leader.
func TestClusterLedgerWrittenThroughLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a two-broker cluster")
	}
	c := testutil.StartCluster(t, 2, 0, func(_ int, cfg *config.Broker) {
		cfg.AdminListen = "127.0.0.1:0"
		cfg.GroupInitialRebalanceDelay = 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic, group, partitions, records = "orders", "billing", 2, 100
	prod := newClient(t, c.Seeds(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(prod)
	if _, err := adm.CreateTopic(ctx, partitions, 2, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i := range records {
		r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(strconv.Itoa(i))}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	coord := adm.FindGroupCoordinators(ctx, group)[group]
	if coord.Err != nil {
		t.Fatal(coord.Err)
	}
	admin := c.Brokers[coord.NodeID].Server().AdminAddr().String()
	handoffs := func(want int) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, func() error {
			var rep struct {
				Totals struct {
					Handoffs int `json:"handoffs"`
				} `json:"totals"`
			}
			if grouptest.AdminGet(t, admin, "/api/handoffs?group="+group, &rep); rep.Totals.Handoffs != want {
				return fmt.Errorf("%d hand-offs of %s in the ledger, want %d", rep.Totals.Handoffs, group, want)
			}
			return nil
		})
	}
	consume := func(client string) {
		t.Helper()
		cons := newClient(t, c.Seeds(), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(client),
			kgo.DisableAutoCommit()) // each reads every record
		defer cons.Close()
		for got := 0; got < records; {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s consumed %d of %d", client, got, records)
			}
			got += fs.NumRecords()
		}
	}
	consume("v1") // the ledger's topic is made with the first hand-offs
	handoffs(partitions)

	// Every partition of the ledger moves to the other broker, as the
	// coordinator, which writes the next hand-offs, sees them.
	other := 1 - coord.NodeID
	meta := c.Brokers[coord.NodeID].Server().Metadata()
	lt, ok := meta.Topic(ledger.Topic)
	if !ok {
		t.Fatalf("no %s after the first hand-offs", ledger.Topic)
	}
	var req kadm.AlterPartitionAssignmentsReq
	set := kadm.TopicsSet{}
	for p := range lt.Partitions {
		req.Assign(ledger.Topic, p, []int32{other, coord.NodeID})
		set.Add(ledger.Topic, p)
	}
	if resps, err := adm.AlterPartitionAssignments(ctx, req); err != nil || resps.Error() != nil {
		t.Fatalf("reordering %s's replicas: %v %v", ledger.Topic, err, resps.Error())
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set); err != nil {
			return err
		}
		for p := range lt.Partitions {
			if st, _ := meta.Partition(ledger.Topic, p); st.Leader != other {
				return fmt.Errorf("%s-%d led by %d, want %d", ledger.Topic, p, st.Leader, other)
			}
		}
		return nil
	})

	consume("v2") // hands every partition over from v1, gone
	handoffs(2 * partitions)
}
