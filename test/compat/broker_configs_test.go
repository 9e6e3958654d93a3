package compat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
)

// kafkaRelease is the Kafka release whose broker configs Strand describes.
const kafkaRelease = "4.4.0"

// describeBroker is a broker's DescribeConfigs answer for itself, every
// config with its synonyms, by name.
func describeBroker(t *testing.T, cl *kgo.Client, node string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	return describeResource(t, cl, kmsg.ConfigResourceTypeBroker, node)
}

// describeResource is a DescribeConfigs answer for one resource, every
// config with its synonyms, by name.
func describeResource(t *testing.T, cl *kgo.Client, typ kmsg.ConfigResourceType, name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	req.Resources = append(req.Resources, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && resp.Resources[0].ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("DescribeConfigs of %v %s: %v", typ, name, err)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// kafkaDefsOf reads Kafka's broker configs from its DescribeConfigs answer:
// a config's default is its DEFAULT_CONFIG synonym.
func kafkaDefsOf(described map[string]kmsg.DescribeConfigsResponseResourceConfig) []config.KafkaDef {
	var defs []config.KafkaDef
	for _, c := range described {
		d := config.KafkaDef{Name: c.Name, Type: config.Type(c.ConfigType), ReadOnly: c.ReadOnly, Sensitive: c.IsSensitive}
		for _, s := range c.ConfigSynonyms {
			if s.Source == kmsg.ConfigSourceDefaultConfig && s.Value != nil {
				v := *s.Value
				d.Default = &v
			}
		}
		defs = append(defs, d)
	}
	return defs
}

// alterBroker sets configs on broker node with IncrementalAlterConfigs and
// returns the answer's error code and message.
func alterBroker(t *testing.T, cl *kgo.Client, node string, configs map[string]string) (int16, string) {
	t.Helper()
	return alterResource(t, cl, kmsg.ConfigResourceTypeBroker, node, configs)
}

// alterResource sets one resource's configs with IncrementalAlterConfigs
// and returns the answer's error code and message.
func alterResource(t *testing.T, cl *kgo.Client, typ kmsg.ConfigResourceType, name string, configs map[string]string) (int16, string) {
	t.Helper()
	var changes []kmsg.IncrementalAlterConfigsRequestResourceConfig
	for k, v := range configs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = k, kmsg.StringPtr(v), kmsg.IncrementalAlterConfigOpSet
		changes = append(changes, c)
	}
	return alterResourceWith(t, cl, typ, name, changes)
}

// alterResourceWith makes changes to one config resource with
// IncrementalAlterConfigs and returns the error code and message.
func alterResourceWith(t *testing.T, cl *kgo.Client, typ kmsg.ConfigResourceType, name string,
	changes []kmsg.IncrementalAlterConfigsRequestResourceConfig) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = typ, name, changes
	req.Resources = append(req.Resources, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs of %v %s: %v", typ, name, err)
	}
	return resp.Resources[0].ErrorCode, strPtr(resp.Resources[0].ErrorMessage)
}

func strPtr(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}

