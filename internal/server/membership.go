package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/protocol"
)

// openMetadata opens the cluster metadata: a file for a single node (which
// registers itself at once, at the configured address, so that topics can
// be placed before Start), the metadata quorum's Raft log in a cluster,
// its traffic over TLS when quorumTLS and dialTLS are given.
func openMetadata(cfg config.Broker, quorumTLS, dialTLS *tls.Config, logger *slog.Logger) (*cluster.Store, error) {
	voters, err := cfg.Voters()
	if err != nil {
		return nil, err
	}
	meta, err := readMetaProperties(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if meta.nodeID >= 0 && meta.nodeID != cfg.NodeID {
		return nil, fmt.Errorf("data directory %s belongs to node %d, not %d", cfg.DataDir, meta.nodeID, cfg.NodeID)
	}
	if meta.clusterID != "" && cfg.ClusterID != "" && meta.clusterID != cfg.ClusterID {
		return nil, fmt.Errorf("data directory %s belongs to cluster %s, not %s", cfg.DataDir, meta.clusterID, cfg.ClusterID)
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = meta.clusterID // a restart checks the quorum against the id it had
	}
	if len(voters) > 0 {
		rebalance := cfg.LeaderImbalanceCheck
		if !cfg.AutoLeaderRebalance {
			rebalance = 0
		}
		return cluster.OpenRaft(cluster.RaftConfig{NodeID: cfg.NodeID, Voters: voters, Listen: cfg.ControllerListen,
			TLS: quorumTLS, DialTLS: dialTLS,
			Dir: cfg.DataDir, ClusterID: cfg.ClusterID, SessionTimeout: cfg.BrokerSessionTimeout,
			LeaderRebalanceInterval: rebalance, Logger: logger})
	}
	s, err := cluster.OpenFile(cfg.DataDir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	if cfg.ClusterID != "" && s.ClusterID() != cfg.ClusterID {
		return nil, fmt.Errorf("data directory %s belongs to cluster %s, not %s", cfg.DataDir, s.ClusterID(), cfg.ClusterID)
	}
	if err := writeMetaProperties(cfg.DataDir, s.ClusterID(), cfg.NodeID); err != nil {
		return nil, err
	}
	host, port, err := cfg.AdvertisedAddr()
	if err != nil {
		host, port = "127.0.0.1", 0 // Start registers the address it gets
	}
	if _, err := s.RegisterBroker(host, port, cfg.Rack, true); err != nil {
		return nil, fmt.Errorf("registering broker %d: %w", cfg.NodeID, err)
	}
	// A single node's flags finalize its features at every start.
	if err := s.SetFeatures(featureLevels(cfg), false); err != nil {
		return nil, err
	}
	return s, nil
}

// clustered reports whether the metadata lives in a quorum.
func (s *Server) clustered() bool {
	_, ok := s.cluster.Quorum()
	return ok
}

// register joins this broker to the cluster once the metadata quorum
// answers: it gives a new cluster its id (or checks the one it must have)
// and registers this process at its address, fenced until the active
// controller sees it caught up. It retries until it succeeds (true) or the
// server stops or belongs elsewhere (false).
func (s *Server) register(host string, port int32, endpoints []cluster.Endpoint) bool {
	const backoff = 200 * time.Millisecond
	var warned time.Time
	for {
		err := s.registerOnce(host, port, endpoints)
		if err == nil {
			return true
		}
		switch {
		case errors.Is(err, errWrongCluster):
			s.logger.Error("not joining the cluster", "err", err)
			s.fail(err)
			return false
		case errors.Is(err, cluster.ErrDuplicateBrokerRegistration):
			// Kafka's DUPLICATE_BROKER_REGISTRATION: wait until the active
			// controller fences the other process (it has stopped, or it
			// has not been heard from for the session timeout).
			if time.Since(warned) > 10*time.Second {
				warned = time.Now()
				s.logger.Warn("another process is registered as this node; waiting for it to be fenced",
					"node", s.cfg.NodeID)
			}
		default:
			s.logger.Debug("registration not made yet", "err", err)
		}
		select {
		case <-s.ctx.Done():
			return false
		case <-time.After(backoff):
		}
	}
}

var errWrongCluster = errors.New("the metadata quorum belongs to another cluster")

func (s *Server) registerOnce(host string, port int32, endpoints []cluster.Endpoint) error {
	want := s.cfg.ClusterID
	if meta, err := readMetaProperties(s.cfg.DataDir); err == nil && meta.clusterID != "" {
		want = meta.clusterID
	}
	id, err := s.cluster.EnsureClusterID(want)
	if err != nil {
		return err
	}
	if want != "" && id != want {
		return fmt.Errorf("%w: %s, not %s (data directory %s)", errWrongCluster, id, want, s.cfg.DataDir)
	}
	if err := writeMetaProperties(s.cfg.DataDir, id, s.cfg.NodeID); err != nil {
		return err
	}
	// A new cluster takes the first registering broker's feature levels;
	// later ones keep what is finalized.
	if err := s.cluster.SetFeatures(featureLevels(s.cfg), true); err != nil {
		return err
	}
	if err := s.ensureInterBrokerUser(); err != nil {
		return err
	}
	b, err := s.cluster.RegisterBroker(host, port, s.cfg.Rack, false, endpoints...)
	if err != nil {
		return err
	}
	s.logger.Info("registered with the cluster", "cluster", id, "node", b.NodeID, "broker_epoch", b.Epoch)
	s.brokerEpoch.Store(b.Epoch)
	// The registration applied here, so the image has everything
	// committed before it: this broker may lead what it says, and what it
	// no longer places here can go.
	s.rec.caughtUp.Store(true)
	if err := s.reconcile(); err != nil {
		s.logger.Warn("serving the metadata's partitions failed", "err", err)
	}
	if err := s.removeOrphans(); err != nil {
		s.logger.Warn("removing deleted topics' data failed", "err", err)
	}
	s.metadataChanged() // and the coordinators follow the leadership
	return nil
}

// controlledShutdownTimeout bounds the wait for the metadata quorum when
// stopping: without a quorum, leadership cannot move anyway.
const controlledShutdownTimeout = 5 * time.Second

// controlledShutdown moves leadership off this broker before it stops, as
// Kafka's controlled shutdown does: the broker fences itself through the
// metadata log, so every partition it leads moves to an in-sync follower
// (which has every acknowledged record) while it still answers clients,
// who then follow the new leaders with only retriable errors.
func (s *Server) controlledShutdown() {
	epoch := s.brokerEpoch.Load()
	if epoch < 0 {
		return // never registered: it leads nothing
	}
	if b, ok := s.cluster.Broker(s.cfg.NodeID); s.cluster.LiveBrokers() <= 1 && ok && !b.Fenced {
		return // the last live broker: no one to hand leadership to
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.cluster.ShutdownBroker(epoch) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(controlledShutdownTimeout):
		err = fmt.Errorf("no answer from the metadata quorum within %v", controlledShutdownTimeout)
	}
	if err != nil {
		s.logger.Warn("controlled shutdown failed: what this broker leads moves once its session times out", "err", err)
		return
	}
	s.leadNothing()
	s.logger.Info("controlled shutdown: leadership moved", "took", time.Since(start).Round(time.Millisecond))
}

// stale reports whether another process has registered as this node
// since this one did (a replacement started while this one was paused or
// cut off). A stale process leads nothing from then on and fails, so that
// it stops: the broker epoch of the newer registration fences it.
func (s *Server) stale() bool {
	b, stale := s.cluster.Superseded()
	if !stale {
		return false
	}
	s.leadNothing()
	err := fmt.Errorf("another process registered as node %d (broker epoch %d, at %s:%d); this one is stale and stops",
		b.NodeID, b.Epoch, b.Host, b.Port)
	s.logger.Error("superseded", "err", err)
	s.fail(err)
	return true
}

// metaProperties is what a data directory says it belongs to, in Kafka's
// meta.properties file: the cluster and the node. Written once the cluster
// id is known, and checked at every start.
type metaProperties struct {
	clusterID string
	nodeID    int32 // -1 when unknown
}

const metaPropertiesFile = "meta.properties"

func readMetaProperties(dir string) (metaProperties, error) {
	m := metaProperties{nodeID: -1}
	b, err := os.ReadFile(filepath.Join(dir, metaPropertiesFile))
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		switch {
		case !ok || strings.HasPrefix(k, "#"):
		case k == "cluster.id":
			m.clusterID = v
		case k == "node.id":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return m, fmt.Errorf("%s: node.id %q", filepath.Join(dir, metaPropertiesFile), v)
			}
			m.nodeID = int32(n)
		}
	}
	return m, nil
}

