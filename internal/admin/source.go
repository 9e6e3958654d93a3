package admin

import (
	"context"
	"time"

	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/model"
)

// Groups is this broker's group coordinator: the groups it serves.
type Groups interface {
	Views() []group.View
	View(id string) (group.View, bool)
}

// ClusterGroups reads the groups of the whole cluster through the Kafka
// protocol, as any client would (and as the console does): each group as
// its coordinator answers for it, whichever broker that is.
type ClusterGroups interface {
	// List is the id of every group of the cluster, sorted.
	List(ctx context.Context) ([]string, error)
	// Read is group as its coordinator describes it; false when the
	// cluster does not know the group. What the Kafka protocol does not
	// carry is unknown: a classic group's generation (-1) and the
	// members' client software (empty).
	Read(ctx context.Context, id string) (group.View, bool, error)
}

// Partitions says where partitions end and when their records were
// written, whichever broker leads them.
type Partitions interface {
	// HighWatermarks are the high watermarks of tps; a partition whose
	// leader cannot be asked is missing.
	HighWatermarks(ctx context.Context, tps []model.TopicPartition) map[model.TopicPartition]int64
	// Timestamp is the first timestamp of the batch that holds offset.
	Timestamp(ctx context.Context, tp model.TopicPartition, offset int64) (time.Time, bool)
}

// Ledger reads the hand-off ledger: the entries of group (every group
// when empty) from since on.
type Ledger interface {
	Read(ctx context.Context, group string, since time.Time) ([]ledger.Entry, error)
}

// Health is what the broker knows of the cluster.
type Health interface {
	Health() HealthReport
}

// HealthReport is /api/health's answer. Status is "ok", or "degraded"
// while a partition is offline or under-replicated.
type HealthReport struct {
	Status    string `json:"status"`
	NodeID    int32  `json:"node_id"` // the broker that answers
	ClusterID string `json:"cluster_id"`
	// Controller is the active controller, the metadata quorum's leader
	// (what `strand cluster info` and DescribeQuorum name); -1 while there
	// is none.
	Controller int32 `json:"controller"`
	Brokers    int   `json:"brokers"` // those up
	// DownBrokers are the registered brokers that are down (fenced), with
	// the partitions they hold a replica of.
	DownBrokers               []DownBroker `json:"down_brokers"`
	Partitions                int          `json:"partitions"`
	OfflinePartitions         int          `json:"offline_partitions"`
	UnderReplicatedPartitions int          `json:"under_replicated_partitions"`
	// UnderMinISRPartitions have fewer in-sync replicas than their
	// topic's min.insync.replicas: acks=all writes to them fail.
	UnderMinISRPartitions int `json:"under_min_isr_partitions"`
	// Led counts what the answering broker leads: its partitions, and of
	// them those under-replicated and under min.insync.replicas, as
	// Kafka's per-broker LeaderCount, UnderReplicatedPartitions and
	// UnderMinIsrPartitionCount count them.
	Led LedPartitions `json:"led"`
}

// LedPartitions are the partitions one broker leads, by state.
type LedPartitions struct {
	Partitions      int `json:"partitions"`
	UnderReplicated int `json:"under_replicated"`
	UnderMinISR     int `json:"under_min_isr"`
}

// DownBroker is a registered broker that is down.
type DownBroker struct {
	NodeID int32 `json:"node_id"`
	// Partitions are those with a replica on it ("topic-partition"),
	// sorted.
	Partitions []string `json:"partitions"`
}

// Connections is the broker's open client connections and fetch sessions,
// for /metrics.
type Connections interface {
	// Connections counts the open connections by listener name.
	Connections() map[string]int
	// FetchSessions counts the fetch sessions (KIP-227) the broker keeps,
	// of consumers and of followers.
	FetchSessions() (consumers, followers int)
}

// LocalReplicas are the partition replicas a broker holds, for /metrics.
type LocalReplicas interface {
	LocalReplicas() []ReplicaState
}

// ReplicaState is one replica's log: its start and end offsets, high
// watermark and size on disk.
type ReplicaState struct {
	Topic            string
	Partition        int32
	Leader           bool
	LogStart, LogEnd int64
	HighWatermark    int64
	SizeBytes        int64
}
