package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/librdkafkatest"
)

// The Kafka tools of share groups (KIP-932).
const (
	shareGroupTool      = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
	consoleShareConsume = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"
	verifiableShare     = "org.apache.kafka.tools.VerifiableShareConsumer"
)

// TestKafkaShareGroupTools: Kafka's own tools run a share group on
// Strand. kafka-features.sh turns share groups on (share.version=1),
// kafka-configs.sh sets the group's share.auto.offset.reset,
// kafka-console-share-consumer.sh (Java's KafkaShareConsumer) reads every
// record of a three-partition topic once, and kafka-share-groups.sh lists
// the group and describes its offsets and state.
func TestKafkaShareGroupTools(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	const topic, group, n = "shared", "share-tools", 30
	if r := runKafkaTool(t, featureTool, "--bootstrap-server", b.Addr, "upgrade", "--feature", "share.version=1"); r.err != nil {
		t.Fatalf("kafka-features.sh upgrade --feature share.version=1: %v", r)
	}
	createTopic(t, b.Addr, topic, 3, nil)
	// The group's configs as the README sets them.
	if r := runKafkaTool(t, configTool, "--bootstrap-server", b.Addr, "--entity-type", "groups", "--entity-name", group,
		"--alter", "--add-config", "share.auto.offset.reset=earliest,share.record.lock.duration.ms=30000"); r.err != nil {
		t.Fatalf("kafka-configs.sh: %v", r)
	}
	var recs []*kgo.Record
	want := map[string]bool{}
	for i := range n {
		v := fmt.Sprintf("task-%02d", i)
		want[v] = true
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v)})
	}
	prod := client(t, b.Addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	r := runKafkaTool(t, consoleShareConsume, "--bootstrap-server", b.Addr, "--topic", topic, "--group", group,
		"--max-messages", fmt.Sprint(n), "--timeout-ms", "30000")
	if r.err != nil {
		t.Fatalf("kafka-console-share-consumer.sh: %v", r)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if strings.HasPrefix(line, "task-") {
			got = append(got, line)
		}
	}
	slices.Sort(got)
	if len(got) != n || len(slices.Compact(slices.Clone(got))) != n {
		t.Fatalf("the console share consumer printed %d records (%d distinct), want %d:\n%s", len(got),
			len(slices.Compact(slices.Clone(got))), n, r.stdout)
	}
	for _, v := range got {
		if !want[v] {
			t.Fatalf("the console share consumer printed %q, never produced", v)
		}
	}

	list := runKafkaTool(t, shareGroupTool, "--bootstrap-server", b.Addr, "--list")
	if list.err != nil || !regexp.MustCompile(`(?m)^`+group+`$`).MatchString(list.stdout) {
		t.Fatalf("kafka-share-groups.sh --list: %v", list)
	}
	// Each partition's share-partition starts past its ten records, none
	// left (DescribeShareGroupOffsets).
	offsets := runKafkaTool(t, shareGroupTool, "--bootstrap-server", b.Addr, "--describe", "--group", group, "--offsets")
	for p := range 3 {
		if offsets.err != nil || !regexp.MustCompile(fmt.Sprintf(`(?m)^%s\s+%s\s+%d\s+10\s+0\s*$`, group, topic, p)).MatchString(offsets.stdout) {
			t.Fatalf("kafka-share-groups.sh --describe --offsets, partition %d: %v", p, offsets)
		}
	}
	state := runKafkaTool(t, shareGroupTool, "--bootstrap-server", b.Addr, "--describe", "--group", group, "--state")
	if state.err != nil || !regexp.MustCompile(`(?m)^`+group+`\s+\S+\s+\(0\)\s+Empty\s+0\s*$`).MatchString(state.stdout) {
		t.Fatalf("kafka-share-groups.sh --describe --state: %v", state)
	}

	// Reset to the earliest offsets (AlterShareGroupOffsets): every
	// partition starts over at 0 with its ten records to deliver again,
	// and a new consumer gets all of them, although the partition's
	// leader held the old state.
	if r := runKafkaTool(t, shareGroupTool, "--bootstrap-server", b.Addr, "--reset-offsets", "--group", group, "--topic", topic,
		"--to-earliest", "--execute"); r.err != nil {
		t.Fatalf("kafka-share-groups.sh --reset-offsets: %v", r)
	}
	offsets = runKafkaTool(t, shareGroupTool, "--bootstrap-server", b.Addr, "--describe", "--group", group, "--offsets")
	for p := range 3 {
		if offsets.err != nil || !regexp.MustCompile(fmt.Sprintf(`(?m)^%s\s+%s\s+%d\s+0\s+10\s*$`, group, topic, p)).MatchString(offsets.stdout) {
			t.Fatalf("kafka-share-groups.sh --describe --offsets after the reset, partition %d: %v", p, offsets)
		}
	}
	// strand group describe reads a share group as kafka-share-groups.sh
	// does.
	d := run(time.Minute, "", "", testutil.Binary(t), "group", "describe", group, "--brokers", b.Addr)
	wantCLI(t, d, true, "share, state Empty, protocol share simple", "START", "total lag 30")
	again := runKafkaTool(t, consoleShareConsume, "--bootstrap-server", b.Addr, "--topic", topic, "--group", group,
		"--max-messages", fmt.Sprint(n), "--timeout-ms", "30000")
	if c := strings.Count(again.stdout, "task-"); again.err != nil || c != n {
		t.Fatalf("after the reset the console share consumer printed %d records, want %d: %v", c, n, again)
	}

	// Delete the topic's offsets (DeleteShareGroupOffsets), then the group
	// (DeleteGroups).
	if r := runKafkaTool(t, shareGroupTool, "--bootstrap-server", b.Addr, "--delete-offsets", "--group", group, "--topic", topic); r.err != nil {
		t.Fatalf("kafka-share-groups.sh --delete-offsets: %v", r)
	}
	offsets = runKafkaTool(t, shareGroupTool, "--bootstrap-server", b.Addr, "--describe", "--group", group, "--offsets")
	if offsets.err != nil || regexp.MustCompile(`(?m)^`+group+`\s+`+topic+`\s+\d`).MatchString(offsets.stdout) {
		t.Fatalf("kafka-share-groups.sh --describe --offsets after --delete-offsets: %v", offsets)
	}
	if r := runKafkaTool(t, shareGroupTool, "--bootstrap-server", b.Addr, "--delete", "--group", group); r.err != nil {
		t.Fatalf("kafka-share-groups.sh --delete: %v", r)
	}
	list = runKafkaTool(t, shareGroupTool, "--bootstrap-server", b.Addr, "--list")
	if list.err != nil || regexp.MustCompile(`(?m)^`+group+`$`).MatchString(list.stdout) {
		t.Fatalf("kafka-share-groups.sh --list after --delete: %v", list)
	}
}

