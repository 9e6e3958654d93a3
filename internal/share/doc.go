// Package share serves share groups (KIP-932): queue semantics on the log.
// Many members read the same partitions; each record is handed to one
// member at a time under a lock, acknowledged one by one (accepted,
// released for redelivery, rejected), redelivered when its lock expires,
// and given up after a delivery limit.
//
// It has four parts:
//   - Partition, a share-partition: one group's view of one topic
//     partition, the records between its start offset, before which every
//     record is done with, and the end of its in-flight window, each with
//     its state and delivery count. It is pure state: the caller reads the
//     log, tells it which offsets hold records, and keeps the time.
//   - Coordinator, the share groups' members as their coordinator keeps
//     them: joins, epochs, sessions, and the assignment of every subscribed
//     partition, shared by several members when there are more members
//     than partitions.
//   - Leader, the share-partitions of the partitions a broker leads, with
//     the lock their users hold, and the members' share sessions with it.
//   - Store, the share-partitions' state as the share coordinator keeps it
//     in __share_group_state, in Kafka's record formats: read when a
//     share-partition is first used, written before an acknowledgement is
//     answered, started over or deleted by the offsets admin APIs, and
//     fenced by leader and state epochs.
//
// The Coordinator's groups are kept in __consumer_offsets too, in Kafka's
// share group records (grouprecords.go).
//
// The members live in memory: a restart, or a move of a group's
// coordinator, has them join again.
//
// Locking: a Partition is not safe for concurrent use: its SharePartition's
// lock guards it, held while the log is read and the state written for it.
// Coordinator.mu, Leader.mu and Store.mu are taken alone (LOCKS.md).
package share
