package config

import (
	"fmt"
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
	SourceBrokerLogger   Source = 6 // DYNAMIC_BROKER_LOGGER_CONFIG: a logger's level
	SourceClientMetrics  Source = 7 // CLIENT_METRICS_CONFIG: a client metrics subscription's own
	SourceGroup          Source = 8 // GROUP_CONFIG: the group's own config
)

// Synonym is one level at which a config is set: its name there (a topic
// config's broker-level default has another name), its value and where that
// value comes from.
type Synonym struct {
	Name   string
	Value  string
	Source Source
}

// BrokerDef is one broker setting, declared once: the name DescribeConfigs
// and AlterConfigs give it (Kafka's, or Strand's own), the strand serve
// flag and config file key that set it, its type, its doc, and whether it
// can change while the broker runs. Flags, the config file,
// DescribeConfigs and docs/settings.md all come from BrokerDefs.
type BrokerDef struct {
	Name string
	// Flag is strand serve's flag (and the config file's key) for it;
	// empty for a config set only at run time or derived from another.
	Flag string
	Type Type
	Doc  string
	// Field points at the setting in a Broker: *string, *bool, *int,
	// *int16, *int32, *int64, *time.Duration or *[]string. A duration is
	// given to DescribeConfigs in the unit its name ends with (.ms,
	// .seconds, .minutes), and to its flag as a Go duration (2s), or in
	// milliseconds when the flag's name ends with -ms.
	Field func(b *Broker) any
	// KafkaFlag is a second flag, named after the setting, that takes it
	// in Kafka's syntax (--listeners NAME://host:port,...) where Flag takes
	// a shorter one (--listen host:port); ApplyListeners reads it.
	KafkaFlag string
	// Aliases are other config file keys that set it: Kafka's names for
	// it in another unit (log.retention.hours) or of an older release
	// (broker.id).
	Aliases []Alias
	// Topic is the topic config this one is the broker-wide default of
	// (log.retention.ms for retention.ms). Those can be changed at
	// runtime (AlterConfigs), as Kafka allows for them.
	Topic *TopicDef
	// Default is the setting's built-in value as a config file gives it
	// under the setting's name: a duration in the unit its name ends with,
	// a list comma-separated; empty only for a string or list that is
	// empty by default. Defaults is made of these. A topic config's
	// default is the log's (replica.Defaults).
	Default string
	// Min and Max bound a number, in the unit of the setting's name; nil
	// for none. OneOf lists the values a string, or each item of a list,
	// may take. Validate checks them.
	Min, Max *int64
	OneOf    []string
	// Get reads the value from the broker's settings, when Field does not
	// say it as DescribeConfigs does.
	Get func(b Broker) string
	// Set parses v into the broker's settings, for the broker configs
	// that are not a topic's default but can change at runtime.
	Set func(b *Broker, v string) error
}

// Alias is a config file key that sets a setting under another name:
// Key's value, a whole number of Unit for a duration (0 for the setting's
// own unit), becomes the setting's.
type Alias struct {
	Key  string
	Unit time.Duration
}

func atLeast(n int64) *int64 { return &n }
func atMost(n int64) *int64  { return &n }

// Dynamic reports whether the config can be changed while the broker runs.
func (d *BrokerDef) Dynamic() bool { return d.Topic != nil || d.Set != nil }

// BrokerDefs are the broker configs Strand describes, sorted by name: its
// own settings under Kafka's names, and the default of every topic config.
var BrokerDefs = brokerDefs()

