package server

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/fetcher"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/link"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// reconciler keeps the partitions this broker holds in line with the
// cluster metadata: it opens the replicas the image places here, gives
// each its role (leading or not, at the image's leader epoch), applies
// topic configs, and deletes the replicas of topics that are gone or were
// placed elsewhere. It runs after every change this broker makes and
// whenever the metadata log applies records (Store.Changes), and it is
// idempotent: running it again changes nothing.
//
// Until the image is known to be caught up, the broker leads nothing and
// removes nothing: a broker restarting in a cluster starts from an image
// that may lag the metadata log (its last snapshot, then the entries as
// they replay), so it may name this broker leader of a partition that has
// moved on, or miss a topic whose data must not be lost. A single node's
// image is complete from the start; a cluster member's once its own
// registration has applied (it follows everything committed before it).
//
// Locking: mu serialises runs; configs is guarded by mu.
type reconciler struct {
	mu       lockrank.Mutex[lockrank.ReconcilerTurn]
	configs  map[string]replica.Config
	caughtUp atomic.Bool   // the image is caught up: lead what it says, remove what it no longer places here
	again    chan struct{} // a token: follow the metadata again
}

func newReconciler() *reconciler {
	r := &reconciler{configs: map[string]replica.Config{}, again: make(chan struct{}, 1)}
	return r
}

// reconcile runs one reconciliation and returns what failed.
func (s *Server) reconcile() error {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	defaults, err := config.ApplyDynamic(s.cfg, s.cluster.BrokerConfigs(), s.cluster.NodeConfigs(s.cfg.NodeID))
	if err != nil {
		// Stored dynamic configs were validated when set; this happens
		// only if a newer version stored a config this one does not know.
		s.logger.Warn("ignoring invalid dynamic broker configs", "err", err)
		defaults = s.cfg
	}
	s.leaderRate.Store(defaults.LeaderThrottleRate)
	s.followerRate.Store(defaults.FollowerThrottleRate)
	node := s.cfg.NodeID
	caughtUp := s.rec.caughtUp.Load()
	want := map[model.TopicPartition][16]byte{}
	var follow []fetcher.Assignment
	var mirrors []link.Assignment
	var promoted []link.Promoted
	var errs []error
	for _, t := range s.cluster.Topics() {
		cfg, cfgErr := config.TopicConfig(defaults.Topic, t.Configs)
		if cfgErr != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", t.Name, cfgErr))
		}
		for i, st := range t.States {
			if !st.HasReplica(node) {
				continue
			}
			tp := model.TopicPartition{Topic: t.Name, Partition: int32(i)}
			want[tp] = t.ID // kept even when it cannot open now
			if cfgErr != nil {
				continue
			}
			if p, ok := s.replicas.Get(tp); ok && p.TopicID != t.ID && s.rec.caughtUp.Load() {
				// The topic was deleted and made again under its name.
				errs = append(errs, s.replicas.Delete(tp))
			}
			p, err := s.replicas.Open(tp, t.ID, cfg)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			p.SetReplicaSet(replica.ReplicaSet{Self: node, Replicas: st.Replicas, ISR: st.ISR, Leader: st.Leader,
				LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch, UncleanElections: st.UncleanElections})
			leads := caughtUp && st.Leader == node
			if t.Mirror != nil {
				p.SetMirror(t.Mirror.Link)
			} else {
				p.SetMirror("")
			}
			p.SetRole(leads, st.LeaderEpoch)
			if leads && t.Promoted != nil {
				promoted = append(promoted, link.Promoted{Partition: p,
					AbortAt: time.UnixMilli(t.Promoted.AtMs + t.Promoted.AbortOpenAfterMs)})
			}
			if leads && t.Mirror != nil && t.Mirror.State == cluster.MirrorActive {
				mirrors = append(mirrors, link.Assignment{Partition: p, TopicID: t.ID, Link: t.Mirror.Link, LeaderEpoch: st.LeaderEpoch})
			}
			if caughtUp && !leads && st.Leader != cluster.NoLeader {
				follow = append(follow, fetcher.Assignment{Partition: p, TopicID: t.ID, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch,
					Throttled: replica.ThrottleListed(cfg.FollowerThrottledReplicas, int32(i), node)})
			}
		}
		if cfgErr != nil {
			continue
		}
		if old, ok := s.rec.configs[t.Name]; ok && old != cfg {
			errs = append(errs, s.replicas.SetConfig(t.Name, cfg))
		}
		s.rec.configs[t.Name] = cfg
	}
	s.fetcher.Set(follow)
	s.links.Set(mirrors)
	s.links.SetPromoted(promoted)
	if !caughtUp {
		return errors.Join(errs...)
	}
	for _, p := range s.replicas.Partitions() {
		if id, ok := want[p.TP]; !ok || id != p.TopicID {
			s.logger.Info("removing a replica the metadata no longer places here", "partition", p.TP.String())
			errs = append(errs, s.replicas.Delete(p.TP))
			delete(s.rec.configs, p.TP.Topic)
			if _, exists := s.cluster.Topic(p.TP.Topic); !exists && s.metrics != nil {
				s.metrics.Forget(p.TP.Topic) // a deleted topic's byte counters go with it
			}
		}
	}
	return errors.Join(errs...)
}

