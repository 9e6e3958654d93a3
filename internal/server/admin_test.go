package server_test

import (
	"context"
	"fmt"
	"net/http"
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

type apiGroup struct {
	Group   string `json:"group"`
	Type    string `json:"type"`
	State   string `json:"state"`
	Members []struct {
		MemberID        string `json:"member_id"`
		ClientID        string `json:"client_id"`
		SoftwareName    string `json:"software_name"`
		SoftwareVersion string `json:"software_version"`
		Protocol        string `json:"protocol"`
		Assignment      []struct {
			Topic      string  `json:"topic"`
			Partitions []int32 `json:"partitions"`
		} `json:"assignment"`
	} `json:"members"`
	Partitions []struct {
		Topic      string  `json:"topic"`
		Partition  int32   `json:"partition"`
		Committed  int64   `json:"committed"`
		End        int64   `json:"end"`
		Lag        int64   `json:"lag"`
		LagSeconds float64 `json:"lag_seconds"`
		Owner      string  `json:"owner"`
	} `json:"partitions"`
	Lag int64 `json:"lag"`
}

// TestAdminAPI: the admin listener's groups (members with their client
// software and partitions, lag in offsets and seconds), ledger and
// metrics agree with what Kafka's protocol (kadm, as `strand group lag`
// reads it) and the ledger's reader say, for a live group and once it is
// empty; /metrics parses with Prometheus's own parser.
func TestAdminAPI(t *testing.T) {
	// Slow: a live group of each protocol is waited for, then waited for to empty.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	for _, protocol := range []string{"classic", "consumer"} {
		t.Run(protocol, func(t *testing.T) { testAdminAPI(t, protocol) })
	}
}