// testBrokerConfigs: Strand describes every broker config a real Kafka
// (node 1 at kafkaAddr) describes, of the same type. One Strand does not
// act on has Kafka's default, read-only flag and sensitivity, and says it
// is not acted on; where Kafka changes it at run time Strand keeps a value
// set for it (IncrementalAlterConfigs, and Kafka's kafka-configs.sh) and
// describes it back; where Kafka refuses a change, or a value of the wrong
// type, Strand answers the same error. The table Strand describes them
// from (internal/config/kafka_broker_configs.tsv) must be Kafka's answer:
// STRAND_WRITE_KAFKA_CONFIGS=1 writes it from that answer instead.
func testBrokerConfigs(t *testing.T, kafkaAddr string) {
	kcl := client(t, kafkaAddr)
	onKafka := describeBroker(t, kcl, "1")
	groupOnKafka := describeResource(t, kcl, kmsg.ConfigResourceTypeGroupConfig, "any-group")
	for _, table := range []struct {
		resource, file string
		defs           []config.KafkaDef
		kafka          map[string]kmsg.DescribeConfigsResponseResourceConfig
	}{{"broker", "kafka_broker_configs.tsv", config.KafkaDefs, onKafka}, {"group", "kafka_group_configs.tsv", config.GroupDefs, groupOnKafka}} {
		fromKafka := config.KafkaDefsTSV(table.resource, kafkaRelease, kafkaDefsOf(table.kafka))
		path := filepath.Join("..", "..", "internal", "config", table.file)
		if os.Getenv("STRAND_WRITE_KAFKA_CONFIGS") == "1" {
			if err := os.WriteFile(path, []byte(fromKafka), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %d configs to %s", len(table.kafka), path)
			continue
		}
		if embedded := config.KafkaDefsTSV(table.resource, kafkaRelease, table.defs); embedded != fromKafka {
			t.Fatalf("internal/config/%s is not Kafka %s's answer; STRAND_WRITE_KAFKA_CONFIGS=1 writes it again",
				table.file, kafkaRelease)
		}
	}
	if os.Getenv("STRAND_WRITE_KAFKA_CONFIGS") == "1" {
		return
	}

	b := startBroker(t)
	scl := client(t, b.Addr)
	onStrand := describeBroker(t, scl, "0")
	for name, kc := range onKafka {
		sc, ok := onStrand[name]
		switch {
		case !ok:
			t.Errorf("%s: not described", name)
			continue
		case sc.ConfigType != kc.ConfigType:
			t.Errorf("%s: type %v, Kafka's %v", name, sc.ConfigType, kc.ConfigType)
		case kc.ReadOnly && !sc.ReadOnly:
			t.Errorf("%s: changes at run time, not on Kafka", name)
		}
		if _, served := config.LookupBrokerDef(name); served {
			continue
		}
		var def *string
		for _, s := range kc.ConfigSynonyms {
			if s.Source == kmsg.ConfigSourceDefaultConfig {
				def = s.Value
			}
		}
		if strPtr(sc.Value) != strPtr(def) || sc.Source != kmsg.ConfigSourceDefaultConfig || sc.ReadOnly != kc.ReadOnly ||
			sc.IsSensitive != kc.IsSensitive {
			t.Errorf("%s: %s (%v, read-only %v, sensitive %v); Kafka's default %s (read-only %v, sensitive %v)", name,
				strPtr(sc.Value), sc.Source, sc.ReadOnly, sc.IsSensitive, strPtr(def), kc.ReadOnly, kc.IsSensitive)
		}
		if !strings.Contains(strPtr(sc.Documentation), "Strand does not act on it") {
			t.Errorf("%s: documented as %q", name, strPtr(sc.Documentation))
		}
	}

	// Changed at run time where Kafka changes them, kept and described.
	set := map[string]string{"log.cleaner.backoff.ms": "100", "sasl.kerberos.min.time.before.relogin": "30000"}
	if code, _ := alterBroker(t, scl, "0", set); code != 0 {
		t.Fatalf("setting %v: %v", set, kerr.ErrorForCode(code))
	}
	onStrand = describeBroker(t, scl, "0")
	for name, v := range set {
		c := onStrand[name]
		if strPtr(c.Value) != v || c.Source != kmsg.ConfigSourceDynamicBrokerConfig || len(c.ConfigSynonyms) != 2 {
			t.Errorf("%s after setting %s: %s (%v), synonyms %+v", name, v, strPtr(c.Value), c.Source, c.ConfigSynonyms)
		}
	}
	// Refused as Kafka refuses: a read-only config, a value of the wrong
	// type.
	for _, bad := range []map[string]string{{"process.roles": "broker"}, {"log.cleaner.backoff.ms": "soon"},
		{"log.retention.ms": "soon"}, {"min.insync.replicas": "0"}, {"node.id": "3"}} {
		want, wantMsg := alterBroker(t, kcl, "1", bad)
		got, msg := alterBroker(t, scl, "0", bad)
		if got != want || got == 0 || msg != wantMsg {
			t.Errorf("setting %v: %v %q, Kafka answers %v %q", bad, kerr.ErrorForCode(got), msg, kerr.ErrorForCode(want), wantMsg)
		}
	}
	// A name neither knows is kept, as a plugin's config, its value hidden.
	custom := map[string]string{"plugin.custom.setting": "1"}
	for _, c := range []struct {
		cl   *kgo.Client
		node string
	}{{kcl, "1"}, {scl, "0"}} {
		if code, msg := alterBroker(t, c.cl, c.node, custom); code != 0 {
			t.Fatalf("setting %v on broker %s: %v %s", custom, c.node, kerr.ErrorForCode(code), msg)
		}
	}
	var kc kmsg.DescribeConfigsResponseResourceConfig
	testutil.Eventually(t, 10*time.Second, func() error { // Kafka applies it through its metadata log
		var ok bool
		if kc, ok = describeBroker(t, kcl, "1")["plugin.custom.setting"]; !ok {
			return errors.New("Kafka does not describe plugin.custom.setting yet")
		}
		return nil
	})
	sc := describeBroker(t, scl, "0")["plugin.custom.setting"]
	if sc.Name == "" || sc.Value != nil || sc.Source != kc.Source || sc.IsSensitive != kc.IsSensitive || sc.ConfigType != kc.ConfigType {
		t.Errorf("plugin.custom.setting: %s (%v, sensitive %v, %v); Kafka: %s (%v, sensitive %v, %v)", strPtr(sc.Value), sc.Source,
			sc.IsSensitive, sc.ConfigType, strPtr(kc.Value), kc.Source, kc.IsSensitive, kc.ConfigType)
	}
	// Kafka's kafka-configs.sh sets one cluster-wide and finds it.
	if r := runKafkaTool(t, configTool, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "brokers",
		"--entity-default", "--add-config", "log.cleaner.io.buffer.load.factor=0.8"); r.err != nil {
		t.Fatalf("kafka-configs.sh --alter: %v", r)
	}
	r := runKafkaTool(t, configTool, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "brokers",
		"--entity-name", "0", "--all")
	for _, want := range []string{"log.cleaner.io.buffer.load.factor=0.8 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.io.buffer.load.factor=0.8, DEFAULT_CONFIG:log.cleaner.io.buffer.load.factor=0.9}",
		"log.cleaner.backoff.ms=100 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=100, DEFAULT_CONFIG:log.cleaner.backoff.ms=15000}"} {
		if r.err != nil || !strings.Contains(r.stdout, want) {
			t.Errorf("kafka-configs.sh --describe --all lacks %q: %v\n%s", want, r.err, r.stdout)
		}
	}
}

// alterGroup sets a group's configs with IncrementalAlterConfigs and
// returns the answer's error code and message.
func alterGroup(t *testing.T, cl *kgo.Client, group string, configs map[string]string) (int16, string) {
	t.Helper()
	return alterResource(t, cl, kmsg.ConfigResourceTypeGroupConfig, group, configs)
}

// testGroupConfigs: a consumer group's configs (Kafka 4.0's GROUP
// resource) are described as a real Kafka (kafkaAddr) describes them,
// refused as it refuses them, and set with Kafka's kafka-configs.sh
// --entity-type groups; the coordinator applies the group's heartbeat
// interval and session timeout to its members (KIP-848).
func testGroupConfigs(t *testing.T, kafkaAddr string) {
	kcl := client(t, kafkaAddr)
	// Bounds low enough for a session of 2 s.
	b := startBroker(t, "--group-consumer-min-session-timeout", "1s", "--group-consumer-min-heartbeat-interval", "100ms")
	scl := client(t, b.Addr)
	onKafka := describeResource(t, kcl, kmsg.ConfigResourceTypeGroupConfig, "g")
	onStrand := describeResource(t, scl, kmsg.ConfigResourceTypeGroupConfig, "g")
	for name, kc := range onKafka {
		sc, ok := onStrand[name]
		switch {
		case !ok:
			t.Errorf("group config %s: not described", name)
		case sc.ConfigType != kc.ConfigType || sc.Source != kc.Source || sc.ReadOnly != kc.ReadOnly ||
			(strPtr(sc.Value) != strPtr(kc.Value) && !strings.HasPrefix(name, "consumer.")):
			t.Errorf("group config %s: %s (%v, %v, read-only %v); Kafka: %s (%v, %v, read-only %v)", name, strPtr(sc.Value),
				sc.Source, sc.ConfigType, sc.ReadOnly, strPtr(kc.Value), kc.Source, kc.ConfigType, kc.ReadOnly)
		}
	}
	for _, bad := range []map[string]string{{"consumer.session.timeout.ms": "100"}, {"consumer.session.timeout.ms": "999999"},
		{"consumer.heartbeat.interval.ms": "soon"}, {"no.such.group.config": "1"}} {
		want, wantMsg := alterGroup(t, kcl, "g", bad)
		if got, msg := alterGroup(t, scl, "g", bad); got != want || got == 0 {
			t.Errorf("setting %v: %v %q, Kafka answers %v %q", bad, kerr.ErrorForCode(got), msg, kerr.ErrorForCode(want), wantMsg)
		}
	}

	// Kafka's tool sets the group's own timings; a member is told the
	// heartbeat interval and is removed after the session timeout.
	if r := runKafkaTool(t, configTool, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "groups", "--entity-name", "g",
		"--add-config", "consumer.session.timeout.ms=2000,consumer.heartbeat.interval.ms=300"); r.err != nil {
		t.Fatalf("kafka-configs.sh --alter --entity-type groups: %v", r)
	}
	r := runKafkaTool(t, configTool, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "groups", "--entity-name", "g")
	for _, want := range []string{"consumer.session.timeout.ms=2000", "consumer.heartbeat.interval.ms=300"} {
		if r.err != nil || !strings.Contains(r.stdout, want) {
			t.Errorf("kafka-configs.sh --describe --entity-type groups lacks %q: %v\n%s", want, r.err, r.stdout)
		}
	}
	createTopic(t, b.Addr, "t", 1, nil)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "a-member-of-g", 0, 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := hb.RequestWith(ctx, scl)
	if err != nil || resp.ErrorCode != 0 || resp.HeartbeatIntervalMillis != 300 {
		t.Fatalf("a member's first heartbeat: %v, %+v (want the group's interval, 300 ms)", err, resp)
	}
	joined := time.Now()
	adm := kadm.NewClient(scl)
	testutil.Eventually(t, 20*time.Second, func() error {
		ds, err := adm.DescribeConsumerGroups(ctx, "g")
		if err != nil {
			return err
		}
		if n := len(ds["g"].Members); n != 0 {
			return fmt.Errorf("%d members", n)
		}
		return nil
	})
	gone := time.Since(joined)
	if gone > 10*time.Second {
		t.Errorf("the silent member was removed after %v; the group's session timeout is 2 s, the broker's 45 s", gone)
	}
	t.Logf("a silent member of a group with consumer.session.timeout.ms=2000 was gone after %v", gone.Round(time.Millisecond))
}
