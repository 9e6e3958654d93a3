// Package ledger is the hand-off ledger's storage: every partition that
// changes owner in a consumer group, with what the change may have read
// twice or skipped, kept in the internal topic __strand_handoffs so that
// it survives restarts and coordinator moves, and so that any Kafka
// client can read it. The group coordinator makes the entries
// (group.Handoff); this package encodes them and writes them.
//
// # The topic
//
// __strand_handoffs is an internal topic with one partition per broker
// registered when it is created (at most as many as __consumer_offsets),
// cleanup.policy=delete and the retention of
// --handoff-ledger-retention (7 days by default). Each record is one
// entry: its key is the group id, its value a JSON object, its timestamp
// the entry's time. A broker writes the entries of the groups it
// coordinates to the partition of the group (Kafka's key partitioning)
// when it leads that partition, else to another partition it leads; a
// reader therefore reads every partition and orders a group's entries by
// their time.
//
// # An entry
//
//	{
//	  "v": 1,                       schema version
//	  "type": "handoff",
//	  "time": "2026-12-02T17:00:00.123Z",  when the new owner got the partition
//	  "group": "orders-processor",
//	  "topic": "orders", "partition": 3,
//	  "generation": 7,              the classic generation, or the new owner's member epoch
//	  "from": {                     absent for a group's first assignment of the partition
//	    "member_id": "...", "instance_id": "...", "client_id": "...", "host": "/10.0.0.1",
//	    "software_name": "apache-kafka-java", "software_version": "4.4.0"
//	  },
//	  "to": { the same fields },
//	  "reason": "revoked",          how from lost it: revoked, member-left, member-expired,
//	                                member-removed or member-disconnected
//	  "lost_at": "...",             when from lost it: when it departed, or was revoked
//	  "committed": 1200,            the group's committed offset at the hand-off; -1 if none
//	  "last_fetched": 1180,         the highest offset from asked for; -1 if unknown
//	  "last_sent": 1250,            the offset after the last record sent to from; -1 if unknown
//	  "last_fetched_at": "...",     when from's last fetch of it was answered
//	  "first_fetched": 1200,        where the new owner started; -1 if it never fetched
//	  "first_fetched_at": "...",    when the new owner's first fetch of it arrived
//	  "log_start": 0,               the partition's log start offset at that first fetch
//	  "duplicate_risk": 50,         records sent to from that the new owner is sent again
//	  "skipped": 0,                 records the new owner started past
//	  "rewound": 0,                 how far below the committed offset it started
//	  "unowned_ms": 412             from last_fetched_at (lost_at for a member that left
//	                                cleanly, if later) to first_fetched_at
//	}
//
// A member's commit for a partition it does not own is an entry too:
//
//	{
//	  "v": 1, "type": "commit-not-owned", "time": "...", "group": "...",
//	  "topic": "orders", "partition": 3,
//	  "generation": 7,              the generation or member epoch the commit named
//	  "committer": { a member }, "owner": { a member, absent when nobody owned it },
//	  "offset": 1200                the offset committed
//	}
//
// (its hand-off fields are zero). A figure that cannot be known is -1 (duplicate_risk and skipped without a
// first fetch, for instance). An entry is written once the new owner has
// fetched the partition, or once the partition moves on or the new owner
// leaves before it did.
//
// A step in a member's presence is an entry too, so that the tools and the
// console can say that a member is held after its connection closed:
//
//	{
//	  "v": 1, "type": "presence", "time": "...", "group": "...",
//	  "to": { the member },
//	  "state": "connection-lost",   connection-lost: its group connection closed without a
//	                                LeaveGroup; still-fetching: the grace ended but its
//	                                fetches go on; returned: it sent a group request again;
//	                                removed: it was removed at the end of the grace
//	  "connection": "10.0.0.1:53122",  the connection lost, or the one it still fetches on
//	  "remove_at": "..."            connection-lost and still-fetching: when it is removed
//	                                (or looked at again) unless heard from
//	}
//
// A member is held from its connection-lost entry to its next presence
// entry (or its leaving the group).
//
// A commit a cluster link copied from its source cluster is an entry too,
// so that a group's move from that cluster is reported like a hand-off:
//
//	{
//	  "v": 1, "type": "link-commit", "time": "...", "group": "...",
//	  "topic": "orders", "partition": 3,
//	  "link": "kafka-prod", "source": "kafka-1:9092",
//	  "source_offset": 1200,        the group's commit at the source
//	  "offset": 1200,               what was committed here: the same, or the
//	                                mirror's end when it did not hold that yet
//	  "source_end": 1250,           the source partition's end then
//	  "source_members": 0           the group's members at the source then
//	}
//
// The report pairs a partition's last link-commit with the group's next
// first assignment of it here (a Move): the source's commit against where
// the new owner started.
//
// While a link passes a group through (its group lives on the source, and
// members connected here join it there), the link writes the hand-offs
// its members here take part in (package link, handoffs.go): handoff
// entries with "link" and "source" set, whose other side is a member at
// the source named by its host alone ({"host": "kafka-1:9092"}). A
// partition the source assigns a member here has reason "passed-through",
// its committed offset the one the member read, and a duplicate risk of
// -1 (the source's member's progress is not seen here); one a member here
// loses (revoked, member-left, member-unknown, member-disconnected) has
// the member's last commit and what it was sent, hence its duplicate
// risk, and a first fetch of -1.
//
// # Writing
//
// Record never blocks: it is called from the fetch path. Entries wait in
// a bounded queue and are written in batches by one goroutine; when the
// queue is full, entries are dropped and counted (Dropped), and a
// rate-limited line is logged.
package ledger
