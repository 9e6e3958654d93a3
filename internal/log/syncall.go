package log

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/log/vfs"
)

// DefaultSyncAllMin is how many logs must be waiting for durability at
// once before a round writes them to the journal (journal.go) instead of
// fsyncing each, or, without a journal, syncs the whole file system.
//
// Each fsync of an appended file waits for its own journal commit and
// device flush; a thousand of them cost a hundred times the time and CPU
// of one journal write. Up to a few dozen logs keep their own fsyncs, which
// cost about 0.1 ms each when run at the same time and write each byte
// once. syncfs, the fallback, also writes whatever else is dirty on the
// file system, and its time has a longer tail.
const DefaultSyncAllMin = 32

// fileSyncer makes the active segments of a manager's logs durable. The
// logs that wait while a round runs are gathered into the next round, which
// fsyncs each of them when they are few and writes them to the journal
// (or, without one, syncs the whole file system once) when they are many.
// A log may be in two rounds at once (one writing the journal, the next
// reading its logs); the later one then copies some bytes again, which
// replay tolerates, and finishSync only ever moves a log's positions up.
type fileSyncer struct {
	all     vfs.SyncAll
	journal *journal // nil: rounds of many logs sync the file system
	min     int
	logger  *slog.Logger
	// broken is set once a file-system-wide sync fails. syncfs reports a
	// write-back error once per handle, not to each file that lost data,
	// so from then on every log fsyncs its own files, which still report
	// their own errors.
	broken atomic.Bool

	mu       lockrank.Mutex[lockrank.FileSyncer]
	pending  []*syncRequest
	building bool          // a round is taking its requests' bytes; the next waits
	built    chan struct{} // closed when the building round is done with that

	// Journal files sealed and waiting for their logs to be synced. A
	// round of a log deleted meanwhile may still seal one after close:
	// sealMu and closed keep it from sending on the closed channel (the
	// file is then left for the next start).
	sealMu    lockrank.Mutex[lockrank.FileSyncer]
	sealed    chan *sealedJournal
	closed    bool
	retiring  sync.WaitGroup
	closeOnce sync.Once
}

type syncRequest struct {
	log   *Log
	point syncPoint
	err   error
	// journaled: made durable by a journal record, not in the segment.
	journaled bool
	round     chan struct{} // mu: closed when the round that took it ends

	// Set by a journal round: the bytes to copy, and whether the log
	// must sync its own file instead (unreadable, or truncated meanwhile).
	span    journalSpan
	ownSync bool
}

func newFileSyncer(all vfs.SyncAll, j *journal, min int, logger *slog.Logger) *fileSyncer {
	s := &fileSyncer{all: all, journal: j, min: max(min, 2), logger: logger}
	if j != nil {
		s.sealed = make(chan *sealedJournal, 16)
		s.retiring.Go(s.retire)
	}
	return s
}

// syncMany makes the prepared points durable in one round and returns
// each one's error. A nil syncer fsyncs each alone.
func (s *fileSyncer) syncMany(logs []*Log, points []syncPoint) []*syncRequest {
	reqs := make([]*syncRequest, len(logs))
	for i, l := range logs {
		reqs[i] = &syncRequest{log: l, point: points[i]}
	}
	if s == nil || s.broken.Load() && s.journal == nil {
		fsyncEach(reqs)
		return reqs
	}
	s.mu.Lock()
	// Added together, so they are in the same round: reqs[0] stands for all.
	s.pending = append(s.pending, reqs...)
	for {
		if done := reqs[0].round; done != nil {
			s.mu.Unlock()
			<-done
			return reqs
		}
		if !s.building {
			break
		}
		wait := s.built
		s.mu.Unlock()
		<-wait
		s.mu.Lock()
	}
	// No round is building and reqs are still pending: run one for
	// everything pending. The next round may start building once this one
	// has taken its bytes and holds the journal; their writes and syncs
	// then follow one another.
	batch := s.pending
	s.pending = nil
	done := make(chan struct{})
	for _, r := range batch {
		r.round = done
	}
	s.building = true
	built := make(chan struct{})
	s.built = built
	s.mu.Unlock()

	var once sync.Once
	release := func() {
		once.Do(func() {
			s.mu.Lock()
			s.building = false
			close(built)
			s.mu.Unlock()
		})
	}
	s.runRound(batch, release)
	release()
	close(done)
	return reqs
}

