package protocol

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/logging"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/quota"
	"github.com/strandlog/strand/internal/replica"
	"github.com/strandlog/strand/internal/telemetry"
	"github.com/strandlog/strand/internal/txn"
)

// Request is one decoded request with its header.
type Request struct {
	Key         int16
	Version     int16
	Correlation int32
	ClientID    string
	Client      string // remote address, for logs
	// Size is the request's frame, in bytes, as a produce quota counts it.
	Size int
	// Principal is who the connection authenticated as (User:name, or
	// User:ANONYMOUS), and Host its address, for the authorizer.
	Principal string
	Host      string
	// Listener is the name of the listener the request came through: the
	// brokers it is told of are their endpoints on it.
	Listener string
	// Software is the client's software name and version, from the
	// connection's ApiVersions (v3+); empty when it sent none.
	Software Software
	Body     kmsg.Request
}

// Software names a client's library, as its ApiVersions (v3+, KIP-511)
// gives it.
type Software struct{ Name, Version string }

// Response is a handler's answer. A nil Body sends nothing (acks=0
// produce). Splices name stored record data to send in place of marker
// bytes in Body, so fetches send file bytes without copying them.
type Response struct {
	Body    kmsg.Response
	Splices []Splice
	// Defer, when set, is called in response order before writing, to
	// finish work that waits (an fsync, a long-poll fetch) without holding
	// up the reading and handling of the requests behind it.
	Defer func(ctx context.Context) (*Response, error)
}

// Handler serves one API key. An error closes the connection (Kafka does so
// for requests it cannot parse or serve at all).
type Handler func(ctx context.Context, b *Broker, r *Request) (*Response, error)

type api struct {
	key      int16
	min, max int16
	handle   Handler
}

var apis = map[int16]api{}

// register records an API's advertised version range; ApiVersions lists
// exactly these.
func register(key, min, max int16, h Handler) {
	if h == nil || min > max || max > kmsg.RequestForKey(key).MaxVersion() {
		panic("protocol: bad registration for key " + kmsg.NameForKey(key))
	}
	apis[key] = api{key: key, min: min, max: max, handle: h}
}

// Supported reports whether key at version is served.
func Supported(key, version int16) bool {
	a, ok := apis[key]
	return ok && version >= a.min && version <= a.max
}

// Known reports whether key is an API Strand serves at some version.
func Known(key int16) bool {
	_, ok := apis[key]
	return ok
}

// Ranges lists every served API with its range, by key.
func Ranges() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for _, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

// TopicAdmin changes topics: cluster metadata and the partitions served
// together (the server implements it over cluster and replica).
type TopicAdmin interface {
	CreateTopic(spec cluster.TopicSpec, validateOnly bool) (cluster.Topic, error)
	DeleteTopic(name string) (cluster.Topic, error)
	CreatePartitions(name string, count int32, assignment [][]int32, validateOnly bool) error
	SetTopicConfigs(name string, configs map[string]string, validateOnly bool) error
	SetBrokerConfigs(configs map[string]string, validateOnly bool) error
}

