package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Source is where a config's value comes from, numbered as Kafka's
// DescribeConfigs reports it.
type Source int8

const (
	SourceTopic          Source = 1 // TOPIC_CONFIG: the topic's own override
	SourceDynamicBroker  Source = 2 // DYNAMIC_BROKER_CONFIG: changed at runtime for this broker
	SourceDynamicDefault Source = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG: changed at runtime for every broker
	SourceStaticBroker   Source = 4 // STATIC_BROKER_CONFIG: the broker's flags or config file
	SourceDefault        Source = 5 // DEFAULT_CONFIG: Strand's built-in default
)

// Synonym is one level at which a config is set: its name there (a topic
// config's broker-level default has another name), its value and where that
// value comes from.
type Synonym struct {
	Name   string
	Value  string
	Source Source
}

// BrokerDef defines one broker-level config, under Kafka's name.
type BrokerDef struct {
	Name string
	Type Type
	Doc  string
	// Topic is the topic config this one is the broker-wide default of
	// (log.retention.ms for retention.ms). Those, and only those, can be
	// changed at runtime (AlterConfigs), as Kafka allows for them.
	Topic *TopicDef
	// Get reads the value from the broker's settings.
	Get func(b Broker) string
	// Set parses v into the broker's settings, for the broker configs
	// that are not a topic's default but can change at runtime.
	Set func(b *Broker, v string) error
}

// Dynamic reports whether the config can be changed while the broker runs.
func (d *BrokerDef) Dynamic() bool { return d.Topic != nil || d.Set != nil }

// BrokerDefs are the broker configs Strand describes, sorted by name: its
// own settings under Kafka's names, and the default of every topic config.
var BrokerDefs = brokerDefs()

