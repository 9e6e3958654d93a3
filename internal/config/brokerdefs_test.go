package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBrokerDefsCoverTopicDefaults(t *testing.T) {
	seen := map[string]bool{}
	for i, d := range BrokerDefs {
		if seen[d.Name] {
			t.Errorf("broker config %s defined twice", d.Name)
		}
		seen[d.Name] = true
		if i > 0 && BrokerDefs[i-1].Name >= d.Name {
			t.Errorf("BrokerDefs not sorted at %s", d.Name)
		}
		if d.Get == nil || d.Doc == "" || d.Type == 0 {
			t.Errorf("broker config %s: incomplete definition", d.Name)
		}
		if got, ok := LookupBrokerDef(d.Name); !ok || got.Name != d.Name {
			t.Errorf("LookupBrokerDef(%s) = %v, %v", d.Name, got, ok)
		}
	}
	for i := range TopicDefs {
		td := &TopicDefs[i]
		bd := BrokerDefOf(td)
		if td.BrokerName == "" {
			if bd != nil {
				t.Errorf("%s has no broker default, yet %+v", td.Name, bd)
			}
			continue
		}
		if bd.Topic != td || !bd.Dynamic() || bd.Type != td.Type {
			t.Errorf("broker default of %s: %+v", td.Name, bd)
		}
	}
	for _, name := range []string{"node.id", "broker.id", "num.partitions", "log.dirs", "advertised.listeners",
		"auto.create.topics.enable", "socket.request.max.bytes"} {
		d, ok := LookupBrokerDef(name)
		if !ok || d.Dynamic() {
			t.Errorf("%s: found %v, dynamic %v; want a static broker config", name, ok, ok && d.Dynamic())
		}
	}
	if _, ok := LookupBrokerDef("retention.ms"); ok {
		t.Error("topic config name retention.ms found as a broker config")
	}
}

func TestBrokerDefValues(t *testing.T) {
	b := Defaults()
	b.NodeID, b.DataDir, b.DefaultPartitions = 3, "/data/x", 6
	b.Advertise = "example.com:9093"
	want := map[string]string{
		"node.id": "3", "broker.id": "3", "log.dirs": "/data/x", "num.partitions": "6",
		"advertised.listeners": "PLAINTEXT://example.com:9093", "listeners": "PLAINTEXT://127.0.0.1:9092",
		"log.retention.ms": "604800000", "log.segment.bytes": "1073741824", "log.cleanup.policy": "delete",
		"message.max.bytes": "1048588", "auto.create.topics.enable": "true",
		"socket.request.max.bytes": "104857600", "log.retention.check.interval.ms": "300000",
	}
	for name, v := range want {
		d, _ := LookupBrokerDef(name)
		if got := d.Get(b); got != v {
			t.Errorf("%s = %q, want %q", name, got, v)
		}
	}
}

func TestCheckDynamic(t *testing.T) {
	for _, tc := range []struct {
		configs map[string]string
		want    error
	}{
		{nil, nil},
		{map[string]string{"log.retention.ms": "1", "message.max.bytes": "10", "log.cleanup.policy": "compact"}, nil},
		{map[string]string{"num.partitions": "3"}, ErrInvalidConfig},
		{map[string]string{"log.retention.ms": "1", "node.id": "2"}, ErrInvalidConfig},
		// Kept, as Kafka keeps a name it does not know (a plugin's).
		{map[string]string{"no.such.config": "1"}, nil},
		{map[string]string{"retention.ms": "1"}, nil},
		// Kafka's, not acted on here: kept where Kafka changes it at run
		// time, with a value of its type.
		{map[string]string{"log.cleaner.backoff.ms": "100", "log.cleaner.io.buffer.load.factor": "0.5"}, nil},
		{map[string]string{"log.cleaner.backoff.ms": "soon"}, ErrInvalidConfig},
		{map[string]string{"log.cleaner.io.buffer.load.factor": "most"}, ErrInvalidConfig},
		{map[string]string{"process.roles": "broker"}, ErrInvalidConfig},
	} {
		err := CheckDynamic(tc.configs)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("CheckDynamic(%v) = %v, want %v", tc.configs, err, tc.want)
		}
	}
}

