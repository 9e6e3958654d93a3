package config

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/replica"
)

// Broker is one broker's static configuration.
type Broker struct {
	DataDir   string
	Listen    string // host:port to accept Kafka clients on
	Advertise string // host:port clients are told to connect to; Listen when empty
	// AdminListen is the admin HTTP listener's host:port (JSON API,
	// /metrics); empty for none.
	AdminListen string
	// AdminConsole serves the web console on the admin listener
	// (admin.console.enable); AdminConsoleActions lets it reset a group's
	// offsets and delete a group (admin.console.actions.enable);
	// AdminConsoleSample is how often it samples lag and end offsets for
	// its charts and rates (admin.console.sample.interval.ms).
	AdminConsole        bool
	AdminConsoleActions bool
	AdminConsoleSample  time.Duration
	// LinkMetadataInterval is how often each cluster link reads its
	// source's metadata: how soon a new source topic is mirrored
	// (strand.link.metadata.interval.ms).
	LinkMetadataInterval time.Duration
	// MaxConnections bounds the client connections open at once, and
	// MaxConnectionsPerIP those from one address, with
	// MaxConnectionsPerIPOverrides (host:count,...) for some (Kafka's
	// max.connections, max.connections.per.ip and its overrides); 0 is
	// no bound. ConnectionsMaxIdle closes a connection that sent nothing
	// for that long (connections.max.idle.ms).
	// QueuedMaxRequestBytes bounds the bytes of requests read and not
	// yet answered, across the broker (queued.max.request.bytes); one
	// connection holds at most MaxRequestBytes of them. 0 is no bound.
	QueuedMaxRequestBytes        int64
	MaxConnections               int32
	MaxConnectionsPerIP          int32
	MaxConnectionsPerIPOverrides string
	ConnectionsMaxIdle           time.Duration
	// ListenerProtocol is the first listener's security protocol:
	// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, and ListenerName its
	// name (the protocol when empty). MoreListeners are the others
	// (Listeners lists them all). An SSL listener serves TLS 1.2 and 1.3
	// with the PEM certificate chain in SSLKeystore and its key in SSLKey
	// (or in SSLKeystore too); with SSLClientAuth requested or required it
	// asks clients for a certificate signed by a CA of SSLTruststore.
	ListenerProtocol string
	ListenerName     string
	MoreListeners    []Listener
	// InterBrokerListener names the listener other brokers connect to
	// (inter.broker.listener.name; the first when empty). Over SASL they
	// authenticate as InterBrokerSASLUser with InterBrokerSASLPassword, by
	// InterBrokerSASLMechanism; over TLS they present the broker's own
	// certificate and check the peer's against SSLTruststore.
	InterBrokerListener      string
	InterBrokerSASLMechanism string
	InterBrokerSASLUser      string
	InterBrokerSASLPassword  string
	// ControllerListenerNames are the names of controller listeners in
	// listeners (controller.listener.names).
	ControllerListenerNames string
	// SASLMechanisms are the mechanisms a SASL listener offers
	// (sasl.enabled.mechanisms): PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512,
	// all checked against the users' SCRAM credentials.
	SASLMechanisms []string
	// OAuthJWKS is where OAUTHBEARER tokens' verification keys are: a
	// JWKS file, by path or file: URL (sasl.oauthbearer.jwks.endpoint.url).
	// OAuthAudience and OAuthIssuer, when set, must be the tokens' aud
	// and iss; OAuthSubClaim names the principal's claim; OAuthClockSkew
	// is allowed on their times. OAuthUnsecured accepts tokens signed
	// with nothing (Kafka's unsecured validator): for development only.
	OAuthJWKS      string
	OAuthAudience  []string
	OAuthIssuer    string
	OAuthSubClaim  string
	OAuthClockSkew time.Duration
	OAuthUnsecured bool
	// Authorizer is authorizer.class.name: empty for none, or acl (Kafka's
	// ACL rules; Kafka's authorizer class names say the same). SuperUsers
	// (super.users, semicolon-separated principals) pass every check;
	// AllowEveryoneIfNoACL opens the resources no ACL names.
	// QuotaWindowNum windows of QuotaWindowSize each measure a client's
	// use against its quotas (quota.window.num,
	// quota.window.size.seconds).
	QuotaWindowNum       int32
	QuotaWindowSize      time.Duration
	Authorizer           string
	SuperUsers           string
	AllowEveryoneIfNoACL bool
	// ConnectionsMaxReauth is how long an authentication lasts
	// (connections.max.reauth.ms, KIP-368): the client re-authenticates on
	// its connection within it, or the connection closes. 0 is for ever.
	ConnectionsMaxReauth time.Duration
	SSLKeystore          string
	SSLKey               string
	SSLTruststore        string
	SSLClientAuth        string
	NodeID               int32
	DefaultPartitions    int32 // num.partitions
	// DefaultReplicationFactor is default.replication.factor; topics get
	// at most as many replicas as there are live brokers.
	DefaultReplicationFactor int16
	// OffsetsTopicReplicationFactor and TransactionStateReplicationFactor
	// are offsets.topic.replication.factor and
	// transaction.state.log.replication.factor: the internal topics'
	// replicas, fewer while the cluster has fewer live brokers.
	OffsetsTopicReplicationFactor     int16
	TransactionStateReplicationFactor int16
	// ReplicaLagTime is replica.lag.time.max.ms: a follower that has not
	// caught up with its leader for this long leaves the in-sync set.
	ReplicaLagTime time.Duration
	// LeaderThrottleRate and FollowerThrottleRate are
	// leader.replication.throttled.rate and
	// follower.replication.throttled.rate: the bytes a second this broker
	// sends to, or copies as, the throttled replicas that are out of sync
	// (their topics' *.replication.throttled.replicas). Set at runtime, as
	// kafka-reassign-partitions.sh --throttle does.
	LeaderThrottleRate, FollowerThrottleRate int64
	// AutoLeaderRebalance is auto.leader.rebalance.enable: every
	// LeaderImbalanceCheck (leader.imbalance.check.interval.seconds) the
	// active controller gives partitions back to their preferred replicas.
	AutoLeaderRebalance  bool
	LeaderImbalanceCheck time.Duration
	Rack                 string // broker.rack
	// ReplicaSelector is replica.selector.class: with RackAwareSelector a
	// consumer that names its rack (client.rack) is sent to an in-sync
	// replica in that rack (KIP-392).
	ReplicaSelector  string
	AutoCreateTopics bool  // auto.create.topics.enable
	MaxRequestBytes  int32 // socket.request.max.bytes: larger frames close the connection
	// SocketSendBufferBytes is socket.send.buffer.bytes: each client
	// connection's SO_SNDBUF, -1 for the system's default (autotuned).
	SocketSendBufferBytes int32
	// TelemetryMaxBytes is telemetry.max.bytes: the largest metrics push
	// (KIP-714) accepted from a client, compressed and decompressed.
	TelemetryMaxBytes int32
	// Topic holds the topic defaults (log.retention.ms, log.segment.bytes,
	// min.insync.replicas, ...).
	Topic replica.Config
	// RetentionCheck is log.retention.check.interval.ms.
	RetentionCheck time.Duration

	// The group coordinator, under Kafka's names.
	GroupInitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms
	GroupMinSessionTimeout     time.Duration // group.min.session.timeout.ms
	GroupMaxSessionTimeout     time.Duration // group.max.session.timeout.ms
	GroupMaxSize               int32         // group.max.size
	// Consumer groups (KIP-848).
	GroupConsumerSessionTimeout    time.Duration // group.consumer.session.timeout.ms
	GroupConsumerHeartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms
	// The bounds of the two above (group.consumer.min.session.timeout.ms
	// and so on), as Kafka checks them.
	GroupConsumerMinSessionTimeout    time.Duration
	GroupConsumerMaxSessionTimeout    time.Duration
	GroupConsumerMinHeartbeatInterval time.Duration
	GroupConsumerMaxHeartbeatInterval time.Duration
	GroupConsumerMaxSize              int32    // group.consumer.max.size
	GroupConsumerAssignors            []string // group.consumer.assignors, the first the default
	GroupConsumerMigrationPolicy      string   // group.consumer.migration.policy: bidirectional, upgrade, downgrade or disabled
	// GroupMemberDisconnectGrace (group.member.disconnect.grace.ms, Strand's
	// own) is how long a member whose connection closed without a
	// LeaveGroup keeps its place; 0 until its session times out, as
	// Kafka. GroupMemberDisconnectGraceStatic applies it to static members
	// too.
	GroupMemberDisconnectGrace       time.Duration
	GroupMemberDisconnectGraceStatic bool
	// HandoffLedger (group.handoff.ledger.enable, Strand's own) records
	// every partition hand-off of every group, with the fetches that tell
	// what it risked, in the internal topic __strand_handoffs, kept for
	// HandoffLedgerRetention (group.handoff.ledger.retention.ms).
	HandoffLedger          bool
	HandoffLedgerRetention time.Duration
	// GroupCommitOwnershipStrict (group.commit.ownership.strict, Strand's
	// own) refuses a member's commit of a partition it does not own; it
	// is reported in the ledger either way.
	GroupCommitOwnershipStrict bool
	OffsetsTopicPartitions     int32         // offsets.topic.num.partitions: fixed once __consumer_offsets exists
	OffsetsRetention           time.Duration // offsets.retention.minutes
	OffsetsRetentionCheck      time.Duration // offsets.retention.check.interval.ms
	OffsetMetadataMaxBytes     int32         // offset.metadata.max.bytes

	// The transaction coordinator, under Kafka's names.
	// TransactionVersion is the finalized transaction.version feature
	// advertised to clients: 2 lets them use KIP-890's protocol (epoch bump
	// on every EndTxn, partitions added by produce requests), 1 or 0 keeps
	// them on the older flow.
	TransactionVersion         int16
	TransactionStatePartitions int32         // transaction.state.log.num.partitions: fixed once __transaction_state exists
	TransactionMaxTimeout      time.Duration // transaction.max.timeout.ms
	TransactionalIDExpiration  time.Duration // transactional.id.expiration.ms
	TransactionAbortCheck      time.Duration // transaction.abort.timed.out.transaction.cleanup.interval.ms

	// The cluster. Without QuorumVoters the broker is a cluster of one
	// that keeps its metadata in a file.
	//
	// QuorumVoters is controller.quorum.voters: the metadata quorum's
	// voters as "id@host:port,...", their controller listeners.
	QuorumVoters string
	// ControllerListen is the controller listener's host:port: where this
	// node takes the metadata quorum's traffic.
	ControllerListen string
	// ControllerProtocol is the controller listener's security protocol:
	// PLAINTEXT, or SSL with mutual TLS, so that only holders of a
	// certificate of the truststore take part in the quorum.
	ControllerProtocol string
	// ClusterID, when set, is the id the cluster must have: a new cluster
	// takes it, and a data directory of another cluster is refused.
	ClusterID string
	// BrokerSessionTimeout is broker.session.timeout.ms: a broker the
	// active controller has not heard from for this long is fenced.
	BrokerSessionTimeout time.Duration
}