func brokerDefs() []BrokerDef {
	itoa := func(n int32) string { return strconv.FormatInt(int64(n), 10) }
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
			Doc:     "Bytes a second this broker copies, at most, as the throttled replicas out of sync (follower.replication.throttled.replicas).",
			Field:   func(b *Broker) any { return &b.FollowerThrottleRate },
			Default: "9223372036854775807", Min: atLeast(0),
			Set: rate(func(b *Broker, n int64) { b.FollowerThrottleRate = n })},
		{Name: "leader.replication.throttled.rate", Type: TypeLong,
			Doc:     "Bytes a second this broker sends, at most, to the throttled replicas out of sync (leader.replication.throttled.replicas).",
			Field:   func(b *Broker) any { return &b.LeaderThrottleRate },
			Default: "9223372036854775807", Min: atLeast(0),
			Set: rate(func(b *Broker, n int64) { b.LeaderThrottleRate = n })},
		{Name: "admin.console.actions.enable", Flag: "admin-console-actions", Type: TypeBoolean,
			Doc:     "Whether the web console may reset a group's offsets and delete a group, each after a confirmation.",
			Field:   func(b *Broker) any { return &b.AdminConsoleActions },
			Default: "false"},
		{Name: "admin.console.enable", Flag: "admin-console", Type: TypeBoolean,
			Doc:     "Whether the admin listener serves the web console.",
			Field:   func(b *Broker) any { return &b.AdminConsole },
			Default: "true"},
		{Name: "strand.link.metadata.interval.ms", Flag: "link-metadata-interval", Type: TypeLong,
			Doc:     "How often each cluster link reads its source cluster's metadata: how soon a new source topic gets its mirror.",
			Field:   func(b *Broker) any { return &b.LinkMetadataInterval },
			Default: "5000", Min: atLeast(1)},
		{Name: "admin.console.sample.interval.ms", Flag: "admin-console-sample-interval", Type: TypeLong,
			Doc:     "How often the web console samples group lag and topic end offsets for its charts and rates.",
			Field:   func(b *Broker) any { return &b.AdminConsoleSample },
			Default: "10000", Min: atLeast(1)},
		{Name: "admin.listener", Flag: "admin-listen", Type: TypeString,
			Doc:     "The admin HTTP listener's host:port (web console at /, JSON API under /api, Prometheus metrics at /metrics); empty for none.",
			Field:   func(b *Broker) any { return &b.AdminListen },
			Default: "127.0.0.1:9644"},
		{Name: "advertised.listeners", Flag: "advertise", KafkaFlag: "advertised-listeners", Type: TypeList,
			Doc:   "The host:port clients of the first listener are told to connect to (default: its listen address); --advertised-listeners NAME://host:port,... sets it per listener.",
			Field: func(b *Broker) any { return &b.Advertise },
			Get:   func(b Broker) string { return b.listenersSetting(true) }},
		{Name: "allow.everyone.if.no.acl.found", Flag: "allow-everyone-if-no-acl-found", Type: TypeBoolean,
			Doc:     "With an authorizer, whether a resource that no ACL names is open to everyone.",
			Field:   func(b *Broker) any { return &b.AllowEveryoneIfNoACL },
			Default: "false"},
		{Name: "authorizer.class.name", Flag: "authorizer", Type: TypeString,
			Doc:   "The authorizer: empty for none (everyone may do everything), acl for Kafka's ACL rules (Kafka's class names StandardAuthorizer and AclAuthorizer say the same).",
			Field: func(b *Broker) any { return &b.Authorizer }},
		{Name: "auto.create.topics.enable", Flag: "auto-create-topics", Type: TypeBoolean,
			Doc:     "Create a topic when a client asks for its metadata and it does not exist.",
			Field:   func(b *Broker) any { return &b.AutoCreateTopics },
			Default: "true"},
		{Name: "auto.leader.rebalance.enable", Flag: "auto-leader-rebalance", Type: TypeBoolean,
			Doc:     "Give partitions back to their preferred replicas.",
			Field:   func(b *Broker) any { return &b.AutoLeaderRebalance },
			Default: "true"},
		{Name: "broker.id", Type: TypeInt,
			Doc: "This broker's id (the same as node.id).",
			Get: func(b Broker) string { return itoa(b.NodeID) }},
		{Name: "broker.rack", Flag: "rack", Type: TypeString,
			Doc:   "This broker's rack: replicas spread over racks.",
			Field: func(b *Broker) any { return &b.Rack }},
		{Name: "replica.selector.class", Flag: "replica-selector", Type: TypeString,
			Doc:   "Where consumers read: empty or LeaderSelector's class for the leader, RackAwareReplicaSelector's (org.apache.kafka.common.replica.RackAwareReplicaSelector) for an in-sync replica in the consumer's client.rack.",
			Field: func(b *Broker) any { return &b.ReplicaSelector },
			OneOf: []string{"", LeaderSelector, RackAwareSelector}},
		{Name: "broker.session.timeout.ms", Flag: "broker-session-timeout", Type: TypeInt,
			Doc:     "A broker the active controller has not heard from for this long is fenced.",
			Field:   func(b *Broker) any { return &b.BrokerSessionTimeout },
			Default: "9000", Min: atLeast(1)},
		{Name: "cluster.id", Flag: "cluster-id", Type: TypeString,
			Doc:   "The cluster's id: a new cluster takes it, a data directory of another cluster is refused (default: generated).",
			Field: func(b *Broker) any { return &b.ClusterID }},
		{Name: "controller.quorum.voters", Flag: "controller-quorum-voters", Type: TypeList,
			Doc:   "The metadata quorum's voters, id@host:port,... of their CONTROLLER listeners; empty for a single node.",
			Field: func(b *Broker) any { return &b.QuorumVoters }},
		{Name: "default.replication.factor", Flag: "default-replication-factor", Type: TypeInt,
			Doc:     "Replicas of topics created without a factor; topics get at most as many as there are live brokers.",
			Field:   func(b *Broker) any { return &b.DefaultReplicationFactor },
			Default: "1", Min: atLeast(1)},
		{Name: "group.commit.ownership.strict", Flag: "group-commit-ownership-strict", Type: TypeBoolean,
			Doc:     "Whether a member's commit of a partition it does not own is refused (it is reported in the hand-off ledger either way).",
			Field:   func(b *Broker) any { return &b.GroupCommitOwnershipStrict },
			Default: "false"},
		{Name: "group.consumer.assignors", Flag: "group-consumer-assignors", Type: TypeList,
			Doc:     "The server-side assignors of consumer groups, the first the default.",
			Field:   func(b *Broker) any { return &b.GroupConsumerAssignors },
			Default: "uniform,range", OneOf: []string{"uniform", "range"}},
		{Name: "group.consumer.heartbeat.interval.ms", Flag: "group-consumer-heartbeat-interval", Type: TypeInt,
			Doc:     "How often consumer group members heartbeat.",
			Field:   func(b *Broker) any { return &b.GroupConsumerHeartbeatInterval },
			Default: "5000"},
		{Name: "group.consumer.max.heartbeat.interval.ms", Flag: "group-consumer-max-heartbeat-interval", Type: TypeInt,
			Doc:     "The upper bound of the consumer group heartbeat interval.",
			Field:   func(b *Broker) any { return &b.GroupConsumerMaxHeartbeatInterval },
			Default: "15000"},
		{Name: "group.consumer.max.session.timeout.ms", Flag: "group-consumer-max-session-timeout", Type: TypeInt,
			Doc:     "The upper bound of the consumer group session timeout.",
			Field:   func(b *Broker) any { return &b.GroupConsumerMaxSessionTimeout },
			Default: "60000"},
		{Name: "group.consumer.max.size", Flag: "group-consumer-max-size", Type: TypeInt,
			Doc:     "The most members a consumer group may have.",
			Field:   func(b *Broker) any { return &b.GroupConsumerMaxSize },
			Default: "2147483647", Min: atLeast(1)},
		{Name: "group.consumer.migration.policy", Flag: "group-consumer-migration-policy", Type: TypeString,
			Doc:     "Whether a live group may move between the classic and the consumer protocol: bidirectional, upgrade, downgrade or disabled.",
			Field:   func(b *Broker) any { return &b.GroupConsumerMigrationPolicy },
			Default: "bidirectional",
			Get:     func(b Broker) string { return strings.ToLower(b.GroupConsumerMigrationPolicy) }},
		{Name: "group.consumer.min.heartbeat.interval.ms", Flag: "group-consumer-min-heartbeat-interval", Type: TypeInt,
			Doc:     "The lower bound of the consumer group heartbeat interval.",
			Field:   func(b *Broker) any { return &b.GroupConsumerMinHeartbeatInterval },
			Default: "5000", Min: atLeast(1)},
		{Name: "group.consumer.min.session.timeout.ms", Flag: "group-consumer-min-session-timeout", Type: TypeInt,
			Doc:     "The lower bound of the consumer group session timeout.",
			Field:   func(b *Broker) any { return &b.GroupConsumerMinSessionTimeout },
			Default: "45000", Min: atLeast(1)},
		{Name: "group.consumer.session.timeout.ms", Flag: "group-consumer-session-timeout", Type: TypeInt,
			Doc:     "How long a consumer group member may go without a heartbeat.",
			Field:   func(b *Broker) any { return &b.GroupConsumerSessionTimeout },
			Default: "45000"},
		{Name: "group.handoff.ledger.enable", Flag: "handoff-ledger", Type: TypeBoolean,
			Doc:     "Whether every partition hand-off of every group is recorded, with what it risked, in __strand_handoffs.",
			Field:   func(b *Broker) any { return &b.HandoffLedger },
			Default: "true"},
		{Name: "group.handoff.ledger.retention.ms", Flag: "handoff-ledger-retention", Type: TypeLong,
			Doc:     "How long __strand_handoffs keeps its entries.",
			Field:   func(b *Broker) any { return &b.HandoffLedgerRetention },
			Default: "604800000", Min: atLeast(1)},
		{Name: "group.initial.rebalance.delay.ms", Flag: "group-initial-rebalance-delay", Type: TypeInt,
			Doc:     "How long the first rebalance of an empty group waits for more members to join.",
			Field:   func(b *Broker) any { return &b.GroupInitialRebalanceDelay },
			Default: "3000", Min: atLeast(0)},
		{Name: "group.max.session.timeout.ms", Flag: "group-max-session-timeout", Type: TypeInt,
			Doc:     "The longest session timeout a group member may ask for.",
			Field:   func(b *Broker) any { return &b.GroupMaxSessionTimeout },
			Default: "1800000"},
		{Name: "group.max.size", Flag: "group-max-size", Type: TypeInt,
			Doc:     "The most members a classic group may have.",
			Field:   func(b *Broker) any { return &b.GroupMaxSize },
			Default: "2147483647", Min: atLeast(1)},
		{Name: "group.member.disconnect.grace.ms", Flag: "group-member-disconnect-grace", Type: TypeInt,
			Doc:     "How long a group member whose connection closed without a LeaveGroup keeps its place; 0 until its session times out, as in Kafka.",
			Field:   func(b *Broker) any { return &b.GroupMemberDisconnectGrace },
			Default: "2000", Min: atLeast(0)},
		{Name: "group.member.disconnect.grace.static.enable", Flag: "group-member-disconnect-grace-static", Type: TypeBoolean,
			Doc:     "Whether the disconnect grace also applies to static members (group.instance.id).",
			Field:   func(b *Broker) any { return &b.GroupMemberDisconnectGraceStatic },
			Default: "false"},
		{Name: "group.min.session.timeout.ms", Flag: "group-min-session-timeout", Type: TypeInt,
			Doc:     "The shortest session timeout a group member may ask for.",
			Field:   func(b *Broker) any { return &b.GroupMinSessionTimeout },
			Default: "6000", Min: atLeast(1)},
		{Name: "group.share.session.timeout.ms", Flag: "group-share-session-timeout", Type: TypeInt,
			Doc:     "How long a share group member may go without a heartbeat.",
			Field:   func(b *Broker) any { return &b.GroupShareSessionTimeout },
			Default: "45000", Min: atLeast(1)},
		{Name: "group.share.heartbeat.interval.ms", Flag: "group-share-heartbeat-interval", Type: TypeInt,
			Doc:     "How often share group members heartbeat.",
			Field:   func(b *Broker) any { return &b.GroupShareHeartbeatInterval },
			Default: "5000", Min: atLeast(1)},
		{Name: "group.share.max.size", Flag: "group-share-max-size", Type: TypeInt,
			Doc:     "The most members a share group may have.",
			Field:   func(b *Broker) any { return &b.GroupShareMaxSize },
			Default: "200", Min: atLeast(1), Max: atMost(1000)},
		{Name: "group.share.max.share.sessions", Flag: "group-share-max-share-sessions", Type: TypeInt,
			Doc:     "The most share sessions (one per share group member fetching here) open on this broker at once.",
			Field:   func(b *Broker) any { return &b.GroupShareMaxSessions },
			Default: "2000", Min: atLeast(1)},
		{Name: "group.share.delivery.count.limit", Flag: "group-share-delivery-count-limit", Type: TypeInt,
			Doc:     "How many times a share group delivers a record before giving it up (archived); a group's share.delivery.count.limit overrides it.",
			Field:   func(b *Broker) any { return &b.GroupShareDeliveryLimit },
			Default: "5", Min: atLeast(2), Max: atMost(10)},
		{Name: "group.share.partition.max.record.locks", Flag: "group-share-partition-max-record-locks", Type: TypeInt,
			Doc:     "The most records of one partition a share group has in flight (acquired, or waiting past an unacknowledged one); a group's share.partition.max.record.locks overrides it.",
			Field:   func(b *Broker) any { return &b.GroupShareRecordLocks },
			Default: "2000", Min: atLeast(100), Max: atMost(4000)},
		{Name: "group.share.record.lock.duration.ms", Flag: "group-share-record-lock-duration", Type: TypeInt,
			Doc:     "How long a share group member holds a record it acquired before it goes to another; a group's share.record.lock.duration.ms overrides it.",
			Field:   func(b *Broker) any { return &b.GroupShareRecordLock },
			Default: "30000", Min: atLeast(1), Max: atMost(3600000)},
		{Name: "share.coordinator.state.topic.num.partitions", Flag: "share-state-topic-partitions", Type: TypeInt,
			Doc:     "The partitions of __share_group_state, where share groups keep their share-partitions' state, when it is created.",
			Field:   func(b *Broker) any { return &b.ShareStateTopicPartitions },
			Default: "50", Min: atLeast(1)},
		{Name: "share.coordinator.state.topic.replication.factor", Flag: "share-state-topic-replication-factor", Type: TypeShort,
			Doc:     "Replicas of __share_group_state, fewer while fewer brokers are live.",
			Field:   func(b *Broker) any { return &b.ShareStateTopicReplicationFactor },
			Default: "3", Min: atLeast(1)},
		{Name: "leader.imbalance.check.interval.seconds", Flag: "leader-imbalance-check-interval", Type: TypeLong,
			Doc:     "How often leadership is given back to preferred replicas.",
			Field:   func(b *Broker) any { return &b.LeaderImbalanceCheck },
			Default: "300"},
		{Name: "listeners", Flag: "listen", KafkaFlag: "listeners", Type: TypeList,
			Doc:     "The host:port the first listener accepts Kafka clients on; --listeners NAME://host:port,... gives every listener, the controller's among them.",
			Field:   func(b *Broker) any { return &b.Listen },
			Default: "127.0.0.1:9092",
			Get:     func(b Broker) string { return b.listenersSetting(false) }},
		{Name: "listener.security.protocol.map", KafkaFlag: "listener-security-protocol-map", Type: TypeString,
			Doc: "Each listener's security protocol, NAME:PROTOCOL,... (--listener-security-protocol-map); a listener named PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL speaks that protocol unless mapped otherwise.",
			Get: func(b Broker) string { return b.protocolMapSetting() }},
		{Name: "inter.broker.listener.name", Flag: "inter-broker-listener-name", Type: TypeString,
			Doc:     "The listener other brokers connect to (default: the first in listeners); security.inter.broker.protocol in a config file names it too.",
			Aliases: []Alias{{Key: "security.inter.broker.protocol"}},
			Field:   func(b *Broker) any { return &b.InterBrokerListener }},
		{Name: "inter.broker.sasl.username", Flag: "inter-broker-sasl-username", Type: TypeString,
			Doc:   "The user brokers authenticate to each other as when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL; it needs a SCRAM credential, and super.users should name it under an authorizer.",
			Field: func(b *Broker) any { return &b.InterBrokerSASLUser }},
		{Name: "inter.broker.sasl.password", Flag: "inter-broker-sasl-password", Type: TypePassword,
			Doc:   "The password of inter.broker.sasl.username.",
			Field: func(b *Broker) any { return &b.InterBrokerSASLPassword }},
		{Name: "sasl.mechanism.inter.broker.protocol", Flag: "sasl-mechanism-inter-broker-protocol", Type: TypeString,
			Doc:   "The SASL mechanism brokers authenticate to each other with: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: the strongest of sasl.enabled.mechanisms).",
			Field: func(b *Broker) any { return &b.InterBrokerSASLMechanism }},
		{Name: "controller.listener.names", Flag: "controller-listener-names", Type: TypeList,
			Doc:     "The names of the controller listeners in listeners, whose address takes the metadata quorum's traffic (PLAINTEXT, or SSL with mutual TLS as listener.security.protocol.map says).",
			Field:   func(b *Broker) any { return &b.ControllerListenerNames },
			Default: "CONTROLLER"},
		{Name: "log.dirs", Flag: "data-dir", Type: TypeList,
			Doc:     "The directory holding the partitions and the cluster metadata.",
			Field:   func(b *Broker) any { return &b.DataDir },
			Default: "strand-data"},
		{Name: "log.retention.check.interval.ms", Flag: "retention-check-interval", Type: TypeLong,
			Doc:     "How often retention runs.",
			Field:   func(b *Broker) any { return &b.RetentionCheck },
			Default: "300000", Min: atLeast(1)},
		{Name: "max.connections", Flag: "max-connections", Type: TypeInt,
			Doc:     "The most client connections open at once; 0 for no bound. Over it a new connection is closed at once.",
			Field:   func(b *Broker) any { return &b.MaxConnections },
			Default: "0", Min: atLeast(0)},
		{Name: "max.connections.per.ip", Flag: "max-connections-per-ip", Type: TypeInt,
			Doc:     "The most client connections open at once from one address; 0 for no bound.",
			Field:   func(b *Broker) any { return &b.MaxConnectionsPerIP },
			Default: "0", Min: atLeast(0)},
		{Name: "max.connections.per.ip.overrides", Flag: "max-connections-per-ip-overrides", Type: TypeString,
			Doc:   "Other bounds for some addresses: host:count,...",
			Field: func(b *Broker) any { return &b.MaxConnectionsPerIPOverrides }},
		{Name: "connections.max.reauth.ms", Flag: "connections-max-reauth", Type: TypeLong,
			Doc:     "How long a SASL authentication lasts: the client re-authenticates on its connection within it (KIP-368), or the connection closes; 0 for ever.",
			Field:   func(b *Broker) any { return &b.ConnectionsMaxReauth },
			Default: "0", Min: atLeast(0)},
		{Name: "connections.max.idle.ms", Flag: "connections-max-idle", Type: TypeLong,
			Doc:     "A client connection that sent nothing for this long is closed; 0 for never.",
			Field:   func(b *Broker) any { return &b.ConnectionsMaxIdle },
			Default: "600000", Min: atLeast(0)},
		{Name: "node.id", Flag: "node-id", Type: TypeInt,
			Doc:     "This broker's id.",
			Field:   func(b *Broker) any { return &b.NodeID },
			Aliases: []Alias{{Key: "broker.id"}},
			Default: "0", Min: atLeast(0)},
		{Name: "num.partitions", Flag: "default-partitions", Type: TypeInt,
			Doc:     "Partitions of a topic created without a count (auto-created, or CreateTopics with -1).",
			Field:   func(b *Broker) any { return &b.DefaultPartitions },
			Default: "1", Min: atLeast(1)},
		{Name: "offset.metadata.max.bytes", Flag: "offset-metadata-max-bytes", Type: TypeInt,
			Doc:     "The longest metadata string an offset commit may carry.",
			Field:   func(b *Broker) any { return &b.OffsetMetadataMaxBytes },
			Default: "4096", Min: atLeast(0)},
		{Name: "offsets.retention.check.interval.ms", Flag: "offsets-retention-check-interval", Type: TypeLong,
			Doc:     "How often stale committed offsets are looked for.",
			Field:   func(b *Broker) any { return &b.OffsetsRetentionCheck },
			Default: "600000", Min: atLeast(1)},
		{Name: "offsets.retention.minutes", Flag: "offsets-retention", Type: TypeInt,
			Doc:     "How long a group's committed offsets are kept once it has no members.",
			Field:   func(b *Broker) any { return &b.OffsetsRetention },
			Default: "10080", Min: atLeast(1)},
		{Name: "offsets.topic.num.partitions", Flag: "offsets-topic-partitions", Type: TypeInt,
			Doc:     "The partitions of __consumer_offsets when it is created.",
			Field:   func(b *Broker) any { return &b.OffsetsTopicPartitions },
			Default: "50", Min: atLeast(1)},
		{Name: "offsets.topic.replication.factor", Flag: "offsets-topic-replication-factor", Type: TypeShort,
			Doc:     "Replicas of __consumer_offsets, fewer while fewer brokers are live.",
			Field:   func(b *Broker) any { return &b.OffsetsTopicReplicationFactor },
			Default: "3", Min: atLeast(1)},
		{Name: "queued.max.request.bytes", Flag: "queued-max-request-bytes", Type: TypeLong,
			Doc:     "The most bytes of requests read and not yet answered, across the broker; a connection then waits to be read. 0 for no bound.",
			Field:   func(b *Broker) any { return &b.QueuedMaxRequestBytes },
			Default: "536870912"},
		{Name: "quota.window.num", Flag: "quota-window-num", Type: TypeInt,
			Doc:     "The windows a client's use is measured over against its quotas.",
			Field:   func(b *Broker) any { return &b.QuotaWindowNum },
			Default: "11", Min: atLeast(2)},
		{Name: "quota.window.size.seconds", Flag: "quota-window-size", Type: TypeInt,
			Doc:     "The length of each window a client's use is measured in against its quotas.",
			Field:   func(b *Broker) any { return &b.QuotaWindowSize },
			Default: "1", Min: atLeast(1)},
		{Name: "replica.lag.time.max.ms", Flag: "replica-lag-time", Type: TypeLong,
			Doc:     "A follower not caught up for this long leaves the in-sync set.",
			Field:   func(b *Broker) any { return &b.ReplicaLagTime },
			Default: "30000", Min: atLeast(1)},
		{Name: "sasl.enabled.mechanisms", Flag: "sasl-enabled-mechanisms", Type: TypeList,
			Doc:     "The SASL mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (each checked against the users' SCRAM credentials).",
			Field:   func(b *Broker) any { return &b.SASLMechanisms },
			Default: "SCRAM-SHA-256,SCRAM-SHA-512", OneOf: []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}},
		{Name: "sasl.oauthbearer.clock.skew.seconds", Flag: "sasl-oauthbearer-clock-skew", Type: TypeInt,
			Doc:     "The clock difference allowed on an OAUTHBEARER token's exp, nbf and iat.",
			Field:   func(b *Broker) any { return &b.OAuthClockSkew },
			Default: "30", Min: atLeast(0)},
		{Name: "sasl.oauthbearer.expected.audience", Flag: "sasl-oauthbearer-audience", Type: TypeList,
			Doc:   "When set, an OAUTHBEARER token's aud must hold one of these.",
			Field: func(b *Broker) any { return &b.OAuthAudience }},
		{Name: "sasl.oauthbearer.expected.issuer", Flag: "sasl-oauthbearer-issuer", Type: TypeString,
			Doc:   "When set, an OAUTHBEARER token's iss must be this.",
			Field: func(b *Broker) any { return &b.OAuthIssuer }},
		{Name: "sasl.oauthbearer.jwks.endpoint.url", Flag: "sasl-oauthbearer-jwks", Type: TypeString,
			Doc:   "The JWKS file (a path or a file: URL) holding the keys OAUTHBEARER tokens are signed with (RS, PS and ES algorithms); read again when it changes.",
			Field: func(b *Broker) any { return &b.OAuthJWKS }},
		{Name: "sasl.oauthbearer.sub.claim.name", Flag: "sasl-oauthbearer-sub-claim", Type: TypeString,
			Doc:     "The OAUTHBEARER token claim naming the principal.",
			Field:   func(b *Broker) any { return &b.OAuthSubClaim },
			Default: "sub"},
		{Name: "sasl.oauthbearer.unsecured.enable", Flag: "sasl-oauthbearer-unsecured", Type: TypeBoolean,
			Doc:     "Accept OAUTHBEARER tokens signed with nothing (alg none), as Kafka's unsecured validator does: for development only.",
			Field:   func(b *Broker) any { return &b.OAuthUnsecured },
			Default: "false"},
		{Name: "security.protocol", Type: TypeString,
			Doc:     "The first listener's security protocol (listener.security.protocol.map gives every listener's): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
			Field:   func(b *Broker) any { return &b.ListenerProtocol },
			Default: "PLAINTEXT"},
		{Name: "ssl.client.auth", Flag: "ssl-client-auth", Type: TypeString,
			Doc:     "Whether an SSL listener asks clients for a certificate: none, requested or required (mutual TLS).",
			Field:   func(b *Broker) any { return &b.SSLClientAuth },
			Default: "none", OneOf: []string{"none", "requested", "required"}},
		{Name: "ssl.keystore.key.location", Flag: "ssl-key", Type: TypeString,
			Doc:   "The PEM file of the SSL listener's private key (default: in ssl.keystore.location); reloaded when it changes.",
			Field: func(b *Broker) any { return &b.SSLKey }},
		{Name: "ssl.keystore.location", Flag: "ssl-cert", Type: TypeString,
			Doc:   "The PEM file of the SSL listener's certificate chain (and its key, without ssl.keystore.key.location); reloaded when it changes.",
			Field: func(b *Broker) any { return &b.SSLKeystore }},
		{Name: "ssl.keystore.type", Type: TypeString,
			Doc: "The format of the key and certificate files: PEM.",
			Get: func(Broker) string { return "PEM" }},
		{Name: "ssl.truststore.location", Flag: "ssl-ca", Type: TypeString,
			Doc:   "The PEM file of the CAs whose client certificates an SSL listener accepts (with ssl.client.auth), and that brokers trust in each other over TLS.",
			Field: func(b *Broker) any { return &b.SSLTruststore }},
		{Name: "socket.request.max.bytes", Flag: "max-request-size", Type: TypeInt,
			Doc:     "The largest request accepted; a larger one closes the connection.",
			Field:   func(b *Broker) any { return &b.MaxRequestBytes },
			Default: "104857600", Min: atLeast(1024)},
		{Name: "socket.send.buffer.bytes", Flag: "socket-send-buffer", Type: TypeInt,
			Doc:     "The send buffer (SO_SNDBUF) of each client connection, -1 for the system's autotuned default. 256 KiB keeps a consumer's fetches in the caches; a long, fast network path may want more.",
			Field:   func(b *Broker) any { return &b.SocketSendBufferBytes },
			Default: "262144"},
		{Name: "super.users", Flag: "super-users", Type: TypeString,
			Doc:   "The principals every ACL check allows, separated by semicolons: User:admin;User:ops.",
			Field: func(b *Broker) any { return &b.SuperUsers }},
		{Name: "telemetry.max.bytes", Flag: "telemetry-max-bytes", Type: TypeInt,
			Doc:     "The largest metrics push (KIP-714) accepted from a client, compressed and decompressed; what clients push is exported on /metrics.",
			Field:   func(b *Broker) any { return &b.TelemetryMaxBytes },
			Default: "1048576", Min: atLeast(1)},
		{Name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Flag: "transaction-abort-check-interval", Type: TypeInt,
			Doc:     "How often timed-out transactions are looked for.",
			Field:   func(b *Broker) any { return &b.TransactionAbortCheck },
			Default: "10000", Min: atLeast(1)},
		{Name: "transaction.max.timeout.ms", Flag: "transaction-max-timeout", Type: TypeInt,
			Doc:     "The longest transaction timeout a producer may ask for.",
			Field:   func(b *Broker) any { return &b.TransactionMaxTimeout },
			Default: "900000", Min: atLeast(1)},
		{Name: "transaction.state.log.num.partitions", Flag: "transaction-state-partitions", Type: TypeInt,
			Doc:     "The partitions of __transaction_state when it is created.",
			Field:   func(b *Broker) any { return &b.TransactionStatePartitions },
			Default: "50", Min: atLeast(1)},
		{Name: "transaction.state.log.replication.factor", Flag: "transaction-state-replication-factor", Type: TypeShort,
			Doc:     "Replicas of __transaction_state, fewer while fewer brokers are live.",
			Field:   func(b *Broker) any { return &b.TransactionStateReplicationFactor },
			Default: "3", Min: atLeast(1)},
		{Name: "transaction.version", Flag: "transaction-version", Type: TypeShort,
			Doc:     "The finalized transaction.version feature: 2 for KIP-890's transaction protocol, 1 or 0 for the older flow.",
			Field:   func(b *Broker) any { return &b.TransactionVersion },
			Default: "2", Min: atLeast(0), Max: atMost(2)},
		{Name: "transactional.id.expiration.ms", Flag: "transactional-id-expiration", Type: TypeInt,
			Doc:     "How long an idle transactional id is kept.",
			Field:   func(b *Broker) any { return &b.TransactionalIDExpiration },
			Default: "604800000", Min: atLeast(1)},
	}
	for i := range TopicDefs {
		t := &TopicDefs[i]
		if t.BrokerName == "" {
			continue // no broker-wide default (the throttled replicas lists)
		}
		d := BrokerDef{Name: t.BrokerName, Flag: t.Flag, Aliases: t.Aliases, Type: t.Type, Topic: t,
			Doc: "The default of the topic config " + t.Name + ": " + t.Doc,
			Get: func(b Broker) string { return t.Get(b.Topic) }}
		if t.Field != nil {
			d.Field = func(b *Broker) any { return t.Field(&b.Topic) }
		}
		defs = append(defs, d)
	}
	for i := range defs {
		if defs[i].Get == nil {
			defs[i].Get = fieldGetter(defs[i].Name, defs[i].Field)
		}
	}
	slices.SortFunc(defs, func(a, b BrokerDef) int { return strings.Compare(a.Name, b.Name) })
	return defs
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