func brokerDefs() []BrokerDef {
	itoa := func(n int32) string { return strconv.FormatInt(int64(n), 10) }
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	rate := func(set func(b *Broker, n int64)) func(b *Broker, v string) error {
		return func(b *Broker, v string) error {
			n, err := parseLong(v, 0)
			if err == nil {
				set(b, n)
			}
			return err
		}
	}
	defs := []BrokerDef{
		{Name: "follower.replication.throttled.rate", Type: TypeLong,
			Doc: "Bytes a second this broker copies, at most, as the throttled replicas out of sync (follower.replication.throttled.replicas).",
			Get: func(b Broker) string { return strconv.FormatInt(b.FollowerThrottleRate, 10) },
			Set: rate(func(b *Broker, n int64) { b.FollowerThrottleRate = n })},
		{Name: "leader.replication.throttled.rate", Type: TypeLong,
			Doc: "Bytes a second this broker sends, at most, to the throttled replicas out of sync (leader.replication.throttled.replicas).",
			Get: func(b Broker) string { return strconv.FormatInt(b.LeaderThrottleRate, 10) },
			Set: rate(func(b *Broker, n int64) { b.LeaderThrottleRate = n })},
		{Name: "advertised.listeners", Type: TypeString,
			Doc: "The address clients are told to connect to.",
			Get: func(b Broker) string { return "PLAINTEXT://" + advertised(b) }},
		{Name: "auto.create.topics.enable", Type: TypeBoolean,
			Doc: "Create a topic when a client asks for its metadata and it does not exist.",
			Get: func(b Broker) string { return strconv.FormatBool(b.AutoCreateTopics) }},
		{Name: "broker.id", Type: TypeInt,
			Doc: "This broker's id (the same as node.id).",
			Get: func(b Broker) string { return itoa(b.NodeID) }},
		{Name: "group.commit.ownership.strict", Type: TypeBoolean,
			Doc: "Whether a member's commit of a partition it does not own is refused (it is reported either way).",
			Get: func(b Broker) string { return strconv.FormatBool(b.GroupCommitOwnershipStrict) }},
		{Name: "group.consumer.assignors", Type: TypeList,
			Doc: "The server-side assignors of consumer groups, the first the default.",
			Get: func(b Broker) string { return strings.Join(b.GroupConsumerAssignors, ",") }},
		{Name: "group.consumer.heartbeat.interval.ms", Type: TypeInt,
			Doc: "How often consumer group members heartbeat.",
			Get: func(b Broker) string { return ms(b.GroupConsumerHeartbeatInterval) }},
		{Name: "group.consumer.max.heartbeat.interval.ms", Type: TypeInt,
			Doc: "The upper bound of the consumer group heartbeat interval.",
			Get: func(b Broker) string { return ms(b.GroupConsumerMaxHeartbeatInterval) }},
		{Name: "group.consumer.max.session.timeout.ms", Type: TypeInt,
			Doc: "The upper bound of the consumer group session timeout.",
			Get: func(b Broker) string { return ms(b.GroupConsumerMaxSessionTimeout) }},
		{Name: "group.consumer.max.size", Type: TypeInt,
			Doc: "The most members a consumer group may have.",
			Get: func(b Broker) string { return itoa(b.GroupConsumerMaxSize) }},
		{Name: "group.consumer.migration.policy", Type: TypeString,
			Doc: "Whether a live group may move between the classic and the consumer protocol: bidirectional, upgrade, downgrade or disabled.",
			Get: func(b Broker) string { return strings.ToLower(b.GroupConsumerMigrationPolicy) }},
		{Name: "group.consumer.min.heartbeat.interval.ms", Type: TypeInt,
			Doc: "The lower bound of the consumer group heartbeat interval.",
			Get: func(b Broker) string { return ms(b.GroupConsumerMinHeartbeatInterval) }},
		{Name: "group.consumer.min.session.timeout.ms", Type: TypeInt,
			Doc: "The lower bound of the consumer group session timeout.",
			Get: func(b Broker) string { return ms(b.GroupConsumerMinSessionTimeout) }},
		{Name: "group.consumer.session.timeout.ms", Type: TypeInt,
			Doc: "How long a consumer group member may go without a heartbeat.",
			Get: func(b Broker) string { return ms(b.GroupConsumerSessionTimeout) }},
		{Name: "group.handoff.ledger.enable", Type: TypeBoolean,
			Doc: "Whether every partition hand-off of every group is recorded, with what it risked, in __strand_handoffs.",
			Get: func(b Broker) string { return strconv.FormatBool(b.HandoffLedger) }},
		{Name: "group.handoff.ledger.retention.ms", Type: TypeLong,
			Doc: "How long __strand_handoffs keeps its entries.",
			Get: func(b Broker) string { return ms(b.HandoffLedgerRetention) }},
		{Name: "group.initial.rebalance.delay.ms", Type: TypeInt,
			Doc: "How long the first rebalance of an empty group waits for more members to join.",
			Get: func(b Broker) string { return ms(b.GroupInitialRebalanceDelay) }},
		{Name: "group.max.session.timeout.ms", Type: TypeInt,
			Doc: "The longest session timeout a group member may ask for.",
			Get: func(b Broker) string { return ms(b.GroupMaxSessionTimeout) }},
		{Name: "group.max.size", Type: TypeInt,
			Doc: "The most members a consumer group may have.",
			Get: func(b Broker) string { return itoa(b.GroupMaxSize) }},
		{Name: "group.member.disconnect.grace.ms", Type: TypeInt,
			Doc: "How long a group member whose connection closed without a LeaveGroup keeps its place; 0 until its session times out.",
			Get: func(b Broker) string { return ms(b.GroupMemberDisconnectGrace) }},
		{Name: "group.member.disconnect.grace.static.enable", Type: TypeBoolean,
			Doc: "Whether the disconnect grace also applies to static members (group.instance.id).",
			Get: func(b Broker) string { return strconv.FormatBool(b.GroupMemberDisconnectGraceStatic) }},
		{Name: "group.min.session.timeout.ms", Type: TypeInt,
			Doc: "The shortest session timeout a group member may ask for.",
			Get: func(b Broker) string { return ms(b.GroupMinSessionTimeout) }},
		{Name: "admin.console.actions.enable", Type: TypeBoolean,
			Doc: "Whether the web console may reset a group's offsets and delete a group (each after a confirmation).",
			Get: func(b Broker) string { return strconv.FormatBool(b.AdminConsoleActions) }},
		{Name: "admin.console.enable", Type: TypeBoolean,
			Doc: "Whether the admin listener serves the web console.",
			Get: func(b Broker) string { return strconv.FormatBool(b.AdminConsole) }},
		{Name: "admin.console.sample.interval.ms", Type: TypeLong,
			Doc: "How often the web console samples group lag and topic end offsets for its charts and rates.",
			Get: func(b Broker) string { return ms(b.AdminConsoleSample) }},
		{Name: "admin.listener", Type: TypeString,
			Doc: "The admin HTTP listener's host:port (web console, JSON API and Prometheus metrics); empty for none.",
			Get: func(b Broker) string { return b.AdminListen }},
		{Name: "listeners", Type: TypeString,
			Doc: "The address the broker accepts Kafka clients on.",
			Get: func(b Broker) string { return "PLAINTEXT://" + b.Listen }},
		{Name: "log.dirs", Type: TypeString,
			Doc: "The directory holding the partitions and the cluster metadata.",
			Get: func(b Broker) string { return b.DataDir }},
		{Name: "log.retention.check.interval.ms", Type: TypeLong,
			Doc: "How often retention runs.",
			Get: func(b Broker) string { return strconv.FormatInt(b.RetentionCheck.Milliseconds(), 10) }},
		{Name: "node.id", Type: TypeInt,
			Doc: "This broker's id.",
			Get: func(b Broker) string { return itoa(b.NodeID) }},
		{Name: "num.partitions", Type: TypeInt,
			Doc: "Partitions of a topic created without a count (auto-created, or CreateTopics with -1).",
			Get: func(b Broker) string { return itoa(b.DefaultPartitions) }},
		{Name: "offset.metadata.max.bytes", Type: TypeInt,
			Doc: "The longest metadata string an offset commit may carry.",
			Get: func(b Broker) string { return itoa(b.OffsetMetadataMaxBytes) }},
		{Name: "offsets.retention.check.interval.ms", Type: TypeLong,
			Doc: "How often stale committed offsets are looked for.",
			Get: func(b Broker) string { return ms(b.OffsetsRetentionCheck) }},
		{Name: "offsets.retention.minutes", Type: TypeInt,
			Doc: "How long a group's committed offsets are kept once it has no members.",
			Get: func(b Broker) string { return strconv.FormatInt(int64(b.OffsetsRetention/time.Minute), 10) }},
		{Name: "offsets.topic.num.partitions", Type: TypeInt,
			Doc: "The partitions of __consumer_offsets when it is created.",
			Get: func(b Broker) string { return itoa(b.OffsetsTopicPartitions) }},
		{Name: "socket.request.max.bytes", Type: TypeInt,
			Doc: "The largest request accepted; a larger one closes the connection.",
			Get: func(b Broker) string { return itoa(b.MaxRequestBytes) }},
	}
	for i := range TopicDefs {
		t := &TopicDefs[i]
		if t.BrokerName == "" {
			continue // no broker-wide default (the throttled replicas lists)
		}
		defs = append(defs, BrokerDef{Name: t.BrokerName, Type: t.Type, Topic: t,
			Doc: "The default of the topic config " + t.Name + ": " + t.Doc,
			Get: func(b Broker) string { return t.Get(b.Log) }})
	}
	slices.SortFunc(defs, func(a, b BrokerDef) int { return strings.Compare(a.Name, b.Name) })
	return defs
}

