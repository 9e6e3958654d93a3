package log

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// Options are the parts of opening a log that are not topic settings.
type Options struct {
	FS     vfs.FS       // vfs.OS when nil
	Logger *slog.Logger // slog.Default() when nil
	Now    func() time.Time

	// journal is the manager's, whose sequence numbers fence the log's
	// records (journal.go); nil for a log opened alone.
	journal *journal
}

// Log is one partition's log: an ordered list of segments in one directory,
// the last of which takes appends.
//
// Locking: mu guards the segment list, the offsets and the active segment's
// writes. Appends validate batches before taking mu and sync after
// releasing it; reads hold mu shared while they locate their batches. A log
// of a manager shares the manager's file syncer (syncall.go), whose rounds
// group the syncs of all its logs; a log opened alone has syncMu serialise
// its fsyncs, so that appends waiting for durability queue behind the one
// fsync in flight and are covered by the next (group commit). Lock order:
// syncMu before mu.
type Log struct {
	fs     vfs.FS
	dir    string
	logger *slog.Logger
	now    func() time.Time

	mu      lockrank.RWMutex[lockrank.Log]
	cfg     Config
	segs    []*segment
	next    int64 // log end offset
	start   int64 // log start offset
	hw      int64
	cleaned int64 // compaction may have left offset gaps below this
	dirty   bool  // the checkpoint on disk says "not clean"
	failed  error // sticky: a write or sync failed
	closing bool  // Close waits for syncs in flight; no new one starts
	closed  bool
	epochs  *epochCache
	// sourceEpochs: a mirror's source epochs (sourceepochs.go).
	sourceEpochs *epochCache
	retired      []retiredSegment // deleted or replaced, closed after FileDeleteDelay

	// Set by the replica layer for compaction (see compact.go).
	firstUnstable int64                       // oldest unstable transaction's first offset, -1 for none
	markerRemoval func([]RemovedMarker) error // told before transaction markers are removed; nil keeps them

	syncMu   lockrank.Mutex[lockrank.LogSync] // with no syncer
	syncDone chan struct{}                    // syncMu: closed when the fsync in flight ends
	// synced: every offset below is durable, in the segments or in the
	// journal. fileSynced: every offset below is durable in the segments
	// themselves; it is the recovery point the checkpoint records.
	synced     atomic.Int64
	fileSynced atomic.Int64
	syncer     *fileSyncer    // shares syncs with the manager's other logs; nil syncs alone
	syncing    sync.WaitGroup // syncs prepared and not finished
	journal    *journal       // the manager's, for fences; nil when alone
	// fence: journal records with lower sequence numbers are never
	// replayed into this log (it was truncated after them, or is a new
	// log in a deleted one's directory). Written under mu.
	fence atomic.Int64

	// mu: where the active segment is known durable (synced, or in a
	// journal record), so a journal round copies only what follows; and
	// the number of truncations, so a sync prepared before one does not
	// move these or synced past what the truncation left.
	durableSeg  *segment
	durablePos  int64
	truncations uint64
	// tailInMemory: the log's last sync went to the journal, so its
	// appends keep the active segment's tail in memory (tail.go).
	tailInMemory atomic.Bool

	compactMu lockrank.Mutex[lockrank.LogCompaction] // one compaction at a time

	// mu: what of the active segment went to the background writer
	// (writeback.go), for logs that do not fsync every append.
	writebackSeg *segment
	writtenBack  int64
}

type retiredSegment struct {
	seg     *segment
	closeAt time.Time
}

// Open opens or creates the log in dir, recovering it if it was not closed
// cleanly (see the package comment for the rule).
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Log{fs: opts.FS, dir: dir, logger: opts.Logger, now: opts.Now, cfg: cfg, firstUnstable: -1, journal: opts.journal}
	if l.fs == nil {
		l.fs = vfs.OS
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	l.logger = l.logger.With("component", "log", "dir", dir)
	if l.now == nil {
		l.now = time.Now
	}
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := l.load(); err != nil {
		l.closeFiles()
		return nil, err
	}
	return l, nil
}

