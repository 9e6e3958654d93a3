package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
)

// env is an in-process broker with a client and an admin client.
type env struct {
	t   *testing.T
	b   *testutil.Broker
	ctx context.Context
	cl  *kgo.Client
	adm *kadm.Client
}

func newEnv(t *testing.T, edit func(*config.Broker)) *env {
	t.Helper()
	e := &env{t: t, b: testutil.StartBroker(t, edit)}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	e.ctx = ctx
	e.connect()
	return e
}

func (e *env) connect() {
	e.t.Helper()
	e.cl = e.client()
	e.adm = kadm.NewClient(e.cl)
}

// client returns a new client of the broker, closed at the end of the test.
func (e *env) client(opts ...kgo.Opt) *kgo.Client {
	e.t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(e.b.Addr),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.UnknownTopicRetries(0),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cl.Close)
	return cl
}

// clientAt returns a client that uses at most version v of API key.
func (e *env) clientAt(key, v int16) *kgo.Client {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(key, v)
	return e.client(kgo.MaxVersions(vs))
}

func (e *env) restart() {
	e.t.Helper()
	e.cl.Close()
	e.b.Restart(e.t)
	e.connect()
}

// raw sends req straight to the broker (no client-side sharding or
// synthesized errors) and returns the answer.
func raw[R kmsg.Response](e *env, cl *kgo.Client, req kmsg.Request) R {
	e.t.Helper()
	if cl == nil {
		cl = e.cl
	}
	resp, err := cl.SeedBrokers()[0].Request(e.ctx, req)
	if err != nil {
		e.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

func (e *env) createTopic(name string, partitions int32, configs map[string]*string) kadm.CreateTopicResponse {
	e.t.Helper()
	r, err := e.adm.CreateTopic(e.ctx, partitions, 1, configs, name)
	if err != nil {
		e.t.Fatalf("creating %s: %v (%s)", name, err, r.ErrMessage)
	}
	return r
}

// produce writes one record (with a key, so that compacted topics take it).
func (e *env) produce(topic string, partition int32, value []byte) error {
	e.t.Helper()
	r := &kgo.Record{Topic: topic, Partition: partition, Key: []byte("k"), Value: value}
	return e.cl.ProduceSync(e.ctx, r).FirstErr()
}

func (e *env) mustProduce(topic string, partition int32, n int) {
	e.t.Helper()
	for i := range n {
		if err := e.produce(topic, partition, []byte(fmt.Sprint("record-", i))); err != nil {
			e.t.Fatalf("producing to %s/%d: %v", topic, partition, err)
		}
	}
}

// tooLarge is a record value above a max.message.bytes of 1000.
var tooLarge = []byte(strings.Repeat("x", 2000))

func (e *env) describeTopic(topic string) map[string]kadm.Config {
	e.t.Helper()
	rcs, err := e.adm.DescribeTopicConfigs(e.ctx, topic)
	if err != nil {
		e.t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		e.t.Fatalf("describing %s: %v %v", topic, err, rc.Err)
	}
	out := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		out[c.Key] = c
	}
	return out
}

func (e *env) startOffset(topic string, partition int32) int64 {
	e.t.Helper()
	los, err := e.adm.ListStartOffsets(e.ctx, topic)
	if err != nil {
		e.t.Fatal(err)
	}
	lo, ok := los.Lookup(topic, partition)
	if !ok || lo.Err != nil {
		e.t.Fatalf("start offset of %s/%d: %v", topic, partition, lo.Err)
	}
	return lo.Offset
}

// metadata lists every topic, asked of the broker now (kadm's ListTopics
// may answer from the client's metadata cache).
func (e *env) metadata() map[string]kmsg.MetadataResponseTopic {
	e.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all
	out := map[string]kmsg.MetadataResponseTopic{}
	for _, t := range raw[*kmsg.MetadataResponse](e, nil, req).Topics {
		if t.ErrorCode != 0 {
			e.t.Fatalf("metadata of %v: %v", t.Topic, kerr.ErrorForCode(t.ErrorCode))
		}
		out[*t.Topic] = t
	}
	return out
}

func (e *env) topicIDs() map[string]kadm.TopicID {
	e.t.Helper()
	out := map[string]kadm.TopicID{}
	for name, t := range e.metadata() {
		out[name] = t.TopicID
	}
	return out
}

func (e *env) partitions(topic string) int {
	e.t.Helper()
	t, ok := e.metadata()[topic]
	if !ok {
		e.t.Fatalf("topic %s not listed", topic)
	}
	return len(t.Partitions)
}

func wantErr(t *testing.T, what string, got error, want *kerr.Error) {
	t.Helper()
	if want == nil && got != nil || want != nil && !errors.Is(got, want) {
		t.Errorf("%s: error %v, want %v", what, got, want)
	}
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var code int16
	if want != nil {
		code = want.Code
	}
	if got != code {
		t.Errorf("%s: error code %d (%v), want %d (%v)", what, got, kerr.ErrorForCode(got), code, want)
	}
}

func ptr(s string) *string { return &s }

func val(c kadm.Config) string { return c.MaybeValue() }

func TestAdminApiVersions(t *testing.T) {
	e := newEnv(t, nil)
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strand-test", "1.0"
	resp := raw[*kmsg.ApiVersionsResponse](e, nil, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	want := map[int16][2]int16{19: {2, 7}, 20: {1, 6}, 21: {0, 2}, 23: {2, 4}, 32: {1, 4}, 33: {0, 2}, 37: {0, 3}, 44: {0, 1}, 60: {0, 2}}
	for _, k := range resp.ApiKeys {
		if w, ok := want[k.ApiKey]; ok {
			if k.MinVersion != w[0] || k.MaxVersion != w[1] {
				t.Errorf("%s: v%d-%d, want v%d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, w[0], w[1])
			}
			delete(want, k.ApiKey)
		}
	}
	for k := range want {
		t.Errorf("%s not advertised", kmsg.NameForKey(k))
	}
}

func TestCreateTopics(t *testing.T) {
	e := newEnv(t, func(c *config.Broker) { c.DefaultPartitions = 2 })

	r := e.createTopic("orders", 3, map[string]*string{"retention.ms": ptr("3600000"), "cleanup.policy": ptr("compact")})
	if r.NumPartitions != 3 || r.ReplicationFactor != 1 || r.ID == (kadm.TopicID{}) {
		t.Errorf("created: %d partitions, replication %d, id %v", r.NumPartitions, r.ReplicationFactor, r.ID)
	}
	if c := r.Configs["retention.ms"]; c.MaybeValue() != "3600000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms in answer: %q from %v", c.MaybeValue(), c.Source)
	}
	if c := r.Configs["segment.bytes"]; c.MaybeValue() != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("segment.bytes in answer: %q from %v", c.MaybeValue(), c.Source)
	}
	if len(r.Configs) != len(config.TopicDefs) {
		t.Errorf("answer lists %d configs, want %d", len(r.Configs), len(config.TopicDefs))
	}
	if ids := e.topicIDs(); ids["orders"] != r.ID {
		t.Errorf("listed id %v, created %v", ids["orders"], r.ID)
	}
	if n := e.partitions("orders"); n != 3 {
		t.Errorf("orders has %d partitions", n)
	}
	if c := e.describeTopic("orders")["cleanup.policy"]; c.MaybeValue() != "compact" {
		t.Errorf("described cleanup.policy %q", c.MaybeValue())
	}
	e.mustProduce("orders", 2, 1)

	// Default partition count.
	if r := e.createTopic("defaulted", -1, nil); r.NumPartitions != 2 {
		t.Errorf("-1 partitions: created %d, want num.partitions 2", r.NumPartitions)
	}
	if n := e.partitions("defaulted"); n != 2 {
		t.Errorf("defaulted has %d partitions", n)
	}

	// Validate only: answered in full, nothing created.
	vr, err := e.adm.ValidateCreateTopics(e.ctx, 4, 1, map[string]*string{"retention.ms": ptr("1000")}, "validated")
	if err != nil {
		t.Fatal(err)
	}
	if v := vr["validated"]; v.Err != nil || v.NumPartitions != 4 || val(v.Configs["retention.ms"]) != "1000" {
		t.Errorf("validate only: %+v", v)
	}
	if _, ok := e.topicIDs()["validated"]; ok {
		t.Error("validate-only created the topic")
	}

	for _, tc := range []struct {
		name    string
		parts   int32
		rf      int16
		configs map[string]*string
		want    *kerr.Error
	}{
		{"orders", 1, 1, nil, kerr.TopicAlreadyExists},
		{"bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"..", 1, 1, nil, kerr.InvalidTopicException},
		{strings.Repeat("a", 250), 1, 1, nil, kerr.InvalidTopicException},
		{"three-replicas", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"zero-replicas", 1, 0, nil, kerr.InvalidReplicationFactor},
		{"zero-partitions", 0, 1, nil, kerr.InvalidPartitions},
		{"bad-value", 1, 1, map[string]*string{"retention.ms": ptr("soon")}, kerr.InvalidConfig},
		{"bad-policy", 1, 1, map[string]*string{"cleanup.policy": ptr("archive")}, kerr.InvalidConfig},
		{"unknown-config", 1, 1, map[string]*string{"no.such.config": ptr("1")}, kerr.InvalidConfig},
		{"null-config", 1, 1, map[string]*string{"retention.ms": nil}, kerr.InvalidConfig},
		// The config error wins over the replication factor, as in Kafka.
		{"two-errors", 1, 3, map[string]*string{"retention.ms": ptr("soon")}, kerr.InvalidConfig},
	} {
		rs, err := e.adm.CreateTopics(e.ctx, tc.parts, tc.rf, tc.configs, tc.name)
		if err != nil {
			t.Fatal(err)
		}
		got := rs[tc.name]
		wantErr(t, tc.name, got.Err, tc.want)
		if got.ErrMessage == "" {
			t.Errorf("%s: no error message", tc.name)
		}
	}
	if ids := e.topicIDs(); len(ids) != 2 {
		t.Errorf("topics after the failed creations: %v", ids)
	}

	// Names that differ only by '.' against '_' collide.
	e.createTopic("a.b", 1, nil)
	rs, _ := e.adm.CreateTopics(e.ctx, 1, 1, nil, "a_b")
	wantErr(t, "colliding name", rs["a_b"].Err, kerr.InvalidTopicException)
	if !strings.Contains(rs["a_b"].ErrMessage, "a.b") {
		t.Errorf("collision message %q does not name a.b", rs["a_b"].ErrMessage)
	}
}

func TestCreateTopicsRaw(t *testing.T) {
	e := newEnv(t, nil)
	topic := func(name string, parts int32, rf int16) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, rf
		return rt
	}
	assign := func(rt kmsg.CreateTopicsRequestTopic, parts map[int32][]int32) kmsg.CreateTopicsRequestTopic {
		for p, replicas := range parts {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = p, replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		return rt
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{
		topic("dup", 1, 1),
		topic("single", 1, 1),
		topic("dup", 2, 1),
		assign(topic("assigned", -1, -1), map[int32][]int32{0: {0}, 1: {0}}),
		assign(topic("other-broker", -1, -1), map[int32][]int32{0: {1}}),
		assign(topic("twice", -1, -1), map[int32][]int32{0: {0, 0}}),
		assign(topic("empty-replicas", -1, -1), map[int32][]int32{0: {}}),
		assign(topic("gap", -1, -1), map[int32][]int32{0: {0}, 2: {0}}),
		assign(topic("assigned-with-rf", -1, 1), map[int32][]int32{0: {0}}),
		assign(topic("assigned-with-count", 1, -1), map[int32][]int32{0: {0}}),
		topic("__cluster_metadata", 1, 1),
	}
	resp := raw[*kmsg.CreateTopicsResponse](e, nil, req)
	want := map[string]*kerr.Error{
		"dup": kerr.InvalidRequest, "single": nil, "assigned": nil,
		"other-broker": kerr.InvalidReplicaAssignment, "twice": kerr.InvalidReplicaAssignment,
		"empty-replicas": kerr.InvalidReplicaAssignment, "gap": kerr.InvalidReplicaAssignment,
		"assigned-with-rf": kerr.InvalidRequest, "assigned-with-count": kerr.InvalidRequest,
		"__cluster_metadata": kerr.InvalidRequest,
	}
	seen := map[string]int{}
	for _, st := range resp.Topics {
		seen[st.Topic]++
		w, ok := want[st.Topic]
		if !ok {
			t.Errorf("unexpected answer for %s", st.Topic)
			continue
		}
		wantCode(t, st.Topic, st.ErrorCode, w)
		if w != nil && (st.ErrorMessage == nil || *st.ErrorMessage == "") {
			t.Errorf("%s: no error message", st.Topic)
		}
	}
	for name := range want {
		if seen[name] != 1 {
			t.Errorf("%s answered %d times, want once", name, seen[name])
		}
	}
	ids := e.topicIDs()
	if len(ids) != 2 {
		t.Errorf("topics created: %v, want single and assigned", ids)
	}
	if n := e.partitions("assigned"); n != 2 {
		t.Errorf("assigned has %d partitions, want 2", n)
	}

	// More than 10000 partitions in one request: nothing is created.
	req = kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{topic("huge", 10000, 1), topic("small", 1, 1)}
	resp = raw[*kmsg.CreateTopicsResponse](e, nil, req)
	for _, st := range resp.Topics {
		wantCode(t, "too many partitions: "+st.Topic, st.ErrorCode, kerr.PolicyViolation)
	}
	if len(resp.Topics) != 2 || len(e.topicIDs()) != 2 {
		t.Errorf("too many partitions: %d answers, topics %v", len(resp.Topics), e.topicIDs())
	}
}

// TestCreateTopicsVersions creates a topic at every version served and
// checks the fields each version carries.
func TestCreateTopicsVersions(t *testing.T) {
	e := newEnv(t, nil)
	for v := int16(2); v <= 7; v++ {
		cl := e.clientAt(19, v)
		name := fmt.Sprint("topic-v", v)
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, 1
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = "retention.ms", ptr("60000")
		rt.Configs = append(rt.Configs, c)
		req.Topics = append(req.Topics, rt)
		resp := raw[*kmsg.CreateTopicsResponse](e, cl, req)
		if resp.Version != v || len(resp.Topics) != 1 {
			t.Fatalf("v%d: answered v%d with %d topics", v, resp.Version, len(resp.Topics))
		}
		st := resp.Topics[0]
		wantCode(t, name, st.ErrorCode, nil)
		if v >= 5 {
			if st.NumPartitions != 2 || st.ReplicationFactor != 1 || len(st.Configs) != len(config.TopicDefs) {
				t.Errorf("v%d: %d partitions, replication %d, %d configs", v, st.NumPartitions, st.ReplicationFactor, len(st.Configs))
			}
		} else if len(st.Configs) != 0 {
			t.Errorf("v%d: configs in an answer that has none", v)
		}
		id := e.topicIDs()[name]
		if v >= 7 && st.TopicID != id || v < 7 && st.TopicID != ([16]byte{}) {
			t.Errorf("v%d: answered id %v, topic id %v", v, st.TopicID, id)
		}
		if c := e.describeTopic(name)["retention.ms"]; c.MaybeValue() != "60000" {
			t.Errorf("v%d: retention.ms %q", v, c.MaybeValue())
		}
	}
}

func TestDescribeConfigs(t *testing.T) {
	e := newEnv(t, func(c *config.Broker) {
		c.Topic.SegmentBytes = 64 << 20 // a static setting that differs from the default
		c.NodeID = 4
	})
	e.createTopic("described", 1, map[string]*string{"retention.ms": ptr("3600000")})

	cs := e.describeTopic("described")
	if len(cs) != len(config.TopicDefs) {
		t.Errorf("described %d configs, want %d", len(cs), len(config.TopicDefs))
	}
	check := func(name, value string, source kmsg.ConfigSource, synonyms ...kadm.ConfigSynonym) {
		t.Helper()
		c, ok := cs[name]
		if !ok {
			t.Errorf("%s not described", name)
			return
		}
		if c.MaybeValue() != value || c.Source != source {
			t.Errorf("%s = %q from %v, want %q from %v", name, c.MaybeValue(), c.Source, value, source)
		}
		var got []string
		for _, s := range c.Synonyms {
			got = append(got, fmt.Sprintf("%v:%s=%s", s.Source, s.Key, *s.Value))
		}
		var want []string
		for _, s := range synonyms {
			want = append(want, fmt.Sprintf("%v:%s=%s", s.Source, s.Key, *s.Value))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s synonyms:\n got %v\nwant %v", name, got, want)
		}
	}
	syn := func(source kmsg.ConfigSource, key, value string) kadm.ConfigSynonym {
		return kadm.ConfigSynonym{Key: key, Value: &value, Source: source}
	}
	check("retention.ms", "3600000", kmsg.ConfigSourceDynamicTopicConfig,
		syn(kmsg.ConfigSourceDynamicTopicConfig, "retention.ms", "3600000"),
		syn(kmsg.ConfigSourceDefaultConfig, "log.retention.ms", "604800000"))
	check("segment.bytes", "67108864", kmsg.ConfigSourceStaticBrokerConfig,
		syn(kmsg.ConfigSourceStaticBrokerConfig, "log.segment.bytes", "67108864"),
		syn(kmsg.ConfigSourceDefaultConfig, "log.segment.bytes", "1073741824"))
	check("cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig,
		syn(kmsg.ConfigSourceDefaultConfig, "log.cleanup.policy", "delete"))
	check("max.message.bytes", "1048588", kmsg.ConfigSourceDefaultConfig,
		syn(kmsg.ConfigSourceDefaultConfig, "message.max.bytes", "1048588"))

	// Every version, with and without synonyms, documentation and names.
	for v := int16(1); v <= 4; v++ {
		cl := e.clientAt(32, v)
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "described"
		rr.ConfigNames = []string{"retention.ms", "segment.ms", "no.such.config"}
		req.Resources = append(req.Resources, rr)
		req.IncludeDocumentation = true
		resp := raw[*kmsg.DescribeConfigsResponse](e, cl, req)
		if resp.Version != v || len(resp.Resources) != 1 {
			t.Fatalf("v%d: answered v%d with %d resources", v, resp.Version, len(resp.Resources))
		}
		res := resp.Resources[0]
		wantCode(t, fmt.Sprint("v", v), res.ErrorCode, nil)
		if len(res.Configs) != 2 || res.Configs[0].Name != "retention.ms" || res.Configs[1].Name != "segment.ms" {
			t.Fatalf("v%d: named configs answered %+v", v, res.Configs)
		}
		c := res.Configs[0]
		if *c.Value != "3600000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig || c.ReadOnly || len(c.ConfigSynonyms) != 0 {
			t.Errorf("v%d: %+v", v, c)
		}
		if v >= 3 && (c.ConfigType != kmsg.ConfigTypeLong || c.Documentation == nil || *c.Documentation == "") {
			t.Errorf("v%d: type %v, documentation %v", v, c.ConfigType, c.Documentation)
		}
		if v < 3 && (c.ConfigType != 0 || c.Documentation != nil) {
			t.Errorf("v%d: type and documentation in a version without them", v)
		}
	}
	// Without IncludeDocumentation, none.
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "described"
	req.Resources = append(req.Resources, rr)
	for _, c := range raw[*kmsg.DescribeConfigsResponse](e, nil, req).Resources[0].Configs {
		if c.Documentation != nil {
			t.Errorf("%s: documentation not asked for", c.Name)
		}
	}

	// Errors, per resource.
	bad := []struct {
		typ  kmsg.ConfigResourceType
		name string
		want *kerr.Error
	}{
		{kmsg.ConfigResourceTypeTopic, "missing", kerr.UnknownTopicOrPartition},
		{kmsg.ConfigResourceTypeTopic, "bad/name", kerr.InvalidTopicException},
		{kmsg.ConfigResourceTypeBroker, "0", kerr.InvalidRequest}, // not this broker (4)
		{kmsg.ConfigResourceTypeBroker, "four", kerr.InvalidRequest},
		{kmsg.ConfigResourceTypeBrokerLogger, "0", kerr.InvalidRequest}, // not this broker
		{kmsg.ConfigResourceTypeBrokerLogger, "", kerr.InvalidRequest},
		{kmsg.ConfigResourceTypeBrokerLogger, "4", nil},
		{kmsg.ConfigResourceTypeGroupConfig, "g", nil},
		{kmsg.ConfigResourceTypeTopic, "described", nil},
	}
	req = kmsg.NewPtrDescribeConfigsRequest()
	for _, b := range bad {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = b.typ, b.name
		req.Resources = append(req.Resources, rr)
	}
	resp := raw[*kmsg.DescribeConfigsResponse](e, nil, req)
	if len(resp.Resources) != len(bad) {
		t.Fatalf("%d answers for %d resources", len(resp.Resources), len(bad))
	}
	for i, res := range resp.Resources {
		if res.ResourceName != bad[i].name || res.ResourceType != bad[i].typ {
			t.Errorf("answer %d is for %v %q", i, res.ResourceType, res.ResourceName)
		}
		wantCode(t, fmt.Sprintf("%v %q", bad[i].typ, bad[i].name), res.ErrorCode, bad[i].want)
		if bad[i].want != nil && len(res.Configs) != 0 {
			t.Errorf("%q: configs with an error", bad[i].name)
		}
	}
}

func TestDescribeBrokerConfigs(t *testing.T) {
	e := newEnv(t, func(c *config.Broker) { c.NodeID = 2; c.DefaultPartitions = 3 })
	rcs, err := e.adm.DescribeBrokerConfigs(e.ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("2", nil)
	if err != nil || rc.Err != nil {
		t.Fatal(err, rc.Err)
	}
	got := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		got[c.Key] = c
	}
	for name, want := range map[string]string{
		"node.id": "2", "broker.id": "2", "num.partitions": "3", "log.dirs": e.b.DataDir,
		"advertised.listeners": "PLAINTEXT://" + e.b.Addr, "auto.create.topics.enable": "true",
		"log.retention.ms": "604800000", "message.max.bytes": "1048588", "log.cleanup.policy": "delete",
	} {
		if c := got[name]; c.MaybeValue() != want {
			t.Errorf("%s = %q, want %q", name, c.MaybeValue(), want)
		}
	}
	if c := got["num.partitions"]; c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("num.partitions 3 (default 1) from %v", c.Source)
	}
	if c := got["log.retention.ms"]; c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("log.retention.ms from %v", c.Source)
	}
	if want := len(config.BrokerDefs) + len(config.UnusedKafkaDefs); len(got) != want {
		t.Errorf("%d broker configs described, want %d", len(got), want)
	}

	// Read-only flags, on the raw answer.
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "2"
	rr.ConfigNames = []string{"num.partitions", "log.retention.ms"}
	req.Resources = append(req.Resources, rr)
	for _, c := range raw[*kmsg.DescribeConfigsResponse](e, nil, req).Resources[0].Configs {
		if want := c.Name == "num.partitions"; c.ReadOnly != want {
			t.Errorf("%s read-only %v", c.Name, c.ReadOnly)
		}
	}

	// The cluster-wide level lists only what is set there.
	clusterLevel := func() []kadm.Config {
		t.Helper()
		rcs, err := e.adm.DescribeBrokerConfigs(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("", nil)
		if err != nil || rc.Err != nil {
			t.Fatal(err, rc.Err)
		}
		return rc.Configs
	}
	if cs := clusterLevel(); len(cs) != 0 {
		t.Errorf("cluster level before any change: %v", cs)
	}
	if _, err := e.adm.AlterBrokerConfigs(e.ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: ptr("120000")}}); err != nil {
		t.Fatal(err)
	}
	cs := clusterLevel()
	if len(cs) != 1 || cs[0].Key != "log.retention.ms" || val(cs[0]) != "120000" ||
		cs[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || len(cs[0].Synonyms) != 1 {
		t.Errorf("cluster level: %+v", cs)
	}
}

