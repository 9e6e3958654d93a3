// Package link mirrors other Kafka clusters into this one: cluster links.
//
// A link (cluster.Link, in the metadata) names a source cluster and the
// topics and groups to mirror. Every broker runs a runner per link that is
// not paused:
//   - it reads the source's metadata every MetadataInterval (and at once
//     when a fetch finds a partition moved): where each source partition
//     is led, at which leader epoch;
//   - on the active controller only, it brings the mirror topics in line
//     with the source (topics.go): a topic the filter matches is created
//     here with the source's name, topic id and partition count (and its
//     configs when the link syncs them), grows with it, and is marked
//     stopped when its source topic is gone;
//   - for the mirror partitions this broker leads, one loop per source
//     broker (mirror.go) fetches as a consumer would (READ_UNCOMMITTED, up
//     to the source's high watermark, so aborted data and transaction
//     markers come too) from this mirror's log end, and appends the
//     batches unchanged but for the partition leader epoch
//     (replica.Partition.AppendMirrored). Followers here copy the mirror's
//     leader as for any partition, so a new leader resumes from its own
//     end, with no gap and no duplicate.
//
// The mirror's log start follows the source's: data the source deleted
// is deleted here. When the source loses what the mirror copied (an
// unclean leader election there), the mirror is cut to match (mirror.go,
// verify). The mirror's log keeps the source's leader epochs of its
// batches beside it (log.SourceEpochAt): after a start, a change of the
// source's leader epoch, or a source log that ends before the mirror's,
// the mirror asks the source where the source epoch of its last batch
// ends there (OffsetForLeaderEpoch, as KIP-320's consumers do) and is cut
// to where they agree; KIP-320's diverging epoch in a fetch answer cuts it
// at once. Where the epochs are unknown (a follower's copy, which does not
// learn them, became the leader), the mirror's last batch is compared with
// the source's at that offset (base offset and CRC) and the mirror is cut
// batch by batch until they agree. Producer ids the mirrored batches carry are
// reserved in the metadata (cluster.Store.ReserveProducerIDs), so that
// producers of this cluster never get one of them.
//
// Group pass-through (passthrough.go): while a link passes the groups it
// matches through, their members connected here join the source's group:
// the protocol layer hands their group requests to ForwardGroup, which
// sends each to the source's coordinator through a client of the member's
// own, and a member whose connection closed leaves the source's group
// after the disconnect grace. A consumer fetching a mirror at an offset
// its source has and it has not copied yet waits instead of being told
// the offset is out of range (SourceHighWatermark).
//
// Promote (status.go) waits until every partition of the topics holds
// what the source has committed and no source transaction is open on it,
// then makes them ordinary topics; failover does so at once, reporting
// the lag each partition had.
//
// Locking: runner.mu guards a runner's partitions, the source's leaders
// and the status; Manager.mu the runners. Neither is held while a request
// is in flight or while appending.
package link