func (l *Log) load() error {
	bases, err := l.tidyDir()
	if err != nil {
		return err
	}
	ck, err := readCheckpoint(l.fs, l.dir)
	if err != nil {
		return err
	}
	rebuildFrom := int64(-1) // where the epochs may be missing from their file
	if l.epochs, err = loadEpochs(l.fs, l.dir, epochFile); err != nil {
		return err
	}
	if l.sourceEpochs, err = loadEpochs(l.fs, l.dir, sourceEpochFile); err != nil {
		return err
	}
	if ck.restartPending {
		if bases, ck, err = l.finishStartAt(bases, ck); err != nil {
			return err
		}
	}
	for _, base := range bases {
		s, err := openSegment(l.fs, l.dir, base)
		if err != nil {
			return err
		}
		s.openedAt = l.now()
		l.segs = append(l.segs, s)
	}
	for i, s := range l.segs[:max(len(l.segs)-1, 0)] {
		s.next = l.segs[i+1].base
	}
	l.fence.Store(ck.journalFence)
	if len(l.segs) == 0 {
		// A new log: its fence is durable before its first segment
		// exists, so no record of a log deleted from this directory is
		// ever replayed into it.
		if l.journal != nil {
			l.fence.Store(l.journal.next.Load())
		}
		l.dirty = true // a new log has nothing to scan, but nothing is clean yet either
		if err := l.writeCheckpointLocked(false); err != nil {
			return err
		}
		s, err := createSegment(l.fs, l.dir, ck.logStart)
		if err == nil {
			err = l.fs.SyncDir(l.dir)
		}
		if err != nil {
			return err
		}
		s.openedAt = l.now()
		l.segs = []*segment{s}
	} else if ck.clean && l.openActive() == nil {
		// Trusted: the last close wrote the indexes and synced everything.
	} else {
		l.dirty = true
		if err := l.recover(ck); err != nil {
			return err
		}
		rebuildFrom = ck.recoveryPoint
	}
	l.cleaned = ck.cleanedEnd
	active := l.active()
	l.next = active.next
	l.start = max(ck.logStart, l.segs[0].base)
	l.start = min(l.start, l.next)
	l.hw = min(max(ck.highWatermark, l.start), l.next)
	l.synced.Store(l.next) // what recovery kept is what the disk holds
	l.fileSynced.Store(l.next)
	l.durableSeg, l.durablePos = active, active.size
	if err := l.epochs.truncateFromEnd(l.next); err != nil {
		return err
	}
	// A source epoch written ahead of an append a crash lost.
	if err := l.sourceEpochs.truncateFromEnd(l.next); err != nil {
		return err
	}
	if rebuildFrom >= 0 {
		return l.rebuildEpochs(rebuildFrom)
	}
	return nil
}

// rebuildEpochs adds to the epoch cache the leader epochs of the batches
// from offset on, which a crash may have kept out of the epoch file: the
// file is written with checkpoints, so it has every epoch that starts
// below the recovery point.
func (l *Log) rebuildEpochs(from int64) error {
	return l.ScanBatches(from, func(b model.Batch) bool {
		l.epochs.assign(b.PartitionLeaderEpoch(), b.BaseOffset())
		return true
	})
}