func TestAlterConfigs(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("altered", 1, map[string]*string{"retention.ms": ptr("3600000")})
	state := func(configs ...kadm.AlterConfig) (kadm.AlterConfigsResponse, error) {
		rs, err := e.adm.AlterTopicConfigsState(e.ctx, configs, "altered")
		if err != nil {
			return kadm.AlterConfigsResponse{}, err
		}
		return rs.On("altered", nil)
	}

	// The whole set is replaced: retention.ms returns to its default.
	if r, err := state(kadm.AlterConfig{Name: "max.message.bytes", Value: ptr("1000")}); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	cs := e.describeTopic("altered")
	if c := cs["retention.ms"]; c.MaybeValue() != "604800000" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("retention.ms after replacing the set: %q from %v", c.MaybeValue(), c.Source)
	}
	if c := cs["max.message.bytes"]; c.MaybeValue() != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("max.message.bytes: %q from %v", c.MaybeValue(), c.Source)
	}
	// The partition's log got it.
	wantErr(t, "produce above max.message.bytes", e.produce("altered", 0, tooLarge), kerr.MessageTooLarge)

	// Validate only changes nothing.
	rs, err := e.adm.ValidateAlterTopicConfigsState(e.ctx, nil, "altered")
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	if c := e.describeTopic("altered")["max.message.bytes"]; c.MaybeValue() != "1000" {
		t.Errorf("validate-only changed max.message.bytes to %q", c.MaybeValue())
	}

	// Errors leave the set as it was.
	for _, bad := range []kadm.AlterConfig{
		{Name: "retention.ms", Value: ptr("soon")},
		{Name: "no.such.config", Value: ptr("1")},
		{Name: "retention.ms"}, // null
	} {
		r, err := state(bad)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "altering "+bad.Name, r.Err, kerr.InvalidConfig)
	}
	if c := e.describeTopic("altered")["max.message.bytes"]; c.MaybeValue() != "1000" {
		t.Errorf("a failed alter changed max.message.bytes to %q", c.MaybeValue())
	}

	// An empty set removes every override, in the log too.
	if r, err := state(); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	if err := e.produce("altered", 0, tooLarge); err != nil {
		t.Errorf("produce after removing max.message.bytes: %v", err)
	}

	// Per resource errors and duplicates, raw, at every version.
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrAlterConfigsRequest()
		for _, r := range []struct {
			typ  kmsg.ConfigResourceType
			name string
		}{
			{kmsg.ConfigResourceTypeTopic, "missing"},
			{kmsg.ConfigResourceTypeTopic, "altered"},
			{kmsg.ConfigResourceTypeTopic, "altered"},
			{kmsg.ConfigResourceTypeBrokerLogger, "0"},
			{kmsg.ConfigResourceTypeBroker, "9"},
		} {
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = r.typ, r.name
			req.Resources = append(req.Resources, rr)
		}
		resp := raw[*kmsg.AlterConfigsResponse](e, e.clientAt(33, v), req)
		if resp.Version != v || len(resp.Resources) != 4 {
			t.Fatalf("v%d: answered v%d, %d resources: %+v", v, resp.Version, len(resp.Resources), resp.Resources)
		}
		for i, want := range []*kerr.Error{kerr.UnknownTopicOrPartition, kerr.InvalidRequest, kerr.InvalidRequest, kerr.InvalidRequest} {
			wantCode(t, fmt.Sprintf("v%d %q", v, resp.Resources[i].ResourceName), resp.Resources[i].ErrorCode, want)
		}
		// A working alter at this version.
		req = kmsg.NewPtrAlterConfigsRequest()
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "altered"
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "segment.ms", ptr(strconv.Itoa(1000000+int(v)))
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		resp = raw[*kmsg.AlterConfigsResponse](e, e.clientAt(33, v), req)
		wantCode(t, fmt.Sprint("v", v), resp.Resources[0].ErrorCode, nil)
		if c := e.describeTopic("altered")["segment.ms"]; c.MaybeValue() != strconv.Itoa(1000000+int(v)) {
			t.Errorf("v%d: segment.ms %q", v, c.MaybeValue())
		}
	}
}

