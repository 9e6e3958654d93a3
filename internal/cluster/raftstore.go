package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/strandlog/strand/internal/cluster/raft"
	"github.com/strandlog/strand/internal/log/vfs"
)

// RaftConfig places a broker in a cluster whose metadata log is a Raft log.
type RaftConfig struct {
	NodeID int32
	// Voters are the metadata quorum's voters and their controller
	// listeners. A node not among them joins as a learner.
	Voters map[int32]string
	// Listen is this node's controller listener.
	Listen string
	// TLS and DialTLS, when set, carry the quorum's traffic over TLS: the
	// listener serves TLS with TLS, and connections to the other members
	// are made with DialTLS.
	TLS, DialTLS *tls.Config
	// Dir is the data directory; the metadata log lives in its
	// __cluster_metadata-0 directory, as Kafka's does.
	Dir string
	// ClusterID, when set, is the id the cluster must have.
	ClusterID string
	// SessionTimeout is broker.session.timeout.ms: the active controller
	// fences a broker it has not heard from for this long. Negative: no
	// liveness decisions at all (tests that fence by hand).
	SessionTimeout time.Duration
	// LeaderRebalanceInterval is leader.imbalance.check.interval: how often
	// the active controller gives partitions back to their preferred
	// replicas (auto.leader.rebalance.enable); zero or negative: never.
	LeaderRebalanceInterval time.Duration
	// ProposeTimeout bounds each change: past it the change fails with
	// ErrNotAvailable (default 10 s).
	ProposeTimeout time.Duration
	// TickInterval is Raft's tick (default 100 ms; elections after 10).
	TickInterval time.Duration

	// FS and Transport are for tests: an in-memory file system, a
	// simulated network. By default the OS and TCP on Listen.
	FS        vfs.FS
	Transport raft.Transport
	Logger    *slog.Logger
}

// MetadataDir is where a data directory keeps the metadata log.
const MetadataDir = "__cluster_metadata-0"

// raftID maps a node id (0 and up, as Kafka's) to a Raft id (never 0).
func raftID(node int32) uint64 { return uint64(node) + 1 }

func nodeID(id uint64) int32 { return int32(id - 1) }

// raftBackend orders records through the metadata quorum.
type raftBackend struct {
	s       *Store
	node    *raft.Node
	timeout time.Duration
	ctl     *controller
}