// runRound makes the requests of batch durable and sets each one's error.
// It calls built once the next round may start: a journal round when it
// holds the journal, any other when it ends.
func (s *fileSyncer) runRound(batch []*syncRequest, built func()) {
	if len(batch) < s.min {
		fsyncEach(batch)
		return
	}
	if j := s.journal; j != nil && !j.broken.Load() {
		if s.journalRound(j, batch, built) {
			return
		}
	}
	if !s.broken.Load() {
		// A tail in memory is not the file system's to sync.
		for _, r := range batch {
			if err := r.log.flushTail(); err != nil {
				fsyncEach(batch)
				return
			}
		}
		err := s.all.Sync()
		if err == nil {
			return
		}
		s.breakSyncAll(err)
	}
	fsyncEach(batch)
}

func (s *fileSyncer) breakSyncAll(err error) {
	if !s.broken.Swap(true) {
		s.logger.Error("file system sync failed; syncing each log's files from now on", "err", err)
	}
}

// journalRound writes the round to the journal (see journal.go for the
// steps and why each is safe). It returns false when the journal failed
// and nothing is durable yet.
func (s *fileSyncer) journalRound(j *journal, batch []*syncRequest, built func()) bool {
	seq := j.next.Add(1) - 1
	for _, r := range batch {
		var ok bool
		r.span, ok = r.log.journalSpan()
		r.ownSync = !ok
	}
	sealed, written := j.commit(buildJournalBatch(seq, batch), built)
	if sealed != nil {
		s.sealMu.Lock()
		if !s.closed {
			s.sealed <- sealed
		}
		s.sealMu.Unlock()
	}
	if !written {
		return false
	}
	var own []*syncRequest
	for _, r := range batch {
		if r.ownSync || r.log.fence.Load() > seq {
			own = append(own, r)
			continue
		}
		r.journaled = true
	}
	if len(own) > 0 {
		fsyncEach(own)
	}
	return true
}

// retire syncs the logs of each sealed journal file and then removes it,
// until the syncer closes.
func (s *fileSyncer) retire() {
	for sealed := range s.sealed {
		s.retireFile(sealed)
	}
}

// retireFile syncs what a sealed file's records hold into the segments
// and removes the file, or keeps it when a log could not be synced (its
// records are then replayed at the next start).
func (s *fileSyncer) retireFile(sealed *sealedJournal) {
	points := make(map[*Log]fileSyncPoint, len(sealed.logs))
	for l := range sealed.logs {
		points[l] = l.fileSyncPoint()
	}
	synced := false
	flushed := true
	for l := range sealed.logs {
		// The journal holds what the tails hold until they are written.
		if err := l.flushTail(); err != nil {
			flushed = false
		}
	}
	if flushed && !s.broken.Load() {
		err := s.all.Sync()
		if err == nil {
			synced = true
		} else {
			s.breakSyncAll(err)
		}
	}
	var failed error
	for l, p := range points {
		if synced {
			l.fileSyncedTo(p)
			continue
		}
		if err := l.syncFile(); err != nil && !errors.Is(err, ErrClosed) && failed == nil {
			failed = err
		}
	}
	if failed != nil {
		s.logger.Error("a log whose records are in a journal file failed to sync; keeping the file", "file", sealed.name, "err", failed)
		return
	}
	if err := s.journal.remove(sealed); err != nil {
		s.logger.Warn("removing a retired journal file failed", "file", sealed.name, "err", err)
	}
}

// fsyncEach fsyncs the files at the same time, as their logs would on
// their own.
func fsyncEach(batch []*syncRequest) {
	var wg sync.WaitGroup
	for _, r := range batch[1:] {
		wg.Go(func() { r.err = r.point.file.Sync() })
	}
	batch[0].err = batch[0].point.file.Sync()
	wg.Wait()
}

// close stops the retirement of journal files. Called once every log is
// closed. When they all closed cleanly (synced), what the journal holds is
// no longer needed, and it is emptied so that the next start replays
// nothing; otherwise it is kept for that replay.
func (s *fileSyncer) close(logsSynced bool) error {
	if s == nil {
		return nil
	}
	var errs []error
	s.closeOnce.Do(func() {
		if s.journal != nil {
			s.sealMu.Lock()
			s.closed = true
			close(s.sealed)
			s.sealMu.Unlock()
			s.retiring.Wait()
			if logsSynced {
				old, err := s.journal.reset()
				errs = append(errs, err)
				if old != nil {
					errs = append(errs, s.journal.remove(old))
				}
			}
		}
		errs = append(errs, s.all.Close())
	})
	return errors.Join(errs...)
}