// tidyDir finishes what a crash interrupted (leftover temporary, cleaned and
// orphaned index files) and returns the base offsets of the segments, in
// order.
func (l *Log) tidyDir() ([]int64, error) {
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	logs := map[int64]bool{}
	var bases []int64
	for _, e := range entries {
		if base, ok := parseSegmentName(e.Name(), logSuffix); ok {
			logs[base] = true
			bases = append(bases, base)
		}
	}
	for _, e := range entries {
		name := e.Name()
		_, isIndex := parseSegmentName(name, indexSuffix)
		_, isTime := parseSegmentName(name, timeIndexSuffix)
		base, _ := strconv.ParseInt(strings.SplitN(name, ".", 2)[0], 10, 64)
		stale := strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, deletedSuffix) ||
			strings.HasSuffix(name, cleanedSuffix) || ((isIndex || isTime) && !logs[base])
		if stale {
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

func parseSegmentName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, err == nil
}

// openActive readies the last segment after a clean shutdown: its index files
// are current, so only the batches after the last index entry are walked to
// find the log end. An error sends the log through recovery instead.
func (l *Log) openActive() error {
	s := l.active()
	idx, _, err := s.indexes(l.cfg.IndexIntervalBytes)
	if err != nil {
		return err
	}
	from, pos := idx.lookupPos(s.size)
	s.next = from
	end := pos
	err = scanHeaders(s.file, pos, s.size, func(p int64, b model.Batch) bool {
		s.next = b.LastOffset() + 1
		end = p + int64(b.Size())
		return end <= s.size
	})
	if err != nil {
		return err
	}
	if end != s.size {
		// Bytes past the last whole batch: the file changed after the clean
		// close. Recovery decides what they are.
		return fmt.Errorf("%d bytes after the last batch of %s", s.size-end, s.file.Name())
	}
	s.sinceIndex = s.size - pos
	return l.readFirstTimestamp(s)
}

func (l *Log) readFirstTimestamp(s *segment) error {
	if s.size < model.BatchHeaderSize {
		return nil
	}
	hdr := make([]byte, model.BatchHeaderSize)
	if _, err := s.file.ReadAt(hdr, 0); err != nil {
		return err
	}
	s.firstTs = model.Batch(hdr).MaxTimestamp()
	return nil
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the log's current settings.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// SetConfig changes the settings of an open log (AlterConfigs).
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	l.cfg = cfg
	l.mu.Unlock()
	return nil
}

// AppendOptions qualify one append.
type AppendOptions struct {
	// LeaderEpoch is stamped on every batch and recorded in the leader-epoch
	// checkpoint when it is new; negative leaves the batches' own.
	LeaderEpoch int32
	// Durable makes Append return only once the batches are on stable
	// storage, sharing the fsync with concurrent appends.
	Durable bool
	// Internal permits control batches (written by coordinators, never by
	// clients).
	Internal bool
}

// AppendResult says where the batches went.
type AppendResult struct {
	BaseOffset    int64 // first offset assigned; -1 when there were no batches
	LastOffset    int64
	LogAppendTime int64 // -1 unless the topic stamps log-append time
	LogStart      int64
	Batches       []BatchInfo
}

// BatchInfo is what the producer-state layer needs of each appended batch.
type BatchInfo struct {
	BaseOffset    int64
	LastOffset    int64
	Count         int32
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Transactional bool
	Control       bool
	MaxTimestamp  int64
}

// Append validates the batches in data (one or more whole v2 batches, as in
// a produce request), assigns them consecutive offsets and writes them. It
// takes ownership of data: base offsets, leader epochs and log-append times
// are set in place, so the stored bytes are the bytes received, but for a
// batch the topic's compression.type recompresses (recompress.go). Nothing
// of data is written unless every batch passes.
func (l *Log) Append(data []byte, opts AppendOptions) (AppendResult, error) {
	res := AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}
	l.mu.RLock()
	cfg := l.cfg
	l.mu.RUnlock()
	now := l.now()
	vopts := validateOptions{
		maxBatchBytes:     cfg.MaxMessageBytes,
		requireKeys:       cfg.Compact,
		allowControl:      opts.Internal,
		now:               now.UnixMilli(),
		maxTimestampAgo:   cfg.TimestampBeforeMax.Milliseconds(),
		maxTimestampAhead: cfg.TimestampAfterMax.Milliseconds(),
	}
	refs, infos, err := splitAndValidate(data, &vopts)
	if err != nil || len(refs) == 0 {
		return res, err
	}
	if cfg.Compression.Recompress && !opts.Internal {
		if data, refs, err = recompressBatches(data, refs, infos, cfg); err != nil {
			return res, err
		}
	}
	if cfg.LogAppendTime {
		res.LogAppendTime = now.UnixMilli()
	}

	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return res, err
	}
	base := l.next
	for i := range refs {
		r := &refs[i]
		b := model.Batch(data[r.pos : r.pos+r.size])
		delta := r.last - r.base
		r.base = base
		r.last = base + delta
		base = r.last + 1
		b.SetBaseOffset(r.base)
		if opts.LeaderEpoch >= 0 {
			b.SetPartitionLeaderEpoch(opts.LeaderEpoch)
		}
		if cfg.LogAppendTime {
			setLogAppendTime(b, res.LogAppendTime)
			r.maxTs = res.LogAppendTime
		}
		infos[i].BaseOffset, infos[i].LastOffset = r.base, r.last
	}
	if err := l.appendLocked(data, refs, now); err != nil {
		l.mu.Unlock()
		return res, err
	}
	if opts.LeaderEpoch >= 0 {
		l.epochs.assign(opts.LeaderEpoch, refs[0].base)
	}
	res.BaseOffset, res.LastOffset, res.LogStart = refs[0].base, l.next-1, l.start
	res.Batches = infos
	l.mu.Unlock()

	if opts.Durable {
		if err := l.Sync(res.LastOffset + 1); err != nil {
			return res, err
		}
	}
	return res, nil
}