// OpenRaft starts this broker's member of the metadata quorum: it restores
// the image from the local log (so reads answer at once, from what this
// broker has), then follows the quorum. Changes wait for the quorum.
func OpenRaft(cfg RaftConfig) (*Store, error) {
	if cfg.ProposeTimeout <= 0 {
		cfg.ProposeTimeout = 10 * time.Second
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 9 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	logger := cfg.Logger.With("component", "cluster")
	fsys := cfg.FS
	if fsys == nil {
		fsys = vfs.OS
	}
	s := newStore(cfg.NodeID)
	be := &raftBackend{s: s, timeout: cfg.ProposeTimeout}
	s.be = be
	voters := make([]uint64, 0, len(cfg.Voters))
	peers := make(map[uint64]string, len(cfg.Voters))
	for id, addr := range cfg.Voters {
		voters = append(voters, raftID(id))
		peers[raftID(id)] = addr
	}
	_, voter := cfg.Voters[cfg.NodeID]
	tr, addr := cfg.Transport, cfg.Listen
	if tr == nil {
		tcp, err := raft.NewTCPTransport(raft.TCPConfig{Listen: cfg.Listen, TLS: cfg.TLS, DialTLS: cfg.DialTLS, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("controller listener: %w", err) // the error names the address
		}
		tr, addr = tcp, tcp.Addr() // the port taken, for a listener on port 0
	}
	node, err := raft.Start(raft.Config{
		NodeID:       raftID(cfg.NodeID),
		Voters:       voters,
		Join:         !voter,
		Addr:         addr,
		Peers:        peers,
		FS:           fsys,
		Dir:          filepath.Join(cfg.Dir, MetadataDir),
		SM:           stateMachine{s},
		Transport:    tr,
		Incarnation:  s.incarnation,
		TickInterval: cfg.TickInterval,
		Logger:       cfg.Logger,
		LogID:        func(id uint64) int64 { return int64(nodeID(id)) },
	})
	if err != nil {
		return nil, fmt.Errorf("metadata log: %w", err)
	}
	be.node = node
	if id := s.ClusterID(); id != "" && cfg.ClusterID != "" && id != cfg.ClusterID {
		node.Close()
		return nil, fmt.Errorf("data directory %s belongs to cluster %s, not %s", cfg.Dir, id, cfg.ClusterID)
	}
	if cfg.SessionTimeout > 0 {
		be.ctl = startController(s, be, cfg.SessionTimeout, cfg.LeaderRebalanceInterval, logger)
	}
	return s, nil
}

// stateMachine is the Store as the Raft log drives it.
type stateMachine struct{ s *Store }

func (m stateMachine) Apply(index uint64, data []byte) any {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	return m.s.applyLocked(index, data)
}

func (m stateMachine) Snapshot() ([]byte, error) { return m.s.snapshot() }

func (m stateMachine) Restore(_ uint64, data []byte) error { return m.s.restore(data) }

func (r *raftBackend) propose(data []byte) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	v, err := r.node.Propose(ctx, data)
	if err != nil {
		if raft.Retriable(err) || errors.Is(err, raft.ErrStopped) || errors.Is(err, context.DeadlineExceeded) {
			return result{}, fmt.Errorf("%w: %v", ErrNotAvailable, err)
		}
		return result{}, err
	}
	res, _ := v.(result)
	return res, nil
}

func (r *raftBackend) controller() int32 {
	if id := r.node.Leader(); id != 0 {
		return nodeID(id)
	}
	return -1
}

func (r *raftBackend) contact() time.Time { return r.node.LeaderContact() }

func (r *raftBackend) stopped() <-chan struct{} { return r.node.Done() }

func (r *raftBackend) failure() error { return r.node.Err() }

func (r *raftBackend) close() error {
	if r.ctl != nil {
		r.ctl.stop()
	}
	return r.node.Close()
}

// EnsureClusterID gives a new cluster its id (want, or a random one when
// empty) and returns the cluster's id: the first proposal applied wins.
func (s *Store) EnsureClusterID(want string) (string, error) {
	if id := s.ClusterID(); id != "" {
		return id, nil
	}
	if want == "" {
		var id TopicID
		rand.Read(id[:])
		want = id.String()
	}
	v, err := s.propose(kindClusterID, clusterIDRecord{ID: want})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

// CatchUp returns once this broker's image holds everything the metadata
// log committed before the call: it appends a record that changes nothing
// (the cluster id, as it is) and waits until it applies here.
func (s *Store) CatchUp() error {
	_, err := s.propose(kindClusterID, clusterIDRecord{ID: s.ClusterID()})
	return err
}

// QuorumStatus is the metadata quorum as this node sees it (Kafka's
// DescribeQuorum).
type QuorumStatus struct {
	Leader    int32 // -1 when none
	Epoch     int64 // the Raft term
	HighWater int64 // the commit index
	Voters    []ReplicaStatus
	Observers []ReplicaStatus
}

// ReplicaStatus is one member's progress, as far as the leader knows it.
type ReplicaStatus struct {
	NodeID      int32
	Addr        string // its controller listener
	LogEnd      int64  // the last index known to be stored there, -1 when unknown
	LastContact time.Time
}

// Quorum returns the metadata quorum's status; false on a single node.
func (s *Store) Quorum() (QuorumStatus, bool) {
	r, ok := s.be.(*raftBackend)
	if !ok {
		return QuorumStatus{}, false
	}
	st := r.node.Status()
	q := QuorumStatus{Leader: -1, Epoch: int64(st.Term), HighWater: int64(st.Commit)}
	if st.Leader != 0 {
		q.Leader = nodeID(st.Leader)
	}
	self := ReplicaStatus{NodeID: nodeID(st.ID), LogEnd: int64(st.Applied), LastContact: time.Now()}
	member := func(id uint64) ReplicaStatus {
		rs := self
		if id != st.ID {
			rs = peerStatus(id, st.Peers)
		}
		rs.Addr = st.Members[id]
		return rs
	}
	for _, id := range st.Voters {
		q.Voters = append(q.Voters, member(id))
	}
	for _, id := range st.Learners {
		q.Observers = append(q.Observers, member(id))
	}
	return q, true
}

// peerStatus is a member's progress from the leader's view; unknown (-1)
// on other nodes.
func peerStatus(id uint64, peers map[uint64]raft.PeerStatus) ReplicaStatus {
	rs := ReplicaStatus{NodeID: nodeID(id), LogEnd: -1}
	if ps, ok := peers[id]; ok {
		rs.LogEnd, rs.LastContact = int64(ps.Match), ps.LastContact
	}
	return rs
}
