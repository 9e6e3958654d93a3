package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/internal/log/vfs"
)

// StateMachine is what the replicated log drives. All three methods are
// called from the node's loop goroutine, one at a time, never concurrently
// with each other.
type StateMachine interface {
	// Apply applies one committed entry's data, in log order, exactly once
	// per index across restarts: at start the node restores the newest
	// snapshot and replays the entries after it. It must be deterministic.
	// Its result goes to the Propose call on this node that proposed the
	// entry, if any.
	Apply(index uint64, data []byte) any
	// Snapshot returns the state as of the last applied entry.
	Snapshot() ([]byte, error)
	// Restore replaces the state with a snapshot's: at Start (when one is
	// stored), or when the leader sends one. index is the last entry the
	// snapshot covers.
	Restore(index uint64, data []byte) error
}

// Config configures a Node.
type Config struct {
	// NodeID identifies the node for all time; never reused, never zero.
	NodeID uint64
	// Voters is the initial voter set. It is used only to bootstrap an
	// empty log, and every voter must be started with the same Voters and
	// the same Peers addresses for them (they become the first entries).
	Voters []uint64
	// Join makes a node that is not a voter join an existing quorum as a
	// learner: until its log shows it as a member, it asks the voters in
	// Peers to add it, with Addr as its address.
	Join bool
	// Addr is this node's own transport address, told to the others when
	// joining. A voter's own address may come from Peers instead.
	Addr string
	// Peers maps voters (and any other node known up front) to their
	// transport addresses. Addresses learned from the log are used for the
	// others; an address here wins over the log's.
	Peers map[uint64]string
	// FS and Dir locate the storage: vfs.OS in production, vfs.NewMem in
	// tests.
	FS  vfs.FS
	Dir string
	// SM is the state machine. It must be empty at Start.
	SM StateMachine
	// Transport carries messages; the node owns it from Start on.
	Transport Transport
	// Incarnation names this process of the node (a random id per start),
	// so that peers tell a restarted or duplicate process from the one
	// before; it is reported in their PeerStatus.Heard. Optional.
	Incarnation string

	TickInterval   time.Duration // default 100ms
	ElectionTicks  int           // ticks without a leader before an election, default 10
	HeartbeatTicks int           // default 1
	// SnapshotEntries is how many applied entries pass between snapshots,
	// after each of which the log before it is compacted. Default 10000.
	SnapshotEntries uint64
	// SegmentBytes is the size at which a WAL segment is sealed and a new
	// one started. Default 64 MiB.
	SegmentBytes int64
	// MaxSizePerMsg bounds the entries in one append message. Default 1 MiB.
	MaxSizePerMsg uint64
	Logger        *slog.Logger // slog.Default() when nil
	// LogID is the id that log lines name a member by, given its Raft id:
	// the id the rest of the system knows it by (package cluster's node
	// ids, one less than their Raft ids). The Raft id itself when nil.
	LogID func(id uint64) int64
}

