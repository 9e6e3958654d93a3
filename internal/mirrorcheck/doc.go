// Package mirrorcheck proves that a mirror topic equals its source: the
// same record batches at the same offsets, byte for byte, and the same
// committed group offsets. The cluster link's tests use it against a real
// Apache Kafka source and a Strand mirror; it speaks only the Kafka
// protocol, so either side may be any Kafka cluster.
//
// Reading a log (reader.go): a Reader answers three questions about one
// side: a topic's id and partition count (Metadata v12+), a partition's
// log start and high watermark (ListOffsets, earliest and latest), and
// its raw record batches from an offset (Fetch). The Kafka implementation
// sends each request to the partition's leader with
// Client.Broker(leader).Request, as a consumer would but with replica id
// -1 and READ_UNCOMMITTED, so that aborted records and transaction markers
// come too; it refreshes the leader and retries (a bounded number of
// times) when the answer says the leadership moved. Unit tests give the
// comparison synthetic logs through the same interface.
//
// Walking (walk.go): a partition is read in fetches from the larger of
// the two log starts (below it one side has nothing to compare) up to an
// end: each side's high watermark, or the caller's bound when the mirror
// may lag a live source (Options.Ends). A fetch returns whole batches,
// the first possibly starting before the offset asked for (it holds that
// offset, or a broker reading from an index entry may start a batch
// earlier) and the last possibly cut short by the size limit; the walker
// keeps the whole ones past what it has seen, and asks again from the
// offset after the last. A fetch with no whole batch past what was seen
// is asked again with twice the size, up to 64 MiB. An empty fetch below
// the end means the rest of the range holds no batch (the cleaner may
// have removed the tail): the walk ends there. Only record format v2 is
// walked; anything else is an error.
//
// Comparing (compare.go): the two walks advance together by base offset.
// Batches at the same base offset must be equal byte for byte with the
// partition leader epoch (bytes 12..15, outside the CRC) masked out: the
// mirror stamps its own epoch and nothing else may differ. A batch on one
// side with no batch at its base offset on the other is missing from (or
// extra on) the mirror. A differing pair names each header field that
// differs, and for the records the first byte that does, and says when a
// side's CRC does not match its own bytes (so corruption is told from a
// re-encoded batch). The counts of a partition report (batches, records,
// control batches, codecs, offset gaps) are the source's, over the range
// compared. A report keeps the first mismatches of each partition and
// counts them all.
//
// Group offsets (groups.go): every committed offset of each group, with
// its leader epoch and metadata, fetched from both sides (OffsetFetch
// through kadm) and compared partition by partition.
package mirrorcheck
