package compat

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// TestGroupOfAnotherAssignor: a franz-go member runs a group with the
// roundrobin assignor. `strand group describe` takes the group as its
// argument and shows the member's client software; `strand consume
// --group` is refused by the group, and says which assignor it runs and
// how to offer it; with --assignor roundrobin it joins and reads.
func TestGroupOfAnotherAssignor(t *testing.T) {
	t.Parallel()
	b := startBroker(t, groupBrokerArgs...)
	ctx := groupCtx(t, 2*time.Minute)
	const topic, group = "rr", "rr-readers"
	createTopic(t, b.Addr, topic, 2, nil)
	producer := client(t, b.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		for i := range 5 {
			producer.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte{'a' + byte(i)}}, nil)
		}
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	member := client(t, b.Addr, kgo.ClientID("rr-member"), kgo.SoftwareNameAndVersion("orders-app", "2.1.0"),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RoundRobinBalancer()),
		kgo.HeartbeatInterval(300*time.Millisecond), kgo.DisableAutoCommit())
	// It keeps fetching (an unpolled client stops), committing nothing.
	pollCtx, stopPolling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopPolling()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for pollCtx.Err() == nil {
			fctx, cancel := context.WithTimeout(pollCtx, 200*time.Millisecond)
			member.PollFetches(fctx)
			cancel()
		}
	}()
	waitHandoffs(t, ctx, b.Addr, group, 2, "the member to take both partitions")

	cli := func(args ...string) result {
		return run(time.Minute, "", "", testutil.Binary(t), append(args, "--brokers", b.Addr)...)
	}
	d := cli("group", "describe", group)
	wantCLI(t, d, true, "rr-member", "orders-app 2.1.0", "protocol consumer roundrobin")
	t.Logf("strand group describe %s:\n%s", group, d.stdout)
	wantCLI(t, cli("group", "describe", "--group", group), true, "orders-app 2.1.0")
	r := cli("group", "describe", group, "--format", "json")
	var described struct {
		Members []struct {
			ClientID string `json:"client_id"`
			Software string `json:"software"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &described); err != nil || len(described.Members) != 1 ||
		described.Members[0].Software != "orders-app 2.1.0" {
		t.Fatalf("describe --format json: %+v %v\n%v", described, err, r)
	}
	wantCLI(t, cli("group", "describe", group, "--group", "other"), false, "name two groups")
	wantCLI(t, cli("group", "lag", group), true, "total lag 10")

	// strand consume offers cooperative-sticky unless told otherwise.
	wantCLI(t, cli("consume", topic, "--group", group, "--num", "1", "--timeout", "30s"), false,
		"group rr-readers's members use the roundrobin assignor, which this member does not offer (it offers cooperative-sticky): "+
			"join with --assignor roundrobin", "INCONSISTENT_GROUP_PROTOCOL")
	wantCLI(t, cli("consume", topic, "--group", group, "--assignor", "round-robin"), false, "did you mean roundrobin?")
	joined := cli("consume", topic, "--group", group, "--assignor", "roundrobin", "--num", "1", "--timeout", "60s")
	wantCLI(t, joined, true)
	if got := strings.TrimSpace(joined.stdout); got != "a" {
		t.Fatalf("read %q, want the first record of its partition, a: %v", got, joined)
	}
}