func (c *Config) setDefaults() error {
	switch {
	case c.NodeID == 0:
		return errors.New("cluster/raft: NodeID must not be zero")
	case c.FS == nil || c.Dir == "":
		return errors.New("cluster/raft: FS and Dir are required")
	case c.SM == nil:
		return errors.New("cluster/raft: SM is required")
	case c.Transport == nil:
		return errors.New("cluster/raft: Transport is required")
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = 1
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.ElectionTicks <= c.HeartbeatTicks {
		return errors.New("cluster/raft: ElectionTicks must exceed HeartbeatTicks")
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 10000
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 64 << 20
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LogID == nil {
		c.LogID = func(id uint64) int64 { return int64(id) }
	}
	return nil
}

// Node is one member of the metadata quorum. Its methods are safe for
// concurrent use.
type Node struct {
	cfg Config
	id  uint64
	log *slog.Logger

	// Owned by the loop goroutine (run) once Start has returned; Start
	// sets them up before it starts the loop.
	rn        *etcdraft.RawNode
	store     *diskStorage
	confState *pb.ConfState
	members   map[uint64]string               // addresses learned from the log and snapshots
	contact   map[uint64]time.Time            // when each peer was last heard from
	heard     map[uint64]map[string]time.Time // the same, per incarnation of each peer
	applied   uint64
	snapIndex uint64
	joinTicks int
	lastLead  uint64
	// membersChanged says a membership change applied since the last
	// snapshot.
	membersChanged bool

	propc   chan *proposal
	recvc   chan inbound
	statusc chan chan Status
	reports reportQueue
	stopc   chan struct{} // closed by Close
	donec   chan struct{} // closed when the loop has exited
	// loopErr and finalStatus are written by the loop before it closes
	// donec, and read only after.
	loopErr     error
	finalStatus Status
	// stepErr is set by the loop when Raft refused a message by panicking:
	// the loop stops with it.
	stepErr error

	leader atomic.Uint64
	// leaderContact is when, in unix nanoseconds, this node last knew it
	// was in touch with the quorum (LeaderContact). Written by the loop.
	leaderContact atomic.Int64
	leaderMu      sync.Mutex
	leaderCh      chan struct{} // closed and replaced on each leader change; leaderMu

	wait   waitTable
	reqSeq atomic.Uint64

	goroutines sync.WaitGroup // every goroutine of the node and its transport
	stopOnce   sync.Once
	closeOnce  sync.Once
	closeErr   error
}

// Start opens the storage in cfg.Dir (refusing damaged storage with a
// *CorruptError naming the file), restores the newest snapshot into cfg.SM,
// bootstraps an empty log with cfg.Voters unless cfg.Join, starts the
// transport and the loop, which then replays the committed entries after the
// snapshot. When Start fails, it has closed cfg.Transport.
func Start(cfg Config) (*Node, error) {
	n, err := start(cfg)
	if err != nil {
		if cfg.Transport != nil {
			_ = cfg.Transport.close()
		}
		return nil, err
	}
	return n, nil
}

func start(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "raft", "node_id", cfg.LogID(cfg.NodeID))
	store, err := openStorage(cfg.FS, cfg.Dir, cfg.SegmentBytes, log)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:       cfg,
		id:        cfg.NodeID,
		log:       log,
		store:     store,
		confState: &pb.ConfState{},
		members:   map[uint64]string{},
		contact:   map[uint64]time.Time{},
		heard:     map[uint64]map[string]time.Time{},
		propc:     make(chan *proposal),
		recvc:     make(chan inbound, 256),
		statusc:   make(chan chan Status),
		reports:   newReportQueue(),
		stopc:     make(chan struct{}),
		donec:     make(chan struct{}),
		leaderCh:  make(chan struct{}),
		wait:      waitTable{m: map[uint64]chan any{}},
	}
	// Request ids start at a random point, so that those of an earlier run
	// of this node, still in the log, do not wake this run's proposers.
	n.reqSeq.Store(rand.Uint64() >> 1)

	fail := func(err error) (*Node, error) {
		_ = store.close()
		return nil, err
	}
	snap, err := store.ms.Snapshot()
	if err != nil {
		return fail(err)
	}
	if !etcdraft.IsEmptySnap(snap) {
		if err := n.restore(snap); err != nil {
			return fail(err)
		}
	}
	bootstrap := store.empty() && !cfg.Join
	if bootstrap {
		if !slices.Contains(cfg.Voters, cfg.NodeID) {
			return fail(fmt.Errorf("cluster/raft: node %d is not in Voters %v and does not Join", cfg.NodeID, cfg.Voters))
		}
		for _, id := range cfg.Voters {
			if id == 0 || id != cfg.NodeID && cfg.Peers[id] == "" {
				return fail(fmt.Errorf("cluster/raft: voter %d has no address in Peers", id))
			}
		}
	}
	if cfg.Join && len(cfg.Peers) == 0 {
		return fail(errors.New("cluster/raft: a joining node needs the voters' addresses in Peers"))
	}
	rn, err := etcdraft.NewRawNode(&etcdraft.Config{
		ID:                cfg.NodeID,
		ElectionTick:      cfg.ElectionTicks,
		HeartbeatTick:     cfg.HeartbeatTicks,
		Storage:           store.ms,
		Applied:           n.applied,
		MaxSizePerMsg:     cfg.MaxSizePerMsg,
		MaxInflightMsgs:   256,
		CheckQuorum:       true,
		PreVote:           true,
		StepDownOnRemoval: true,
		Logger:            raftLogger{log, cfg.LogID},
	})
	if err != nil {
		return fail(err)
	}
	n.rn = rn
	if bootstrap {
		peers := make([]etcdraft.Peer, 0, len(cfg.Voters))
		for _, id := range slices.Sorted(slices.Values(cfg.Voters)) {
			addr := cfg.Peers[id]
			if addr == "" && id == cfg.NodeID {
				addr = cfg.Addr
			}
			peers = append(peers, etcdraft.Peer{ID: id, Context: changeContext{Addr: addr}.encode()})
		}
		peers = slices.CompactFunc(peers, func(a, b etcdraft.Peer) bool { return a.ID == b.ID })
		if err := rn.Bootstrap(peers); err != nil {
			return fail(err)
		}
		log.Info("bootstrapping a new quorum", "voters", logIDs(cfg.LogID, cfg.Voters))
	}
	if err := cfg.Transport.start(n.id, cfg.Incarnation, (*nodeHandler)(n), n.spawn); err != nil {
		return fail(err)
	}
	for id, addr := range n.routes() {
		cfg.Transport.addPeer(id, addr)
	}
	n.spawn(n.run)
	return n, nil
}