// splitAndValidate walks the batches in data and checks each one.
func splitAndValidate(data []byte, opts *validateOptions) ([]batchRef, []BatchInfo, error) {
	var refs []batchRef
	var infos []BatchInfo
	r := model.NewBatchReader(data)
	for b, ok := r.Next(); ok; b, ok = r.Next() {
		// The batch is whole, so only its magic can be refused here.
		if _, err := batchSize(b, 0); err != nil {
			return nil, nil, err
		}
		bi, err := validateBatch(b, opts)
		if err != nil {
			return nil, nil, err
		}
		refs = append(refs, batchRef{pos: r.Pos() - len(b), size: len(b), base: 0, last: int64(bi.lastOffsetDelta), maxTs: bi.maxTimestamp})
		infos = append(infos, BatchInfo{
			Count: bi.count, ProducerID: bi.producerID, ProducerEpoch: bi.producerEpoch,
			BaseSequence: bi.baseSequence, Transactional: bi.transactional, Control: bi.control,
			MaxTimestamp: bi.maxTimestamp,
		})
	}
	if r.Stop() == model.EndOfBatches {
		return refs, infos, nil
	}
	rest := r.Rest()
	if len(rest) < model.BatchHeaderSize {
		return nil, nil, fmt.Errorf("%w: %d trailing bytes are not a batch", ErrCorruptMessage, len(rest))
	}
	// A length below a header's, then a wrong magic, are named before the
	// size: a batch cut short is too large when it claims more than the
	// limit, else corrupt.
	if _, err := batchSize(rest, 0); err != nil {
		return nil, nil, err
	}
	if n := r.Claimed(); opts.maxBatchBytes > 0 && n > opts.maxBatchBytes {
		return nil, nil, fmt.Errorf("%w: batch of %d bytes, limit %d", ErrMessageTooLarge, n, opts.maxBatchBytes)
	}
	return nil, nil, fmt.Errorf("%w: batch of %d bytes, only %d present", ErrCorruptMessage, r.Claimed(), len(rest))
}

func (l *Log) writableLocked() error {
	switch {
	case l.closed:
		return ErrClosed
	case l.failed != nil:
		return l.failed
	case !l.dirty:
		// The first change after a clean open must first retract the
		// checkpoint's "clean", or a crash would skip recovery.
		if err := l.writeCheckpointLocked(false); err != nil {
			l.failLocked(err)
			return l.failed
		}
		l.dirty = true
	}
	return nil
}

