// Package txn is the transaction coordinator: transactional ids, their
// producer ids and epochs, and the two-phase commit of their transactions.
// It follows Apache Kafka 4's TransactionCoordinator and
// TransactionMetadata: the same states, checks, errors and records.
//
// # What it owns
//
//   - The state of the transactional ids this broker coordinates, stored in
//     __transaction_state (records.go for the format: Kafka's
//     TxnMetadataKey/TxnMetadataValue, so its tools read it). An id's
//     records go to partition model.CoordinatorPartition (Java hashCode,
//     abs, modulo), and the leader of that partition is the id's
//     coordinator (FindCoordinator's answer). The topic is created on first
//     use (FindCoordinator through EnsureTopic, or a first InitProducerID),
//     internal and compacted, through the coordinator runtime
//     (coordinator.Topic, which the server implements), and replayed with
//     coordinator.Replay.
//   - Leadership, as the group coordinator follows __consumer_offsets':
//     LoadPartition replays a partition this broker has come to lead (its
//     ids answer ErrCoordinatorLoadInProgress meanwhile) and finishes its
//     PrepareCommit/PrepareAbort transactions in the background;
//     UnloadPartition drops the ids of one it no longer leads and stops
//     their background work. Load, at start, loads the partitions led then.
//     An id whose partition is not served here is ErrNotCoordinator, and no
//     state is made for it. Of a topic this coordinator created, the
//     partitions it leads are served at once (empty); of one it finds made
//     (by another broker, or before it knew), they are served only once
//     loaded. The server drives the loads from the metadata
//     (syncCoordinators).
//   - The checks partition leaders make before appending a transactional
//     batch (KIP-890): CheckPartitions verifies the partitions (the older
//     protocol) or adds them (Produce v12+), here or, for an id another
//     broker coordinates, through the Remote interface (the server sends
//     AddPartitionsToTxn v5). CheckPartitionsHere answers those requests,
//     never passing them on.
//   - Producer ids and epochs: InitProducerID bumps the epoch of an idle
//     id (KIP-360: a producer naming its current pid/epoch is checked and
//     a retried bump is recognised); an exhausted epoch (>= MaxInt16-1)
//     gives a new producer id with epoch 0 instead. EndTxn v5+ (KIP-890
//     part 2, v2) bumps the epoch on every EndTxn, stores it with the
//     Prepare record (with NextProducerID when exhausted), and recognises
//     a retry by the epoch just below the current one.
//   - The markers: after the Prepare record is durable, Markers writes a
//     marker with the (bumped) epoch to every partition of the transaction,
//     wherever it is led, then the Complete record is written. The
//     coordinator epoch the markers carry is the leader epoch of the id's
//     __transaction_state partition when it was loaded, so a newer
//     leadership's markers fence an older one's. When that fails, a
//     background job retries every MarkerRetryBackoff; the partition's next
//     load resumes every Prepare* it finds.
//   - Timeouts (every AbortCheckInterval: an Ongoing transaction older than
//     its timeout is aborted with its epoch bumped, which fences its
//     producer) and expiry (every ExpiryCheckInterval: idle ids untouched
//     for IDExpiration are removed with a tombstone).
//
// # States
//
// Kafka's names and numbers (TxnMetadataValue.State):
//
//	Empty ──AddPartitions──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
//	  ▲                        │                 PrepareAbort  ──markers──▶ CompleteAbort
//	  └──InitProducerID        └──fence/timeout──▶ PrepareAbort (epoch bumped)
//
// Complete* behaves as Empty for the next transaction (AddPartitions starts
// one, InitProducerID bumps the epoch; with v2, an abort of an idle id bumps
// the epoch through PrepareAbort with no partitions). Kafka's
// PrepareEpochFence is never stored: a fence is written as PrepareAbort with
// the epoch already bumped. Dead is a tombstone.
//
// # Invariants
//
//   - A method that changes state returns only after the new state is
//     durable in __transaction_state; in-memory state changes only then
//     (Kafka's pending transition). While a record of an id is being made
//     durable, other requests on that id answer ErrConcurrentTransactions.
//     The one exception is the Complete record (writeAhead): it is applied
//     and answered once appended, because losing it decides nothing (Load
//     finishes the durable Prepare* again, with the same outcome) and any
//     later record of the id lands after it, so its durability covers it.
//   - An id's records reach the log in the order of its states: an
//     append happens under the id's lock, and no second transition starts
//     before the first is durable.
//   - A Prepare* state changes only through its background job (markers,
//     then Complete); every request answers ErrConcurrentTransactions or
//     an error while it lasts, so the job may write markers without the
//     lock.
//   - EndTxn answers success once Prepare is durable even if the markers
//     fail: the outcome is decided, and the job or the next Load
//     completes it. Markers are idempotent, so resuming writes them again.
//   - lastEpoch (the epoch before the last bump) is kept in memory only,
//     as in Kafka: a retried InitProducerID across a restart is fenced.
//   - Every txn belongs to one leadership of its partition (a served value,
//     made at load or creation): once the partition is unloaded, the txn's
//     appends are refused and its background work stops, and
//     UnloadPartition returns only once its appends in flight are durable
//     or failed. So a later load replays everything that leadership wrote,
//     and nothing of it lands after.
//   - Adds from partition leaders (CheckPartitions with add) that find
//     another add of the id in flight wait for it rather than answer
//     ErrConcurrentTransactions: KIP-890's leaders add their partitions at
//     once. AddPartitions from clients keeps Kafka's answer.
//
// # Locking
//
// Coordinator.mu guards the id map, the served partitions, loading, loaded,
// closed and the timers. Each txn's mu guards that id's state and its
// pending, settled, removed and finishing flags. The order is txn.mu, then
// Coordinator.mu; nothing takes an id's lock while holding Coordinator.mu.
// write releases the id's lock while it waits for durability (pending
// keeps other transitions out). Topic's methods are called under
// Coordinator.mu (creating the topic, looking it up) and must not call back
// into the coordinator: the server never loads or unloads partitions from
// inside them. Markers.WriteMarkers, Remote, the replay of a partition and
// the producer id allocation for a new id run without Coordinator.mu.
//
// Goroutines: background jobs (finishing Prepare*, timeout aborts, expiry)
// start through spawn, which tracks them; UnloadPartition cancels the
// marker writes of its partition, Close those of all, and Close waits for
// the jobs. Timer callbacks run on the clock's goroutine, do nothing after
// Close, and only spawn work.
package txn