// spawn is the one way the node and its transport start goroutines, so that
// Close can wait for every one of them.
func (n *Node) spawn(f func()) { n.goroutines.Go(f) }

// routes returns the address of every other member: Peers, then what the
// log taught for the others.
func (n *Node) routes() map[uint64]string {
	r := maps.Clone(n.members)
	maps.Copy(r, n.cfg.Peers)
	delete(r, n.id)
	return r
}

// Propose replicates data and returns what the state machine's Apply
// returned for it, once it applied on this node (the leader may be
// elsewhere: followers and learners forward to it). It never waits past
// ctx. A retriable error (see Retriable) means no leader was known
// (ErrNoLeader: nothing proposed), Raft refused it (ErrDropped: nothing
// proposed) or it did not apply in time (ErrTimeout: it may still apply,
// so data should be safe to apply twice, or carry its own check).
//
// Each proposal carries this node's id and a request id unique to this run,
// and only the entry carrying both wakes the proposer: an entry lost to a
// leader change never hands back another entry's result.
//
// A leader change while the proposal waits ends the wait early with
// ErrTimeout, as etcd does: the proposal may have been lost with the old
// leader, and waiting out ctx would hold the caller for nothing.
func (n *Node) Propose(ctx context.Context, data []byte) (any, error) {
	req := n.reqSeq.Add(1)
	ch := n.wait.register(req)
	defer n.wait.cancel(req)
	changed, err := n.submit(ctx, &proposal{data: encodeProposal(n.id, req, data)})
	if err != nil {
		return nil, err
	}
	return n.await(ctx, ch, changed)
}

func (n *Node) await(ctx context.Context, ch chan any, leaderChanged <-chan struct{}) (any, error) {
	select {
	case r := <-ch:
		return r, nil
	case <-leaderChanged:
		// Applied meanwhile, or stopping: those answers come first.
		select {
		case r := <-ch:
			return r, nil
		case <-n.donec:
			return nil, n.stoppedErr()
		default:
		}
		return nil, fmt.Errorf("%w: the leader changed while it waited", ErrTimeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
	case <-n.donec:
		return nil, n.stoppedErr()
	}
}

// submit hands a proposal to the loop, waiting for a leader first. It
// returns the channel that closes when the leader it was handed to changes.
func (n *Node) submit(ctx context.Context, p *proposal) (<-chan struct{}, error) {
	for {
		changed := n.leaderChanged()
		if n.leader.Load() == 0 {
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
			case <-n.donec:
				return nil, n.stoppedErr()
			}
		}
		p.errc = make(chan error, 1)
		select {
		case n.propc <- p:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-n.donec:
			return nil, n.stoppedErr()
		}
		select {
		case err := <-p.errc:
			if errors.Is(err, errNoLeaderYet) {
				continue // the leader was lost meanwhile: wait for the next
			}
			return changed, err
		case <-n.donec:
			return nil, n.stoppedErr()
		}
	}
}

// Done is closed when the node has stopped: by Close, or on its own after
// an error that Err then returns.
func (n *Node) Done() <-chan struct{} { return n.donec }

// Err returns the error that stopped the node on its own, once Done is
// closed; nil otherwise.
func (n *Node) Err() error {
	select {
	case <-n.donec:
		return n.loopErr
	default:
		return nil
	}
}

