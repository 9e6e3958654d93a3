package compat

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
)

// TestConsumerGroupKafkaTool: Kafka's kafka-consumer-groups.sh lists a
// consumer group and a classic group with their types and describes each
// with its members and their partitions; and a group in the middle of a
// migration (a classic and a consumer-protocol member) as a consumer group
// with both members.
func TestConsumerGroupKafkaTool(t *testing.T) {
	t.Parallel()
	javatest.Helper(t)
	b := startBroker(t, append(consumerGroupBrokerArgs, groupBrokerArgs...)...)
	ctx := groupCtx(t, 2*time.Minute)
	createTopic(t, b.Addr, "orders", 4, nil)
	adm := grouptest.Admin(t, b.Addr)
	modern := kgoMemberOf(t, grouptest.ConsumerConfig{Name: "modern-0", Addr: b.Addr, Group: "modern", Topic: "orders",
		SessionTimeout: consumerSession, ServerSide: true})
	classic := kgoMember(t, b.Addr, "orders", "classic", "classic-0")
	grouptest.WaitSettled(t, ctx, adm, "modern", "orders", 4, modern)
	grouptest.WaitSettled(t, ctx, adm, "classic", "orders", 4, classic)
	mixedGroup(t, ctx, adm, b.Addr, "mixed")
	// DescribeGroups (v5, the newest served) answers a consumer group as
	// Kafka does before v6: Dead, with no error.
	if ds, err := adm.DescribeGroups(ctx, "modern"); err != nil || ds["modern"].Err != nil || ds["modern"].State != "Dead" {
		t.Errorf("DescribeGroups of a consumer group: %+v %v, want Dead without an error", ds["modern"], err)
	}

	const tool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	list := runKafkaTool(t, tool, "--bootstrap-server", b.Addr, "--list", "--type")
	if list.err != nil {
		t.Fatalf("--list --type: %v", list)
	}
	for _, want := range []string{`(?m)^modern\s+Consumer\s*$`, `(?m)^classic\s+Classic\s*$`, `(?m)^mixed\s+Consumer\s*$`} {
		if !regexp.MustCompile(want).MatchString(list.stdout) {
			t.Errorf("--list --type lacks %s:\n%s", want, list.stdout)
		}
	}
	for _, g := range []string{"modern", "classic"} {
		d := runKafkaTool(t, tool, "--bootstrap-server", b.Addr, "--describe", "--group", g, "--members", "--verbose")
		if d.err != nil {
			t.Fatalf("--describe --group %s --members: %v", g, d)
		}
		if !strings.Contains(d.stdout, g+"-0") || !strings.Contains(d.stdout, "orders:0,1,2,3") {
			t.Errorf("--describe --group %s --members lacks its member with orders:0,1,2,3:\n%s", g, d.stdout)
		}
		st := runKafkaTool(t, tool, "--bootstrap-server", b.Addr, "--describe", "--group", g, "--state")
		if st.err != nil || !strings.Contains(st.stdout, "Stable") {
			t.Errorf("--describe --group %s --state: %v\n%s", g, st.err, st.stdout)
		}
		t.Logf("%s:\n%s", g, d.stdout)
	}
	d := runKafkaTool(t, tool, "--bootstrap-server", b.Addr, "--describe", "--group", "mixed", "--members", "--verbose")
	if d.err != nil {
		t.Fatalf("--describe --group mixed --members: %v", d)
	}
	for _, m := range []string{"mixed-classic", "mixed-modern"} {
		if !strings.Contains(d.stdout, m) {
			t.Errorf("--describe --group mixed --members lacks %s:\n%s", m, d.stdout)
		}
	}
	t.Logf("mixed:\n%s", d.stdout)
}

// TestConsumerGroupVerifiableConsumer: Kafka's VerifiableConsumer with
// --group-protocol consumer joins a consumer group and consumes a topic to
// the end, committing as it goes.
func TestConsumerGroupVerifiableConsumer(t *testing.T) {
	t.Parallel()
	javatest.Helper(t)
	b := startBroker(t, consumerGroupBrokerArgs...)
	ctx := groupCtx(t, 2*time.Minute)
	createTopic(t, b.Addr, "verified", 3, nil)
	produced := grouptest.Produced{}
	produceKeyed(t, ctx, b.Addr, "verified", "v", 300, produced)
	r := runKafkaTool(t, "org.apache.kafka.tools.VerifiableConsumer", "--bootstrap-server", b.Addr, "--topic", "verified",
		"--group-id", "verifiable", "--group-protocol", "consumer", "--max-messages", "300", "--reset-policy", "earliest")
	if r.err != nil {
		t.Fatalf("VerifiableConsumer: %v", r)
	}
	consumed, committed := 0, 0
	for _, line := range strings.Split(r.stdout, "\n") {
		var ev struct {
			Name    string `json:"name"`
			Count   int    `json:"count"`
			Success bool   `json:"success"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		switch ev.Name {
		case "records_consumed":
			consumed += ev.Count
		case "offsets_committed":
			if !ev.Success {
				t.Errorf("a commit failed: %s", line)
			}
			committed++
		}
	}
	if consumed != 300 || committed == 0 {
		t.Fatalf("consumed %d records of 300 with %d commits:\n%s", consumed, committed, tail(r.stdout, 4<<10))
	}
}

// mixedGroup forms group g on the 4 partitions of "orders" in the middle of
// a migration: a franz-go member of the classic protocol (client
// g-classic), settled, then one of the consumer protocol (g-modern), which
// upgrades the group; it returns them once the two settled.
func mixedGroup(t *testing.T, ctx context.Context, adm *kadm.Client, addr, g string) (classic, modern grouptest.Member) {
	t.Helper()
	classic = kgoMember(t, addr, "orders", g, g+"-classic")
	grouptest.WaitSettled(t, ctx, adm, g, "orders", 4, classic)
	modern = kgoMemberOf(t, grouptest.ConsumerConfig{Name: g + "-modern", Addr: addr, Group: g, Topic: "orders",
		SessionTimeout: consumerSession, ServerSide: true})
	grouptest.WaitSettled(t, ctx, adm, g, "orders", 4, classic, modern)
	return classic, modern
}