// Defaults is the embedded single-node default: ./strand-data, 127.0.0.1:9092,
// Kafka's topic defaults with fsync on every acknowledged write.
func Defaults() Broker {
	return Broker{
		DataDir:                           "strand-data",
		Listen:                            "127.0.0.1:9092",
		AdminListen:                       "127.0.0.1:9644",
		AdminConsole:                      true,
		ListenerProtocol:                  "PLAINTEXT",
		ControllerListenerNames:           "CONTROLLER",
		ControllerProtocol:                "PLAINTEXT",
		ConnectionsMaxIdle:                10 * time.Minute,
		SASLMechanisms:                    []string{"SCRAM-SHA-256", "SCRAM-SHA-512"},
		QueuedMaxRequestBytes:             512 << 20,
		SSLClientAuth:                     "none",
		QuotaWindowNum:                    11,
		OAuthSubClaim:                     "sub",
		OAuthClockSkew:                    30 * time.Second,
		QuotaWindowSize:                   time.Second,
		AdminConsoleSample:                10 * time.Second,
		LinkMetadataInterval:              5 * time.Second,
		NodeID:                            0,
		DefaultPartitions:                 1,
		DefaultReplicationFactor:          1,
		OffsetsTopicReplicationFactor:     3,
		TransactionStateReplicationFactor: 3,
		ReplicaLagTime:                    30 * time.Second,
		LeaderThrottleRate:                math.MaxInt64,
		FollowerThrottleRate:              math.MaxInt64,
		AutoLeaderRebalance:               true,
		LeaderImbalanceCheck:              300 * time.Second,
		AutoCreateTopics:                  true,
		MaxRequestBytes:                   100 << 20,
		SocketSendBufferBytes:             256 << 10,
		TelemetryMaxBytes:                 1 << 20,
		Topic:                             replica.Defaults(),
		RetentionCheck:                    5 * time.Minute,

		GroupInitialRebalanceDelay: 3 * time.Second,
		GroupMinSessionTimeout:     6 * time.Second,
		GroupMaxSessionTimeout:     30 * time.Minute,
		GroupMaxSize:               math.MaxInt32,

		GroupConsumerSessionTimeout:    45 * time.Second,
		GroupConsumerHeartbeatInterval: 5 * time.Second,

		GroupConsumerMinSessionTimeout:    45 * time.Second,
		GroupConsumerMaxSessionTimeout:    60 * time.Second,
		GroupConsumerMinHeartbeatInterval: 5 * time.Second,
		GroupConsumerMaxHeartbeatInterval: 15 * time.Second,
		GroupConsumerMaxSize:              math.MaxInt32,
		GroupConsumerAssignors:            []string{"uniform", "range"},
		GroupConsumerMigrationPolicy:      "bidirectional",
		GroupMemberDisconnectGrace:        2 * time.Second,
		HandoffLedger:                     true,
		HandoffLedgerRetention:            7 * 24 * time.Hour,
		OffsetsTopicPartitions:            50,
		OffsetsRetention:                  7 * 24 * time.Hour,
		OffsetsRetentionCheck:             10 * time.Minute,
		OffsetMetadataMaxBytes:            4096,

		TransactionVersion:         2,
		TransactionStatePartitions: 50,
		TransactionMaxTimeout:      15 * time.Minute,
		TransactionalIDExpiration:  7 * 24 * time.Hour,
		TransactionAbortCheck:      10 * time.Second,

		BrokerSessionTimeout: 9 * time.Second,
	}
}