func TestApplyDynamic(t *testing.T) {
	static := Defaults()
	static.Topic.SegmentBytes = 64 << 20

	b, err := ApplyDynamic(static, map[string]string{"log.retention.ms": "1000", "message.max.bytes": "5000"},
		map[string]string{"log.retention.ms": "2000"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Topic.RetentionTime != 2*time.Second {
		t.Errorf("retention %v: the node level must win over the cluster level", b.Topic.RetentionTime)
	}
	if b.Topic.MaxMessageBytes != 5000 {
		t.Errorf("max message bytes %d: the cluster level must apply", b.Topic.MaxMessageBytes)
	}
	if b.Topic.SegmentBytes != 64<<20 {
		t.Errorf("segment bytes %d: the static setting must stay", b.Topic.SegmentBytes)
	}
	if static.Topic.RetentionTime != 7*24*time.Hour {
		t.Error("ApplyDynamic changed its argument")
	}

	for _, bad := range []map[string]string{
		{"log.retention.ms": "soon"},
		{"log.cleanup.policy": "archive"},
		{"num.partitions": "2"},
		{"log.segment.bytes": "3"},
	} {
		if _, err := ApplyDynamic(static, bad, nil); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ApplyDynamic(%v) = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func TestSynonyms(t *testing.T) {
	static := Defaults()
	static.Topic.SegmentBytes = 64 << 20
	retention, _ := LookupTopicDef("retention.ms")
	segment, _ := LookupTopicDef("segment.bytes")

	got := TopicSynonyms(retention, map[string]string{"retention.ms": "5"}, static,
		map[string]string{"log.retention.ms": "6"}, map[string]string{"log.retention.ms": "7"})
	want := []Synonym{
		{"retention.ms", "5", SourceTopic},
		{"log.retention.ms", "7", SourceDynamicBroker},
		{"log.retention.ms", "6", SourceDynamicDefault},
		{"log.retention.ms", "604800000", SourceDefault},
	}
	if !slices.Equal(got, want) {
		t.Errorf("retention.ms synonyms:\n got %v\nwant %v", got, want)
	}

	got = TopicSynonyms(segment, nil, static, nil, nil)
	want = []Synonym{
		{"log.segment.bytes", "67108864", SourceStaticBroker},
		{"log.segment.bytes", "1073741824", SourceDefault},
	}
	if !slices.Equal(got, want) {
		t.Errorf("segment.bytes synonyms:\n got %v\nwant %v", got, want)
	}

	nodeID, _ := LookupBrokerDef("node.id")
	if got := BrokerSynonyms(nodeID, Defaults(), nil, nil); !slices.Equal(got, []Synonym{{"node.id", "0", SourceDefault}}) {
		t.Errorf("node.id synonyms: %v", got)
	}
}

// The replication throttles: the rates change at runtime like the topic
// defaults, and the replicas lists take Kafka's partition:broker pairs.
func TestReplicationThrottleConfigs(t *testing.T) {
	b, err := ApplyDynamic(Defaults(), map[string]string{"leader.replication.throttled.rate": "1000"},
		map[string]string{"follower.replication.throttled.rate": "2000"})
	if err != nil || b.LeaderThrottleRate != 1000 || b.FollowerThrottleRate != 2000 {
		t.Fatalf("rates applied: %d, %d, %v", b.LeaderThrottleRate, b.FollowerThrottleRate, err)
	}
	if _, err := ApplyDynamic(Defaults(), nil, map[string]string{"follower.replication.throttled.rate": "-5"}); err == nil {
		t.Fatal("a negative rate accepted")
	}
	for _, tc := range []struct {
		list string
		ok   bool
	}{{"", true}, {"*", true}, {"0:1,3:2", true}, {"0:1, 1:2", true}, {"0", false}, {"a:1", false}, {"0:b", false}} {
		if _, err := TopicConfig(Defaults().Topic, map[string]string{"follower.replication.throttled.replicas": tc.list}); (err == nil) != tc.ok {
			t.Errorf("throttled replicas %q: %v", tc.list, err)
		}
	}
}

// TestSettingsDoc: docs/settings.md is the table of BrokerDefs.
func TestSettingsDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "settings.md")
	want := SettingsMarkdown()
	if os.Getenv("STRAND_WRITE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is not the table of BrokerDefs: run STRAND_WRITE_DOCS=1 go test ./internal/config", path)
	}
}

// TestUnusedKafkaDefs: each of Kafka's broker configs is either served
// (BrokerDefs) or listed as unused, never both; the reasons given name
// unused Kafka configs; the lists are sorted for their lookups.
func TestUnusedKafkaDefs(t *testing.T) {
	if len(KafkaDefs) < 300 {
		t.Fatalf("%d Kafka broker configs", len(KafkaDefs))
	}
	for i, d := range KafkaDefs {
		_, served := LookupBrokerDef(d.Name)
		if _, unused := LookupUnusedKafkaDef(d.Name); served == unused {
			t.Errorf("%s: served %v, unused %v", d.Name, served, unused)
		}
		if i > 0 && KafkaDefs[i-1].Name >= d.Name {
			t.Errorf("%s is not after %s", d.Name, KafkaDefs[i-1].Name)
		}
	}
	for i, d := range UnusedKafkaDefs {
		if got, ok := LookupUnusedKafkaDef(d.Name); !ok || got.Name != d.Name {
			t.Errorf("LookupUnusedKafkaDef(%s) = %v, %v", d.Name, got, ok)
		}
		if i > 0 && UnusedKafkaDefs[i-1].Name >= d.Name {
			t.Errorf("%s is not after %s", d.Name, UnusedKafkaDefs[i-1].Name)
		}
	}
	for name := range unusedWhy {
		if _, ok := LookupUnusedKafkaDef(name); !ok {
			t.Errorf("a reason for %s, which is no unused Kafka config", name)
		}
	}
	if _, ok := LookupUnusedKafkaDef("no.such.config"); ok {
		t.Error("an unknown name is listed")
	}
	// The table keeps what Kafka says: a default, none, a secret.
	for name, want := range map[string]string{"log.cleaner.backoff.ms": `15000 dynamic`, "node.id": `<none> read-only`,
		"ssl.keystore.password": `<none> dynamic sensitive`} {
		d, ok := LookupKafkaDef(name)
		if !ok {
			t.Fatalf("no Kafka config %s", name)
		}
		got := "<none>"
		if d.Default != nil {
			got = *d.Default
		}
		got += map[bool]string{true: " read-only", false: " dynamic"}[d.ReadOnly]
		if d.Sensitive {
			got += " sensitive"
		}
		if got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}

// TestCheckGroupConfigs: a group's configs as Kafka's GroupConfig checks
// them, against the broker's bounds.
func TestCheckGroupConfigs(t *testing.T) {
	b := Defaults() // sessions 45-60 s, heartbeats 5-15 s
	for _, tc := range []struct {
		configs map[string]string
		want    error
	}{
		{nil, nil},
		{map[string]string{"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"}, nil},
		{map[string]string{"share.auto.offset.reset": "earliest", "streams.num.standby.replicas": "1"}, nil},
		{map[string]string{"consumer.session.timeout.ms": "1000"}, ErrInvalidConfig},
		{map[string]string{"consumer.session.timeout.ms": "61000"}, ErrInvalidConfig},
		{map[string]string{"consumer.heartbeat.interval.ms": "often"}, ErrInvalidConfig},
		{map[string]string{"no.such.group.config": "1"}, ErrUnknownConfig},
	} {
		if err := CheckGroupConfigs(tc.configs, b); tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("CheckGroupConfigs(%v) = %v, want %v", tc.configs, err, tc.want)
		}
	}
	b.GroupConsumerMinSessionTimeout, b.GroupConsumerMinHeartbeatInterval = time.Second, 100*time.Millisecond
	if err := CheckGroupConfigs(map[string]string{"consumer.session.timeout.ms": "2000", "consumer.heartbeat.interval.ms": "5000"}, b); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a heartbeat interval over the session timeout: %v", err)
	}
}

