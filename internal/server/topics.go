package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/replica"
)

// topicAdmin changes topics in the cluster metadata, then brings the
// partitions this broker holds in line with it (reconcile), so that a crash
// between the two is repaired by the reconcile at the next start:
// partitions open, orphaned data is removed.
//
// The topic defaults are the broker's static settings with the dynamic
// broker configs (cluster-wide, then this node's) applied. mu serialises the
// changes, so that a topic is never created or reconfigured with defaults
// that a concurrent SetBrokerConfigs is replacing.
type topicAdmin struct {
	s  *Server
	mu lockrank.Mutex[lockrank.TopicAdmin]
}

// defaults returns the topic defaults in force.
func (a *topicAdmin) defaults() replica.Config {
	b, err := config.ApplyDynamic(a.s.cfg, a.s.cluster.BrokerConfigs(), a.s.cluster.NodeConfigs(a.s.cfg.NodeID))
	if err != nil {
		// Stored dynamic configs were validated when set; this happens
		// only if a newer version stored a config this one does not know.
		a.s.logger.Warn("ignoring invalid dynamic broker configs", "err", err)
		return a.s.cfg.Topic
	}
	return b.Topic
}

func (a *topicAdmin) CreateTopic(spec cluster.TopicSpec, validateOnly bool) (cluster.Topic, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := cluster.ValidateTopicName(spec.Name); err != nil {
		return cluster.Topic{}, err
	}
	if spec.Partitions <= 0 {
		return cluster.Topic{}, fmt.Errorf("%w: %d", cluster.ErrInvalidPartitions, spec.Partitions)
	}
	if _, err := config.TopicConfig(a.defaults(), spec.Configs); err != nil {
		return cluster.Topic{}, err
	}
	if validateOnly {
		if err := a.s.cluster.CheckTopic(spec); err != nil {
			return cluster.Topic{}, err
		}
		return cluster.Topic{Name: spec.Name, Partitions: spec.Partitions, Configs: spec.Configs}, nil
	}
	t, err := a.s.cluster.CreateTopic(spec)
	if err != nil {
		return t, err
	}
	a.s.logger.Info("created topic", "topic", spec.Name, "partitions", spec.Partitions, "internal", spec.Internal)
	// This broker's replicas serve before the answer; other brokers open
	// theirs as the creation applies there.
	return t, a.s.reconcile()
}

func (a *topicAdmin) DeleteTopic(name string) (cluster.Topic, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, err := a.s.cluster.DeleteTopic(name)
	if err != nil {
		return t, err
	}
	a.s.logger.Info("deleted topic", "topic", name)
	return t, a.s.reconcile()
}

func (a *topicAdmin) CreatePartitions(name string, count int32, assignment [][]int32, validateOnly bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.s.cluster.Topic(name)
	if !ok {
		return fmt.Errorf("%w: %s", cluster.ErrUnknownTopic, name)
	}
	if t.Mirror != nil {
		return fmt.Errorf("%w: topic %s mirrors link %s, which follows its source's partition count", cluster.ErrMirrorTopic, name, t.Mirror.Link)
	}
	if count <= t.Partitions {
		return fmt.Errorf("%w: topic %s has %d partitions; the count can only grow", cluster.ErrInvalidPartitions, name, t.Partitions)
	}
	if _, err := config.TopicConfig(a.defaults(), t.Configs); err != nil || validateOnly {
		return err
	}
	if err := a.s.cluster.SetPartitions(name, count, assignment); err != nil {
		return err
	}
	return a.s.reconcile()
}

func (a *topicAdmin) SetTopicConfigs(name string, configs map[string]string, validateOnly bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.s.cluster.Topic(name)
	if !ok {
		return fmt.Errorf("%w: %s", cluster.ErrUnknownTopic, name)
	}
	if t.Mirror != nil {
		if l, ok := a.s.cluster.Link(t.Mirror.Link); ok && l.SyncTopicConfigs {
			return fmt.Errorf("%w: topic %s mirrors link %s, which copies its configs from the source", cluster.ErrMirrorTopic, name, l.Name)
		}
	}
	if _, err := config.TopicConfig(a.defaults(), configs); err != nil || validateOnly {
		return err
	}
	if err := a.s.cluster.SetTopicConfigs(name, configs); err != nil {
		return err
	}
	return a.s.reconcile()
}

// SetBrokerConfigs replaces the cluster-wide dynamic broker configs. Only
// topic defaults (log.retention.ms, message.max.bytes, ...) can be set; they
// apply at once to the topics that do not override them, and to topics
// created later.
func (a *topicAdmin) SetBrokerConfigs(configs map[string]string, validateOnly bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	node := a.s.cluster.NodeConfigs(a.s.cfg.NodeID)
	return a.setDynamic(configs, node, validateOnly, func() error { return a.s.cluster.SetBrokerConfigs(configs) })
}

// SetNodeConfigs replaces the dynamic broker configs of this node (Kafka's
// per-broker level, which wins over the cluster-wide one).
func (a *topicAdmin) SetNodeConfigs(node int32, configs map[string]string, validateOnly bool) error {
	if node != a.s.cfg.NodeID {
		return fmt.Errorf("%w: broker %d is not this broker (%d)", config.ErrInvalidConfig, node, a.s.cfg.NodeID)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	clusterDefaults := a.s.cluster.BrokerConfigs()
	return a.setDynamic(clusterDefaults, configs, validateOnly, func() error { return a.s.cluster.SetNodeConfigs(node, configs) })
}

// setDynamic checks the dynamic configs that would be in force, stores them
// and applies the new defaults to every topic.
func (a *topicAdmin) setDynamic(clusterDefaults, node map[string]string, validateOnly bool, store func() error) error {
	b, err := config.ApplyDynamic(a.s.cfg, clusterDefaults, node)
	if err != nil {
		return err
	}
	// Every topic must remain valid with its overrides on the new defaults.
	for _, t := range a.s.cluster.Topics() {
		if _, err := config.TopicConfig(b.Topic, t.Configs); err != nil {
			return fmt.Errorf("topic %s would be invalid: %w", t.Name, err)
		}
	}
	if validateOnly {
		return nil
	}
	if err := store(); err != nil {
		return err
	}
	a.s.logger.Info("changed dynamic broker configs", "cluster", clusterDefaults, "node", node)
	return a.s.reconcile()
}

// internalReplicationFactor is an internal topic's replication factor: the
// configured one, or every registered broker while the cluster has fewer
// (a single node's internal topics have one replica), said in a log line.
// Registered, not live: while a broker of a larger cluster is starting or
// down, the creation waits for it (clients are told the coordinator is not
// available and retry), as Kafka's does, rather than making the topic
// with fewer replicas for good.
func (s *Server) internalReplicationFactor(topic string, want int16) int16 {
	registered := int16(max(1, min(len(s.cluster.Brokers()), 32767)))
	if want <= registered {
		return want
	}
	lvl := slog.LevelInfo
	if s.clustered() {
		lvl = slog.LevelWarn
	}
	s.logger.Log(context.Background(), lvl, "creating an internal topic with fewer replicas than configured: the cluster has fewer brokers",
		"topic", topic, "replication_factor", registered, "configured", want)
	return registered
}