func TestIncrementalAlterConfigs(t *testing.T) {
	e := newEnv(t, func(c *config.Broker) { c.RetentionCheck = 100 * time.Millisecond })
	e.createTopic("inc", 1, map[string]*string{"segment.bytes": ptr("100"), "retention.ms": ptr("3600000")})
	alter := func(configs ...kadm.AlterConfig) error {
		rs, err := e.adm.AlterTopicConfigs(e.ctx, configs, "inc")
		if err != nil {
			return err
		}
		r, err := rs.On("inc", nil)
		if err != nil {
			return err
		}
		return r.Err
	}
	value := func(name string) string { return val(e.describeTopic("inc")[name]) }

	if err := alter(
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: ptr("1000")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"},
		kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: ptr("compact")},
	); err != nil {
		t.Fatal(err)
	}
	cs := e.describeTopic("inc")
	if c := cs["retention.ms"]; c.MaybeValue() != "604800000" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("deleted retention.ms: %q from %v", c.MaybeValue(), c.Source)
	}
	if got := val(cs["cleanup.policy"]); got != "delete,compact" {
		t.Errorf("appended cleanup.policy %q, want delete,compact", got)
	}
	if got := val(cs["segment.bytes"]); got != "100" {
		t.Errorf("untouched segment.bytes %q", got)
	}
	wantErr(t, "produce above the new max.message.bytes", e.produce("inc", 0, tooLarge), kerr.MessageTooLarge)

	if err := alter(kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: ptr("compact")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "max.message.bytes"}); err != nil {
		t.Fatal(err)
	}
	if got := value("cleanup.policy"); got != "delete" {
		t.Errorf("subtracted cleanup.policy %q", got)
	}

	// Errors, and validate-only, change nothing.
	for _, tc := range []struct {
		change kadm.AlterConfig
		want   *kerr.Error
	}{
		{kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: ptr("5")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr("soon")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: ptr("1")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: ptr("delete")}, kerr.InvalidConfig}, // empty policy
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms"}, kerr.InvalidRequest},                             // null
	} {
		wantErr(t, fmt.Sprintf("%v %s", tc.change.Op, tc.change.Name), alter(tc.change), tc.want)
	}
	rs, err := e.adm.ValidateAlterTopicConfigs(e.ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr("1")}}, "inc")
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	if got := value("retention.ms"); got != "604800000" {
		t.Errorf("after errors and validate-only, retention.ms %q", got)
	}

	// Raw: duplicate resources and keys, unknown op, at every version.
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		add := func(name string, changes ...kmsg.IncrementalAlterConfigsRequestResourceConfig) {
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeTopic, name, changes
			req.Resources = append(req.Resources, rr)
		}
		change := func(op kmsg.IncrementalAlterConfigOp, name string, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Op, c.Name, c.Value = op, name, value
			return c
		}
		e.createTopic(fmt.Sprint("inc-v", v), 1, nil)
		add("missing", change(kmsg.IncrementalAlterConfigOpSet, "retention.ms", ptr("1")))
		add("inc", change(kmsg.IncrementalAlterConfigOpSet, "retention.ms", ptr("1")),
			change(kmsg.IncrementalAlterConfigOpDelete, "retention.ms", nil))
		add(fmt.Sprint("inc-v", v), change(9, "retention.ms", ptr("1")))
		add("twice", change(kmsg.IncrementalAlterConfigOpSet, "retention.ms", ptr("1")))
		add("twice", change(kmsg.IncrementalAlterConfigOpSet, "retention.ms", ptr("1")))
		add(fmt.Sprint("inc-v", v), change(kmsg.IncrementalAlterConfigOpSet, "retention.ms", ptr("1")))
		resp := raw[*kmsg.IncrementalAlterConfigsResponse](e, e.clientAt(44, v), req)
		if resp.Version != v || len(resp.Resources) != 6 {
			t.Fatalf("v%d: answered v%d with %d resources", v, resp.Version, len(resp.Resources))
		}
		for i, want := range []*kerr.Error{kerr.UnknownTopicOrPartition, kerr.InvalidRequest, kerr.InvalidRequest,
			kerr.InvalidRequest, kerr.InvalidRequest, kerr.InvalidRequest} {
			wantCode(t, fmt.Sprintf("v%d resource %d", v, i), resp.Resources[i].ErrorCode, want)
		}
		// A working change at this version.
		req = kmsg.NewPtrIncrementalAlterConfigsRequest()
		add(fmt.Sprint("inc-v", v), change(kmsg.IncrementalAlterConfigOpSet, "retention.ms", ptr("123")))
		resp = raw[*kmsg.IncrementalAlterConfigsResponse](e, e.clientAt(44, v), req)
		wantCode(t, fmt.Sprint("v", v), resp.Resources[0].ErrorCode, nil)
		if got := val(e.describeTopic(fmt.Sprint("inc-v", v))["retention.ms"]); got != "123" {
			t.Errorf("v%d: retention.ms %q", v, got)
		}
	}

	// Retention follows a change: with 100-byte segments, each record
	// below is a segment of its own, and retention.bytes=1 keeps only the
	// active one.
	e.mustProduce("inc", 0, 5)
	if err := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.bytes", Value: ptr("1")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for e.startOffset("inc", 0) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("log start offset %d: retention.bytes=1 not applied", e.startOffset("inc", 0))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDynamicBrokerConfigs(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("plain", 1, nil)
	e.createTopic("overriding", 1, map[string]*string{"max.message.bytes": ptr("1048588")})
	alterBroker := func(configs []kadm.AlterConfig, brokers ...int32) error {
		rs, err := e.adm.AlterBrokerConfigs(e.ctx, configs, brokers...)
		if err != nil {
			return err
		}
		return rs[0].Err
	}

	// Cluster-wide message.max.bytes applies to topics without an override.
	if err := alterBroker([]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "message.max.bytes", Value: ptr("1000")}}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "produce to plain", e.produce("plain", 0, tooLarge), kerr.MessageTooLarge)
	if err := e.produce("overriding", 0, tooLarge); err != nil {
		t.Errorf("produce to the topic that overrides max.message.bytes: %v", err)
	}
	e.createTopic("later", 1, nil)
	wantErr(t, "produce to a topic created later", e.produce("later", 0, tooLarge), kerr.MessageTooLarge)
	c := e.describeTopic("plain")["max.message.bytes"]
	if c.MaybeValue() != "1000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || len(c.Synonyms) != 2 ||
		c.Synonyms[0].Key != "message.max.bytes" || c.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("plain max.message.bytes: %+v", c)
	}

	// This broker's own level wins over the cluster-wide one.
	if err := alterBroker([]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "message.max.bytes", Value: ptr("3000")}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.produce("plain", 0, tooLarge); err != nil {
		t.Errorf("produce under the broker level 3000: %v", err)
	}
	c = e.describeTopic("plain")["max.message.bytes"]
	if c.MaybeValue() != "3000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig || len(c.Synonyms) != 3 {
		t.Errorf("plain max.message.bytes with both levels: %+v", c)
	}
	if err := alterBroker([]kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "message.max.bytes"}}, 0); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "produce after deleting the broker level", e.produce("plain", 0, tooLarge), kerr.MessageTooLarge)

	// Validate only, and errors, change nothing.
	rs, err := e.adm.ValidateAlterBrokerConfigs(e.ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "message.max.bytes"}})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	for _, tc := range []struct {
		change  kadm.AlterConfig
		brokers []int32
		want    *kerr.Error
	}{
		// As Kafka, a broker config refused is INVALID_REQUEST.
		{kadm.AlterConfig{Name: "num.partitions", Value: ptr("3")}, nil, kerr.InvalidRequest},
		{kadm.AlterConfig{Name: "advertised.listeners", Value: ptr("PLAINTEXT://x:1")}, []int32{0}, kerr.InvalidRequest},
		{kadm.AlterConfig{Name: "log.retention.ms", Value: ptr("soon")}, nil, kerr.InvalidRequest},
		{kadm.AlterConfig{Name: "log.segment.bytes", Value: ptr("3")}, nil, kerr.InvalidRequest},
		{kadm.AlterConfig{Op: kadm.AppendConfig, Name: "log.retention.ms", Value: ptr("3")}, nil, kerr.InvalidConfig},
	} {
		wantErr(t, "broker "+tc.change.Name, alterBroker([]kadm.AlterConfig{tc.change}, tc.brokers...), tc.want)
	}
	wantErr(t, "produce after failed changes", e.produce("plain", 0, tooLarge), kerr.MessageTooLarge)

	// A list config at the broker level, and another broker's id, raw.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, name := range []string{"", "7"} {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op, c.Name, c.Value = kmsg.IncrementalAlterConfigOpAppend, "log.cleanup.policy", ptr("compact")
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
	}
	resp := raw[*kmsg.IncrementalAlterConfigsResponse](e, nil, req)
	wantCode(t, "append log.cleanup.policy", resp.Resources[0].ErrorCode, nil)
	wantCode(t, "broker 7", resp.Resources[1].ErrorCode, kerr.InvalidRequest)
	if got := val(e.describeTopic("plain")["cleanup.policy"]); got != "delete,compact" {
		t.Errorf("cleanup.policy under log.cleanup.policy=delete,compact: %q", got)
	}

	// The legacy AlterConfigs replaces the cluster level's whole set.
	rs, err = e.adm.AlterBrokerConfigsState(e.ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: ptr("1000")}})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	if err := e.produce("plain", 0, tooLarge); err != nil {
		t.Errorf("produce after the legacy alter dropped message.max.bytes: %v", err)
	}
	cs := e.describeTopic("plain")
	if val(cs["retention.ms"]) != "1000" || val(cs["cleanup.policy"]) != "delete" {
		t.Errorf("after replacing the cluster level: retention.ms %q, cleanup.policy %q",
			val(cs["retention.ms"]), val(cs["cleanup.policy"]))
	}
}