// TestDefaultsFromBrokerDefs: Defaults is each row's Default, written as
// the row reads back, and within the row's own bounds.
func TestDefaultsFromBrokerDefs(t *testing.T) {
	b := Defaults()
	withDefault := 0
	for i := range BrokerDefs {
		d := &BrokerDefs[i]
		if d.Field == nil || d.Topic != nil {
			if d.Default != "" || d.Min != nil || d.Max != nil || d.OneOf != nil {
				t.Errorf("%s: a default or bounds without a field of its own", d.Name)
			}
			continue
		}
		if d.Default != "" {
			withDefault++
		}
		if got := fieldGetter(d.Name, d.Field)(b); got != d.Default {
			t.Errorf("%s: Defaults() has %q, its row says %q", d.Name, got, d.Default)
		}
		if err := d.check(&b); err != nil {
			t.Errorf("%s: its default is outside its bounds: %v", d.Name, err)
		}
	}
	if withDefault < 50 {
		t.Fatalf("only %d settings have a default", withDefault)
	}
	// Where each row's field is: no two rows write one field.
	fields := map[any]string{}
	for i := range BrokerDefs {
		if d := &BrokerDefs[i]; d.Field != nil {
			f := d.Field(&b)
			if other, dup := fields[f]; dup {
				t.Errorf("%s and %s write the same field", other, d.Name)
			}
			fields[f] = d.Name
		}
	}
}

