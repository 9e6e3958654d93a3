package config

import (
	"fmt"
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
	// Share groups (KIP-932), under Kafka's names: a member's session
	// and heartbeat, the most members, and each share-partition's
	// defaults (a group's share.* configs override the last three).
	GroupShareSessionTimeout    time.Duration // group.share.session.timeout.ms
	GroupShareHeartbeatInterval time.Duration // group.share.heartbeat.interval.ms
	GroupShareMaxSize           int32         // group.share.max.size
	GroupShareMaxSessions       int32         // group.share.max.share.sessions: share sessions open on a broker at once
	GroupShareDeliveryLimit     int32         // group.share.delivery.count.limit
	GroupShareRecordLocks       int32         // group.share.partition.max.record.locks
	GroupShareRecordLock        time.Duration // group.share.record.lock.duration.ms
	// ShareStateTopicPartitions and ShareStateTopicReplicationFactor are
	// share.coordinator.state.topic.num.partitions and
	// .replication.factor: __share_group_state's, when it is created.
	ShareStateTopicPartitions        int32
	ShareStateTopicReplicationFactor int16
	OffsetsTopicPartitions           int32         // offsets.topic.num.partitions: fixed once __consumer_offsets exists
	OffsetsRetention                 time.Duration // offsets.retention.minutes
	OffsetsRetentionCheck            time.Duration // offsets.retention.check.interval.ms
	OffsetMetadataMaxBytes           int32         // offset.metadata.max.bytes

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

// Defaults is the embedded single-node default: every setting's Default
// in BrokerDefs (./strand-data, 127.0.0.1:9092, ...) and the log's topic
// defaults, fsync on every acknowledged write.
func Defaults() Broker {
	// The controller listener's protocol has no setting of its own:
	// listener.security.protocol.map gives it.
	b := Broker{Topic: replica.Defaults(), ControllerProtocol: "PLAINTEXT"}
	for i := range BrokerDefs {
		d := &BrokerDefs[i]
		if d.Default == "" || d.Field == nil || d.Topic != nil {
			continue
		}
		if err := d.setField(&b, d.Default); err != nil {
			panic("config: the default of " + d.Name + ": " + err.Error())
		}
	}
	return b
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

// The replica selectors of replica.selector.class, by Kafka's class names.
const (
	RackAwareSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
	LeaderSelector    = "org.apache.kafka.common.replica.LeaderSelector"
)

// Validate reports the first bad setting: one outside its bounds in
// BrokerDefs, then those that depend on each other.
func (b Broker) Validate() error {
	for i := range BrokerDefs {
		if err := BrokerDefs[i].check(&b); err != nil {
			return err
		}
	}
	// What one setting's bounds cannot say: the ones that depend on
	// another, and the values a number takes outside a range.
	switch {
	case b.DataDir == "":
		return fmt.Errorf("log.dirs (--data-dir): must be set")
	case b.SocketSendBufferBytes != -1 && b.SocketSendBufferBytes < 1024:
		return fmt.Errorf("socket send buffer %d: must be -1 (the system's default) or at least 1024", b.SocketSendBufferBytes)
	case b.GroupConsumerSessionTimeout < b.GroupConsumerMinSessionTimeout || b.GroupConsumerSessionTimeout > b.GroupConsumerMaxSessionTimeout:
		return fmt.Errorf("group.consumer.session.timeout.ms %v: must be within group.consumer.min/max.session.timeout.ms, %v-%v",
			b.GroupConsumerSessionTimeout, b.GroupConsumerMinSessionTimeout, b.GroupConsumerMaxSessionTimeout)
	case b.GroupConsumerHeartbeatInterval < b.GroupConsumerMinHeartbeatInterval || b.GroupConsumerHeartbeatInterval > b.GroupConsumerMaxHeartbeatInterval:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms %v: must be within group.consumer.min/max.heartbeat.interval.ms, %v-%v",
			b.GroupConsumerHeartbeatInterval, b.GroupConsumerMinHeartbeatInterval, b.GroupConsumerMaxHeartbeatInterval)
	case b.GroupConsumerHeartbeatInterval >= b.GroupConsumerSessionTimeout:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms %v must be below group.consumer.session.timeout.ms %v",
			b.GroupConsumerHeartbeatInterval, b.GroupConsumerSessionTimeout)
	case b.UsesTLS() && b.SSLKeystore == "":
		return fmt.Errorf("an SSL listener needs its certificate: ssl.keystore.location (--ssl-cert)")
	case b.SSLClientAuth != "none" && b.SSLTruststore == "":
		return fmt.Errorf("ssl.client.auth %s needs the clients' CA: ssl.truststore.location (--ssl-ca)", b.SSLClientAuth)
	case !knownMigrationPolicy(b.GroupConsumerMigrationPolicy):
		return fmt.Errorf("group.consumer.migration.policy %q: must be bidirectional, upgrade, downgrade or disabled", b.GroupConsumerMigrationPolicy)
	case len(b.GroupConsumerAssignors) == 0:
		return fmt.Errorf("group.consumer.assignors: needs at least one assignor")
	case b.GroupShareHeartbeatInterval >= b.GroupShareSessionTimeout:
		return fmt.Errorf("group.share.heartbeat.interval.ms %v must be below group.share.session.timeout.ms %v",
			b.GroupShareHeartbeatInterval, b.GroupShareSessionTimeout)
	case b.GroupMaxSessionTimeout < b.GroupMinSessionTimeout:
		return fmt.Errorf("group.max.session.timeout.ms %v: must not be below group.min.session.timeout.ms %v", b.GroupMaxSessionTimeout, b.GroupMinSessionTimeout)
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
	if slices.Contains(b.SASLMechanisms, "OAUTHBEARER") && b.OAuthJWKS == "" && !b.OAuthUnsecured {
		return fmt.Errorf("OAUTHBEARER needs the keys tokens are signed with: sasl.oauthbearer.jwks.endpoint.url (--sasl-oauthbearer-jwks)")
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