func testAdminAPI(t *testing.T, protocol string) {
	b := testutil.StartBroker(t, func(c *config.Broker) {
		c.AdminListen = "127.0.0.1:0"
		c.GroupInitialRebalanceDelay = 0
	})
	admin := b.Server().AdminAddr().String()
	const topic, group, partitions, records = "orders", "billing", 3, 300
	createTopic(t, b.Addr, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(n int) {
		for i := range n {
			r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(strconv.Itoa(i))}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(records)
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID("billing-v1"),
		kgo.DisableAutoCommit()}
	if protocol == "consumer" {
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	}
	cons, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	for got < records {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, records)
		}
		got += fs.NumRecords()
	}
	// The member commits 40 of each partition's 100 records.
	var commit []*kgo.Record
	for p := range int32(partitions) {
		commit = append(commit, &kgo.Record{Topic: topic, Partition: p, Offset: 39, LeaderEpoch: -1})
	}
	if err := cons.CommitRecords(ctx, commit...); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(prod)
	time.Sleep(1100 * time.Millisecond) // the oldest uncommitted record is over a second old

	var live apiGroup
	if code := grouptest.AdminGet(t, admin, "/api/groups/"+group, &live); code != http.StatusOK {
		t.Fatalf("GET /api/groups/%s: %d", group, code)
	}
	if len(live.Members) != 1 || live.Members[0].ClientID != "billing-v1" || live.Members[0].SoftwareName != "kgo" ||
		live.Members[0].SoftwareVersion == "" || len(live.Members[0].Assignment) != 1 ||
		len(live.Members[0].Assignment[0].Partitions) != partitions {
		t.Fatalf("members %+v", live.Members)
	}
	checkLag(t, ctx, adm, group, live, 60, live.Members[0].MemberID)

	// Once empty, the group's lag is still there: in the API and in /metrics.
	cons.Close()
	deadline := time.Now().Add(20 * time.Second)
	var empty apiGroup
	for grouptest.AdminGet(t, admin, "/api/groups/"+group, &empty); empty.State != "Empty"; grouptest.AdminGet(t, admin, "/api/groups/"+group, &empty) {
		if time.Now().After(deadline) {
			t.Fatalf("group state %s after its member left", empty.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	produce(30) // 10 more per partition: lag 70
	grouptest.AdminGet(t, admin, "/api/groups/"+group, &empty)
	checkLag(t, ctx, adm, group, empty, 70, "")

	fams := grouptest.Scrape(t, admin)
	for p := range int32(partitions) {
		labels := map[string]string{"group": group, "topic": topic, "partition": fmt.Sprint(p)}
		if v, ok := grouptest.Sample(fams, "strand_group_lag", labels); !ok || v != 70 {
			t.Errorf("strand_group_lag %v: %v (present %v), want 70", labels, v, ok)
		}
		if v, ok := grouptest.Sample(fams, "strand_group_lag_seconds", labels); !ok || v < 1 || v > 60 {
			t.Errorf("strand_group_lag_seconds %v: %v (present %v), want over a second", labels, v, ok)
		}
	}
	if v, ok := grouptest.Sample(fams, "strand_group_members", map[string]string{"group": group, "state": "Empty"}); !ok || v != 0 {
		t.Errorf("strand_group_members of the empty group: %v (present %v)", v, ok)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"strand_produce_bytes_total", map[string]string{"topic": topic}, 330},
		{"strand_produce_records_total", map[string]string{"topic": topic}, records},
		{"strand_fetch_bytes_total", map[string]string{"topic": topic}, 300},
		{"strand_fetch_records_total", map[string]string{"topic": topic}, records},
		{"strand_request_duration_seconds", map[string]string{"api": "Produce"}, 320}, // the last answers may be counted after the client has them
		{"strand_request_duration_seconds", map[string]string{"api": "Fetch"}, 1},
		{"strand_group_rebalances_total", map[string]string{"group": group}, 1},
		{"strand_group_handoffs_total", map[string]string{"group": group}, partitions},
	} {
		if v, ok := grouptest.Sample(fams, c.name, c.labels); !ok || v < c.min {
			t.Errorf("%s %v: %v (present %v), want at least %v", c.name, c.labels, v, ok, c.min)
		}
	}

	// The ledger as the API serves it is the ledger as migrate report reads it.
	es, err := grouptest.ReadLedger(ctx, b.Addr, group)
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.NewReport(group, es)
	var rep ledger.Report
	if code := grouptest.AdminGet(t, admin, "/api/handoffs?group="+group, &rep); code != http.StatusOK {
		t.Fatalf("GET /api/handoffs: %d", code)
	}
	if rep.Totals != want.Totals || len(rep.Handoffs) != partitions || rep.Handoffs[0].To.SoftwareName != "kgo" {
		t.Fatalf("handoffs: totals %+v, want %+v; %d hand-offs", rep.Totals, want.Totals, len(rep.Handoffs))
	}
	if grouptest.AdminGet(t, admin, "/api/handoffs?group="+group+"&risk=skipped", &rep); len(rep.Handoffs) != 0 {
		t.Errorf("%d hand-offs with skipped records", len(rep.Handoffs))
	}
	var bad map[string]string
	if code := grouptest.AdminGet(t, admin, "/api/handoffs?risk=nonsense", &bad); code != http.StatusBadRequest || bad["error"] == "" {
		t.Errorf("a bad risk filter: %d %v", code, bad)
	}
	if code := grouptest.AdminGet(t, admin, "/api/groups/nobody", &bad); code != http.StatusNotFound {
		t.Errorf("an unknown group: %d", code)
	}
	var health struct {
		Status     string `json:"status"`
		Partitions int    `json:"partitions"`
	}
	if grouptest.AdminGet(t, admin, "/api/health", &health); health.Status != "ok" || health.Partitions < partitions {
		t.Errorf("health %+v", health)
	}
	var list struct {
		Groups []struct {
			Group string `json:"group"`
			Lag   int64  `json:"lag"`
		} `json:"groups"`
	}
	if grouptest.AdminGet(t, admin, "/api/groups", &list); len(list.Groups) != 1 || list.Groups[0].Group != group ||
		list.Groups[0].Lag != 70*partitions {
		t.Errorf("groups %+v", list.Groups)
	}

	// A deleted topic's byte counters go with it.
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	fams = grouptest.Scrape(t, admin)
	for _, name := range []string{"strand_produce_bytes_total", "strand_fetch_bytes_total", "strand_produce_records_total",
		"strand_fetch_records_total"} {
		if v, ok := grouptest.Sample(fams, name, map[string]string{"topic": topic}); ok {
			t.Errorf("%s of the deleted topic %s: %v", name, topic, v)
		}
	}
}

// checkLag compares the API's partitions with kadm's lag of the group
// (the figures of `strand group lag`), and with want per partition when
// it is not -1.
func checkLag(t *testing.T, ctx context.Context, adm *kadm.Client, group string, g apiGroup, want int64, owner string) {
	t.Helper()
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	dl := lags[group]
	if dl.Error() != nil {
		t.Fatal(dl.Error())
	}
	if len(g.Partitions) == 0 {
		t.Fatal("no partitions")
	}
	var total int64
	for _, p := range g.Partitions {
		l, ok := dl.Lag.Lookup(p.Topic, p.Partition)
		if !ok || l.Lag != p.Lag || l.Commit.At != p.Committed || l.End.Offset != p.End {
			t.Errorf("%s-%d: API committed %d end %d lag %d; kadm %+v", p.Topic, p.Partition, p.Committed, p.End, p.Lag, l)
		}
		if want >= 0 && (p.Lag != want || p.LagSeconds < 1) {
			t.Errorf("%s-%d: lag %d (%.3fs), want %d over at least a second", p.Topic, p.Partition, p.Lag, p.LagSeconds, want)
		}
		if p.Owner != owner {
			t.Errorf("%s-%d: owner %q, want %q", p.Topic, p.Partition, p.Owner, owner)
		}
		total += p.Lag
	}
	if want >= 0 && g.Lag != total {
		t.Errorf("group lag %d, partitions sum to %d", g.Lag, total)
	}
}
