package server

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
)

// openMetadata opens the cluster metadata: a file for a single node (which
// registers itself at once, at the configured address, so that topics can
// be placed before Start), the metadata quorum's Raft log in a cluster.
func openMetadata(cfg config.Broker, logger *slog.Logger) (*cluster.Store, error) {
	voters, err := cfg.Voters()
	if err != nil {
		return nil, err
	}
	if len(voters) > 0 {
		return cluster.OpenRaft(cluster.RaftConfig{NodeID: cfg.NodeID, Voters: voters, Listen: cfg.ControllerListen,
			Dir: cfg.DataDir, ClusterID: cfg.ClusterID, SessionTimeout: cfg.BrokerSessionTimeout, Logger: logger})
	}
	s, err := cluster.OpenFile(cfg.DataDir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	if cfg.ClusterID != "" && s.ClusterID() != cfg.ClusterID {
		return nil, fmt.Errorf("data directory %s belongs to cluster %s, not %s", cfg.DataDir, s.ClusterID(), cfg.ClusterID)
	}
	host, port, err := cfg.AdvertisedAddr()
	if err != nil {
		host, port = "127.0.0.1", 0 // Start registers the address it gets
	}
	if _, err := s.RegisterBroker(host, port, cfg.Rack, true); err != nil {
		return nil, fmt.Errorf("registering broker %d: %w", cfg.NodeID, err)
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
// controller sees it caught up. It retries until it succeeds or the server
// stops.
func (s *Server) register(host string, port int32) {
	const backoff = 200 * time.Millisecond
	for {
		err := s.registerOnce(host, port)
		if err == nil {
			return
		}
		if errors.Is(err, errWrongCluster) {
			s.logger.Error("not joining the cluster", "err", err)
			return
		}
		s.logger.Debug("registration not made yet", "err", err)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

var errWrongCluster = errors.New("the metadata quorum belongs to another cluster")

func (s *Server) registerOnce(host string, port int32) error {
	id, err := s.cluster.EnsureClusterID(s.cfg.ClusterID)
	if err != nil {
		return err
	}
	if s.cfg.ClusterID != "" && id != s.cfg.ClusterID {
		return fmt.Errorf("%w: %s, not %s", errWrongCluster, id, s.cfg.ClusterID)
	}
	b, err := s.cluster.RegisterBroker(host, port, s.cfg.Rack, false)
	if err != nil {
		return err
	}
	s.logger.Info("registered with the cluster", "cluster", id, "node", b.NodeID, "broker_epoch", b.Epoch)
	// The registration applied here, so the image has everything
	// committed before it: what it no longer places here can go.
	s.rec.removals.Store(true)
	if err := s.reconcile(); err != nil {
		s.logger.Warn("serving the metadata's partitions failed", "err", err)
	}
	if err := s.removeOrphans(); err != nil {
		s.logger.Warn("removing deleted topics' data failed", "err", err)
	}
	return nil
}
