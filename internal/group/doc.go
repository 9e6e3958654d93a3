// Package group is the group coordinator: the classic consumer-group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), committed offsets,
// and the rebalance history. It follows Apache Kafka 4's GroupMetadataManager
// and ClassicGroup: the same states, timers, errors and records.
//
// # What it owns
//
//   - Every group's state machine: Empty → PreparingRebalance →
//     CompletingRebalance → Stable, and Dead once deleted. Members join
//     (JoinGroup v4+ first hands out a member id with MEMBER_ID_REQUIRED,
//     KIP-394), the join phase ends when every member has rejoined or the
//     rebalance timeout passes (the first rebalance of an empty group waits
//     group.initial.rebalance.delay.ms, longer while members keep coming),
//     the leader gets the members' metadata, and its SyncGroup assignment
//     is stored and handed to every member. Sessions expire without
//     heartbeats; members that do not rejoin or sync in time are removed.
//     Static members (group.instance.id, KIP-345) keep their place across
//     restarts: a known instance rejoining under a new member id takes over
//     without a rebalance when nothing else changed, and the old id is
//     fenced (FENCED_INSTANCE_ID). Assignment is the client's business, so
//     eager and cooperative rebalancing both work.
//   - Committed offsets, checked against the member and generation
//     (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID; a commit with generation -1
//     is taken by an Empty group), kept in memory, expired after
//     offsets.retention.minutes.
//   - Transactional offsets (TxnOffsetCommit, txnoffsets.go): written as a
//     transactional batch of the producer, pending per group and producer
//     id until the transaction's marker; see below.
//   - The __consumer_offsets topic's content (records.go for the format:
//     Kafka's own key and value schemas, so its tools read it). A group's
//     records go to partition model.CoordinatorPartition (Java hashCode, abs, modulo). The
//     topic is created on first use (FindCoordinator, or a first write),
//     internal and compacted, through the coordinator runtime
//     (coordinator.Topic, which the server implements); Load replays it on
//     start (coordinator.Replay), and a write that fails with the
//     runtime's errors gets the group coordinator's (writeError). A consumer group (KIP-848)
//     keeps its epochs, members, target and current assignments there as
//     Kafka's records (consumerrecords.go, consumerstore.go): each change
//     is flushed as the records that differ from the last written, and a
//     heartbeat is answered once they are durable.
//   - Consumer groups (KIP-848, consumergroup*.go) beside classic ones,
//     and the live migration of a group between the two protocols
//     (migration.go): upgrade when a member of the new protocol joins a
//     classic group, classic members served inside a consumer group,
//     downgrade when the last member of the new protocol leaves, as
//     group.consumer.migration.policy allows.
//   - Instant rollback (presence.go): a member whose connection closed
//     without a LeaveGroup is removed after Config.DisconnectGrace
//     instead of at the end of its session, unless it is heard from
//     again or it still fetches its partitions on a connection of its
//     own; its presence never follows its host and client id, which
//     instances share. The server reports connections
//     (ClientConnected, ClientDisconnected) and fetches (Fetched,
//     FetchedElsewhere); the steps go to the ledger.
//   - The rebalance history (history.go): per group a bounded timeline of
//     membership changes and generations, and the partition hand-offs with
//     the committed offset at hand-off, the highest offset the previous
//     owner fetched and the first the new one fetched.
//
// # Structure
//
// A group (group.go) is what every group has, whichever protocol its
// members speak: its offset store (offsetstore.go; commits in offsets.go
// and txnoffsets.go), the partitions' owners and the history. The state of
// its protocol is one of two kinds behind groupKind: the classic group
// (classicGroup; its rules in join.go, membership.go, rebalance.go,
// store.go) or the consumer group (consumerGroup; consumergroup*.go,
// consumerstore.go). What differs between the kinds outside their own
// requests goes through groupKind: ListGroups' type and state, the member
// count, which topics are subscribed, the validation of commits, when
// offsets expire, and the records that delete the group. A classic
// request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) that reaches a
// consumer group is served by that group's rules for classic members
// (migration.go). Migration converts one kind into the other; the offset
// store stays as it is. The classic rules that need only the classic
// state are methods of classicGroup; those that also need the
// coordinator's clock, writer, timers or history are methods of group.
//
// # Invariants
//
//   - A request is answered after its state change is durable when it
//     wrote anything: commits, the leader's SyncGroup (every member's sync
//     waits for it), DeleteGroups, OffsetDelete, a static member's
//     replacement. Offsets become visible to OffsetFetch only once durable
//     (as Kafka's reads of committed state); RequireStable waits for the
//     group's commits in flight, and reports a partition with an offset
//     pending in an open transaction as UNSTABLE_OFFSET_COMMIT.
//   - A partition's committed offset is the one written last in
//     __consumer_offsets among those that count: plain commits count once
//     durable, transactional ones once their transaction commits. So a
//     plain commit written after a transaction's offset wins over it even
//     when the transaction commits later (offset.logOffset decides).
//   - Records of a group are appended in the order its state changed (the
//     append happens under the group's lock), and their durability is
//     reported in log order (writer.go), so replay rebuilds the same state.
//   - A group's timers act only while their work is current: each is
//     stopped under the group's lock, and a stopped timer never runs.
//   - Answers are sent on channels buffered for one, so the coordinator
//     never blocks on a client; the protocol layer waits on them off the
//     connection's read path (Response.Defer).
//
// # Transactional offsets
//
// Kafka 4's OffsetMetadataManager rules, which a client can observe:
//
//   - CommitTxn validates as Kafka's handleTxnCommitOffsets: an unknown
//     group is created Empty (refused with UNKNOWN_MEMBER_ID if the request
//     names a member or generation, which such a group cannot have); a
//     Dead group is COORDINATOR_NOT_AVAILABLE; a member id or instance id
//     must be the group's (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID), and with
//     any of member, instance or generation given the generation must be
//     the group's (ILLEGAL_GENERATION). Unlike a plain commit, one without
//     member and generation (TxnOffsetCommit v0-2) is taken by a group with
//     members, and CompletingRebalance does not refuse it. Metadata over
//     offset.metadata.max.bytes fails its offset only.
//   - The batch is transactional (attributes 0x10) with the producer's id
//     and epoch and base sequence 0; the partition fences stale epochs,
//     and its error is kept in the chain of the ErrNotCoordinator answered.
//   - From the append on, the offsets are pending: invisible to
//     FetchOffsets, UNSTABLE_OFFSET_COMMIT to a RequireStable fetch of
//     their partition, kept from expiry, and their group is not deleted
//     by expiry. A write that fails to become durable drops them.
//   - CompleteTxn (the server calls it once a marker it wrote to a
//     __consumer_offsets partition is durable): commit applies the
//     producer's pending offsets of every group of that partition (by the
//     rule above), abort drops them. Each writer indexes which groups have
//     offsets pending for which producer, updated in the critical section
//     of the append, so a durable marker finds every group written before
//     it. CompleteTxn does not know the marker's offset: offsets of the
//     producer appended after its marker but before CompleteTxn would be
//     completed with it; only a client committing outside its transaction
//     can do that.
//   - An offset tombstone (OffsetDelete, DeleteGroups) also ends the
//     partition's pending offsets, as Kafka's replay of one does;
//     DeleteGroups writes a tombstone for each partition that only has a
//     pending offset.
//   - Load: offsets of a transactional batch are pending for its producer
//     until a control batch of that producer later in the partition (its
//     first record's key: int16 version, int16 type, 0 abort, 1 commit);
//     still pending at the end, they stay pending, and their marker comes
//     through CompleteTxn. The server must therefore load the group
//     coordinator before the transaction coordinator resumes markers.
//
// # The fetch hook and its heuristic
//
// A Fetch request names no group or member, so the coordinator matches
// fetches to members by the client's host (the connection's remote address
// without its port: clients fetch and join over different connections) and
// its client id, both recorded when the member joins and syncs. Two members
// of a group on one host with one client id cannot be told apart; their
// fetches count for both. The fetch offset is the position the consumer
// asks for: the highest one seen says everything below it was delivered.
//
// # Locking
//
// Coordinator.mu guards the group map, the writers and closing. Each
// group's mu guards all of that group's state, offsets and pending
// transactional offsets included; timer callbacks and write completions
// take it. A writer's mu guards its queue and its index of open
// transactions. The order is group.mu, then Coordinator.mu, then a
// writer's mu, the fetch index's lock or the connection index's, then a
// history's mu; nothing
// takes a group's lock while holding one of the others (CompleteTxn reads
// the index, lets go, then takes each group's lock). The fetch hook takes only the fetch index's read lock and
// histories' locks, never a group's.
//
// Goroutines: one per __consumer_offsets partition (writer.go), stopped by
// Close, plus the clock's timer callbacks, which do nothing after Close.
package group