// AdvertisedAddr returns the address clients of the first listener are
// told about, split.
func (b Broker) AdvertisedAddr() (string, int32, error) {
	return splitAdvertised(b.Listeners()[0].AdvertisedAddr())
}

// splitAdvertised splits an advertised address, which clients must be
// able to connect to.
func splitAdvertised(addr string) (string, int32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("advertise address %q: %w", addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("advertise address %q: port must be 1-65535 (use --advertise when listening on port 0)", addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		return "", 0, fmt.Errorf("advertise address %q: clients need a routable host (set --advertise)", addr)
	}
	return host, int32(p), nil
}

// Validate reports the first bad setting.
// The replica selectors of replica.selector.class, by Kafka's class names.
const (
	RackAwareSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
	LeaderSelector    = "org.apache.kafka.common.replica.LeaderSelector"
)

func (b Broker) Validate() error {
	switch {
	case b.DataDir == "":
		return fmt.Errorf("data directory: must be set")
	case b.NodeID < 0:
		return fmt.Errorf("node id %d: must not be negative", b.NodeID)
	case b.DefaultPartitions <= 0:
		return fmt.Errorf("default partitions %d: must be positive", b.DefaultPartitions)
	case b.DefaultReplicationFactor <= 0:
		return fmt.Errorf("default replication factor %d: must be positive", b.DefaultReplicationFactor)
	case b.OffsetsTopicReplicationFactor <= 0 || b.TransactionStateReplicationFactor <= 0:
		return fmt.Errorf("internal topics' replication factors %d, %d: must be positive",
			b.OffsetsTopicReplicationFactor, b.TransactionStateReplicationFactor)
	case b.ReplicaLagTime <= 0:
		return fmt.Errorf("replica lag time %v: must be positive", b.ReplicaLagTime)
	case b.BrokerSessionTimeout <= 0:
		return fmt.Errorf("broker session timeout %v: must be positive", b.BrokerSessionTimeout)
	case b.ReplicaSelector != "" && b.ReplicaSelector != RackAwareSelector && b.ReplicaSelector != LeaderSelector:
		return fmt.Errorf("replica.selector.class %q: must be %s or %s", b.ReplicaSelector, RackAwareSelector, LeaderSelector)
	case b.MaxRequestBytes < 1024:
		return fmt.Errorf("max request size %d: must be at least 1024", b.MaxRequestBytes)
	case b.SocketSendBufferBytes != -1 && b.SocketSendBufferBytes < 1024:
		return fmt.Errorf("socket send buffer %d: must be -1 (the system's default) or at least 1024", b.SocketSendBufferBytes)
	case b.TelemetryMaxBytes < 1:
		return fmt.Errorf("telemetry.max.bytes %d: must be at least 1", b.TelemetryMaxBytes)
	case b.GroupInitialRebalanceDelay < 0:
		return fmt.Errorf("group initial rebalance delay %v: must not be negative", b.GroupInitialRebalanceDelay)
	case b.GroupConsumerMinSessionTimeout <= 0 || b.GroupConsumerSessionTimeout < b.GroupConsumerMinSessionTimeout ||
		b.GroupConsumerSessionTimeout > b.GroupConsumerMaxSessionTimeout:
		return fmt.Errorf("group.consumer.session.timeout.ms %v: must be within group.consumer.min/max.session.timeout.ms, %v-%v",
			b.GroupConsumerSessionTimeout, b.GroupConsumerMinSessionTimeout, b.GroupConsumerMaxSessionTimeout)
	case b.GroupConsumerMinHeartbeatInterval <= 0 || b.GroupConsumerHeartbeatInterval < b.GroupConsumerMinHeartbeatInterval ||
		b.GroupConsumerHeartbeatInterval > b.GroupConsumerMaxHeartbeatInterval:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms %v: must be within group.consumer.min/max.heartbeat.interval.ms, %v-%v",
			b.GroupConsumerHeartbeatInterval, b.GroupConsumerMinHeartbeatInterval, b.GroupConsumerMaxHeartbeatInterval)
	case b.GroupConsumerHeartbeatInterval >= b.GroupConsumerSessionTimeout:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms %v must be below group.consumer.session.timeout.ms %v",
			b.GroupConsumerHeartbeatInterval, b.GroupConsumerSessionTimeout)
	case b.GroupConsumerMaxSize <= 0:
		return fmt.Errorf("group.consumer.max.size %d: must be positive", b.GroupConsumerMaxSize)
	case b.HandoffLedgerRetention <= 0:
		return fmt.Errorf("group.handoff.ledger.retention.ms %v: must be positive", b.HandoffLedgerRetention)
	case b.MaxConnections < 0 || b.MaxConnectionsPerIP < 0:
		return fmt.Errorf("max.connections %d, max.connections.per.ip %d: must not be negative (0 is no bound)", b.MaxConnections, b.MaxConnectionsPerIP)
	case b.ConnectionsMaxReauth < 0:
		return fmt.Errorf("connections.max.reauth.ms %v: must not be negative (0 is no re-authentication)", b.ConnectionsMaxReauth)
	case b.ConnectionsMaxIdle < 0:
		return fmt.Errorf("connections.max.idle.ms %v: must not be negative (0 is never)", b.ConnectionsMaxIdle)
	case b.QuotaWindowNum < 2 || b.QuotaWindowSize <= 0:
		return fmt.Errorf("quota.window.num %d, quota.window.size.seconds %v: at least 2 windows of a positive size", b.QuotaWindowNum, b.QuotaWindowSize)
	case b.UsesTLS() && b.SSLKeystore == "":
		return fmt.Errorf("an SSL listener needs its certificate: ssl.keystore.location (--ssl-cert)")
	case b.SSLClientAuth != "none" && b.SSLClientAuth != "requested" && b.SSLClientAuth != "required":
		return fmt.Errorf("ssl.client.auth %q: none, requested or required", b.SSLClientAuth)
	case b.SSLClientAuth != "none" && b.SSLTruststore == "":
		return fmt.Errorf("ssl.client.auth %s needs the clients' CA: ssl.truststore.location (--ssl-ca)", b.SSLClientAuth)
	case b.LinkMetadataInterval <= 0:
		return fmt.Errorf("strand.link.metadata.interval.ms %v: must be positive", b.LinkMetadataInterval)
	case b.AdminConsoleSample <= 0:
		return fmt.Errorf("admin.console.sample.interval.ms %v: must be positive", b.AdminConsoleSample)
	case b.GroupMemberDisconnectGrace < 0:
		return fmt.Errorf("group.member.disconnect.grace.ms %v: must not be negative", b.GroupMemberDisconnectGrace)
	case !knownMigrationPolicy(b.GroupConsumerMigrationPolicy):
		return fmt.Errorf("group.consumer.migration.policy %q: must be bidirectional, upgrade, downgrade or disabled", b.GroupConsumerMigrationPolicy)
	case !knownAssignors(b.GroupConsumerAssignors):
		return fmt.Errorf("group.consumer.assignors %v: each must be uniform or range", b.GroupConsumerAssignors)
	case b.GroupMinSessionTimeout <= 0 || b.GroupMaxSessionTimeout < b.GroupMinSessionTimeout:
		return fmt.Errorf("group session timeouts %v-%v: need 0 < min <= max", b.GroupMinSessionTimeout, b.GroupMaxSessionTimeout)
	case b.GroupMaxSize <= 0:
		return fmt.Errorf("group max size %d: must be positive", b.GroupMaxSize)
	case b.OffsetsTopicPartitions <= 0:
		return fmt.Errorf("offsets topic partitions %d: must be positive", b.OffsetsTopicPartitions)
	case b.OffsetsRetention <= 0 || b.OffsetsRetentionCheck <= 0:
		return fmt.Errorf("offsets retention %v, check interval %v: must be positive", b.OffsetsRetention, b.OffsetsRetentionCheck)
	case b.OffsetMetadataMaxBytes < 0:
		return fmt.Errorf("offset metadata max bytes %d: must not be negative", b.OffsetMetadataMaxBytes)
	case b.TransactionVersion < 0 || b.TransactionVersion > 2:
		return fmt.Errorf("transaction version %d: must be 0, 1 or 2", b.TransactionVersion)
	case b.TransactionStatePartitions <= 0:
		return fmt.Errorf("transaction state partitions %d: must be positive", b.TransactionStatePartitions)
	case b.TransactionMaxTimeout <= 0 || b.TransactionalIDExpiration <= 0 || b.TransactionAbortCheck <= 0:
		return fmt.Errorf("transaction max timeout %v, id expiration %v, abort check %v: must be positive",
			b.TransactionMaxTimeout, b.TransactionalIDExpiration, b.TransactionAbortCheck)
	}
	if err := b.validateListeners(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(b.AdminListen); b.AdminListen != "" && err != nil {
		return fmt.Errorf("admin listen address %q: %w", b.AdminListen, err)
	}
	voters, err := b.Voters()
	if err != nil {
		return err
	}
	if _, voter := voters[b.NodeID]; voter && b.ControllerListen == "" {
		return fmt.Errorf("node %d is a controller quorum voter: it needs a controller listener", b.NodeID)
	}
	for _, m := range b.SASLMechanisms {
		if !slices.Contains([]string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}, m) {
			return fmt.Errorf("sasl.enabled.mechanisms %q: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", m)
		}
		if m == "OAUTHBEARER" && b.OAuthJWKS == "" && !b.OAuthUnsecured {
			return fmt.Errorf("OAUTHBEARER needs the keys tokens are signed with: sasl.oauthbearer.jwks.endpoint.url (--sasl-oauthbearer-jwks)")
		}
	}
	if _, err := b.AuthorizerKind(); err != nil {
		return err
	}
	for _, u := range b.SuperUserList() {
		if !strings.Contains(u, ":") {
			return fmt.Errorf("super.users %q: principals are Type:name (User:admin), separated by semicolons", u)
		}
	}
	if b.UsesSASL() && len(b.SASLMechanisms) == 0 {
		return fmt.Errorf("a SASL listener needs a mechanism: sasl.enabled.mechanisms")
	}
	if _, err := b.ConnectionOverrides(); err != nil {
		return err
	}
	if b.ControllerListen != "" {
		if _, _, err := net.SplitHostPort(b.ControllerListen); err != nil {
			return fmt.Errorf("controller listener %q: %w", b.ControllerListen, err)
		}
	}
	return b.Topic.Validate()
}

