package cluster

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// adminGroup is /api/groups/{group}'s answer.
type adminGroup struct {
	Group        string `json:"group"`
	Type         string `json:"type"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"`
	Generation   int32  `json:"generation"`
	Members      []struct {
		MemberID        string `json:"member_id"`
		ClientID        string `json:"client_id"`
		ClientHost      string `json:"client_host"`
		SoftwareName    string `json:"software_name"`
		SoftwareVersion string `json:"software_version"`
		Protocol        string `json:"protocol"`
		Assignment      []struct {
			Topic      string  `json:"topic"`
			Partitions []int32 `json:"partitions"`
		} `json:"assignment"`
	} `json:"members"`
	Partitions []adminPartition `json:"partitions"`
	Lag        int64            `json:"lag"`
}

type adminPartition struct {
	Topic      string  `json:"topic"`
	Partition  int32   `json:"partition"`
	Committed  int64   `json:"committed"`
	End        int64   `json:"end"`
	Lag        int64   `json:"lag"`
	LagSeconds float64 `json:"lag_seconds"`
	Owner      string  `json:"owner"`
}

type adminGroupSummary struct {
	Group      string `json:"group"`
	Type       string `json:"type"`
	State      string `json:"state"`
	Protocol   string `json:"protocol"`
	Generation int32  `json:"generation"`
	Members    int    `json:"members"`
	Lag        int64  `json:"lag"`
	Error      string `json:"error"`
}

// TestClusterAdminAPIAnswersForEveryGroup: every broker's admin API
// lists and describes every group of the cluster, a classic one and a
// consumer one, with the figures their coordinator gives (members with
// their client software, partitions with their commits, ends and lag); a
// classic group's generation, which the Kafka protocol does not carry, is
// -1 elsewhere. /metrics exports a group's figures on its coordinator
// only, so that scraping every broker counts each group once.
func TestClusterAdminAPIAnswersForEveryGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	c := testutil.StartCluster(t, 3, 0, func(_ int, cfg *config.Broker) {
		cfg.AdminListen = "127.0.0.1:0"
		cfg.GroupInitialRebalanceDelay = 0
	})
	admins := make([]string, len(c.Brokers))
	for i, b := range c.Brokers {
		admins[i] = b.Server().AdminAddr().String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, partitions, records = "orders", 3, 300
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
	groups := map[string]string{"billing-classic": "classic", "billing-consumer": "consumer"}
	for group, protocol := range groups {
		opts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(group + "-v1"), kgo.DisableAutoCommit()}
		if protocol == "consumer" {
			opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
		}
		cons := newClient(t, c.Seeds(), opts...)
		for got := 0; got < records; {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s consumed %d of %d", group, got, records)
			}
			got += fs.NumRecords()
		}
		// The member commits 40 of each partition's 100 records: lag 60.
		var commit []*kgo.Record
		for p := range int32(partitions) {
			commit = append(commit, &kgo.Record{Topic: topic, Partition: p, Offset: 39, LeaderEpoch: -1})
		}
		if err := cons.CommitRecords(ctx, commit...); err != nil {
			t.Fatal(err)
		}
	}

	for group, protocol := range groups {
		cs := adm.FindGroupCoordinators(ctx, group)
		coord := cs[group]
		if coord.Err != nil {
			t.Fatalf("the coordinator of %s: %v", group, coord.Err)
		}
		var want adminGroup
		testutil.Eventually(t, 20*time.Second, func() error {
			want = adminGroup{}
			if code := grouptest.AdminGet(t, admins[coord.NodeID], "/api/groups/"+group, &want); code != http.StatusOK {
				return fmt.Errorf("the coordinator %d answers %d for %s", coord.NodeID, code, group)
			}
			if want.State != "Stable" || len(want.Members) != 1 || want.Lag != 60*partitions || want.Members[0].SoftwareName != "kgo" {
				return fmt.Errorf("the coordinator's %s: %+v", group, want)
			}
			return nil
		})
		// Another broker gives the members' client software as the
		// hand-off ledger recorded it: once the member's first fetch of
		// each partition has reached the coordinator.
		testutil.Eventually(t, 20*time.Second, func() error {
			var rep struct {
				Totals struct {
					Handoffs int `json:"handoffs"`
				} `json:"totals"`
			}
			if grouptest.AdminGet(t, admins[coord.NodeID], "/api/handoffs?group="+group, &rep); rep.Totals.Handoffs != partitions {
				return fmt.Errorf("%d hand-offs of %s in the ledger, want %d", rep.Totals.Handoffs, group, partitions)
			}
			return nil
		})
		for i, addr := range admins {
			if int32(i) == coord.NodeID {
				continue
			}
			var got adminGroup
			if code := grouptest.AdminGet(t, addr, "/api/groups/"+group, &got); code != http.StatusOK {
				t.Fatalf("broker %d answers %d for %s, coordinated by %d", i, code, group, coord.NodeID)
			}
			// Lag in seconds grows while the test runs; the rest is equal.
			for j := range got.Partitions {
				g, w := got.Partitions[j].LagSeconds, want.Partitions[min(j, len(want.Partitions)-1)].LagSeconds
				if g < 0 || math.Abs(g-w) > 10 {
					t.Errorf("broker %d: %s's partition %d lags %.3fs, its coordinator says %.3fs", i, group, j, g, w)
				}
				got.Partitions[j].LagSeconds = 0
			}
			expect := want
			expect.Partitions = append([]adminPartition(nil), want.Partitions...)
			for j := range expect.Partitions {
				expect.Partitions[j].LagSeconds = 0
			}
			if protocol == "classic" {
				expect.Generation = -1
			}
			if !reflect.DeepEqual(got, expect) {
				t.Errorf("broker %d describes %s as\n%+v\nits coordinator %d as\n%+v", i, group, got, coord.NodeID, want)
			}
		}
		for i, addr := range admins {
			var list struct {
				Groups []adminGroupSummary `json:"groups"`
			}
			if code := grouptest.AdminGet(t, addr, "/api/groups", &list); code != http.StatusOK {
				t.Fatalf("broker %d's /api/groups: %d", i, code)
			}
			gen := want.Generation
			if protocol == "classic" && int32(i) != coord.NodeID {
				gen = -1
			}
			wantSummary := adminGroupSummary{Group: group, Type: want.Type, State: "Stable", Protocol: want.Protocol,
				Generation: gen, Members: 1, Lag: 60 * partitions}
			found := false
			for _, g := range list.Groups {
				if g.Group == group {
					found = true
					if g != wantSummary {
						t.Errorf("broker %d lists %+v, want %+v", i, g, wantSummary)
					}
				}
			}
			if !found {
				t.Errorf("broker %d does not list %s (coordinated by %d): %+v", i, group, coord.NodeID, list.Groups)
			}

			fams := grouptest.Scrape(t, addr)
			_, exported := grouptest.Sample(fams, "strand_group_lag", map[string]string{"group": group, "partition": "0"})
			if exported != (int32(i) == coord.NodeID) {
				t.Errorf("broker %d exports strand_group_lag of %s: %v; its coordinator is %d", i, group, exported, coord.NodeID)
			}
		}
	}
}