func advertised(b Broker) string {
	if b.Advertise != "" {
		return b.Advertise
	}
	return b.Listen
}

// WithAdvertised returns b advertising host:port (the address resolved when
// the broker started listening).
func (b Broker) WithAdvertised(host string, port int32) Broker {
	b.Advertise = net.JoinHostPort(host, strconv.FormatInt(int64(port), 10))
	return b
}

// LookupBrokerDef finds a broker config by name.
func LookupBrokerDef(name string) (*BrokerDef, bool) {
	i, ok := slices.BinarySearchFunc(BrokerDefs, name, func(d BrokerDef, n string) int { return strings.Compare(d.Name, n) })
	if !ok {
		return nil, false
	}
	return &BrokerDefs[i], true
}

// BrokerDefOf returns the broker-level default of topic config d, nil for
// a topic config without one.
func BrokerDefOf(d *TopicDef) *BrokerDef {
	if d.BrokerName == "" {
		return nil
	}
	b, ok := LookupBrokerDef(d.BrokerName)
	if !ok {
		panic("config: no broker config " + d.BrokerName + " for topic config " + d.Name)
	}
	return b
}

// CheckDynamic reports names in configs that are not broker configs, or that
// cannot be changed while the broker runs.
func CheckDynamic(configs map[string]string) error {
	var unknown, static []string
	for name := range configs {
		d, ok := LookupBrokerDef(name)
		switch {
		case !ok:
			unknown = append(unknown, name)
		case !d.Dynamic():
			static = append(static, name)
		}
	}
	slices.Sort(unknown)
	slices.Sort(static)
	switch {
	case len(unknown) > 0:
		return fmt.Errorf("%w: unknown broker config %s", ErrUnknownConfig, strings.Join(unknown, ", "))
	case len(static) > 0:
		return fmt.Errorf("%w: cannot update these configs dynamically: %s (only the topic defaults log.*, message.max.bytes, compression.type and min.insync.replicas, and the replication throttle rates, can be)",
			ErrInvalidConfig, strings.Join(static, ", "))
	}
	return nil
}

