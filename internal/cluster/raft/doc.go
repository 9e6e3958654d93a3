// Package raft replicates opaque entries among the nodes of the cluster's
// metadata quorum. It is the only package that imports etcd's Raft library
// (go.etcd.io/raft/v3): it owns the Ready loop, Raft's storage on log/vfs,
// the transport between nodes, snapshots and compaction, and membership.
// Package cluster drives it with a StateMachine holding the metadata image.
//
// # Proposing
//
// Propose wraps the caller's bytes with this node's id and a request id,
// registers a waiter under the request id, and hands the entry to the loop
// (waiting for a leader first). When the entry applies on this node, the
// loop gives the state machine's result to the waiter with that request id;
// entries proposed elsewhere, or by an earlier run of this node (request ids
// start at a random point each run), wake nobody. An entry lost to a leader
// change never applies, so its proposer gets ErrTimeout when its context
// ends, never another entry's result. ErrTimeout means "unknown": the entry
// may still apply later. This is etcd's wait pattern.
//
// # The loop
//
// One goroutine (run) owns the RawNode, the storage and the state machine.
// It takes one event (tick, inbound message, proposal, transport report,
// status request) and whatever else is already waiting, then handles each
// Ready in the order etcd's Raft documents:
//
//  1. Persist the hard state, the entries and any snapshot, and fsync
//     (unless Raft says no sync is needed: only the commit index moved).
//  2. Only then send the messages. This is the simple form of the rule
//     that no message may leave before the state it reflects is durable: a
//     vote before the vote, an append acknowledgement before the entries.
//  3. Apply the snapshot, if any (StateMachine.Restore), then the committed
//     entries, in order (Apply; membership changes go to Raft and to the
//     address book). Take a snapshot when SnapshotEntries have applied
//     since the last one, or after a membership change once the log has
//     been compacted (a node catching up accepts only a snapshot whose
//     membership includes it, and the leader sends the stored one).
//  4. Advance.
//
// A failed write or sync stops the loop: what is on disk is then unknown.
// Proposals get ErrStopped and Close returns the cause.
//
// # On disk
//
// Dir holds two directories.
//
//   - wal/: segments named by sequence number, 20 digits
//     (00000000000000000003.wal). A segment is a run of records, each a
//     uint32 big-endian length (of type and payload), a uint32 big-endian
//     CRC-32C (Castagnoli) of the length field, type and payload, a type
//     byte and the payload. The first record of a segment, and only the
//     first, is its header (type 1): its sequence number and the snapshot
//     (index, term) its log follows, the snapshot marker. Then entries
//     (type 2, a marshalled raftpb.Entry) and hard states (type 3, a
//     marshalled raftpb.HardState), in the order written; an entry at index
//     i replaces the entry at i and all after it, and the last hard state
//     counts. A hard state is written after the entries of its Ready.
//   - snap/: snapshot files named by their index, 20 digits
//     (00000000000000012000.snap): a uint32 big-endian CRC-32C of the rest,
//     then a marshalled raftpb.Snapshot (index, term, conf state, data). The
//     data is a version byte, the member addresses (uvarint count, then per
//     member uvarint id, uvarint length, address) and the state machine's
//     bytes. Written with vfs.WriteFileAtomic.
//
// A segment is sealed when it reaches SegmentBytes: it is synced, and the
// next one is created, written, synced and its directory synced before
// anything else is written, so only the newest segment can hold records
// that were never synced. A snapshot, taken here or received from the
// leader, compacts the log in this order: (1) the snapshot file, durable;
// (2) a new segment whose header marks the snapshot and which repeats every
// entry after it and the hard state, durable; (3) the older segments
// removed, oldest first; (4) the older snapshot files removed. A crash
// between any two steps leaves a state recovery reads correctly: after (1)
// the old segments still hold everything; after (2) or (3) the new segment
// does; a partial (3) leaves a gapless run of segments.
//
// # Recovery
//
// Start reads the newest snapshot file (older ones are never needed), then
// every segment in order, and rebuilds Raft's MemoryStorage:
//
//   - A bad record (length out of range, past the end of the file, CRC
//     mismatch, unknown type) in the newest segment with no valid record
//     anywhere after it is a torn tail: data past the last fsync, never
//     acknowledged. It is cut (the file truncated there) with a warning. A
//     newest segment without a valid header (an interrupted roll) is
//     removed.
//   - Anything else is damage to data that was durable, and Start returns a
//     *CorruptError naming the file (and the byte position, where there is
//     one), changing nothing: a bad record followed by a valid one, a bad
//     record in a sealed segment, a gap in the segment numbers, a header
//     that does not match its file or goes back, an entry that does not
//     follow the log, a snapshot file that fails its CRC, a WAL that
//     follows a snapshot newer than the newest snapshot file (it was lost),
//     snapshot files without any WAL, or a hard state committing past the
//     last entry. Nothing is dropped silently; an operator decides.
//
// A header marking a newer snapshot, or a snapshot file newer than the
// segments' marker (a crash between steps 1 and 2 above), rebases the log:
// the entries after the snapshot are kept only if the log's entry at the
// snapshot's index has the snapshot's term (by Raft's log matching, the
// same history); otherwise they belong to a history the snapshot replaced
// and the leader sends the right ones. The commit index is raised to the
// snapshot's index if the hard state written with it was lost.
//
// Then the snapshot's state goes to StateMachine.Restore, Raft restarts
// with the snapshot's index as applied, and the loop's first Readies replay
// the committed entries after it: each index is applied once per run, and
// never below the restored snapshot. The torn-tail rule is etcd's: a power
// loss that tears a write in the middle but leaves later bytes of the same
// write intact is reported as damage, not cut.
//
// # Membership
//
// The initial voters are the first entries of a bootstrapped log, each
// ConfChange carrying the voter's address in its context (so all voters
// must be started with the same Voters and Peers). A node started with Join
// and no membership sends, once per election timeout, a MsgProp holding
// one ConfChangeAddLearnerNode for itself with its address to every voter
// in Peers; a follower forwards it to the leader, the leader proposes it
// (Raft refuses it while another change is pending, and the node asks
// again), and it stops asking once its own log shows it as a member. Every
// applied ConfChange teaches every node the member's address, and the
// snapshot keeps the addresses too, so learners become known to all.
// Addresses in Peers win over the log's. A change that would demote a voter
// to learner, or remove the last voter, is cancelled when applied, decided
// from the applied membership alone so that every node decides alike. A
// join is not authenticated: whoever reaches a voter's transport can join
// as a learner.
//
// # Transport
//
// Transport is sealed: NewTCPTransport (one outgoing connection per peer,
// only to the address given, reconnecting with backoff; bounded per-peer
// queues that drop when full; frames of a uint32 length and a marshalled
// raftpb.Message) and MemNetwork.Endpoint (tests: loss, delay and reorder,
// partitions, killed nodes). Messages are marshalled on the loop, as Raft
// requires. Failed sends are reported to Raft (ReportUnreachable), and so is
// each MsgSnap's outcome (ReportSnapshot).
//
// # Logs
//
// Log lines name members by Config.LogID, the ids the rest of the system
// knows them by (package cluster's node ids), never by Raft id: the node's
// own (node_id), its leader, members, peers; etcd's own lines too, whose
// %x verbs of Raft ids are printed as those ids (logger.go).
//
// # Goroutines and locking
//
// Every goroutine of a Node and of its transport starts through Node.spawn
// and is waited for by Close. The loop's state (RawNode, storage, state
// machine, membership) has one owner, the loop, and no lock. Other
// goroutines reach it through channels (proposals, messages, status
// requests), the wait table (waitTable.mu), the report queue
// (reportQueue.mu), and the leader id (an atomic, with leaderMu guarding the
// channel that announces changes). These locks are leaves: nothing is
// called while holding one. The state machine runs on the loop, so its
// methods must not call Propose, Status or the membership methods (they
// wait for the loop), nor take a lock held by a goroutine that does.
package raft
