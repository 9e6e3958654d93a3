// Package replica is a partition as the broker serves it: the log, the high
// watermark (the offset below which data is committed and readable), the
// producer state that makes idempotent producing exact, and the waiters
// that long-polling fetches park on.
//
// A partition's settings (Config) are its log's (log.Config, how it
// stores) and the replication settings the log never reads:
// min.insync.replicas, the throttled-replica lists and unclean leader
// election. The wire protocol asks its questions of a partition
// (offsets.go: offsets by time, epoch ends, the leader throttle) rather
// than of its log.
//
// On a single node the high watermark is the durable end of the log when
// the topic syncs every acknowledged write (so a consumer never sees data a
// crash could take back), and the log end otherwise. Replication will move
// it with the in-sync followers instead.
//
// Idempotent producing (producer.go): each partition keeps, per producer
// id, the epoch and the last five batches' sequences and offsets, checks
// every batch against them before it is written (duplicates are answered
// with the original offsets and not written again), snapshots the table to
// <offset>.producers files in the partition directory (every
// Options.ProducerSnapshotEvery appends, after a rebuild, and on
// Manager.Close), and on open rebuilds it from the newest snapshot the log
// still covers plus a scan of the batch headers after it.
//
// Transactions (txn.go, rules at the top of producer.go): transactional
// batches open their producer's transaction; markers from the transaction
// coordinator (WriteMarker, control batches) close it, and aborts are
// recorded for read_committed fetches (AbortedTransactions). The last
// stable offset (LastStableOffset) is the high watermark held back by the
// oldest transaction that is open or whose marker is not yet below the
// high watermark; it moves when the high watermark does, which wakes the
// waiters. Coordinators' own batches (the group coordinator's
// __consumer_offsets writes) go through AppendInternal, which skips the
// sequence checks. Open transactions, coordinator epochs and aborted
// transactions are part of the producer snapshot (version 2) and of the
// rebuild from the log, which reads each marker's commit or abort.
//
// Compaction of transactional data (log.Log.Compact) is fed from here: the
// first offset of the oldest unstable transaction goes to the log
// (SetFirstUnstableOffset) whenever it changes, and compaction cleans
// nothing at or past it. Before compaction removes transaction markers
// (after their data is gone), the partition drops the aborted transactions
// among them and replaces its older snapshots with one taken after them
// (forgetMarkers), so that read_committed fetches never name an aborted
// transaction whose marker is gone and a rebuild never starts from a
// snapshot that saw a removed marker's transaction open.
//
// A follower whose log ends before its leader's starts restarts it empty at
// the leader's start (StartAt, log.Log.StartAt): the producer snapshots are
// removed first, then the log restarts, then the producer state, applied
// end and high watermark are reset to the new start, all under appendMu and
// snapMu. A crash between the two leaves the old log without snapshots,
// rebuilt by a scan; the log's restart syncs the directory, so after it no
// snapshot of the old log is left to seed the new log's state. Snapshots
// of the old log still in flight are refused (snapEnd, restarts).
//
// Locking: Partition.appendMu orders producer-state checks with appends and
// guards the producer state; Partition.snapMu serialises snapshot writes
// (taken after appendMu when both are held; snapshot files are written
// without appendMu; StartAt holds it while the log restarts, so the log's
// lock comes after it); Partition.mu guards the high watermark, the
// waiters and the transactions readers need (producerState.txns: the
// unstable transactions and the aborted list), so that fetches never wait
// for appendMu. Appends change producerState.txns holding appendMu and then mu;
// the high watermark prunes its decided transactions under mu alone; the
// aborted list changes only with both held, so a snapshot reads it under
// appendMu. appendMu comes before mu, and neither is held across an fsync
// of the log.
package replica