// appendLocked writes batches whose offsets are set, rolling first when the
// active segment is full or old.
func (l *Log) appendLocked(data []byte, refs []batchRef, now time.Time) error {
	s := l.active()
	last := refs[len(refs)-1].last
	full := s.size > 0 && s.size+int64(len(data)) > l.cfg.SegmentBytes
	old := s.size > 0 && s.firstTs >= 0 && now.Sub(time.UnixMilli(s.firstTs)) >= l.cfg.SegmentTime &&
		now.Sub(s.openedAt) >= l.cfg.SegmentTime
	wide := last-s.base > math.MaxUint32 || s.size+int64(len(data)) > math.MaxUint32
	if full || old || wide && s.size > 0 {
		if err := l.rollLocked(); err != nil {
			return err
		}
		s = l.active()
	}
	if err := s.append(data, refs, l.cfg.IndexIntervalBytes, l.tailBudgetLocked()); err != nil {
		l.failLocked(err)
		return l.failed
	}
	l.next = last + 1
	if l.cfg.FlushPolicy != FlushEveryAppend {
		l.queueWritebackLocked()
	}
	return nil
}

// tailBudgetLocked returns the budget the active segment's tail is kept
// in memory under, or nil when the append is to be written through.
func (l *Log) tailBudgetLocked() *tailBudget {
	if l.journal == nil || l.cfg.FlushPolicy != FlushEveryAppend || !l.tailInMemory.Load() || l.journal.broken.Load() {
		return nil
	}
	return &l.journal.tails
}

// flushTail writes the active segment's tail to its file, for a sync of
// the whole file system.
func (l *Log) flushTail() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil
	}
	t, ok := l.active().file.(*tailFile)
	if !ok {
		return nil
	}
	return t.writeOut()
}

// rollLocked seals the active segment and starts a new one at the log end.
// The sealed segment is synced with its indexes before the new one exists,
// so recovery only ever finds a torn tail in the last segment.
func (l *Log) rollLocked() error {
	s := l.active()
	if err := s.file.Sync(); err != nil {
		l.failLocked(err)
		return l.failed
	}
	if t, ok := s.file.(*tailFile); ok {
		s.file = t.File // synced: the tail is in the file, and stays empty
	}
	if err := s.writeIndexes(l.cfg.IndexIntervalBytes); err != nil {
		l.failLocked(err)
		return l.failed
	}
	n, err := createSegment(l.fs, l.dir, l.next)
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err != nil {
		l.failLocked(err)
		return l.failed
	}
	n.openedAt = l.now()
	l.segs = append(l.segs, n)
	advance(&l.synced, l.next)
	advance(&l.fileSynced, l.next)
	l.durableSeg, l.durablePos = n, 0
	return nil
}

// Roll starts a new segment now (when the active one holds data).
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if l.active().size == 0 {
		return nil
	}
	return l.rollLocked()
}

// failure returns the error that failed the log, or nil.
func (l *Log) failure() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.failed
}

func (l *Log) failLocked(err error) {
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %v", ErrStorage, err)
		l.logger.Error("log failed; refusing writes until reopened", "err", err)
	}
}

func advance(v *atomic.Int64, to int64) {
	for {
		cur := v.Load()
		if cur >= to || v.CompareAndSwap(cur, to) {
			return
		}
	}
}

// Sync returns once every offset below upTo is on stable storage. Callers
// arriving while an fsync runs wait for it and then share the next one:
// the log's own when it syncs alone, the manager's file syncer's round
// otherwise.
func (l *Log) Sync(upTo int64) error {
	if l.synced.Load() >= upTo {
		return nil
	}
	if l.syncer != nil {
		p, err := l.prepareSync()
		if err != nil {
			return err
		}
		r := l.syncer.syncMany([]*Log{l}, []syncPoint{p})[0]
		return l.finishSync(p, !r.journaled, r.err)
	}
	for {
		l.syncMu.Lock()
		if l.synced.Load() >= upTo {
			l.syncMu.Unlock()
			return nil
		}
		if done := l.syncDone; done != nil {
			l.syncMu.Unlock()
			<-done // every waiter wakes at once; the covered ones return
			continue
		}
		done := make(chan struct{})
		l.syncDone = done
		l.syncMu.Unlock()
		p, err := l.prepareSync()
		if err == nil {
			err = l.finishSync(p, true, p.file.Sync())
		}
		l.syncMu.Lock()
		l.syncDone = nil
		l.syncMu.Unlock()
		close(done)
		return err
	}
}

