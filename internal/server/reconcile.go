package server

import (
	"errors"
	"fmt"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
)

// reconciler keeps the partitions this broker holds in line with the
// cluster metadata: it opens the replicas the image places here, gives
// each its role (leading or not, at the image's leader epoch), applies
// topic configs, and deletes the replicas of topics that are gone or were
// placed elsewhere. It runs after every change this broker makes and
// whenever the metadata log applies records (Store.Changes), and it is
// idempotent: running it again changes nothing.
//
// Locking: mu serialises runs; configs is guarded by mu.
type reconciler struct {
	mu      chan struct{} // a one-token semaphore, so a run can be skipped when one is pending
	configs map[string]log.Config
}

func newReconciler() *reconciler {
	r := &reconciler{mu: make(chan struct{}, 1), configs: map[string]log.Config{}}
	return r
}

// reconcile runs one reconciliation and returns what failed.
func (s *Server) reconcile() error {
	s.rec.mu <- struct{}{}
	defer func() { <-s.rec.mu }()
	defaults, err := config.ApplyDynamic(s.cfg, s.cluster.BrokerConfigs(), s.cluster.NodeConfigs(s.cfg.NodeID))
	if err != nil {
		// Stored dynamic configs were validated when set; this happens
		// only if a newer version stored a config this one does not know.
		s.logger.Warn("ignoring invalid dynamic broker configs", "err", err)
		defaults = s.cfg
	}
	node := s.cfg.NodeID
	want := map[model.TopicPartition][16]byte{}
	var errs []error
	for _, t := range s.cluster.Topics() {
		cfg, cfgErr := config.TopicLogConfig(defaults.Log, t.Configs)
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
			if p, ok := s.replicas.Get(tp); ok && p.TopicID != t.ID {
				// The topic was deleted and made again under its name.
				errs = append(errs, s.replicas.Delete(tp))
			}
			p, err := s.replicas.Open(tp, t.ID, cfg)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			p.SetRole(st.Leader == node, st.LeaderEpoch)
		}
		if cfgErr != nil {
			continue
		}
		if old, ok := s.rec.configs[t.Name]; ok && old != cfg {
			errs = append(errs, s.replicas.SetConfig(t.Name, cfg))
		}
		s.rec.configs[t.Name] = cfg
	}
	for _, p := range s.replicas.Partitions() {
		if id, ok := want[p.TP]; !ok || id != p.TopicID {
			s.logger.Info("removing a replica the metadata no longer places here", "partition", p.TP.String())
			errs = append(errs, s.replicas.Delete(p.TP))
			delete(s.rec.configs, p.TP.Topic)
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
			if err := s.reconcile(); err != nil {
				s.logger.Warn("serving the metadata's partitions failed", "err", err)
			}
		}
	}
}
