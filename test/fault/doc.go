// Package fault is Strand's fault suite: real broker processes, partitions
// with three replicas and min.insync.replicas 2, idempotent acks=all
// producers writing self-checking records, a consumer group committing as
// it reads, and a transactional producer committing (and, every fifth
// time, aborting) transactions across partitions, while brokers are
// killed, paused past their session timeout, cut off from the other
// brokers (but not from the clients) by network partitions, and
// restarted, each fault in its own round and then mixed at random; with
// three brokers and with five, where a split leaves two on one side. Each broker runs in a network namespace of its own on a bridge
// the test makes (testutil.StartNetCluster): the suite runs as root.
// After healing, a checker holds the cluster to its promises: every
// acknowledged record is readable at its acknowledged offset, the
// replicas of each partition are identical byte for byte, a leader cut off
// past its session timeout takes no write (not even acks=1), each producer's
// records keep their order per partition, the group saw every
// acknowledged record (duplicates only from what it had not committed,
// counted), and read committed no transaction is torn, none aborted is
// visible and every acknowledged commit is whole.
//
// STRAND_FAULT_ROUNDS sets the number of mixed rounds (CI runs a few; 50
// or more for the long mode) and STRAND_FAULT_SEED the random choices.
package fault