// Metadata is the cluster metadata as handlers read it (cluster.Store).
type Metadata interface {
	ClusterID() string
	Topic(name string) (cluster.Topic, bool)
	TopicByID(id cluster.TopicID) (cluster.Topic, bool)
	Topics() []cluster.Topic
	CollidingTopic(name string) (string, bool)
	Partition(topic string, partition int32) (cluster.Partition, bool)
	Broker(node int32) (cluster.Broker, bool)
	Brokers() []cluster.Broker
	LiveBrokers() int
	Applied() int64
	Quorum() (cluster.QuorumStatus, bool)
	BrokerConfigs() map[string]string
	NodeConfigs(node int32) map[string]string
	NextProducerID() (int64, error)
	FeatureLevel(name string) (level int16, epoch int64, ok bool)
	SetFeatures(levels map[string]int16, ifUnset bool) error
	GroupConfigs(group string) map[string]string
	SetGroupConfigs(group string, configs map[string]string) error
	GroupsWithConfigs() []string
	ClientMetrics(name string) map[string]string
	ClientMetricsNames() []string
	SetClientMetrics(name string, configs map[string]string) error
	ElectLeader(topic string, partition int32, unclean bool) (cluster.Partition, error)
	ReassignPartition(topic string, partition int32, target []int32) (cluster.Partition, error)
	ScramCredentials() map[string]map[int8]cluster.ScramCredential
	AlterScramCredentials(upsertions, deletions []cluster.ScramCredentialChange) error
	ACLs() ([]model.ACLBinding, int64)
	ACLsEpoch() int64
	AlterACLs(creations, deletions []model.ACLBinding) error
	ClientQuotas() ([]cluster.ClientQuota, int64)
	AlterClientQuotas(changes []cluster.ClientQuotaChange) error
}

// Replicas finds the partitions this broker holds (replica.Manager).
type Replicas interface {
	Get(tp model.TopicPartition) (Partition, bool)
	Partitions() []Partition
	// SyncAppends makes what several partitions appended below ends[i]
	// durable together (replica.SyncAppends).
	SyncAppends(ps []Partition, ends []int64) []error
}

// Partition is what handlers ask of one partition this broker holds
// (replica.Partition): they read, append and answer about offsets through
// it, never touching its log.
type Partition interface {
	TopicPartition() model.TopicPartition

	// Leadership and replication.
	IsLeader() bool
	LeaderEpoch() int32
	CheckLeaderEpoch(seen int32) error
	ReplicaSet() replica.ReplicaSet
	CheckEnoughReplicas() error
	WaitReplicated(ctx context.Context, upTo int64, timeout time.Duration) error
	FollowerFetched(node int32, offset int64) (int64, error)
	LeaderThrottled(follower int32) bool
	MirrorOf() string

	// Offsets and sizes.
	StartOffset() int64
	EndOffset() int64
	HighWatermark() int64
	LastStableOffset() int64
	Settled(upTo int64) bool
	Size() int64
	ListOffset(timestamp int64, readCommitted bool) (offset, ts int64, err error)
	OffsetForLeaderEpoch(epoch int32) (int32, int64)

	// Reading, and waiting for more.
	Read(offset int64, maxBytes int, readCommitted bool) (replica.Section, error)
	ReadUpTo(offset int64, maxBytes int, bound int64) (replica.Section, error)
	ReadToLogEnd(offset int64, maxBytes int) (replica.Section, error)
	AbortedTransactions(from, upTo int64) []replica.AbortedTxn
	Watch(w *replica.Waiter)
	Unwatch(w *replica.Waiter)

	// Writing.
	Append(data []byte) (replica.AppendResult, func() error, error)
	TxnGuard(pid int64) replica.TxnGuard
	AppendVerified(data []byte, g replica.TxnGuard) (replica.AppendResult, func() error, error)
	WriteMarker(m replica.Marker) (int64, func() error, error)
	RecordsDeletable() bool
	DeleteRecords(offset int64) (int64, error)
	Truncated()
	Producers() []replica.ProducerInfo
}

// Groups is the group coordinator as handlers call it (group.Coordinator).
type Groups interface {
	EnsureTopic() error
	PartitionFor(groupID string) int32
	Join(req group.JoinRequest) <-chan group.JoinResult
	Sync(req group.SyncRequest) <-chan group.SyncResult
	Heartbeat(req group.HeartbeatRequest) error
	Leave(req group.LeaveRequest) <-chan group.LeaveResult
	Commit(req group.CommitRequest) <-chan []error
	CommitTxn(req group.TxnCommitRequest) <-chan []error
	CompleteTxn(partition int32, producerID int64, commit bool)
	FetchOffsets(groupID string, topics []group.FetchTopic, requireStable bool) ([]group.FetchedOffset, error)
	AwaitStable(groupID string) <-chan struct{}
	DeleteOffsets(groupID string, topics []group.FetchTopic) <-chan group.DeleteOffsetsResult
	Describe(ids []string) []group.GroupDescription
	List(states, types []string) []group.ListedGroup
	DeleteGroup(id string) <-chan error
	ConsumerHeartbeat(req group.ConsumerHeartbeatRequest) <-chan group.ConsumerHeartbeatResult
	DescribeConsumerGroups(ids []string) []group.ConsumerGroupDescription
	CheckFetchMember(groupID, memberID string, epoch int32) error
}

