package log

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// ManagerOptions configure the background work over all logs.
type ManagerOptions struct {
	FS     vfs.FS
	Logger *slog.Logger
	Now    func() time.Time
	// RetentionCheck is how often retention runs (log.retention.check.interval.ms).
	RetentionCheck time.Duration
	// CompactionCheck is how often compacted logs are cleaned.
	CompactionCheck time.Duration
	// CheckpointInterval is how often offsets are checkpointed
	// (log.flush.offset.checkpoint.interval.ms).
	CheckpointInterval time.Duration
	// SyncAllMin is how many logs waiting for durability at once are
	// made durable by one sync of the whole file system instead of an
	// fsync each (DefaultSyncAllMin when 0; negative never does).
	SyncAllMin int
}

// Manager owns the partition logs under one data directory and runs their
// background work: interval flushes, retention, compaction and checkpoints.
// Its goroutine stops in Close; logs are opened and closed through it.
type Manager struct {
	dir  string
	opts ManagerOptions

	mu   lockrank.Mutex[lockrank.LogManager]
	logs map[model.TopicPartition]*Log

	syncer *fileSyncer // nil when each log syncs alone
	device uint64      // of dir, when known: a log elsewhere syncs alone
	known  bool

	stop chan struct{}
	done chan struct{}
}

// NewManager starts the background loop over the logs in dir.
func NewManager(dir string, opts ManagerOptions) (*Manager, error) {
	if opts.FS == nil {
		opts.FS = vfs.OS
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RetentionCheck <= 0 {
		opts.RetentionCheck = 5 * time.Minute
	}
	if opts.CompactionCheck <= 0 {
		opts.CompactionCheck = 15 * time.Second
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = time.Minute
	}
	if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m := &Manager{dir: dir, opts: opts, logs: map[model.TopicPartition]*Log{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if opts.SyncAllMin >= 0 {
		if opts.SyncAllMin == 0 {
			opts.SyncAllMin = DefaultSyncAllMin
		}
		all, err := opts.FS.OpenSyncAll(dir)
		if err != nil {
			return nil, err
		}
		logger := opts.Logger.With("component", "log")
		// The journal replays what a crash left in it before any log is
		// served.
		j, err := openJournal(opts.FS, dir, logger)
		if err != nil {
			all.Close()
			return nil, fmt.Errorf("log journal: %w", err)
		}
		m.syncer = newFileSyncer(all, j, opts.SyncAllMin, logger)
		if info, err := opts.FS.Stat(dir); err == nil {
			m.device, m.known = vfs.Device(info)
		}
	}
	go m.run()
	return m, nil
}

// Stored lists the partitions that have a directory on disk.
func (m *Manager) Stored() ([]model.TopicPartition, error) {
	entries, err := m.opts.FS.ReadDir(m.dir)
	if err != nil {
		return nil, err
	}
	var tps []model.TopicPartition
	for _, e := range entries {
		if tp, err := model.ParseTopicPartition(e.Name()); e.IsDir() && err == nil {
			tps = append(tps, tp)
		}
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	return tps, nil
}

// Open opens (creating if needed) the log of tp, or returns it if open.
func (m *Manager) Open(tp model.TopicPartition, cfg Config) (*Log, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.logs[tp]; ok {
		return l, nil
	}
	if m.logs == nil {
		return nil, ErrClosed
	}
	var j *journal
	if m.syncer != nil {
		j = m.syncer.journal
	}
	l, err := Open(filepath.Join(m.dir, tp.String()), cfg, Options{FS: m.opts.FS, Logger: m.opts.Logger, Now: m.opts.Now, journal: j})
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", tp, err)
	}
	if m.sameDevice(l.dir) {
		l.syncer = m.syncer // before anyone else has l
	}
	m.logs[tp] = l
	return l, nil
}

// sameDevice says whether dir is on the file system the manager's syncer
// syncs (a partition directory may be a mount of its own).
func (m *Manager) sameDevice(dir string) bool {
	if !m.known {
		return true
	}
	info, err := m.opts.FS.Stat(dir)
	if err != nil {
		return false
	}
	dev, ok := vfs.Device(info)
	return ok && dev == m.device
}

// Get returns the open log of tp.
func (m *Manager) Get(tp model.TopicPartition) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[tp]
	return l, ok
}

// Delete closes the log of tp and removes its directory.
func (m *Manager) Delete(tp model.TopicPartition) error {
	m.mu.Lock()
	l, ok := m.logs[tp]
	delete(m.logs, tp)
	m.mu.Unlock()
	if ok {
		return l.Delete()
	}
	return m.opts.FS.RemoveAll(filepath.Join(m.dir, tp.String()))
}

// Close stops the background work and closes every log cleanly.
func (m *Manager) Close() error {
	m.mu.Lock()
	logs := m.logs
	m.logs = nil
	m.mu.Unlock()
	if logs == nil {
		return nil
	}
	close(m.stop)
	<-m.done
	errs := closeAll(logs)
	errs = append(errs, m.syncer.close(errors.Join(errs...) == nil))
	return errors.Join(errs...)
}

// closeConcurrency is how many logs close at once. A clean close is a few
// fsyncs and renames per log, mostly waiting for the disk: a thousand
// partitions closed one after another took seconds, and the file system
// commits concurrent fsyncs together.
const closeConcurrency = 16

// closeAll closes the logs, closeConcurrency at a time, and returns their
// errors.
func closeAll(logs map[model.TopicPartition]*Log) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, closeConcurrency)
	)
	for _, l := range logs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := l.Close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

func (m *Manager) snapshot() []*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	logs := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		logs = append(logs, l)
	}
	return logs
}

// run ticks at the finest interval any log needs and does what is due.
func (m *Manager) run() {
	defer close(m.done)
	const tick = 100 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	now := m.opts.Now()
	lastRetention, lastCompaction, lastCheckpoint := now, now, now
	lastFlush := map[*Log]time.Time{}
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		now := m.opts.Now()
		logs := m.snapshot()
		for _, l := range logs {
			cfg := l.Config()
			if cfg.FlushPolicy == FlushInterval && now.Sub(lastFlush[l]) >= cfg.FlushInterval {
				lastFlush[l] = now
				m.report(l, "flush", l.Flush())
			}
		}
		if now.Sub(lastRetention) >= m.opts.RetentionCheck {
			lastRetention = now
			for _, l := range logs {
				_, err := l.ApplyRetention()
				m.report(l, "retention", err)
			}
		}
		if now.Sub(lastCompaction) >= m.opts.CompactionCheck {
			lastCompaction = now
			for _, l := range logs {
				if l.Config().Compact {
					_, err := l.Compact()
					m.report(l, "compaction", err)
				}
			}
		}
		if now.Sub(lastCheckpoint) >= m.opts.CheckpointInterval {
			lastCheckpoint = now
			for _, l := range logs {
				m.report(l, "checkpoint", l.Checkpoint())
			}
			clear(lastFlush) // forget logs closed since
		}
	}
}

func (m *Manager) report(l *Log, what string, err error) {
	if err != nil && !errors.Is(err, ErrClosed) {
		m.opts.Logger.Warn("background "+what+" failed", "component", "log", "dir", l.Dir(), "err", err)
	}
}
