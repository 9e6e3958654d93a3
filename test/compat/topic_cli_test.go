package compat

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicCLI drives `strand topic` against the real binary: create with
// a config, list, describe (table and JSON, with the offsets records gave
// and the config set), the errors a script can rely on (a second create,
// an unknown topic), and delete.
func TestTopicCLI(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	testTopicCLI(t, b.Addr)
}

func testTopicCLI(t *testing.T, addr string) {
	strand := strandCLI(t, addr, "topic")
	wantCLI(t, strand("create", "orders", "--partitions", "3", "--config", "retention.ms=3600000"), true,
		"created topic orders with 3 partitions, replication factor 1")
	wantCLI(t, strand("create", "orders", "--partitions", "3"), false, "TOPIC_ALREADY_EXISTS")
	wantCLI(t, strand("create", "bad", "--config", "retention.ms"), false, "name=value")

	ctx := groupCtx(t, time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	list := strand("list")
	wantCLI(t, list, true, "orders")
	if strings.Contains(list.stdout, "__consumer_offsets") {
		t.Fatalf("list shows internal topics without --internal: %v", list)
	}
	d := strand("describe", "orders")
	wantCLI(t, d, true, "3 partitions", "retention.ms=3600000")
	t.Logf("strand topic describe:\n%s", d.stdout)

	r := strand("describe", "orders", "--format", "json")
	wantCLI(t, r, true)
	var described struct {
		Topics []struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Partition int32   `json:"partition"`
				Leader    int32   `json:"leader"`
				Replicas  []int32 `json:"replicas"`
				ISR       []int32 `json:"isr"`
				Start     int64   `json:"start_offset"`
				End       int64   `json:"end_offset"`
				Size      int64   `json:"size_bytes"`
			} `json:"partitions"`
			Size    int64             `json:"size_bytes"`
			Configs map[string]string `json:"configs"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &described); err != nil {
		t.Fatalf("describe --format json: %v\n%v", err, r)
	}
	if len(described.Topics) != 1 || len(described.Topics[0].Partitions) != 3 ||
		described.Topics[0].Configs["retention.ms"] != "3600000" {
		t.Fatalf("described %+v", described)
	}
	for _, p := range described.Topics[0].Partitions {
		end := int64(0)
		if p.Partition == 1 {
			end = 5
		}
		if p.Start != 0 || p.End != end || p.Leader < 0 || !slices.Equal(p.ISR, []int32{p.Leader}) ||
			!slices.Equal(p.Replicas, []int32{p.Leader}) {
			t.Errorf("partition %+v, want offsets 0 to %d and its leader its one replica, in sync", p, end)
		}
		if (end > 0) != (p.Size > 0) || p.Size < 0 {
			t.Errorf("partition %d holds %d records in %d bytes", p.Partition, end, p.Size)
		}
	}
	if got := described.Topics[0]; got.Size != got.Partitions[1].Size {
		t.Errorf("the topic's size %d, its partitions' %+v", got.Size, got.Partitions)
	}
	wantCLI(t, strand("describe", "nowhere"), false, "UNKNOWN_TOPIC_OR_PARTITION")

	// Configs, partitions and the log start move, and describe shows it.
	wantCLI(t, strand("alter-config", "orders", "--set", "retention.ms=7200000", "--set", "cleanup.policy=compact,delete"), true,
		"altered 2 configs of topic orders")
	wantCLI(t, strand("alter-config", "orders", "--delete", "cleanup.policy"), true, "altered 1 configs")
	wantCLI(t, strand("alter-config", "orders", "--set", "no.such.config=1"), false, "orders: ")
	wantCLI(t, strand("add-partitions", "orders", "--total", "5"), true, "topic orders has 5 partitions")
	wantCLI(t, strand("add-partitions", "orders", "--total", "2"), false, "INVALID_PARTITIONS")
	wantCLI(t, strand("trim", "orders", "--before", "3", "--partition", "1"), true, "orders-1 starts at 3")
	describe := func() (starts, ends []int64, configs map[string]string) {
		t.Helper()
		r := strand("describe", "orders", "--format", "json")
		described.Topics = nil
		if err := json.Unmarshal([]byte(r.stdout), &described); err != nil || len(described.Topics) != 1 {
			t.Fatalf("describe --format json: %v\n%v", err, r)
		}
		for _, p := range described.Topics[0].Partitions {
			starts, ends = append(starts, p.Start), append(ends, p.End)
		}
		return starts, ends, described.Topics[0].Configs
	}
	starts, ends, configs := describe()
	if fmt.Sprint(starts, ends) != "[0 3 0 0 0] [0 5 0 0 0]" || configs["retention.ms"] != "7200000" || configs["cleanup.policy"] != "" {
		t.Fatalf("after alter-config, add-partitions and trim: starts %v, ends %v, configs %v", starts, ends, configs)
	}
	wantCLI(t, strand("trim", "orders", "--before", "-1"), true, "orders-1 starts at 5", "orders-4 starts at 0")
	if starts, _, _ := describe(); fmt.Sprint(starts) != "[0 5 0 0 0]" {
		t.Fatalf("after trimming to the end: starts %v", starts)
	}
	wantCLI(t, strand("list", "--format", "yaml"), true, "- topic: orders\n    id: ", "partitions: 5")
	wantCLI(t, strand("list", "--format", "xml"), false, "table, json or yaml")

	wantCLI(t, strand("delete", "orders"), true, "deleted topic orders")
	if l := strand("list", "--format", "json"); strings.Contains(l.stdout, `"orders"`) {
		t.Fatalf("orders still listed after delete: %v", l)
	}
	wantCLI(t, strand("delete", "orders"), false, "UNKNOWN_TOPIC_OR_PARTITION")
}
