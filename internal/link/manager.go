package link

import (
	"context"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// Store is the cluster metadata as the links read and change it
// (cluster.Store).
type Store interface {
	Links() []cluster.Link
	Link(name string) (cluster.Link, bool)
	Topics() []cluster.Topic
	Topic(name string) (cluster.Topic, bool)
	TopicByID(id cluster.TopicID) (cluster.Topic, bool)
	SetMirrorState(topic, link, state, reason string) error
	ReserveProducerIDs(above int64) error
	MirroredProducerIDs() int64
	PromoteMirror(topic, link string, atMs, abortAfterMs int64) error
	Controller() int32
	ClusterID() string
	// AlterLink records a link's new settings (a group promoted by
	// itself, AutoPromoteGroups).
	AlterLink(l cluster.Link) error
}

// Mirrors creates and changes mirror topics: the broker checks configs
// against what it supports and reconciles after each change.
type Mirrors interface {
	CreateMirror(name string, id cluster.TopicID, partitions int32, link string, configs map[string]string) error
	GrowMirror(name string, partitions int32) error
	SetMirrorConfigs(name string, configs map[string]string) error
}

// Config is what a Manager needs.
type Config struct {
	Self    int32
	Store   Store
	Mirrors Mirrors
	// Local returns a client of this cluster (group offsets), under the
	// client id LocalClientID.
	Local  func() (*kgo.Client, error)
	Logger *slog.Logger
	// MetadataInterval is how often the source's metadata is read (and
	// topics synced); 5 s by default.
	MetadataInterval time.Duration
	// MaxWait is a fetch's wait for data at the source; 500 ms by default.
	MaxWait time.Duration
	// Ledger, when set, records the group commits copied from sources
	// in the hand-off ledger.
	Ledger func(ledger.Entry)
	// DisconnectGrace is how long after its connection closed a member
	// of a passed-through group is taken out of the source's group
	// (group.member.disconnect.grace.ms); 0 leaves it to its session.
	DisconnectGrace time.Duration
	// DisconnectGraceStatic applies it to static members too
	// (group.member.disconnect.grace.static.enable).
	DisconnectGraceStatic bool
	// ClientOpts are added to every source client (tests).
	ClientOpts []kgo.Opt
	Now        func() time.Time
}

// LocalClientID is the client id of the links' client of this cluster: its
// group requests are served here even for groups passed through, so that
// it reads and writes this cluster's offsets of them.
const LocalClientID = "strand-link-local"

// Assignment is a mirror partition this broker leads.
type Assignment struct {
	Partition   *replica.Partition
	TopicID     [16]byte
	Link        string
	LeaderEpoch int32
}

// Manager runs this broker's side of every link.
type Manager struct {
	cfg     Config
	logger  *slog.Logger
	mu      lockrank.Mutex[lockrank.Subsystem]
	runners map[string]*runner
	closed  bool
	// stopping counts the runners stopping in the background.
	stopping sync.WaitGroup
	// promoted are the promoted partitions led here (promoted.go).
	promoted map[model.TopicPartition]*promotedPart
	done     chan struct{}
	wg       sync.WaitGroup
	// reserved is the largest producer id known reserved in the metadata
	// for the mirrored producers; reserveMu serialises reservations.
	reserved  atomic.Int64
	reserveMu lockrank.Mutex[lockrank.Subsystem]
}

// New returns a Manager; Set starts its work.
func New(cfg Config) *Manager {
	if cfg.MetadataInterval <= 0 {
		cfg.MetadataInterval = 5 * time.Second
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Manager{cfg: cfg, logger: cfg.Logger.With("component", "link"), runners: map[string]*runner{}}
	m.reserved.Store(-1)
	m.done = make(chan struct{})
	m.wg.Add(1)
	go m.sweepPromoted()
	return m
}

// Set starts, changes and stops the links' runners as the metadata says,
// and hands each the mirror partitions this broker leads. The reconciler
// calls it after every metadata change.
func (m *Manager) Set(mirrors []Assignment) {
	byLink := map[string]map[model.TopicPartition]Assignment{}
	for _, a := range mirrors {
		if byLink[a.Link] == nil {
			byLink[a.Link] = map[model.TopicPartition]Assignment{}
		}
		byLink[a.Link][a.Partition.TP] = a
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	want := map[string]cluster.Link{}
	for _, l := range m.cfg.Store.Links() {
		if !l.Paused {
			want[l.Name] = l
		}
	}
	for name, r := range m.runners {
		if l, ok := want[name]; !ok || !sameSource(l, r.link) {
			// Stopped without waiting: the caller (the reconciler) may
			// be what the runner's work waits for.
			r.cancel()
			m.stopping.Add(1)
			go func() {
				defer m.stopping.Done()
				r.stop()
			}()
			delete(m.runners, name)
		}
	}
	for name, l := range want {
		r, ok := m.runners[name]
		if !ok {
			r = newRunner(m, l)
			m.runners[name] = r
		}
		r.set(l, byLink[name])
	}
}

// sameSource reports whether a runner's client still fits the link.
func sameSource(a, b cluster.Link) bool { return reflect.DeepEqual(a.Source, b.Source) }

// Close stops every runner and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	rs := maps.Clone(m.runners)
	m.runners = map[string]*runner{}
	m.mu.Unlock()
	close(m.done)
	m.wg.Wait()
	for _, r := range rs {
		r.stop()
	}
	m.stopping.Wait()
}

// runner returns the running runner of a link, or nil.
func (m *Manager) runner(name string) *runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runners[name]
}

// isController reports whether this broker is the active controller: the
// one that changes mirror topics.
func (m *Manager) isController() bool { return m.cfg.Store.Controller() == m.cfg.Self }

// runner is one link's work on this broker.
type runner struct {
	m      *Manager
	logger *slog.Logger
	cl     *kgo.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{} // a token: read the source's metadata now

	mu       lockrank.Mutex[lockrank.Worker]
	link     cluster.Link
	parts    map[model.TopicPartition]*mirrorPart // led here
	leaders  map[model.TopicPartition]sourcePartition
	topics   map[string]sourceTopic // as the source last described them
	loops    map[int32]*sourceLoop
	clientEr error // the source client could not be made
	lastErr  error // the last failure reading the source's metadata
	lastErrAt,
	lastMetadata time.Time
	sourceClusterID string
	warned          map[string]bool // warnOnce
	// pass: the members of passed-through groups connected here.
	pass passThrough
	// groupMatch is link.Groups compiled, kept with link: group requests
	// ask it (passes).
	groupMatch func(string) bool
	// throttleMu guards nextFetch: when the link's byte rate lets the next
	// fetch go.
	throttleMu lockrank.Mutex[lockrank.Leaf]
	nextFetch  time.Time
	// The last group-offset sync: what it did, its failure, when.
	offsetSync    OffsetSync
	offsetSyncErr error
	offsetSyncAt  time.Time
}

func newRunner(m *Manager, l cluster.Link) *runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{m: m, logger: m.logger.With("link", l.Name), ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1),
		link: l, parts: map[model.TopicPartition]*mirrorPart{}, leaders: map[model.TopicPartition]sourcePartition{},
		loops: map[int32]*sourceLoop{}}
	cl, err := sourceClient(l.Source, m.cfg.ClientOpts...)
	if err != nil {
		r.clientEr = err
		r.logger.Warn("the link's source client cannot be made", "err", err)
		return r
	}
	r.cl = cl
	r.wg.Add(2)
	go r.run()
	go r.syncOffsetsLoop()
	return r
}