// ApplyDynamic returns static with the broker configs changed at runtime
// applied: the cluster-wide defaults, then this broker's own, which win. The
// topic defaults are applied in the order of TopicDefs, as TopicLogConfig
// applies a topic's overrides.
func ApplyDynamic(static Broker, clusterDefaults, node map[string]string) (Broker, error) {
	if err := CheckDynamic(clusterDefaults); err != nil {
		return static, err
	}
	if err := CheckDynamic(node); err != nil {
		return static, err
	}
	b := static
	for i := range BrokerDefs {
		d := &BrokerDefs[i]
		if d.Set == nil {
			continue
		}
		v, ok := node[d.Name]
		if !ok {
			v, ok = clusterDefaults[d.Name]
		}
		if !ok {
			continue
		}
		if err := d.Set(&b, v); err != nil {
			return static, fmt.Errorf("%s: %w", d.Name, err)
		}
	}
	for i := range TopicDefs {
		d := &TopicDefs[i]
		if d.BrokerName == "" {
			continue
		}
		v, ok := node[d.BrokerName]
		if !ok {
			v, ok = clusterDefaults[d.BrokerName]
		}
		if !ok {
			continue
		}
		if err := d.Set(&b.Log, v); err != nil {
			return static, fmt.Errorf("%s: %w", d.BrokerName, err)
		}
	}
	if err := b.Log.Validate(); err != nil {
		return static, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return b, nil
}

// BrokerSynonyms lists where broker config d may be set, the level in force
// first: this broker's runtime value, the cluster-wide runtime default, the
// static setting (listed when it differs from the built-in default) and the
// built-in default. static is the broker's configuration before runtime
// changes.
func BrokerSynonyms(d *BrokerDef, static Broker, clusterDefaults, node map[string]string) []Synonym {
	var out []Synonym
	if v, ok := node[d.Name]; ok {
		out = append(out, Synonym{Name: d.Name, Value: v, Source: SourceDynamicBroker})
	}
	if v, ok := clusterDefaults[d.Name]; ok {
		out = append(out, Synonym{Name: d.Name, Value: v, Source: SourceDynamicDefault})
	}
	sv, dv := d.Get(static), d.Get(Defaults())
	if sv != dv {
		out = append(out, Synonym{Name: d.Name, Value: sv, Source: SourceStaticBroker})
	}
	return append(out, Synonym{Name: d.Name, Value: dv, Source: SourceDefault})
}

// TopicSynonyms lists where topic config d may be set, the level in force
// first: the topic's override, then the levels of its broker-wide default
// (BrokerSynonyms).
func TopicSynonyms(d *TopicDef, overrides map[string]string, static Broker, clusterDefaults, node map[string]string) []Synonym {
	var out []Synonym
	if v, ok := overrides[d.Name]; ok {
		out = append(out, Synonym{Name: d.Name, Value: v, Source: SourceTopic})
	}
	bd := BrokerDefOf(d)
	if bd == nil {
		return append(out, Synonym{Name: d.Name, Value: d.Get(Defaults().Log), Source: SourceDefault})
	}
	return append(out, BrokerSynonyms(bd, static, clusterDefaults, node)...)
}