// TestValidateBoundsFromBrokerDefs: Validate refuses, naming the setting,
// a value just outside each row's Min, Max or OneOf.
func TestValidateBoundsFromBrokerDefs(t *testing.T) {
	checked := 0
	for i := range BrokerDefs {
		d := &BrokerDefs[i]
		var outside []string
		if d.Min != nil {
			outside = append(outside, strconv.FormatInt(*d.Min-1, 10))
		}
		if d.Max != nil {
			outside = append(outside, strconv.FormatInt(*d.Max+1, 10))
		}
		if d.OneOf != nil {
			outside = append(outside, "bogus")
		}
		for _, v := range outside {
			b := Defaults()
			if err := d.setField(&b, v); err != nil {
				t.Fatalf("%s = %s: %v", d.Name, v, err)
			}
			err := b.Validate()
			if err == nil || !strings.Contains(err.Error(), d.Name) {
				t.Errorf("%s = %s: Validate() = %v, want it refused by name", d.Name, v, err)
			}
			checked++
		}
	}
	if checked < 40 {
		t.Fatalf("only %d bounds checked", checked)
	}
	// A duration between whole units of its name is above zero, or
	// below, as it is.
	b := Defaults()
	b.QuotaWindowSize, b.ReplicaLagTime = 500*time.Millisecond, 100*time.Microsecond
	if err := b.Validate(); err != nil {
		t.Errorf("a 500ms quota window, a 100µs replica lag time: %v", err)
	}
	b = Defaults()
	b.GroupInitialRebalanceDelay = -time.Microsecond
	if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "group.initial.rebalance.delay.ms") {
		t.Errorf("a negative rebalance delay: %v", err)
	}
}