// Txns is the transaction coordinator as handlers call it
// (txn.Coordinator).
type Txns interface {
	EnsureTopic() error
	InitProducerID(ctx context.Context, id string, timeout time.Duration, pid int64, epoch int16) (int64, int16, error)
	AddPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []model.TopicPartition) error
	CheckPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []model.TopicPartition, add bool) []error
	CheckPartitionsHere(ctx context.Context, id string, pid int64, epoch int16, tps []model.TopicPartition, add bool) []error
	EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit, v2 bool) (int64, int16, error)
	Describe(id string) (txn.TxnInfo, error)
	List(f txn.ListFilter) []txn.TxnInfo
}

// Broker is what the handlers reach: the broker's settings and, through
// interfaces, the packages that own its state.
type Broker struct {
	// Config holds every listener with the address it advertises as
	// resolved when it was bound.
	Config   config.Broker
	Cluster  Metadata
	Replicas Replicas
	Topics   TopicAdmin
	Logger   *slog.Logger
	// Groups is the group coordinator (every group's state and committed
	// offsets).
	Groups Groups
	// Txns is the transaction coordinator.
	Txns Txns
	// FetchObserver, when set, is told where consumers fetch (the group
	// coordinator's rebalance history).
	FetchObserver group.FetchObserver
	// Peers, when set, sends requests to other brokers (forwarding).
	Peers Peers
	// LeaderThrottle caps what this broker sends to throttled followers
	// out of sync (leader.replication.throttled.rate); nil for none.
	LeaderThrottle *replica.Throttle
	// Meter, when set, counts the bytes produced and fetched per topic.
	Meter Meter
	// Quotas, when set, throttles clients over their quotas.
	Quotas *quota.Manager
	// Links, when set, are the cluster links: groups passed through to
	// a source cluster, and mirrors' sources.
	Links Links
	// Telemetry keeps the client instances that push metrics (KIP-714).
	Telemetry *telemetry.Manager
	// Loggers are the levels of the broker's loggers (BROKER_LOGGER).
	Loggers *logging.Levels
	// Shares, when set, are the share groups (shares.go).
	Shares *Shares

	authz   atomic.Pointer[builtAuthorizer] // the ACL rules last built (authorize.go)
	aclOnce sync.Once                       // reads the static setting once: Config is large to copy
	aclOn   bool

	sessionsOnce sync.Once
	sessions     *fetchSessionCache // consumers' fetch sessions (fetch_session.go)
}

// Meter counts record bytes and records per topic: appended by
// producers, and sent to consumers (not to followers). It is called on
// the request path and must be cheap. A fetch's records are the offsets
// it sent past the fetch offset: a compacted topic's gaps and transaction
// markers count.
type Meter interface {
	Produced(topic string, bytes int, records int64)
	Fetched(topic string, bytes, records int64)
}

// Peers sends a request to another broker of the cluster and returns its
// answer (peer.Client).
type Peers interface {
	Request(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error)
}

// Handle serves one request whose key and version are Supported.
func (b *Broker) Handle(ctx context.Context, r *Request) (*Response, error) {
	return apis[r.Key].handle(ctx, b, r)
}

// reply wraps a plain response.
func reply(body kmsg.Response) (*Response, error) { return &Response{Body: body}, nil }