// Voters parses QuorumVoters ("1@host:port,2@host:port") into each
// voter's controller address by node id; none for a single node.
func (b Broker) Voters() (map[int32]string, error) {
	if strings.TrimSpace(b.QuorumVoters) == "" {
		return nil, nil
	}
	voters := map[int32]string{}
	for _, v := range strings.Split(b.QuorumVoters, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(v), "@")
		n, err := strconv.ParseInt(id, 10, 32)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("controller quorum voters %q: %q is not id@host:port", b.QuorumVoters, v)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("controller quorum voters %q: %q: %w", b.QuorumVoters, v, err)
		}
		if _, dup := voters[int32(n)]; dup {
			return nil, fmt.Errorf("controller quorum voters %q: node %d named twice", b.QuorumVoters, n)
		}
		voters[int32(n)] = addr
	}
	return voters, nil
}

// knownAssignors: the server-side assignors Strand has, at least one.
func knownAssignors(names []string) bool {
	for _, n := range names {
		if n != "uniform" && n != "range" {
			return false
		}
	}
	return len(names) > 0
}

// knownMigrationPolicy: Kafka's ConsumerGroupMigrationPolicy names, in any
// case.
func knownMigrationPolicy(p string) bool {
	switch strings.ToLower(p) {
	case "bidirectional", "upgrade", "downgrade", "disabled":
		return true
	}
	return false
}

// ConnectionOverrides reads max.connections.per.ip.overrides: host:count,...
func (b Broker) ConnectionOverrides() (map[string]int32, error) {
	out := map[string]int32{}
	for _, e := range strings.Split(b.MaxConnectionsPerIPOverrides, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		i := strings.LastIndexByte(e, ':')
		if i <= 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides %q: host:count,...", e)
		}
		n, err := strconv.ParseInt(e[i+1:], 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides %q: host:count,...", e)
		}
		out[e[:i]] = int32(n)
	}
	return out, nil
}

// AuthorizerKind is the authorizer configured: "" for none, or "acl".
func (b Broker) AuthorizerKind() (string, error) {
	switch b.Authorizer {
	case "":
		return "", nil
	case "acl", "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer":
		return "acl", nil
	}
	return "", fmt.Errorf("authorizer.class.name %q: acl, or empty for none", b.Authorizer)
}

// SuperUserList is super.users as a list of principals.
func (b Broker) SuperUserList() []string {
	var out []string
	for _, u := range strings.Split(b.SuperUsers, ";") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}