func TestCreatePartitions(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("grow", 1, map[string]*string{"max.message.bytes": ptr("1000")})
	rs, err := e.adm.CreatePartitions(e.ctx, 2, "grow")
	if err != nil || rs["grow"].Err != nil {
		t.Fatal(err, rs)
	}
	if n := e.partitions("grow"); n != 3 {
		t.Fatalf("grow has %d partitions, want 3", n)
	}
	e.mustProduce("grow", 2, 3)
	// New partitions have the topic's settings.
	wantErr(t, "produce to a new partition", e.produce("grow", 2, tooLarge), kerr.MessageTooLarge)

	rs, err = e.adm.ValidateCreatePartitions(e.ctx, 5, "grow")
	if err != nil || rs["grow"].Err != nil {
		t.Fatal(err, rs)
	}
	if n := e.partitions("grow"); n != 3 {
		t.Errorf("validate-only grew the topic to %d", n)
	}
	for _, tc := range []struct {
		set  int
		want *kerr.Error
	}{{3, kerr.InvalidPartitions}, {2, kerr.InvalidPartitions}} {
		rs, err := e.adm.UpdatePartitions(e.ctx, tc.set, "grow")
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, fmt.Sprint("set ", tc.set), rs["grow"].Err, tc.want)
		if rs["grow"].ErrMessage == "" {
			t.Errorf("set %d: no message", tc.set)
		}
	}

	// Raw, at every version: assignments, unknown topics, duplicates.
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrCreatePartitionsRequest()
		add := func(topic string, count int32, assignments ...[]int32) {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = topic, count
			for _, replicas := range assignments {
				a := kmsg.NewCreatePartitionsRequestTopicAssignment()
				a.Replicas = replicas
				rt.Assignment = append(rt.Assignment, a)
			}
			req.Topics = append(req.Topics, rt)
		}
		n := int32(e.partitions("grow"))
		add("grow", n+2, []int32{0}, []int32{0})
		add("missing", 4)
		add("twice", 4)
		add("twice", 5)
		e.createTopic(fmt.Sprint("cp-v", v), 1, nil)
		add(fmt.Sprint("cp-v", v), 2, []int32{1})
		add(fmt.Sprint("cp2-v", v), 3)
		e.createTopic(fmt.Sprint("cp2-v", v), 1, nil)
		e.createTopic(fmt.Sprint("cp3-v", v), 1, nil)
		add(fmt.Sprint("cp3-v", v), 3, []int32{0})
		resp := raw[*kmsg.CreatePartitionsResponse](e, e.clientAt(37, v), req)
		if resp.Version != v {
			t.Fatalf("v%d: answered v%d", v, resp.Version)
		}
		want := map[string]*kerr.Error{
			"grow": nil, "missing": kerr.UnknownTopicOrPartition, "twice": kerr.InvalidRequest,
			fmt.Sprint("cp-v", v): kerr.InvalidReplicaAssignment, fmt.Sprint("cp2-v", v): nil,
			fmt.Sprint("cp3-v", v): kerr.InvalidReplicaAssignment,
		}
		if len(resp.Topics) != len(want) {
			t.Errorf("v%d: %d answers, want %d", v, len(resp.Topics), len(want))
		}
		for _, st := range resp.Topics {
			wantCode(t, fmt.Sprintf("v%d %s", v, st.Topic), st.ErrorCode, want[st.Topic])
		}
		if got := e.partitions("grow"); got != int(n)+2 {
			t.Errorf("v%d: grow has %d partitions, want %d", v, got, n+2)
		}
		if got := e.partitions(fmt.Sprint("cp2-v", v)); got != 3 {
			t.Errorf("v%d: cp2 has %d partitions", v, got)
		}
	}
}

