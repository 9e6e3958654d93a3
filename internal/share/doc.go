// Package share serves share groups (KIP-932): queue semantics on the log.
// Many members read the same partitions; each record is handed to one
// member at a time under a lock, acknowledged one by one (accepted,
// released for redelivery, rejected), redelivered when its lock expires,
// and given up after a delivery limit.
//
// A share-partition (Partition) is one group's view of one topic
// partition: the records between its start offset, before which every
// record is done with, and the end of its in-flight window, each with its
// state and delivery count. It is pure state: the caller reads the log,
// tells it which offsets hold records, and keeps the time.
//
// Locking: a Partition is not safe for concurrent use; its owner guards it.
package share