// set takes the link's settings and the mirror partitions led here.
func (r *runner) set(l cluster.Link, led map[model.TopicPartition]Assignment) {
	r.mu.Lock()
	if r.groupMatch == nil || !slices.Equal(l.Groups.Include, r.link.Groups.Include) ||
		!slices.Equal(l.Groups.Exclude, r.link.Groups.Exclude) {
		r.groupMatch, _ = l.Groups.Compile() // validated when the link was made
	}
	r.link = l
	for tp, mp := range r.parts {
		if a, ok := led[tp]; !ok || a.Partition != mp.p || a.LeaderEpoch != mp.epoch {
			delete(r.parts, tp)
		}
	}
	for tp, a := range led {
		if _, ok := r.parts[tp]; !ok {
			r.parts[tp] = &mirrorPart{p: a.Partition, topicID: a.TopicID, epoch: a.LeaderEpoch, lastSourceEpoch: -1,
				sourceHW: -1, caughtUpAt: r.m.cfg.Now()}
		}
	}
	r.assignLocked()
	r.mu.Unlock()
}

// stop ends the runner's goroutines and closes its client.
func (r *runner) stop() {
	r.cancel()
	r.wg.Wait()
	r.pass.closeAll()
	if r.cl != nil {
		r.cl.Close()
	}
}

