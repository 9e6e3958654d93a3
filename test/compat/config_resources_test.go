package compat

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clientMetricsTool is kafka-client-metrics.sh's main class.
const clientMetricsTool = "org.apache.kafka.tools.ClientMetricsCommand"

// listConfigResources asks ListConfigResources (v1) for types and returns
// the error code and the resources as "type name" lines.
func listConfigResources(t *testing.T, cl *kgo.Client, types ...int8) (int16, []string) {
	t.Helper()
	req := kmsg.NewPtrListConfigResourcesRequest()
	req.ResourceTypes = types
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ListConfigResources %v: %v", types, err)
	}
	var out []string
	for _, r := range resp.ConfigResources {
		out = append(out, kmsg.ConfigResourceType(r.Type).String()+" "+r.Name)
	}
	slices.Sort(out)
	return resp.ErrorCode, out
}

// testConfigResources: client metrics subscriptions (KIP-714's
// CLIENT_METRICS resources) are described, refused and listed as a real
// Kafka (kafkaAddr) does, and kafka-client-metrics.sh creates, lists,
// describes and deletes one; ListConfigResources (KIP-1142) lists every
// kind of config resource.
func testConfigResources(t *testing.T, kafkaAddr string) {
	kcl := client(t, kafkaAddr)
	b := startBroker(t)
	scl := client(t, b.Addr)

	// A subscription never set: Kafka's defaults.
	onKafka := describeResource(t, kcl, kmsg.ConfigResourceTypeClientMetrics, "never-set")
	onStrand := describeResource(t, scl, kmsg.ConfigResourceTypeClientMetrics, "never-set")
	if len(onStrand) != len(onKafka) {
		t.Errorf("%d client metrics configs described, Kafka describes %d", len(onStrand), len(onKafka))
	}
	for name, kc := range onKafka {
		sc := onStrand[name]
		if strPtr(sc.Value) != strPtr(kc.Value) || sc.Source != kc.Source || sc.ConfigType != kc.ConfigType {
			t.Errorf("%s: %s (%v, %v); Kafka: %s (%v, %v)", name, strPtr(sc.Value), sc.Source, sc.ConfigType,
				strPtr(kc.Value), kc.Source, kc.ConfigType)
		}
	}
	for _, bad := range []map[string]string{{"interval.ms": "5"}, {"match": "nonsense"}, {"match": "client_id=[("},
		{"metrics": "x", "no.such": "1"}} {
		want, wantMsg := alterResource(t, kcl, kmsg.ConfigResourceTypeClientMetrics, "refused", bad)
		if got, msg := alterResource(t, scl, kmsg.ConfigResourceTypeClientMetrics, "refused", bad); got != want || msg != wantMsg {
			t.Errorf("setting %v: %v %q, Kafka answers %v %q", bad, kerr.ErrorForCode(got), msg, kerr.ErrorForCode(want), wantMsg)
		}
	}
	if want, _ := listConfigResources(t, kcl, 99); want == 0 {
		t.Errorf("Kafka lists resources of type 99")
	} else if got, _ := listConfigResources(t, scl, 99); got != want {
		t.Errorf("resources of type 99: %v, Kafka answers %v", kerr.ErrorForCode(got), kerr.ErrorForCode(want))
	}

	// Kafka's tool on Strand.
	tool := func(args ...string) string {
		t.Helper()
		r := runKafkaTool(t, clientMetricsTool, append([]string{"--bootstrap-server", b.Addr}, args...)...)
		if r.err != nil {
			t.Fatalf("kafka-client-metrics.sh %s: %v", strings.Join(args, " "), r)
		}
		return r.stdout
	}
	tool("--alter", "--name", "producers", "--metrics", "org.apache.kafka.producer.", "--interval", "1000",
		"--match", "client_id=orders-.*")
	if out := tool("--list"); !strings.Contains(out, "producers") {
		t.Errorf("--list after --alter:\n%s", out)
	}
	if out := tool("--describe", "--name", "producers"); !strings.Contains(out, "interval.ms=1000") ||
		!strings.Contains(out, "metrics=org.apache.kafka.producer.") || !strings.Contains(out, "match=client_id=orders-.*") {
		t.Errorf("--describe:\n%s", out)
	}
	createTopic(t, b.Addr, "listed", 1, nil)
	if code, msg := alterGroup(t, scl, "configured", map[string]string{"consumer.heartbeat.interval.ms": "6000"}); code != 0 {
		t.Fatalf("a group config: %v %s", kerr.ErrorForCode(code), msg)
	}
	_, all := listConfigResources(t, scl)
	for _, want := range []string{"TOPIC listed", "BROKER 0", "BROKER_LOGGER 0", "CLIENT_METRICS producers", "GROUP_CONFIG configured"} {
		if !slices.Contains(all, want) {
			t.Errorf("ListConfigResources lacks %q: %v", want, all)
		}
	}
	tool("--delete", "--name", "producers")
	if _, left := listConfigResources(t, scl, int8(kmsg.ConfigResourceTypeClientMetrics)); len(left) != 0 {
		t.Errorf("after --delete: %v", left)
	}
}