// removeOrphans deletes stored partition data no topic owns: that of topics
// whose deletion a crash interrupted.
func (s *Server) removeOrphans() error {
	stored, err := s.logs.Stored()
	if err != nil {
		return err
	}
	for _, tp := range stored {
		if tp.String() == cluster.MetadataDir {
			continue // the metadata log, kept beside the partitions as in Kafka
		}
		if _, ok := s.replicas.Get(tp); !ok {
			s.logger.Info("removing the data of a deleted topic", "partition", tp.String())
			if err := s.logs.Delete(tp); err != nil {
				return err
			}
		}
	}
	return nil
}

// followMetadata reconciles whenever the metadata log applies records,
// until the server stops.
func (s *Server) followMetadata() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.cluster.Changes():
		case <-s.rec.again:
		case <-s.cluster.Stopped():
			s.metadataStopped()
			return
		}
		if s.stale() {
			return
		}
		if err := s.reconcile(); err != nil {
			s.logger.Warn("serving the metadata's partitions failed", "err", err)
		}
		s.syncCoordinators()
	}
}

// maintainInSyncSets proposes the in-sync set changes of the partitions
// this broker leads, as Kafka's leader does with AlterPartition: lagging
// followers leave, caught-up ones join. The controller applies a change
// only on the view it was decided on; the image then brings it back here.
func (s *Server) maintainInSyncSets() {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		if s.cluster.Controller() < 0 {
			continue // no quorum: nothing can change, and proposals would wait
		}
		for _, p := range s.replicas.Partitions() {
			if s.ctx.Err() != nil {
				return
			}
			rs, isr, ok := p.InSyncChange(s.cfg.ReplicaLagTime)
			if !ok {
				continue
			}
			st, err := s.cluster.AlterPartition(p.TP.Topic, cluster.TopicID(p.TopicID), p.TP.Partition, rs.LeaderEpoch, rs.PartitionEpoch, isr)
			if err != nil {
				p.InSyncChangeFailed()
				s.logger.Debug("in-sync set change not made", "partition", p.TP.String(), "isr", isr, "err", err)
				continue
			}
			s.logger.Info("in-sync set changed", "partition", p.TP.String(), "from", rs.ISR, "to", st.ISR,
				"partition_epoch", st.PartitionEpoch)
			s.metadataChanged()
		}
	}
}

// metadataStopped gives up leading once the metadata log has stopped on
// its own: the image no longer follows, so what it says this broker leads
// may have moved. The server fails, and the process stops.
func (s *Server) metadataStopped() {
	if s.ctx.Err() != nil {
		return // shutting down
	}
	err := fmt.Errorf("the metadata log stopped: %w", s.cluster.Failure())
	s.logger.Error("metadata log stopped", "err", err)
	s.leadNothing()
	s.fail(err)
}

// leadNothing makes this broker lead no partition and coordinate nothing,
// whatever its image says.
func (s *Server) leadNothing() {
	s.rec.caughtUp.Store(false)
	if err := s.reconcile(); err != nil {
		s.logger.Warn("giving up the partitions failed", "err", err)
	}
	s.syncCoordinators()
}

// metadataChanged makes followMetadata run again, as if records had
// applied (the broker's own view changed: it caught up).
func (s *Server) metadataChanged() {
	select {
	case s.rec.again <- struct{}{}:
	default:
	}
}

// leadingReplica returns partition i of topic when this broker leads it.
func leadingReplica(replicas *replica.Manager, topic string, i int32) (*replica.Partition, bool) {
	p, ok := replicas.Get(model.TopicPartition{Topic: topic, Partition: i})
	if !ok || !p.IsLeader() {
		return nil, false
	}
	return p, true
}

// syncCoordinators makes the group coordinator serve exactly the
// __consumer_offsets partitions this broker leads, and the transaction
// coordinator the __transaction_state ones (syncTxnCoordinator): it loads
// those it has come to lead and unloads those it no longer does. It runs
// after every reconciliation, from followMetadata only, never under a
// coordinator's lock (a coordinator creating its topic reconciles while
// holding it).
func (s *Server) syncCoordinators() {
	// Transactions after groups: a transaction resumed on load writes
	// markers the group coordinator must have loaded the offsets for.
	defer s.syncTxnCoordinator()
	t, ok := s.cluster.Topic(group.OffsetsTopic)
	if !ok {
		return
	}
	for i := range t.Partitions {
		p, leads := leadingReplica(s.replicas, t.Name, i)
		switch serves := s.groups.Serves(i); {
		case leads && !serves:
			if err := s.groups.LoadPartition(i, t.Partitions, coordinatorPartition{p}); err != nil {
				s.logger.Warn("loading groups failed", "partition", i, "err", err)
			}
		case !leads && serves:
			s.groups.UnloadPartition(i)
		}
	}
}