func (n *Node) stoppedErr() error {
	if n.loopErr != nil {
		return fmt.Errorf("%w: %w", ErrStopped, n.loopErr)
	}
	return ErrStopped
}

func (n *Node) leaderChanged() <-chan struct{} {
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	return n.leaderCh
}

// AddLearner proposes adding node id, reachable at addr, as a learner (it
// receives the log but does not vote), and waits until the change applied
// on this node. A joining node's request (Config.Join) ends in the same
// change, proposed by the leader.
func (n *Node) AddLearner(ctx context.Context, id uint64, addr string) error {
	return n.changeMembership(ctx, pb.ConfChangeAddLearnerNode, id, addr)
}

// PromoteVoter proposes making learner id a voter. Promote a learner only
// once it has caught up (its Match in Status is near the commit index), or
// the quorum may stall while it catches up.
func (n *Node) PromoteVoter(ctx context.Context, id uint64) error {
	if st := n.Status(); !slices.Contains(st.Learners, id) && !slices.Contains(st.Voters, id) {
		return fmt.Errorf("%w: node %d is not a learner", ErrMembership, id)
	}
	return n.changeMembership(ctx, pb.ConfChangeAddNode, id, "")
}

// RemoveMember proposes removing voter or learner id.
func (n *Node) RemoveMember(ctx context.Context, id uint64) error {
	return n.changeMembership(ctx, pb.ConfChangeRemoveNode, id, "")
}

func (n *Node) changeMembership(ctx context.Context, typ pb.ConfChangeType, id uint64, addr string) error {
	if id == 0 {
		return fmt.Errorf("%w: node id 0", ErrMembership)
	}
	req := n.reqSeq.Add(1)
	ch := n.wait.register(req)
	defer n.wait.cancel(req)
	cc := &pb.ConfChange{
		Type:    typ.Enum(),
		NodeId:  new(id),
		Context: changeContext{Addr: addr, Proposer: n.id, Req: req}.encode(),
	}
	changed, err := n.submit(ctx, &proposal{cc: cc})
	if err != nil {
		return err
	}
	r, err := n.await(ctx, ch, changed)
	if err != nil {
		return err
	}
	if err, ok := r.(error); ok {
		return err
	}
	return nil
}

// Leader returns the leader's id as this node last knew it, 0 if none.
func (n *Node) Leader() uint64 { return n.leader.Load() }

