// Package coordinator is what the broker's coordinators share for the
// partitions they keep their state in: the group coordinator's
// __consumer_offsets, the transaction coordinator's __transaction_state
// and the hand-off ledger's topic (and, next, the cluster link's state and
// share groups'). Kafka 4 has one coordinator runtime; this is ours.
//
// A coordinator sees its topic as a Topic and each partition it leads as a
// Partition, which the server implements once over a replica. Its writes
// fail with this package's errors (ErrNotLeader, ErrNotReplicated,
// ErrTooLarge), which each coordinator turns into its own Kafka codes.
// Replay loads a partition's state: every record from the log start to
// LoadEnd, in order, skipping batches a coordinator never writes
// (compressed ones) and reporting them.
//
// MemTopic and MemPartition keep a topic in memory for the coordinators'
// tests, with gates that hold appends, durability and reads.
//
// The package imports only model: a coordinator that uses it still
// reaches nothing of the broker but the interfaces it declares.
package coordinator