func TestDeleteTopics(t *testing.T) {
	e := newEnv(t, func(c *config.Broker) { c.AutoCreateTopics = false })
	e.createTopic("doomed", 2, map[string]*string{"retention.ms": ptr("1000")})
	e.mustProduce("doomed", 1, 3)
	id := e.topicIDs()["doomed"]

	rs, err := e.adm.DeleteTopics(e.ctx, "doomed", "never-was")
	if err != nil {
		t.Fatal(err)
	}
	if r := rs["doomed"]; r.Err != nil || r.ID != id {
		t.Errorf("deleting doomed: %v, id %v want %v", r.Err, r.ID, id)
	}
	wantErr(t, "deleting never-was", rs["never-was"].Err, kerr.UnknownTopicOrPartition)
	if _, ok := e.topicIDs()["doomed"]; ok {
		t.Error("doomed still listed")
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = ptr("doomed")
	mreq.Topics = append(mreq.Topics, mt)
	mresp := raw[*kmsg.MetadataResponse](e, nil, mreq)
	wantCode(t, "metadata of doomed", mresp.Topics[0].ErrorCode, kerr.UnknownTopicOrPartition)
	// The producer's cached metadata still names the partition: the broker
	// refuses it.
	wantErr(t, "produce to a deleted topic", e.produce("doomed", 1, []byte("x")), kerr.UnknownTopicOrPartition)

	// Created again: a new id, no data, no old configs.
	r := e.createTopic("doomed", 2, nil)
	if r.ID == id {
		t.Error("recreated topic kept its id")
	}
	if off := e.startOffset("doomed", 1); off != 0 {
		t.Errorf("recreated topic starts at %d", off)
	}
	ends, err := e.adm.ListEndOffsets(e.ctx, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("doomed", 1); o.Offset != 0 {
		t.Errorf("recreated topic ends at %d", o.Offset)
	}
	if c := e.describeTopic("doomed")["retention.ms"]; c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("recreated topic kept retention.ms %q", c.MaybeValue())
	}

	// Raw, at every version.
	for v := int16(1); v <= 6; v++ {
		name := fmt.Sprint("del-v", v)
		id := e.createTopic(name, 1, nil).ID
		req := kmsg.NewPtrDeleteTopicsRequest()
		if v < 6 {
			req.TopicNames = []string{name, "missing", "dup", "dup"}
		} else {
			byName := func(n string) kmsg.DeleteTopicsRequestTopic {
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic = ptr(n)
				return rt
			}
			byID := func(id [16]byte) kmsg.DeleteTopicsRequestTopic {
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.TopicID = id
				return rt
			}
			both := byName("dup")
			both.TopicID = id
			req.Topics = []kmsg.DeleteTopicsRequestTopic{byID(id), byName("missing"), byName("dup"), byName("dup"),
				byID([16]byte{1, 2, 3}), both, kmsg.NewDeleteTopicsRequestTopic()}
		}
		resp := raw[*kmsg.DeleteTopicsResponse](e, e.clientAt(20, v), req)
		if resp.Version != v {
			t.Fatalf("v%d: answered v%d", v, resp.Version)
		}
		got := map[string]int16{}
		for _, st := range resp.Topics {
			key := "<nil>"
			if st.Topic != nil {
				key = *st.Topic
			}
			if st.Topic == nil || (v == 6 && st.TopicID != ([16]byte{}) && *st.Topic == "dup") {
				key += fmt.Sprintf("/%x", st.TopicID[:2])
			}
			got[key] = st.ErrorCode
			if v >= 5 && st.ErrorCode != 0 && st.ErrorMessage == nil {
				t.Errorf("v%d %s: no error message", v, key)
			}
			if v == 6 && st.Topic != nil && *st.Topic == name && st.TopicID != id {
				t.Errorf("v6: deleted by id answered id %v, want %v", st.TopicID, id)
			}
		}
		want := map[string]int16{name: 0, "missing": kerr.UnknownTopicOrPartition.Code, "dup": kerr.InvalidRequest.Code}
		if v == 6 {
			want["<nil>/0102"] = kerr.UnknownTopicID.Code
			want[fmt.Sprintf("dup/%x", id[:2])] = kerr.InvalidRequest.Code
			want["<nil>/0000"] = kerr.InvalidRequest.Code
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("v%d answers:\n got %v\nwant %v", v, got, want)
		}
		if _, ok := e.topicIDs()[name]; ok {
			t.Errorf("v%d: %s not deleted", v, name)
		}
	}
}

func TestDeleteRecords(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("trimmed", 2, nil)
	e.mustProduce("trimmed", 0, 10)
	offsets := func(o int64) kadm.Offsets {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "trimmed", Partition: 0, At: o})
		return os
	}
	rs, err := e.adm.DeleteRecords(e.ctx, offsets(4))
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := rs.Lookup("trimmed", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete below 4: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	if off := e.startOffset("trimmed", 0); off != 4 {
		t.Errorf("log start offset %d after deleting below 4", off)
	}
	// Consuming from offset 0 starts at the new log start.
	cons := e.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"trimmed": {0: kgo.NewOffset().At(0)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(e.ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != 4 || string(recs[0].Value) != "record-4" {
		t.Errorf("first record consumed from 0: %+v", recs)
	}

	// Raw, at every version.
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrDeleteRecordsRequest()
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = "trimmed"
		for _, p := range []struct {
			p   int32
			off int64
		}{{0, 2}, {1, 0}, {5, 0}} {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = p.p, p.off
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		mt := kmsg.NewDeleteRecordsRequestTopic()
		mt.Topic = "missing"
		mt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{kmsg.NewDeleteRecordsRequestTopicPartition()}
		req.Topics = append(req.Topics, mt)
		resp := raw[*kmsg.DeleteRecordsResponse](e, e.clientAt(21, v), req)
		if resp.Version != v || len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 3 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		ps := resp.Topics[0].Partitions
		// Below the log start: nothing changes, the start is answered.
		if ps[0].ErrorCode != 0 || ps[0].LowWatermark != 4 {
			t.Errorf("v%d below the start: %+v", v, ps[0])
		}
		if ps[1].ErrorCode != 0 || ps[1].LowWatermark != 0 {
			t.Errorf("v%d empty partition: %+v", v, ps[1])
		}
		wantCode(t, fmt.Sprintf("v%d partition 5", v), ps[2].ErrorCode, kerr.UnknownTopicOrPartition)
		wantCode(t, fmt.Sprintf("v%d missing topic", v), resp.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
		if ps[2].LowWatermark != -1 {
			t.Errorf("v%d: low watermark %d with an error", v, ps[2].LowWatermark)
		}
	}

	for _, tc := range []struct {
		offset int64
		low    int64
		want   *kerr.Error
	}{
		{11, -1, kerr.OffsetOutOfRange}, // above the high watermark
		{-2, -1, kerr.OffsetOutOfRange},
		{-1, 10, nil}, // the high watermark
	} {
		rs, err := e.adm.DeleteRecords(e.ctx, offsets(tc.offset))
		if err != nil {
			t.Fatal(err)
		}
		r, _ := rs.Lookup("trimmed", 0)
		wantErr(t, fmt.Sprint("delete below ", tc.offset), r.Err, tc.want)
		if tc.want == nil && r.LowWatermark != tc.low {
			t.Errorf("delete below %d: low watermark %d, want %d", tc.offset, r.LowWatermark, tc.low)
		}
	}
	if off := e.startOffset("trimmed", 0); off != 10 {
		t.Errorf("log start %d after deleting below the high watermark", off)
	}

	// A compacted topic refuses, as in Kafka.
	e.createTopic("compacted", 1, map[string]*string{"cleanup.policy": ptr("compact")})
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "compacted", Partition: 0, At: 0})
	rs, err = e.adm.DeleteRecords(e.ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := rs.Lookup("compacted", 0)
	wantErr(t, "delete records of a compacted topic", r.Err, kerr.PolicyViolation)
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("epochs", 2, nil)
	e.mustProduce("epochs", 0, 5)
	for v := int16(2); v <= 4; v++ {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "epochs"
		for _, p := range []struct{ p, current, epoch int32 }{
			{0, 0, 0},   // the current epoch: the log end
			{1, -1, 0},  // an empty partition in the current epoch
			{0, -1, 1},  // a future epoch: undefined
			{0, 1, 0},   // a newer current epoch than ours
			{0, -1, -1}, // undefined
			{9, -1, 0},  // no such partition
		} {
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p.p, p.current, p.epoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		mt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		mt.Topic = "missing"
		mt.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{kmsg.NewOffsetForLeaderEpochRequestTopicPartition()}
		req.Topics = append(req.Topics, mt)
		resp := raw[*kmsg.OffsetForLeaderEpochResponse](e, e.clientAt(23, v), req)
		if resp.Version != v || len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 6 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		type answer struct {
			code   int16
			epoch  int32
			offset int64
		}
		want := []answer{{0, 0, 5}, {0, 0, 0}, {0, -1, -1}, {kerr.UnknownLeaderEpoch.Code, -1, -1},
			{0, -1, -1}, {kerr.UnknownTopicOrPartition.Code, -1, -1}}
		for i, p := range resp.Topics[0].Partitions {
			if got := (answer{p.ErrorCode, p.LeaderEpoch, p.EndOffset}); got != want[i] {
				t.Errorf("v%d partition %d case %d: %+v, want %+v", v, p.Partition, i, got, want[i])
			}
		}
		wantCode(t, fmt.Sprintf("v%d missing topic", v), resp.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	}

	// What clients see through kadm.
	var req kadm.OffsetForLeaderEpochRequest
	req.Add("epochs", 0, 0)
	got, err := e.adm.OffsetForLeaderEpoch(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if o := got["epochs"][0]; o.Err != nil || o.LeaderEpoch != 0 || o.EndOffset != 5 {
		t.Errorf("kadm: %+v", o)
	}
}

func TestDescribeCluster(t *testing.T) {
	e := newEnv(t, func(c *config.Broker) { c.NodeID = 3 })
	meta := raw[*kmsg.MetadataResponse](e, nil, kmsg.NewPtrMetadataRequest())
	host, port := meta.Brokers[0].Host, meta.Brokers[0].Port
	for v := int16(0); v <= 2; v++ {
		cl := e.clientAt(60, v)
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeFencedBrokers = true
		resp := raw[*kmsg.DescribeClusterResponse](e, cl, req)
		if resp.Version != v || resp.ErrorCode != 0 {
			t.Fatalf("v%d: answered v%d, error %d", v, resp.Version, resp.ErrorCode)
		}
		if resp.ClusterID != *meta.ClusterID || resp.ControllerID != 3 || resp.ClusterAuthorizedOperations != math.MinInt32 {
			t.Errorf("v%d: cluster %q controller %d operations %d", v, resp.ClusterID, resp.ControllerID, resp.ClusterAuthorizedOperations)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 3 || resp.Brokers[0].Host != host ||
			resp.Brokers[0].Port != port || resp.Brokers[0].IsFenced {
			t.Errorf("v%d brokers: %+v", v, resp.Brokers)
		}
		if v >= 1 && resp.EndpointType != 1 {
			t.Errorf("v%d: endpoint type %d", v, resp.EndpointType)
		}

		req.IncludeClusterAuthorizedOperations = true
		resp = raw[*kmsg.DescribeClusterResponse](e, cl, req)
		// CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
		// ALTER_CONFIGS, IDEMPOTENT_WRITE: bits 5 and 7-12.
		if want := int32(1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12); resp.ClusterAuthorizedOperations != want {
			t.Errorf("v%d: authorized operations %b, want %b", v, resp.ClusterAuthorizedOperations, want)
		}

		if v >= 1 {
			for _, tc := range []struct {
				endpoint int8
				want     *kerr.Error
			}{{2, kerr.MismatchedEndpointType}, {7, kerr.UnsupportedEndpointType}} {
				req := kmsg.NewPtrDescribeClusterRequest()
				req.EndpointType = tc.endpoint
				resp := raw[*kmsg.DescribeClusterResponse](e, cl, req)
				wantCode(t, fmt.Sprintf("v%d endpoint type %d", v, tc.endpoint), resp.ErrorCode, tc.want)
				if len(resp.Brokers) != 0 || resp.ErrorMessage == nil {
					t.Errorf("v%d endpoint type %d: %+v", v, tc.endpoint, resp)
				}
			}
		}
	}
}

func TestAdminRestart(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("kept", 3, map[string]*string{"max.message.bytes": ptr("1000"), "retention.ms": ptr("3600000")})
	e.createTopic("plain", 1, nil)
	e.mustProduce("kept", 1, 4)
	if _, err := e.adm.CreatePartitions(e.ctx, 1, "kept"); err != nil {
		t.Fatal(err)
	}
	if rs, err := e.adm.DeleteRecords(e.ctx, func() kadm.Offsets {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "kept", Partition: 1, At: 2})
		return os
	}()); err != nil || rs.Error() != nil {
		t.Fatal(err, rs.Error())
	}
	if rs, err := e.adm.AlterBrokerConfigs(e.ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: ptr("7200000")}}); err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	if rs, err := e.adm.AlterBrokerConfigs(e.ctx, []kadm.AlterConfig{{Name: "message.max.bytes", Value: ptr("1500")}}, 0); err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	ids := e.topicIDs()

	e.restart()

	if got := e.topicIDs(); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("topic ids after restart %v, before %v", got, ids)
	}
	if n := e.partitions("kept"); n != 4 {
		t.Errorf("kept has %d partitions after restart", n)
	}
	if off := e.startOffset("kept", 1); off != 2 {
		t.Errorf("log start offset %d after restart, want 2", off)
	}
	cs := e.describeTopic("kept")
	if val(cs["retention.ms"]) != "3600000" || cs["max.message.bytes"].Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("kept configs after restart: retention.ms %q, max.message.bytes %q from %v",
			val(cs["retention.ms"]), val(cs["max.message.bytes"]), cs["max.message.bytes"].Source)
	}
	wantErr(t, "topic override after restart", e.produce("kept", 3, tooLarge), kerr.MessageTooLarge)
	cs = e.describeTopic("plain")
	if c := cs["retention.ms"]; c.MaybeValue() != "7200000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("plain retention.ms after restart: %q from %v", c.MaybeValue(), c.Source)
	}
	if c := cs["max.message.bytes"]; c.MaybeValue() != "1500" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("plain max.message.bytes after restart: %q from %v", c.MaybeValue(), c.Source)
	}
	// Topics created after the restart get the dynamic defaults.
	e.createTopic("after", 1, nil)
	wantErr(t, "produce to a topic created after restart", e.produce("after", 0, tooLarge), kerr.MessageTooLarge)

	// Existing topics without an override get them too when their
	// partitions open.
	wantErr(t, "dynamic default on an existing topic after restart", e.produce("plain", 0, tooLarge), kerr.MessageTooLarge)
}
