package group

import (
	"log/slog"
	"time"

	"github.com/strandlog/strand/internal/coordinator"
)

// Config holds the coordinator's settings, under Kafka's broker config
// names, and its wiring. The settings are taken as given: the broker's
// configuration (config.BrokerDefs) has their defaults and bounds.
type Config struct {
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long
	// the first rebalance of an empty group waits for more members, each
	// new member extending the wait by as much again, up to the rebalance
	// timeout.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound a member's session
	// timeout (group.min.session.timeout.ms, group.max.session.timeout.ms).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// MaxSize is group.max.size: the most members a group takes.
	MaxSize int
	// OffsetsPartitions is offsets.topic.num.partitions: the partitions of
	// __consumer_offsets when the coordinator creates it. An existing
	// topic keeps its count.
	OffsetsPartitions int32
	// OffsetsRetention is offsets.retention.minutes: how long the
	// committed offsets of a group are kept once it is empty (or, for
	// groups without members ever, after the commit).
	OffsetsRetention time.Duration
	// OffsetsRetentionCheck is offsets.retention.check.interval.ms.
	OffsetsRetentionCheck time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes: the longest
	// metadata string a commit may carry.
	OffsetMetadataMaxBytes int
	// NewMemberJoinTimeout bounds how long a new member's parked JoinGroup
	// keeps it in the group (Kafka's fixed 5 minutes).
	NewMemberJoinTimeout time.Duration
	// HistoryEvents and HistoryHandoffs bound each group's rebalance
	// history (History).
	HistoryEvents   int
	HistoryHandoffs int

	// Consumer groups (KIP-848). ConsumerSessionTimeout is
	// group.consumer.session.timeout.ms and ConsumerHeartbeatInterval
	// group.consumer.heartbeat.interval.ms; ConsumerMaxSize is
	// group.consumer.max.size; ConsumerAssignors is
	// group.consumer.assignors, the first the default.
	ConsumerSessionTimeout    time.Duration
	ConsumerHeartbeatInterval time.Duration
	// GroupTimings, when set, gives a consumer group's own session
	// timeout and heartbeat interval (Kafka's group configs
	// consumer.session.timeout.ms and consumer.heartbeat.interval.ms),
	// zero where the group sets none. It must be cheap and must not call
	// into the coordinator: it is asked on every heartbeat.
	GroupTimings      func(group string) (session, heartbeat time.Duration)
	ConsumerMaxSize   int
	ConsumerAssignors []string
	// ConsumerMigrationPolicy is group.consumer.migration.policy: whether
	// a live group may move from the classic protocol to the consumer
	// protocol and back (migration.go).
	ConsumerMigrationPolicy MigrationPolicy
	// DisconnectGrace is how long a member whose connection closed
	// without a LeaveGroup keeps its place (presence.go); 0 keeps it
	// until its session times out, as Kafka does.
	// DisconnectGraceStatic applies the grace to static members too.
	DisconnectGrace       time.Duration
	DisconnectGraceStatic bool
	// StrictCommitOwnership refuses a member's commit of a partition it
	// does not own (ownership.go); it is reported either way.
	StrictCommitOwnership bool
	// Ledger, when set, is given each hand-off once its figures are
	// known, to keep (the server's is internal/ledger); it must not
	// block: it is called on the fetch path.
	Ledger Ledger
	// Others keeps the records of __consumer_offsets another coordinator
	// writes there (the share groups'): nil drops them at load.
	Others OtherRecords
	// FetchReportDelay is how long a fetch answered by another broker may
	// take to reach FetchedElsewhere; 0 when every fetch is reported at
	// once (one broker). A departed member's hand-offs wait that long for
	// a report of its first fetch.
	FetchReportDelay time.Duration
	// Watch, when set, is told of every group's events and of each
	// hand-off once its figures are known (the admin listener's
	// counters); it must not block.
	Watch Watcher
	// Topics reads the cluster's topics for the assignors; consumer
	// groups assign nothing without it.
	Topics Topics

	Clock  Clock
	Logger *slog.Logger
}

// withDefaults fills the internals left zero. The settings are the
// broker's (config.BrokerDefs holds their defaults and bounds, and the
// server gives every one); the zero migration policy is Kafka's default.
func (c Config) withDefaults() Config {
	if c.NewMemberJoinTimeout <= 0 {
		c.NewMemberJoinTimeout = 5 * time.Minute
	}
	if c.HistoryEvents <= 0 {
		c.HistoryEvents = 100
	}
	if c.HistoryHandoffs <= 0 {
		c.HistoryHandoffs = 1000
	}
	if p, err := ParseMigrationPolicy(string(c.ConsumerMigrationPolicy)); err == nil {
		c.ConsumerMigrationPolicy = p
	} else {
		c.ConsumerMigrationPolicy = MigrationBidirectional
	}
	if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.Clock == nil {
		c.Clock = coordinator.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = c.Logger.With("component", "group")
	return c
}

// Ledger keeps hand-offs, commits of partitions their member does not
// own, and the steps of members' presence (presence.go).
type Ledger interface {
	Handoff(group string, h Handoff)
	CommitNotOwned(group string, c NotOwnedCommit)
	Presence(group string, c PresenceChange)
}

// Watcher is told what happens in the groups, as it happens.
type Watcher interface {
	Event(group string, e Event)
	Handoff(group string, h Handoff)
}

// Clock is the time source of the coordinator (the coordinator runtime's;
// tests use its ManualClock).
type Clock = coordinator.Clock

// Stopper cancels an AfterFunc.
type Stopper = coordinator.Stopper
