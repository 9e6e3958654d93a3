// Package fetcher copies the partitions this broker follows from their
// leaders, the way Kafka's replica fetcher threads do: one loop per leader
// broker serves every partition followed from there.
//
// A partition joins a loop at a leader epoch. Before it fetches at that
// epoch, the loop asks the leader where the follower's latest epoch ends
// (OffsetForLeaderEpoch) and truncates what the new leader does not have,
// the KIP-101 way rather than to the high watermark. Then it fetches with
// its replica id and broker epoch (Fetch v15's ReplicaState) from its log
// end, in a fetch session with the leader (KIP-227: after the first fetch
// it names only the partitions whose log end, log start or leader epoch
// moved, and forgets those it no longer follows; a lost session starts
// afresh), writes the batches as they come (same offsets, same bytes), syncs
// them when the topic syncs every append (so that the log end it reports
// next, which the leader's high watermark follows, is durable), and takes
// the leader's high watermark.
//
// A fetch the leader finds out of range sends the follower to ask where
// the leader's log starts (ListOffsets, earliest: the leader answers the
// error without it, as Kafka's does). A follower whose log ends before
// that start (it was away while retention or DeleteRecords moved the
// start past its end) empties its log and restarts it at the leader's
// start (replica.Partition.StartAt, Kafka's truncateFullyAndStartAt), then
// fetches on from there; the first batch may begin below that start, and
// the log takes it whole. Any other fetched past the leader's end, and
// truncates again by leader epoch before it fetches.
//
// The reconciler tells the fetcher what to follow after every metadata
// change (Set); a partition this broker comes to lead leaves its loop, and
// a write that races with that is refused by the partition itself.
package fetcher