// LeaderContact is when this node last knew itself in touch with the
// quorum: while it leads (check-quorum makes a leader cut off from the
// others step down within an election timeout), or when it last heard
// from its leader. Zero before either. Between the loss of a leader and
// the election of the next, up to twice the election timeout passes
// without contact.
func (n *Node) LeaderContact() time.Time {
	if ns := n.leaderContact.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Status describes the node and, on the leader, its peers' progress: what
// Kafka's DescribeQuorum reports.
type Status struct {
	ID            uint64
	Role          string // "leader", "follower", "candidate" or "pre-candidate"
	Term          uint64
	Vote          uint64
	Leader        uint64
	Commit        uint64
	Applied       uint64
	SnapshotIndex uint64 // the newest snapshot's index
	Voters        []uint64
	Learners      []uint64
	Members       map[uint64]string // every member's address, as known here
	// Peers is set on the leader only: every other voter and learner.
	Peers map[uint64]PeerStatus
}

// PeerStatus is the leader's view of one peer.
type PeerStatus struct {
	Match       uint64    // the last index known to be in the peer's log
	Learner     bool      // the peer does not vote
	Active      bool      // heard from within the last election timeout
	LastContact time.Time // the last message received from it; zero if none
	// Heard is when each of the peer's recent incarnations (processes)
	// was last heard from, when they name themselves.
	Heard map[string]time.Time
	// Refused is when connections to the peer began to be refused (no
	// process listens at its address: it died, or it is starting again);
	// zero while they are not.
	Refused time.Time
}

// Status returns the node's status; after Close, its last one.
func (n *Node) Status() Status {
	ch := make(chan Status, 1)
	select {
	case n.statusc <- ch:
	case <-n.donec:
		return n.finalStatus
	}
	select {
	case s := <-ch:
		return s
	case <-n.donec:
		return n.finalStatus
	}
}

// Close stops the loop and every goroutine of the node and its transport,
// then syncs and closes the storage. It returns the error that stopped the
// loop, if one did. It is safe to call more than once.
func (n *Node) Close() error {
	n.stopOnce.Do(func() { close(n.stopc) })
	<-n.donec
	n.closeOnce.Do(func() {
		terr := n.cfg.Transport.close()
		n.goroutines.Wait()
		serr := n.store.close()
		n.closeErr = errors.Join(n.loopErr, terr, serr)
	})
	return n.closeErr
}

// proposal is a request to the loop: data for a normal entry, or a
// membership change. errc gets whether Raft took it.
type proposal struct {
	data []byte
	cc   *pb.ConfChange
	errc chan error
}

// errNoLeaderYet tells submit that Raft had no leader to take a proposal.
var errNoLeaderYet = errors.New("no leader yet")

// waitTable is etcd's wait pattern: a proposer registers its request id,
// the loop triggers it with the result when the entry applies.
type waitTable struct {
	mu sync.Mutex
	m  map[uint64]chan any
}

func (w *waitTable) register(id uint64) chan any {
	ch := make(chan any, 1)
	w.mu.Lock()
	w.m[id] = ch
	w.mu.Unlock()
	return ch
}

func (w *waitTable) cancel(id uint64) {
	w.mu.Lock()
	delete(w.m, id)
	w.mu.Unlock()
}

func (w *waitTable) trigger(id uint64, result any) {
	w.mu.Lock()
	ch := w.m[id]
	delete(w.m, id)
	w.mu.Unlock()
	if ch != nil {
		ch <- result // buffered: never blocks
	}
}

// reportQueue holds the transport's reports until the loop hands them to
// Raft. Adding never blocks, since the transport may report from send,
// which runs on the loop.
type reportQueue struct {
	mu          sync.Mutex
	unreachable map[uint64]struct{}
	// refusedSince is when connections to each peer began to be refused,
	// for those refused since the last one made.
	refusedSince map[uint64]time.Time
	snaps        []snapReport
	notify       chan struct{}
}

type snapReport struct {
	id     uint64
	failed bool
}

func newReportQueue() reportQueue {
	return reportQueue{unreachable: map[uint64]struct{}{}, refusedSince: map[uint64]time.Time{}, notify: make(chan struct{}, 1)}
}

func (q *reportQueue) signal() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *reportQueue) take() (unreachable map[uint64]struct{}, snaps []snapReport) {
	q.mu.Lock()
	defer q.mu.Unlock()
	unreachable, snaps = q.unreachable, q.snaps
	q.unreachable, q.snaps = map[uint64]struct{}{}, nil
	return unreachable, snaps
}

// nodeHandler is the Node as its transport's handler, keeping those methods
// off the Node's exported surface.
type nodeHandler Node

// inbound is a received message and its sender's incarnation.
type inbound struct {
	m           *pb.Message
	incarnation string
}

func (h *nodeHandler) logID(id uint64) int64 { return h.cfg.LogID(id) }

func (h *nodeHandler) receive(m *pb.Message, incarnation string) {
	select {
	case h.recvc <- inbound{m, incarnation}:
	case <-h.donec:
	}
}

func (h *nodeHandler) unreachable(id uint64) {
	h.reports.mu.Lock()
	h.reports.unreachable[id] = struct{}{}
	h.reports.mu.Unlock()
	h.reports.signal()
}

func (h *nodeHandler) refused(id uint64, refused bool) {
	h.reports.mu.Lock()
	defer h.reports.mu.Unlock()
	switch _, was := h.reports.refusedSince[id]; {
	case refused && !was:
		h.reports.refusedSince[id] = time.Now()
	case !refused && was:
		delete(h.reports.refusedSince, id)
	}
}

// refusedSince is when connections to peer id began to be refused; zero
// while they are not.
func (n *Node) refusedSince(id uint64) time.Time {
	n.reports.mu.Lock()
	defer n.reports.mu.Unlock()
	return n.reports.refusedSince[id]
}

func (h *nodeHandler) snapshotStatus(id uint64, failed bool) {
	h.reports.mu.Lock()
	h.reports.snaps = append(h.reports.snaps, snapReport{id, failed})
	h.reports.mu.Unlock()
	h.reports.signal()
}
