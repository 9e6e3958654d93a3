package log

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/strandlog/strand/internal/log/vfs"
)

// DefaultSyncAllMin is how many logs must be waiting for durability at
// once before one file-system-wide sync replaces their fsyncs.
//
// Each fsync of an appended file waits for its own journal commit and
// device flush; a thousand of them cost a hundred times the time and CPU
// of one syncfs(2) writing the same bytes. But syncfs also writes whatever
// else is dirty on the file system (topics that do not fsync, other
// programs), and its time has a longer tail: with a few partitions at a
// steady rate it doubled the produce p99 that fsyncs gave. So up to a few
// dozen logs keep their own fsyncs, which cost about 0.1 ms each when run
// at the same time.
const DefaultSyncAllMin = 32

// fileSyncer makes the active segments of a manager's logs durable. The
// logs that wait while a round runs are gathered into the next round, which
// fsyncs each of them when they are few and syncs the whole file system
// once when they are many. Each log has at most one sync in flight (see
// Log.Sync), so a round holds a log at most once.
type fileSyncer struct {
	all    vfs.SyncAll
	min    int
	logger *slog.Logger
	// broken is set once a file-system-wide sync fails. syncfs reports a
	// write-back error once per handle, not to each file that lost data,
	// so from then on every log fsyncs its own files, which still report
	// their own errors.
	broken atomic.Bool

	mu        sync.Mutex
	pending   []*syncRequest
	running   bool
	roundDone chan struct{} // closed when the running round ends
}

type syncRequest struct {
	file vfs.File
	err  error
	done bool // mu
}

func newFileSyncer(all vfs.SyncAll, min int, logger *slog.Logger) *fileSyncer {
	return &fileSyncer{all: all, min: max(min, 2), logger: logger}
}

// sync returns once f is on stable storage, or the error that stopped it.
// A nil syncer fsyncs f alone.
func (s *fileSyncer) sync(f vfs.File) error {
	if s == nil || s.broken.Load() {
		return f.Sync()
	}
	return s.syncMany([]vfs.File{f})[0]
}

// syncMany syncs files in one round and returns each one's error.
func (s *fileSyncer) syncMany(files []vfs.File) []error {
	reqs := make([]*syncRequest, len(files))
	for i, f := range files {
		reqs[i] = &syncRequest{file: f}
	}
	errs := make([]error, len(files))
	if s == nil || s.broken.Load() {
		fsyncEach(reqs)
		for i, r := range reqs {
			errs[i] = r.err
		}
		return errs
	}
	s.mu.Lock()
	// Added together, so they are in the same round: reqs[0] stands for all.
	s.pending = append(s.pending, reqs...)
	for s.running && !reqs[0].done {
		wait := s.roundDone
		s.mu.Unlock()
		<-wait
		s.mu.Lock()
	}
	if !reqs[0].done {
		// No round runs and reqs are still pending: run one for
		// everything pending.
		batch := s.pending
		s.pending = nil
		s.running = true
		done := make(chan struct{})
		s.roundDone = done
		s.mu.Unlock()

		s.runRound(batch)

		s.mu.Lock()
		for _, r := range batch {
			r.done = true
		}
		s.running = false
		close(done)
	}
	s.mu.Unlock()
	for i, r := range reqs {
		errs[i] = r.err
	}
	return errs
}

// runRound syncs the files of batch and sets each request's error.
func (s *fileSyncer) runRound(batch []*syncRequest) {
	if len(batch) >= s.min && !s.broken.Load() {
		err := s.all.Sync()
		if err == nil {
			return
		}
		if !s.broken.Swap(true) {
			s.logger.Error("file system sync failed; syncing each log's files from now on", "err", err)
		}
	}
	fsyncEach(batch)
}

// fsyncEach fsyncs the files at the same time, as their logs would on
// their own.
func fsyncEach(batch []*syncRequest) {
	var wg sync.WaitGroup
	for _, r := range batch[1:] {
		wg.Go(func() { r.err = r.file.Sync() })
	}
	batch[0].err = batch[0].file.Sync()
	wg.Wait()
}

func (s *fileSyncer) close() error {
	if s == nil {
		return nil
	}
	return s.all.Close()
}