// syncPoint is what a sync started after prepareSync makes durable:
// offsets below target, which end at pos in the active segment seg and
// its file (sealed segments were synced when rolled).
type syncPoint struct {
	target      int64
	seg         *segment
	pos         int64
	file        vfs.File
	truncations uint64
}

func (l *Log) prepareSync() (syncPoint, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.failed != nil {
		return syncPoint{}, l.failed
	}
	if l.closed || l.closing {
		return syncPoint{}, ErrClosed
	}
	l.syncing.Add(1) // before closing is set: Close waits for it
	s := l.active()
	return syncPoint{target: l.next, seg: s, pos: s.size, file: s.file, truncations: l.truncations}, nil
}

// finishSync records the outcome of a sync prepareSync prepared; inFile
// says whether it synced the segment itself rather than a journal record.
// A truncation since the sync was prepared moves nothing: it synced what
// it left, and what the sync covered past it is gone.
func (l *Log) finishSync(p syncPoint, inFile bool, err error) error {
	defer l.syncing.Done()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if l.closed {
			return ErrClosed // deleted under the sync
		}
		if p.truncations != l.truncations && l.indexOf(p.seg) < 0 {
			// The segment it synced left the log meanwhile (StartAt, or
			// a truncation below its base), and was perhaps closed:
			// nothing the log holds depended on that sync.
			return nil
		}
		l.failLocked(err)
		return l.failed
	}
	if p.truncations != l.truncations {
		return nil
	}
	advance(&l.synced, p.target)
	if inFile {
		advance(&l.fileSynced, p.target)
	}
	l.tailInMemory.Store(!inFile)
	if !l.closed && l.active() == p.seg && (l.durableSeg != p.seg || l.durablePos < p.pos) {
		l.durableSeg, l.durablePos = p.seg, p.pos
	}
	return nil
}

// syncFile fsyncs the active segment itself, for a sealed journal file
// whose records it must no longer need.
func (l *Log) syncFile() error {
	p, err := l.prepareSync()
	if err != nil {
		return err
	}
	return l.finishSync(p, true, p.file.Sync())
}

// journalSpan is where the active segment's bytes past its known-durable
// position lie, for a journal round; false when the log cannot sync.
func (l *Log) journalSpan() (journalSpan, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed || l.failed != nil {
		return journalSpan{}, false
	}
	s := l.active()
	from := int64(0)
	if l.durableSeg == s {
		from = l.durablePos
	}
	return journalSpan{file: s.file, from: from, to: max(from, s.size)}, true
}

// fileSyncPoint is what a sync of the whole file system started now
// would make durable in the segments.
type fileSyncPoint struct {
	upTo        int64
	truncations uint64
}

func (l *Log) fileSyncPoint() fileSyncPoint {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return fileSyncPoint{upTo: l.synced.Load(), truncations: l.truncations}
}

// fileSyncedTo records that a sync of the file system made p durable.
func (l *Log) fileSyncedTo(p fileSyncPoint) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.truncations == l.truncations {
		advance(&l.fileSynced, p.upTo)
	}
}

// SyncTarget asks for Log's offsets below UpTo to be durable.
type SyncTarget struct {
	Log  *Log
	UpTo int64
}