// CheckDynamic reports names in configs that cannot be changed while the
// broker runs, and values of Kafka's configs that Strand does not act on
// that are not of their type. Those Kafka lets change at run time are
// kept, as Kafka keeps them, without effect here; so is a name neither
// Kafka nor Strand knows, as Kafka keeps a plugin's config.
func CheckDynamic(configs map[string]string) error {
	var static []string
	for name, v := range configs {
		if d, ok := LookupBrokerDef(name); ok {
			if !d.Dynamic() {
				static = append(static, name)
			}
			continue
		}
		d, ok := LookupUnusedKafkaDef(name)
		switch {
		case !ok:
			// Kept, as Kafka keeps a name it does not know (a
			// plugin's config).
		case d.ReadOnly:
			static = append(static, name)
		default:
			if err := checkType(d.Type, v); err != nil {
				return &ValueError{Name: name, Value: v, Err: err}
			}
		}
	}
	if len(static) > 0 {
		slices.Sort(static)
		return &StaticConfigError{Names: static}
	}
	return nil
}

// StaticConfigError: configs that cannot change while the broker runs were
// given a value at run time. It is an ErrInvalidConfig, said as Kafka says
// it.
type StaticConfigError struct{ Names []string }

func (e *StaticConfigError) Error() string {
	return "Cannot update these configs dynamically: [" + strings.Join(e.Names, ", ") + "]"
}