// TestFileSettingAliases: Kafka's other names for a setting go to its flag,
// in the flag's unit.
func TestFileSettingAliases(t *testing.T) {
	for _, tc := range []struct{ key, value, flag, flagValue string }{
		{"log.retention.hours", "24", "retention-ms", "86400000"},
		{"log.retention.minutes", "-1", "retention-ms", "-1"},
		{"log.roll.hours", "1", "segment-ms", "3600000"},
		{"broker.id", "4", "node-id", "4"},
		{"security.inter.broker.protocol", "SSL", "inter-broker-listener-name", "SSL"},
		{"advertised.listeners", "SSL://k:9093", "advertised-listeners", "SSL://k:9093"},
		{"listener.security.protocol.map", "A:SSL", "listener-security-protocol-map", "A:SSL"},
		{"offsets.retention.minutes", "60", "offsets-retention", "1h0m0s"},
		{"log.retention.ms", "5", "retention-ms", "5"},
	} {
		flag, v, ok, err := FileSetting(tc.key, tc.value)
		if !ok || err != nil || flag != tc.flag || v != tc.flagValue {
			t.Errorf("%s = %s: --%s %q, %v, %v; want --%s %q", tc.key, tc.value, flag, v, ok, err, tc.flag, tc.flagValue)
		}
	}
	if !slices.Contains(FileKeys(), "log.retention.hours") {
		t.Error("FileKeys lacks the aliases")
	}
}

// TestSetStaticFlushSettings: a config file's log.flush.* lines, in either
// order, read as Kafka reads them.
func TestSetStaticFlushSettings(t *testing.T) {
	for _, tc := range []struct {
		values   map[string]string
		policy   string
		interval time.Duration
	}{
		{map[string]string{"log.flush.interval.ms": "250", "log.flush.interval.messages": "10000"}, "interval", 250 * time.Millisecond},
		{map[string]string{"log.flush.interval.messages": "10000"}, "never", time.Second},
		{map[string]string{"log.flush.interval.messages": "1", "log.flush.interval.ms": "250"}, "every-append", time.Second},
	} {
		b := Defaults()
		if err := SetStatic(&b, tc.values); err != nil {
			t.Fatal(err)
		}
		if b.Topic.FlushPolicy.String() != tc.policy || b.Topic.FlushInterval != tc.interval {
			t.Errorf("%v: %v every %v, want %s every %v", tc.values, b.Topic.FlushPolicy, b.Topic.FlushInterval, tc.policy, tc.interval)
		}
	}
}

// TestCheckShareGroupConfigs: a share group's configs are checked as
// Kafka's GroupConfig checks them.
func TestCheckShareGroupConfigs(t *testing.T) {
	for _, tc := range []struct {
		configs map[string]string
		ok      bool
	}{
		{map[string]string{"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"}, true},
		{map[string]string{"share.auto.offset.reset": "by_duration:PT1H30M"}, true},
		{map[string]string{"share.auto.offset.reset": "by_duration:P1DT0.5S"}, true},
		{map[string]string{"share.auto.offset.reset": "newest"}, false},
		{map[string]string{"share.auto.offset.reset": "by_duration:1h"}, false},
		{map[string]string{"share.auto.offset.reset": "by_duration:pt"}, false},
		{map[string]string{"share.auto.offset.reset": "by_duration:P1DT"}, false},
		{map[string]string{"share.auto.offset.reset": "by_duration:pt2h"}, true},
		{map[string]string{"share.isolation.level": "committed"}, false},
		{map[string]string{"share.record.lock.duration.ms": "15000", "share.delivery.count.limit": "10"}, true},
		{map[string]string{"share.record.lock.duration.ms": "1000"}, false},
		{map[string]string{"share.delivery.count.limit": "11"}, false},
		{map[string]string{"share.partition.max.record.locks": "99"}, false},
	} {
		err := CheckGroupConfigs(tc.configs, Defaults())
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("%v: %v, want ok %v", tc.configs, err, tc.ok)
		}
	}
	for v, want := range map[string]time.Duration{"latest": 0, "by_duration:PT1H30M": 90 * time.Minute,
		"by_duration:P2D": 48 * time.Hour, "by_duration:PT0.25S": 250 * time.Millisecond} {
		if got, err := ShareResetDuration(v); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", v, got, err, want)
		}
	}
}