// SyncMany makes several logs durable at once and returns each one's error.
// The logs of one manager go to its file syncer together, so that a
// thousand of them cost one sync of the file system rather than a thousand
// fsyncs; logs that sync alone sync at the same time.
func SyncMany(targets []SyncTarget) []error {
	errs := make([]error, len(targets))
	type prepared struct {
		i     int
		point syncPoint
	}
	var (
		bySyncer = map[*fileSyncer][]prepared{}
		alone    []int
	)
	for i, t := range targets {
		l := t.Log
		switch {
		case l.synced.Load() >= t.UpTo:
			continue
		case l.syncer == nil:
			alone = append(alone, i)
			continue
		}
		p, err := l.prepareSync()
		if err != nil {
			errs[i] = err
			continue
		}
		bySyncer[l.syncer] = append(bySyncer[l.syncer], prepared{i, p})
	}
	run := func(s *fileSyncer, ps []prepared) {
		logs, points := make([]*Log, len(ps)), make([]syncPoint, len(ps))
		for k, p := range ps {
			logs[k], points[k] = targets[p.i].Log, p.point
		}
		for k, r := range s.syncMany(logs, points) {
			p := ps[k]
			errs[p.i] = targets[p.i].Log.finishSync(p.point, !r.journaled, r.err)
		}
	}
	var wg sync.WaitGroup
	for _, i := range alone {
		wg.Go(func() { errs[i] = targets[i].Log.Sync(targets[i].UpTo) })
	}
	for s, ps := range bySyncer {
		if len(bySyncer) == 1 && len(alone) == 0 {
			run(s, ps) // the usual case needs no goroutine
			break
		}
		wg.Go(func() { run(s, ps) })
	}
	wg.Wait()
	return errs
}

// Flush syncs everything appended so far.
func (l *Log) Flush() error {
	l.mu.RLock()
	next := l.next
	l.mu.RUnlock()
	return l.Sync(next)
}

// SyncedOffset is the recovery point: every offset below it is durable.
func (l *Log) SyncedOffset() int64 { return l.synced.Load() }

// Section is a byte range of a segment file holding whole batches, to be sent
// as is (with sendfile when File is an *os.File; a section reaching into a
// tail in memory has the tail's file, read by copying). Size 0 means no
// data.
type Section struct {
	File vfs.File
	Pos  int64
	Size int64
	// Next is the offset after the section's last batch: where a reader
	// that got it goes on from.
	Next int64
}

// ReadAll copies the section into memory.
func (s Section) ReadAll() ([]byte, error) {
	b := make([]byte, s.Size)
	if s.Size == 0 {
		return b, nil
	}
	n, err := s.File.ReadAt(b, s.Pos)
	if n == len(b) {
		err = nil
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return b, err
}

// Read returns the batches from the one holding offset onward, in one
// segment, below maxOffset (the high watermark or last stable offset), and
// at most maxBytes of them except that the first batch is returned whole
// whatever its size. Reading at the log end, or at maxOffset, returns no
// data; outside [log start, log end] it is ErrOffsetOutOfRange.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (Section, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return Section{}, ErrClosed
	}
	if offset < l.start || offset > l.next {
		return Section{}, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, l.start, l.next)
	}
	interval := l.cfg.IndexIntervalBytes
	for i := l.segmentFor(offset); i < len(l.segs) && offset < maxOffset; i++ {
		s := l.segs[i]
		size := s.size
		pos, err := s.find(offset, size, interval)
		if err != nil {
			return Section{}, err
		}
		if pos == size {
			continue // offset falls in a gap left by compaction
		}
		end, next := size, s.next
		if maxOffset < s.next {
			if end, next, err = s.findBatch(maxOffset, size, interval); err != nil {
				return Section{}, err
			}
			if end <= pos {
				return Section{}, nil
			}
		}
		cut, cutNext, err := s.findPos(pos, pos+int64(max(maxBytes, 0)), end, interval)
		if err != nil {
			return Section{}, err
		}
		if cutNext >= 0 {
			next = cutNext
		}
		// sendfile reads the file: what it sends must be written.
		file, err := sectionFile(s.file, pos, cut)
		if err != nil {
			return Section{}, err
		}
		return Section{File: file, Pos: pos, Size: cut - pos, Next: next}, nil
	}
	return Section{}, nil
}

