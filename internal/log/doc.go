// Package log stores one partition: an append-only, strictly ordered log of
// Kafka record batches in a directory of segment files, with recovery after
// a crash, retention, compaction and the leader-epoch checkpoint.
//
// # On disk
//
// A partition's directory (<data>/<topic>-<partition>/) holds:
//
//   - Segments, named by the offset of their first batch, 20 digits
//     zero-padded as in Kafka. 00000000000000001000.log holds record batches
//     exactly as received on the wire (record batch v2, magic 2), back to
//     back; the log has set each batch's base offset and partition leader
//     epoch (outside the CRC) and, for LogAppendTime topics, its max
//     timestamp (with a new CRC). A fetch therefore sends stored bytes.
//   - Beside each segment, a sparse offset index (.index: 8-byte entries of
//     base offset relative to the segment, and byte position; one entry per
//     index.interval.bytes of batches) and a sparse time index (.timeindex:
//     12-byte entries of largest timestamp so far and the relative base
//     offset of the batch that carried it, added when the timestamp grows).
//     Both big-endian. The active segment's indexes live in memory and are
//     written when the segment is sealed (rolled) or the log closes.
//   - partition.checkpoint: log start offset, high watermark, recovery point
//     (every offset below it was synced in the segments), whether the log
//     was closed cleanly, and the journal fence (journal records numbered
//     below it are never replayed into the log). "restart-at N" is there
//     only while StartAt runs, or after a crash cut it short: Open then
//     removes every segment but the one at N before it reads any.
//   - leader-epoch-checkpoint: Kafka's format, one "epoch start-offset" line
//     per leader epoch.
//   - source-leader-epoch-checkpoint: on the mirror of a cluster link only,
//     the same format for the source's leader epochs of the batches
//     mirrored (the batches carry this cluster's): written before a batch of
//     a new source epoch is appended, cut with the log, emptied by a
//     follower's append (sourceepochs.go).
//   - <offset>.producers: snapshots of the idempotent producers' state,
//     written and read by package replica through the log's file system.
//
// Files are replaced atomically: written to a .tmp name, synced, renamed,
// and the directory synced. Compaction writes .cleaned files and renames
// them over the segment; leftovers of any of these are removed on open.
//
// # Durability
//
// Appends write to the active segment under the log's lock and sync after
// releasing it. An append that asks for durability waits until an fsync
// covers it; the appends that arrive while one fsync runs are covered
// together by the next (group commit), so N concurrent writers pay about
// one fsync per round, not N. The logs of a manager share its rounds: a
// round of a few logs fsyncs each; a round of many appends their new bytes
// to the manager's journal (<data>/journal/, journal.go) and fsyncs that
// one file, and their segments are synced later, in the background, before
// the journal file is removed. While a log's syncs go to the journal, its
// appends keep the active segment's newest bytes in memory (tail.go) and
// write them in pieces of up to 16 KiB: the journal holds them durably, a
// round copies them from memory, and readers see them: a small section is
// copied from memory, a large one written to the file first for sendfile.
// Rolling a segment syncs it and its indexes before the next segment is
// created, so only the last segment can hold data that was never synced,
// in its file or in the journal.
//
// Logs that do not fsync their appends (flush policy never or interval)
// hand every few MiB they append to the disk in the background with
// sync_file_range (writeback.go), so their dirty pages stay few and
// writers do not meet the kernel's dirty-page throttle. That writes data
// early but syncs nothing: the recovery point still moves only on fsync.
//
// # Recovery
//
// A manager first replays its journal (see journal.go): each log it names
// is recovered as below, gets the journaled batches past its end, and is
// closed cleanly. The recovery point in the checkpoint counts only what was
// synced in the segments, so the rule below never mistakes a journaled
// tail for lost data.
//
// A clean close leaves "clean-shutdown 1" in the checkpoint; the first
// change after opening retracts it. Opening a clean log scans nothing but the
// few batches after the active segment's last index entry (and falls back to
// recovery if the file does not end with a whole batch). Otherwise every
// segment from the one holding the recovery point onward is read in full,
// checking each batch's length, magic and CRC-32C, and that offsets follow
// one another with no gap outside the range compaction has cleaned (the base
// offset is outside the CRC, so this is how a damaged one shows); indexes are
// rebuilt. Then:
//
//   - A bad batch in the last segment above the recovery point is a torn
//     tail: a crash mid-write, or unsynced pages lost (or written out of
//     order) with the power. The segment is cut there, dropping whatever
//     follows, with a warning. No batch reported durable can lie there,
//     since a durable append's fsync precedes its acknowledgement and the
//     recovery point trails the fsyncs.
//   - Anything else is damage to data that was durable, and Open fails with
//     a *CorruptLogError naming the file and position, leaving the files as
//     they are: a bad batch in a sealed segment (rolls sync a segment before
//     the next exists) or below the recovery point, a sealed segment that
//     does not end where the next begins, or a log that ends below the
//     recovery point. Nothing is dropped silently; an operator decides.
//
// Index files of sealed segments are checked when first loaded (sizes,
// increasing entries, positions inside the log) and rebuilt from the
// segment when they fail.
//
// # Retention and compaction
//
// Retention deletes whole segments from the start: those below the log
// start offset (moved by DeleteRecords), those whose largest timestamp is
// older than retention.ms, and the oldest beyond retention.bytes. Deleted
// and replaced segment files are unlinked at once but closed only after
// file.delete.delay.ms, so sections handed to readers stay valid.
// Compaction (see compact.go) rewrites sealed segments keeping the last
// record of each key. It stops at the high watermark and at the first
// unstable offset (the oldest transaction still open or whose marker is not
// yet below the high watermark), which the replica layer reports and the
// cleaner also finds itself by replaying the markers. Aborted transactional
// records are removed, committed ones are compacted as plain records, and
// a marker goes delete.retention.ms after no data of its transaction is
// left (an abort marker only once the replica layer has forgotten the
// aborted transaction).
//
// # Restarting at an offset
//
// StartAt (startat.go) empties the log and restarts it at an offset at or
// past its end: a follower whose log ends before its leader's starts
// fetches on from the leader's start (Kafka's truncateFullyAndStartAt),
// and a mirror starts at its source's start. Every segment goes, the epoch
// cache empties, and start, end, high watermark and recovery point become
// the offset; reads below it are out of range as below any log start. One
// atomic checkpoint write, carrying "restart-at" and a new journal fence,
// decides between the old log and the new: before it a crash leaves the
// old log; after it Open finishes the removal, so no old segment is ever
// read again and no journal record of the old log is replayed. Kafka
// instead deletes every segment of a log whose start lies past its end
// after recovery; here the start may lie past what the segment files hold
// while the journal still holds the rest (DeleteRecords up to a journaled
// offset), so the restart is marked rather than inferred.
//
// A leader's log start may fall inside a batch (DeleteRecords), which it
// sends whole. AppendReplicated on an empty log takes such a batch: the
// log restarts again, at the batch's base, keeping its log start, and
// stores the batch (Kafka's follower does the same). A crash before the
// batch is durable leaves the log empty at the batch's base, its start
// there too; the follower then finds itself below its leader's start and
// restarts once more.
//
// # Locking
//
// Log.mu guards the segment list, offsets and the active segment's writes;
// readers hold it shared while they locate batches, then read the file
// without it. Log.syncMu serialises the fsyncs of a log that syncs alone
// and is given back before Log.mu is taken; the journal's lock comes
// before the file syncer's (a round's locked callback) and before Log.mu
// (a log only reads the journal's sequence number, an atomic). A tail's
// lock comes after every other: a reader holding Log.mu shared may take it
// to write the tail. LOCKS.md gives the order across packages.
package log
