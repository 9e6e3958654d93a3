package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// StartAt empties the log and restarts it at offset, at or past its end:
// every segment goes, the leader-epoch cache is emptied, and the log
// start, end, high watermark and recovery point all become offset (Kafka's
// truncateFullyAndStartAt). A follower whose log ends before its leader's
// starts uses it to fetch on from the leader's start; a mirror, to follow
// its source's start.
//
// Invariant: a crash at any point leaves either the old log, as of its
// last sync, or the new empty one at offset; never a part of the old one,
// and never data StartAt removed coming back (from the segments or from
// the journal). One atomic write decides which: the checkpoint that says
// "restart-at" (see doc.go).
//
// Steps, with the log's lock held throughout:
//  1. Commit: the checkpoint is replaced by one with log start, high
//     watermark and recovery point at offset, a new journal fence (no
//     journal record taken before now is replayed into the log: they
//     hold the old log's batches) and the mark "restart-at offset". Before
//     this, nothing on disk has changed: a crash leaves the old log.
//  2. Every old segment's files are removed; the segment at offset is
//     created; the directory is synced; the epoch file is emptied. A crash
//     in this step leaves the mark, and Open finishes the step before it
//     reads anything (finishStartAt): whatever old files survived are
//     removed, never read. Until the mark goes, the segment at offset
//     holds nothing, so any other segment is the old log's.
//  3. The log switches to the new segment in memory: old segments are
//     retired (closed after file.delete.delay.ms, so that sections handed
//     to readers stay readable); syncs prepared before move nothing
//     (truncations counts StartAt too), and one that fails on an old
//     segment, closed meanwhile, fails nothing (finishSync).
//  4. A checkpoint without the mark replaces the commit's.
//
// A failure after step 1 fails the log (sticky, as any storage error);
// reopening it finishes the restart.
//
// Rejected: Kafka's rule, which needs no mark (after recovery, a log start
// past the log end deletes every segment and starts the log there). Here
// the log start may lie past what the segment files hold for a reason
// other than a restart: DeleteRecords may move it up to offsets that are
// durable only in the journal (journal.go), which replays them after the
// log opens; restarting such a log at its start would drop them and then
// refuse the replay. Also rejected: building the new log in a directory
// beside the old and renaming it over: a non-empty directory cannot be
// replaced in one rename, and the partition's directory holds files that
// are not the log's (the producer snapshots of package replica).
func (l *Log) StartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if offset < l.next {
		return fmt.Errorf("%w: start at %d below the log end %d", ErrOffsetOutOfRange, offset, l.next)
	}
	return l.restartLocked(offset, offset)
}

// restartLocked does StartAt's steps: the log's only segment then starts
// at base, its end too, and its start is start: base, or above it when
// AppendReplicated restarts an empty log at the base of a batch that holds
// its start and appends the batch at once. mu is held.
func (l *Log) restartLocked(base, start int64) error {
	// 1. Commit. The fence is set under mu, before any round can read the
	// new log: a round that took its number earlier writes records that
	// are never replayed, and syncs the log's own file instead
	// (fileSyncer.journalRound).
	l.truncations++
	if l.journal != nil {
		l.fence.Store(l.journal.next.Load())
	}
	commit := checkpoint{logStart: start, highWatermark: start, recoveryPoint: base,
		journalFence: l.fence.Load(), restartPending: true, restartBase: base}
	if err := writeCheckpoint(l.fs, l.dir, commit); err != nil {
		l.failLocked(err)
		return l.failed
	}

	// 2. The files. The old ones go before the new segment is created: the
	// old active segment may have base as its base (an empty segment at
	// the log end), and its name is the new segment's.
	old := l.segs
	var err error
	for _, s := range old {
		if rerr := s.removeFiles(); rerr != nil && err == nil {
			err = rerr
		}
	}
	var s *segment
	if err == nil {
		s, err = createSegment(l.fs, l.dir, base)
	}
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err == nil {
		err = (&epochCache{fs: l.fs, path: l.epochs.path}).store()
	}
	if err == nil && len(l.sourceEpochs.entries) > 0 {
		err = (&epochCache{fs: l.fs, path: l.sourceEpochs.path}).store()
	}
	if err != nil {
		if s != nil {
			_ = s.close()
		}
		l.failLocked(err)
		return l.failed
	}

	// 3. Memory. synced and fileSynced may move down (to a base below the
	// old end): syncs prepared before move nothing, as after a
	// truncation.
	now := l.now()
	for _, o := range old {
		l.retired = append(l.retired, retiredSegment{seg: o, closeAt: now.Add(l.cfg.FileDeleteDelay)})
	}
	l.reapLocked(now)
	s.openedAt = now
	l.segs = []*segment{s}
	l.epochs.entries, l.epochs.dirty = nil, false
	l.sourceEpochs.entries = nil
	l.next, l.start, l.hw, l.cleaned = base, start, start, 0
	l.synced.Store(base)
	l.fileSynced.Store(base)
	l.durableSeg, l.durablePos = s, 0
	l.writebackSeg, l.writtenBack = nil, 0

	// 4. The mark goes.
	if err := l.writeCheckpointLocked(false); err != nil {
		l.failLocked(err)
		return l.failed
	}
	return nil
}

// finishStartAt completes, at open, a restart whose commit a crash left
// behind (ck says restart-at): it removes the files of every segment but
// the one at the restart's base (every other is the old log's: the old
// log's segments may lie above the base when a restart makes room for a
// batch holding the log start), makes sure the segment at the base exists,
// empties the epoch file, and replaces the checkpoint with one without the
// mark. It returns the segments left (the one at the base) and that
// checkpoint. Each step can be repeated, so a crash here only means doing
// it again. A log start above the base (a restart for a batch holding it)
// is kept in the checkpoint; the log opens with its start at its end until
// that batch is appended again.
func (l *Log) finishStartAt(bases []int64, ck checkpoint) ([]int64, checkpoint, error) {
	base := ck.restartBase
	var kept []int64
	for _, b := range bases {
		if b == base {
			kept = append(kept, b)
			continue
		}
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			err := l.fs.Remove(filepath.Join(l.dir, segmentName(b, suffix)))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, ck, err
			}
		}
	}
	if len(kept) == 0 {
		f, err := l.fs.OpenFile(filepath.Join(l.dir, segmentName(base, logSuffix)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, ck, err
		}
		if err := f.Close(); err != nil {
			return nil, ck, err
		}
		kept = []int64{base}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return nil, ck, err
	}
	l.epochs.entries, l.epochs.dirty = nil, false
	if err := l.epochs.store(); err != nil {
		return nil, ck, err
	}
	if len(l.sourceEpochs.entries) > 0 {
		l.sourceEpochs.entries = nil
		if err := l.sourceEpochs.store(); err != nil {
			return nil, ck, err
		}
	}
	done := checkpoint{logStart: ck.logStart, highWatermark: ck.logStart, recoveryPoint: base, journalFence: ck.journalFence}
	if err := writeCheckpoint(l.fs, l.dir, done); err != nil {
		return nil, ck, err
	}
	l.logger.Warn("finished restarting the log empty, which a crash interrupted", "offset", base, "log_start_offset", ck.logStart)
	return kept, done, nil
}