func (e *StaticConfigError) Unwrap() error { return ErrInvalidConfig }

// checkType checks that v reads as a value of type typ, as Kafka parses
// it.
func checkType(typ Type, v string) error {
	v = strings.TrimSpace(v)
	bits := map[Type]int{TypeShort: 16, TypeInt: 32, TypeLong: 64}
	var ok bool
	switch typ {
	case TypeBoolean:
		ok = strings.EqualFold(v, "true") || strings.EqualFold(v, "false")
	case TypeShort, TypeInt, TypeLong:
		_, err := strconv.ParseInt(v, 10, bits[typ])
		ok = err == nil
	case TypeDouble:
		_, err := strconv.ParseFloat(v, 64)
		ok = err == nil
	default:
		ok = true
	}
	switch {
	case ok:
		return nil
	case typ == TypeBoolean:
		return fmt.Errorf("%w: Expected value to be either true or false", ErrInvalidConfig)
	}
	return fmt.Errorf("%w: Not a number of type %s", ErrInvalidConfig, strings.ToUpper(typeNames[typ]))
}

// ApplyDynamic returns static with the broker configs changed at runtime
// applied: the cluster-wide defaults, then this broker's own, which win. The
// topic defaults are applied in the order of TopicDefs, as TopicConfig
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
			return static, &ValueError{Name: d.Name, Value: v, Err: err}
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
		if err := d.Set(&b.Topic, v); err != nil {
			return static, &ValueError{Name: d.BrokerName, Value: v, Err: err}
		}
	}
	if err := b.Topic.Validate(); err != nil {
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
		return append(out, Synonym{Name: d.Name, Value: d.Get(Defaults().Topic), Source: SourceDefault})
	}
	return append(out, BrokerSynonyms(bd, static, clusterDefaults, node)...)
}
