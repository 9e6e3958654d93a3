package compat

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// TestGroupCLI drives `strand group` against the real binary: a group
// reads part of a topic and stops; list, describe and lag show it with its
// lag; copy-offsets clones its offsets to a new group id; reset-offsets
// moves the copy back to the start (printing first, committing with
// --execute), refusing while the group has members; delete removes it.
func TestGroupCLI(t *testing.T) {
	t.Parallel()
	b := startBroker(t, groupBrokerArgs...)
	testGroupCLI(t, b.Addr, func(group string, lag map[int32]int64) { checkAdminLag(t, b, group, lag) })
}

// testGroupCLI is TestGroupCLI against the broker at addr; emptyLag, when
// set, checks the broker's own figures of an empty group's lag.
func testGroupCLI(t *testing.T, addr string, emptyLag func(group string, lag map[int32]int64)) {
	ctx := groupCtx(t, 2*time.Minute)
	createTopic(t, addr, "cli", 2, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		for range 20 {
			cl.Produce(ctx, &kgo.Record{Topic: "cli", Partition: p, Value: []byte("v")}, nil)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	// Group "blue" commits 15 and 5, and stops.
	blue, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("blue"), kgo.ConsumeTopics("cli"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 40; {
		fs := blue.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	blue.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"cli": {0: {Epoch: -1, Offset: 15}, 1: {Epoch: -1, Offset: 5}}}, nil)

	strand := strandCLI(t, addr, "group")
	// While blue runs, its offsets may not be moved.
	wantCLI(t, strand("reset-offsets", "--group", "blue", "--execute"), false, "the group has members")
	d := strand("describe", "--group", "blue")
	wantCLI(t, d, true, "1 members", "cli-0", "total lag 20")
	t.Logf("strand group describe:\n%s", d.stdout)
	blue.Close()

	wantCLI(t, strand("list"), true, "blue", "classic", "Empty")
	wantCLI(t, strand("list", "--format", "yaml"), true, "- group: blue\n    type: classic\n    state: Empty")
	wantCLI(t, strand("lag", "--group", "blue"), true, "cli", "15", "total lag 20")
	var lag struct {
		State      string `json:"state"`
		TotalLag   int64  `json:"total_lag"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Committed int64 `json:"committed"`
			End       int64 `json:"end"`
			Lag       int64 `json:"lag"`
		} `json:"partitions"`
	}
	r := strand("lag", "--group", "blue", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &lag); err != nil {
		t.Fatalf("lag --format json: %v\n%v", err, r)
	}
	if lag.State != "Empty" || lag.TotalLag != 20 || len(lag.Partitions) != 2 || lag.Partitions[0].Committed != 15 ||
		lag.Partitions[0].Lag != 5 || lag.Partitions[1].End != 20 || lag.Partitions[1].Lag != 15 {
		t.Fatalf("lag --format json: %+v", lag)
	}
	wantCLI(t, strand("describe", "--group", "blue", "--format", "yaml"), true, "total_lag: 20", "members: []")
	if emptyLag != nil {
		emptyLag("blue", map[int32]int64{0: 5, 1: 15})
	}
	wantCLI(t, strand("copy-offsets", "--from", "blue", "--to", "green"), true, "committed 2 offsets for group green")
	wantCLI(t, strand("lag", "--group", "green"), true, "total lag 20")
	wantCLI(t, strand("reset-offsets", "--group", "green", "--to", "earliest"), true, "not committed")
	wantCLI(t, strand("lag", "--group", "green"), true, "total lag 20")
	wantCLI(t, strand("reset-offsets", "--group", "green", "--to", "earliest", "--execute"), true, "committed 2 offsets")
	wantCLI(t, strand("lag", "--group", "green"), true, "total lag 40")
	wantCLI(t, strand("reset-offsets", "--group", "green", "--to", "18", "--execute"), true, "committed 2 offsets")
	wantCLI(t, strand("lag", "--group", "green"), true, "total lag 4\n")
	wantCLI(t, strand("delete", "--group", "green"), true, "deleted group green")
	if r := strand("list"); strings.Contains(r.stdout, "green") {
		t.Fatalf("green still listed after delete: %v", r)
	}
}

// checkAdminLag compares the admin listener's figures for an empty group,
// in its JSON API and in /metrics, with the lag the CLI printed.
func checkAdminLag(t *testing.T, b *testutil.Process, group string, want map[int32]int64) {
	t.Helper()
	var detail struct {
		State      string `json:"state"`
		Lag        int64  `json:"lag"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Lag       int64 `json:"lag"`
		} `json:"partitions"`
	}
	if code := grouptest.AdminGet(t, b.Admin, "/api/groups/"+group, &detail); code != 200 {
		t.Fatalf("GET /api/groups/%s: status %d", group, code)
	}
	var total int64
	got := map[int32]int64{}
	for _, p := range detail.Partitions {
		got[p.Partition] = p.Lag
		total += want[p.Partition]
	}
	if detail.State != "Empty" || detail.Lag != total || len(got) != len(want) {
		t.Fatalf("admin API: %+v, want lag %v", detail, want)
	}
	fams := grouptest.Scrape(t, b.Admin)
	for p, lag := range want {
		if got[p] != lag {
			t.Fatalf("admin API partition %d lag %d, want %d", p, got[p], lag)
		}
		v, ok := grouptest.Sample(fams, "strand_group_lag", map[string]string{"group": group, "topic": "cli", "partition": strconv.Itoa(int(p))})
		if !ok || int64(v) != lag {
			t.Fatalf("/metrics strand_group_lag partition %d = %v (present %v), want %d", p, v, ok, lag)
		}
	}
}
