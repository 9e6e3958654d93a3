// Package replica is a partition as the broker serves it: the log, the high
// watermark (the offset below which data is committed and readable), the
// producer state that makes idempotent producing exact, and the waiters
// that long-polling fetches park on.
//
// On a single node the high watermark is the durable end of the log when
// the topic syncs every acknowledged write (so a consumer never sees data a
// crash could take back), and the log end otherwise. Replication will move
// it with the in-sync followers instead.
//
// Locking: Partition.appendMu orders producer-state checks with appends;
// Partition.mu guards the high watermark and the waiters. appendMu comes
// before mu, and neither is held across an fsync.
package replica