// current returns the link's settings as last set.
func (r *runner) current() cluster.Link {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.link
}

// refresh asks for the source's metadata to be read now.
func (r *runner) refresh() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run reads the source's metadata every interval (or when asked), syncs
// the mirror topics on the controller and moves partitions between the
// fetch loops.
func (r *runner) run() {
	defer r.wg.Done()
	t := time.NewTicker(r.m.cfg.MetadataInterval)
	defer t.Stop()
	for {
		r.readMetadata()
		r.autoPromote()
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
	}
}

func (r *runner) readMetadata() {
	ctx, cancel := context.WithTimeout(r.ctx, 15*time.Second)
	defer cancel()
	clusterID, topics, err := sourceMetadata(ctx, r.cl)
	now := r.m.cfg.Now()
	r.mu.Lock()
	if err != nil {
		if r.ctx.Err() == nil && (r.lastErr == nil || r.lastErr.Error() != err.Error()) {
			r.logger.Warn("the link's source does not answer", "err", err)
		}
		r.lastErr, r.lastErrAt = err, now
		r.mu.Unlock()
		return
	}
	if r.lastErr != nil {
		r.logger.Info("the link's source answers again")
	}
	r.lastErr, r.lastMetadata, r.sourceClusterID = nil, now, clusterID
	r.topics = topics
	clear(r.leaders)
	for _, t := range topics {
		for i, p := range t.partitions {
			r.leaders[model.TopicPartition{Topic: t.name, Partition: int32(i)}] = p
		}
	}
	r.assignLocked()
	link := r.link
	r.mu.Unlock()
	if clusterID != "" && clusterID == r.m.cfg.Store.ClusterID() {
		r.logger.Warn("the link's source is this cluster: nothing is mirrored")
		return
	}
	if r.m.isController() {
		r.syncTopics(link, topics)
		if link.SyncACLs {
			if n, err := r.syncACLs(link); err != nil {
				r.warnOnce("acls:"+err.Error(), "the source's ACLs cannot be copied", "err", err)
			} else if n > 0 {
				r.logger.Info("copied the source's ACLs", "acls", n)
			}
		}
	}
}

// assignLocked gives each partition led here to the loop of its source
// leader, starting and stopping loops. r.mu is held.
func (r *runner) assignLocked() {
	if r.cl == nil {
		return
	}
	byLeader := map[int32][]*mirrorPart{}
	for tp, mp := range r.parts {
		sp, ok := r.leaders[tp]
		if !ok || sp.leader < 0 {
			continue
		}
		mp.sourceEpoch.Store(sp.leaderEpoch)
		byLeader[sp.leader] = append(byLeader[sp.leader], mp)
	}
	for node, l := range r.loops {
		if _, ok := byLeader[node]; !ok {
			l.cancel()
			delete(r.loops, node)
		}
	}
	for node, parts := range byLeader {
		if l, ok := r.loops[node]; ok {
			l.setParts(parts)
			continue
		}
		l := newSourceLoop(r, node)
		l.setParts(parts) // before the loop starts: it reads them at once
		r.loops[node] = l
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			l.run()
		}()
	}
}