// segmentFor returns the index of the segment that holds offset.
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset })
	return max(i-1, 0)
}

// StartOffset is the log start offset: the earliest offset readable.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// EndOffset is the log end offset: the offset the next batch will get.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.next
}

// HighWatermark is the offset below which the replica layer has declared data
// committed; the log only stores and checkpoints it.
func (l *Log) HighWatermark() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.hw
}

// SetHighWatermark records a new high watermark (clamped to the log).
func (l *Log) SetHighWatermark(hw int64) {
	l.mu.Lock()
	l.hw = min(max(hw, l.start), l.next)
	l.mu.Unlock()
}

// Size is the log's size in bytes.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Segments returns the base offsets of the segments, oldest first.
func (l *Log) Segments() []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	bases := make([]int64, len(l.segs))
	for i, s := range l.segs {
		bases[i] = s.base
	}
	return bases
}

// Epochs returns the leader-epoch entries.
func (l *Log) Epochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]EpochEntry(nil), l.epochs.entries...)
}

// EpochEndOffset answers OffsetForLeaderEpoch for this log: the largest epoch
// at or below epoch and the offset where it ended, or -1, -1.
func (l *Log) EpochEndOffset(epoch int32) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.endOffset(epoch, l.next)
}

// Checkpoint stores the log start offset, high watermark and recovery point.
func (l *Log) Checkpoint() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.writeCheckpointLocked(false)
}

func (l *Log) writeCheckpointLocked(clean bool) error {
	// The epochs first: the recovery point may then pass their starts.
	if err := l.epochs.flush(); err != nil {
		return err
	}
	return writeCheckpoint(l.fs, l.dir, checkpoint{
		logStart: l.start, highWatermark: l.hw, recoveryPoint: l.fileSynced.Load(), cleanedEnd: l.cleaned, clean: clean,
		journalFence: l.fence.Load(),
	})
}

// Close syncs the log, writes the active segment's indexes and a clean
// checkpoint, so that the next Open needs no scan, and closes every file.
func (l *Log) Close() error {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	l.syncing.Wait() // a sync in flight still uses the files
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	err := l.failed
	if err == nil {
		s := l.active()
		err = s.file.Sync()
		if err == nil {
			l.synced.Store(l.next)
			l.fileSynced.Store(l.next)
			err = s.writeIndexes(l.cfg.IndexIntervalBytes)
		}
		if err == nil {
			err = l.writeCheckpointLocked(true)
		}
	}
	l.closed = true
	if cerr := l.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

func (l *Log) closeFiles() error {
	var first error
	for _, s := range l.segs {
		if err := s.close(); err != nil && first == nil {
			first = err
		}
	}
	for _, r := range l.retired {
		_ = r.seg.close()
	}
	l.retired = nil
	return first
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	l.closeUnsynced()
	return l.fs.RemoveAll(l.dir)
}

// closeUnsynced closes the log's files as a crash would leave them: no
// sync, no checkpoint, so that the next open recovers the log.
func (l *Log) closeUnsynced() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return l.closeFiles()
}

// retireLocked takes segments out of service: their files are removed now
// and closed after FileDeleteDelay, so sections already handed to readers
// stay readable.
func (l *Log) retireLocked(segs []*segment) error {
	now := l.now()
	var first error
	for _, s := range segs {
		if err := s.removeFiles(); err != nil && first == nil {
			first = err
		}
		l.retired = append(l.retired, retiredSegment{seg: s, closeAt: now.Add(l.cfg.FileDeleteDelay)})
	}
	l.reapLocked(now)
	return first
}

// reapLocked closes retired segments whose delay has passed.
func (l *Log) reapLocked(now time.Time) {
	kept := l.retired[:0]
	for _, r := range l.retired {
		if now.Before(r.closeAt) {
			kept = append(kept, r)
		} else {
			_ = r.seg.close()
		}
	}
	l.retired = kept
}