// writeMetaProperties records the directory's cluster and node, durably,
// unless it says so already.
func writeMetaProperties(dir, clusterID string, node int32) error {
	if m, err := readMetaProperties(dir); err == nil && m.clusterID == clusterID && m.nodeID == node {
		return nil
	}
	body := fmt.Sprintf("# Written by strand: the cluster and node this data directory belongs to.\nversion=1\ncluster.id=%s\nnode.id=%d\n", clusterID, node)
	return vfs.WriteFileAtomic(vfs.OS, filepath.Join(dir, metaPropertiesFile), []byte(body))
}

// featureLevels are the feature levels a broker's flags ask for.
func featureLevels(cfg config.Broker) map[string]int16 {
	return map[string]int16{protocol.TransactionVersionFeature: cfg.TransactionVersion}
}

// quorumSilence is how long a broker started at started has gone without
// contact with the quorum, last made at last (zero before any): a broker
// that has not heard from a leader yet counts from its start.
func quorumSilence(last, started, now time.Time) time.Duration {
	if last.IsZero() {
		last = started
	}
	return now.Sub(last)
}

// watchQuorumContact makes a broker cut off from the metadata quorum for
// longer than the session timeout lead nothing. By then the active controller may have
// fenced it and moved its partitions, and a leader that went on as before
// would answer acks=all writes with REQUEST_TIMED_OUT, which clients retry
// at the same broker, or acknowledge acks=1 writes that the new leaders
// never see. Leading nothing, it answers NOT_LEADER_OR_FOLLOWER, which
// sends clients to fresh metadata. Back in touch, it catches up with the
// metadata log (a record that changes nothing, applied here) before it
// leads what its image then says: everything decided while it was away.
// It keeps its registration: if the controller fenced it, the controller
// unfences it once it is heard from and caught up.
func (s *Server) watchQuorumContact() {
	const every = 100 * time.Millisecond
	tick := time.NewTicker(every)
	defer tick.Stop()
	// Past the session timeout the controller may have fenced this broker;
	// an election of the quorum's leader (one that died, say) takes up to
	// twice its election timeout of 1 s, without contact all the while.
	limit := s.cfg.BrokerSessionTimeout + 2*time.Second
	cut := false
	started := time.Now()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		silent := quorumSilence(s.cluster.QuorumContact(), started, time.Now())
		switch {
		case !cut && silent >= limit && s.rec.caughtUp.Load():
			cut = true
			s.logger.Warn("out of touch with the metadata quorum: leading nothing until back in touch",
				"silent", silent.Round(time.Millisecond))
			s.leadNothing()
		case cut && silent < limit/4:
			if err := s.cluster.CatchUp(); err != nil {
				s.logger.Debug("catching up with the metadata log", "err", err)
				continue // the next tick tries again
			}
			s.logger.Info("back in touch with the metadata quorum; leading what it says")
			cut = false
			s.rec.caughtUp.Store(true)
			if err := s.reconcile(); err != nil {
				s.logger.Warn("serving the metadata's partitions failed", "err", err)
			}
			s.syncCoordinators()
		}
	}
}