// TestVerifiableShareConsumer: Kafka's VerifiableShareConsumer, the share
// consumer of Kafka's own system tests, runs to the end on Strand. It
// acknowledges each record by its offset: accept, release, reject. The
// released ones come back until share.delivery.count.limit (5) gives them
// up, so 60 records make 140 deliveries: 20 accepted, 20 rejected, 100
// released, every acknowledgement a success.
func TestVerifiableShareConsumer(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	if r := runKafkaTool(t, featureTool, "--bootstrap-server", b.Addr, "upgrade", "--feature", "share.version=1"); r.err != nil {
		t.Fatalf("kafka-features.sh upgrade --feature share.version=1: %v", r)
	}
	verifiableShareMember(t, b.Addr, "verified", "verifiable-share")
}

// verifiableShareMember produces 60 records to a new one-partition topic
// through addr and runs VerifiableShareConsumer on them as a member of
// group, acknowledging by offset: accept, release, reject. The released
// records come back until share.delivery.count.limit (5) gives them up,
// so it sees 140 deliveries: 20 accepted, 20 rejected, 100 released,
// every acknowledgement a success. Then the group has nothing left.
func verifiableShareMember(t *testing.T, addr, topic, group string) {
	t.Helper()
	const n = 60
	createTopic(t, addr, topic, 1, nil)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := client(t, addr)
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := runKafkaTool(t, verifiableShare, "--bootstrap-server", addr, "--topic", topic, "--group-id", group,
		"--max-messages", "140", "--acknowledgement-mode", "sync", "--ack-pattern", "accept,release,reject",
		"--offset-reset-strategy", "earliest")
	if r.err != nil {
		t.Fatalf("VerifiableShareConsumer: %v", r)
	}
	acks, consumed := map[string]int{}, 0
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev struct {
			Name          string         `json:"name"`
			Count         int            `json:"count"`
			Success       *bool          `json:"success"`
			AckTypeCounts map[string]int `json:"ackTypeCounts"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("VerifiableShareConsumer printed %q: %v", line, err)
		}
		names = append(names, ev.Name)
		switch ev.Name {
		case "records_consumed":
			consumed += ev.Count
		case "offsets_acknowledged":
			if ev.Success == nil || !*ev.Success {
				t.Fatalf("an acknowledgement failed: %s", line)
			}
			for k, v := range ev.AckTypeCounts {
				acks[k] += v
			}
		}
	}
	if consumed != 140 || acks["ACCEPT"] != 20 || acks["REJECT"] != 20 || acks["RELEASE"] != 100 ||
		!slices.Contains(names, "shutdown_complete") {
		t.Fatalf("%d records consumed, acknowledged %v, events %v; want 140 consumed, 20 accepted, 20 rejected, "+
			"100 released, and a shutdown:\n%s", consumed, acks, names, r.stdout)
	}
	// The released records were given up at their fifth delivery: the
	// group has nothing left to deliver.
	offs, err := kadm.NewClient(cl).DescribeShareGroupOffsets(ctx, group)
	if err != nil || offs[group].Err != nil {
		t.Fatalf("the group's offsets: %v %+v", err, offs)
	}
	if o, ok := offs[group].Offsets.Lookup(topic, 0); !ok || o.Err != nil || o.StartOffset != n || o.Lag != 0 {
		t.Fatalf("the group's offset after the delivery limit: %+v %v; want start %d, lag 0", o, ok, n)
	}
}

// TestLibrdkafkaShareConsumer: librdkafka's share consumer
// (confluent-kafka's ShareConsumer) is a member of a share group. In
// explicit mode it rejects the values ending in 0, releases those ending in
// 1 at their first delivery (they come back, counted as second deliveries)
// and accepts the rest; in implicit mode, in another group, it accepts
// every record of a poll at the next. Each value is settled once, as the
// broker confirms it.
func TestLibrdkafkaShareConsumer(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopic(t, b.Addr, "queue", 3, nil)
	produceTasks(t, b.Addr, "queue", 60)
	for _, mode := range []string{"explicit", "implicit"} {
		librdkafkaShareMember(t, b.Addr, []string{b.Addr}, "queue", "librdkafka-"+mode, mode, 60)
	}
}

// TestClusterShareClients: share groups on three brokers, with a topic
// whose six partitions all three lead, read by librdkafka's share consumer
// in explicit mode through one broker, and by Java's KafkaShareConsumer
// (kafka-console-share-consumer.sh, implicit acknowledgement) through
// another: each settles every record once. Then Kafka's
// VerifiableShareConsumer (explicit acknowledgement) runs to the end
// through the third.
func TestClusterShareClients(t *testing.T) {
	c := startCluster(t)
	const topic, n = "queue-cluster", 120
	leaders := c.spreadTopic(t, 0, topic)
	t.Logf("%s leaders %v", topic, leaders)
	produceTasks(t, c.seed(0), topic, n)
	all := []string{c.seed(0), c.seed(1), c.seed(2)}
	librdkafkaShareMember(t, c.seed(1), all, topic, "librdkafka-cluster", "explicit", n)

	const group = "java-cluster"
	testutil.SetGroupConfig(t, client(t, c.seed(0)), group, "share.auto.offset.reset", "earliest")
	testutil.AwaitGroupConfig(t, all, group, "share.auto.offset.reset", "earliest")
	r := runKafkaTool(t, consoleShareConsume, "--bootstrap-server", c.seed(2), "--topic", topic, "--group", group,
		"--max-messages", fmt.Sprint(n), "--timeout-ms", "60000")
	if r.err != nil {
		t.Fatalf("kafka-console-share-consumer.sh: %v", r)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if strings.HasPrefix(line, "task-") {
			seen[line]++
		}
	}
	for i := range n {
		if v := fmt.Sprintf("task-%03d", i); seen[v] != 1 {
			t.Errorf("the Java share consumer printed %s %d times", v, seen[v])
		}
	}
	// Java's explicit acknowledgement, through the third broker.
	verifiableShareMember(t, c.seed(2), "verified-cluster", "verifiable-cluster")
}

// produceTasks writes the values task-000 to task-(n-1), spread over the
// topic's partitions.
func produceTasks(t *testing.T, addr, topic string, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "task-%03d", i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// librdkafkaShareMember runs share_librdkafka.py on addr as a member of
// group (reading from the earliest, once every broker of brokers has the
// group's config) until the n tasks are settled, and checks what it says: in explicit mode the tasks ending in 0 rejected and those
// ending in 1 delivered twice (released at the first), the rest accepted
// at their first delivery; in implicit mode every task accepted at its
// first.
func librdkafkaShareMember(t *testing.T, addr string, brokers []string, topic, group, mode string, n int) {
	t.Helper()
	python := librdkafkatest.Python(t)
	testutil.SetGroupConfig(t, client(t, addr), group, "share.auto.offset.reset", "earliest")
	testutil.AwaitGroupConfig(t, brokers, group, "share.auto.offset.reset", "earliest")
	r := run(2*time.Minute, "", "", python, filepath.Join(librdkafkatest.ScriptsDir(), "share_librdkafka.py"),
		addr, topic, group, fmt.Sprint(n), mode)
	if r.err != nil {
		t.Fatalf("%s: %v", mode, r)
	}
	deliveries, settled := map[string][]int{}, map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "delivered":
			c, _ := strconv.Atoi(f[2])
			deliveries[f[1]] = append(deliveries[f[1]], c)
		case len(f) == 3 && f[0] == "settled":
			settled[f[1]] = append(settled[f[1]], f[2])
		}
	}
	for i := range n {
		v := fmt.Sprintf("task-%03d", i)
		want, wantDeliveries := "accept", []int{1}
		if mode == "explicit" && i%10 == 0 {
			want = "reject"
		}
		if mode == "explicit" && i%10 == 1 {
			wantDeliveries = []int{1, 2}
		}
		if !slices.Equal(settled[v], []string{want}) || !slices.Equal(deliveries[v], wantDeliveries) {
			t.Errorf("%s: %s settled %v after deliveries %v; want %s after %v", mode, v, settled[v], deliveries[v], want, wantDeliveries)
		}
	}
}
