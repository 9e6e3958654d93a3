package lockrank

// The ranks, in LOCKS.md's order. Locks of one rank never nest with each
// other.
type (
	// ConfigChange is protocol.configMu: a config change's
	// read-modify-write.
	ConfigChange struct{}
	// GroupOrTxn is one consumer group's group.mu, or one transactional
	// id's txn.mu.
	GroupOrTxn struct{}
	// Coordinator is group.Coordinator.mu or txn.Coordinator.mu.
	Coordinator struct{}
	// TopicAdmin is server.topicAdmin.mu: topic creation, deletion and
	// config changes.
	TopicAdmin struct{}
	// ReconcilerTurn is server.reconciler's turn: it serialises applying
	// the metadata.
	ReconcilerTurn struct{}
	// Subsystem is the lock of one of the broker's parts: link.Manager.mu
	// or reserveMu, fetcher.Fetcher.mu, server.Server.mu.
	Subsystem struct{}
	// ProducerIDs is cluster.Store.pidMu: a producer id block's
	// allocation, across a proposal to the metadata quorum.
	ProducerIDs struct{}
	// LinkPassThrough is link.passThrough.mu.
	LinkPassThrough struct{}
	// Worker is the lock of one worker of a part: link.runner.mu,
	// link.mirrorPart.mu, fetcher.leaderLoop.mu, quota.Manager.mu.
	Worker struct{}
	// GroupWriter is group.writer.mu.
	GroupWriter struct{}
	// SharePartition is one share-partition's lock
	// (share.SharePartition.Mu), held while the log is read for it.
	SharePartition struct{}
	// ShareStateLoad serialises loading a partition of the share-group
	// state, taken under a share-partition's lock.
	ShareStateLoad struct{}
	// ShareStateWrite is one of server.shareState.writeMu: a key's state
	// from its fence check until its record is durable.
	ShareStateWrite struct{}
	// ReplicaManager is replica.Manager.mu.
	ReplicaManager struct{}
	// LogManager is log.Manager.mu.
	LogManager struct{}
	// LogCompaction is log.Log.compactMu: its marker-removal callback
	// enters the replica.
	LogCompaction struct{}
	// PartitionAppend is replica.Partition.appendMu.
	PartitionAppend struct{}
	// PartitionSnapshot is replica.Partition.snapMu.
	PartitionSnapshot struct{}
	// Partition is replica.Partition.mu.
	Partition struct{}
	// LogSync is log.Log.syncMu or log.journal.mu.
	LogSync struct{}
	// FileSyncer is log.fileSyncer.mu or log.fileSyncer.sealMu.
	FileSyncer struct{}
	// Log is log.Log.mu.
	Log struct{}
	// Segment is log.segment.loadMu or log.tailFile.mu.
	Segment struct{}
	// FetchIndex is group.fetchIndex.mu, taken under a group's lock and
	// before History.
	FetchIndex struct{}
	// History is group.history.mu; the hand-off ledger and the metrics
	// are told under it.
	History struct{}
	// LedgerWriter is ledger.Writer.mu, a leaf.
	LedgerWriter struct{}
	// Leaf is a lock under which no other is taken: group.connIndex.mu,
	// replica.Throttle.mu, the fetch sessions', logging.Levels.mu,
	// telemetry.Manager.mu, the link's throttle, and the server's small
	// helpers.
	Leaf struct{}
	// Metadata is cluster.Store.mu, a leaf: nothing is called under it.
	Metadata struct{}
)

// order lists the ranks' names from the first taken to the last.
var order = []string{
	"ConfigChange", "GroupOrTxn", "Coordinator", "TopicAdmin", "ReconcilerTurn", "Subsystem", "ProducerIDs", "LinkPassThrough", "Worker",
	"GroupWriter", "SharePartition", "ShareStateLoad", "ShareStateWrite", "ReplicaManager", "LogManager",
	"LogCompaction", "PartitionAppend", "PartitionSnapshot", "Partition", "LogSync", "FileSyncer", "Log", "Segment",
	"FetchIndex", "History", "LedgerWriter", "Leaf", "Metadata",
}

// leaves are the ranks under which no lock at all is taken.
var leaves = []string{"LedgerWriter", "Leaf", "Metadata"}
