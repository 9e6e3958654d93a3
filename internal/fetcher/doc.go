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
// The reconciler tells the fetcher what to follow after every metadata
// change (Set); a partition this broker comes to lead leaves its loop, and
// a write that races with that is refused by the partition itself.
package fetcher
