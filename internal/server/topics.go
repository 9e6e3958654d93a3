package server

import (
	"errors"
	"fmt"
	"sync"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/model"
)

// topicAdmin changes topics in the cluster metadata and in the partitions
// served, in the order that a crash between the two leaves repairable:
// metadata first on creation (partitions open on restart), metadata first
// on deletion too (orphaned data is removed on restart).
//
// The topic defaults are the broker's static settings with the dynamic
// broker configs (cluster-wide, then this node's) applied. mu serialises the
// changes, so that a topic is never created or reconfigured with defaults
// that a concurrent SetBrokerConfigs is replacing.
type topicAdmin struct {
	s  *Server
	mu sync.Mutex
}

// defaults returns the topic defaults in force.
func (a *topicAdmin) defaults() log.Config {
	b, err := config.ApplyDynamic(a.s.cfg, a.s.cluster.BrokerConfigs(), a.s.cluster.NodeConfigs(a.s.cfg.NodeID))
	if err != nil {
		// Stored dynamic configs were validated when set; this happens
		// only if a newer version stored a config this one does not know.
		a.s.logger.Warn("ignoring invalid dynamic broker configs", "err", err)
		return a.s.cfg.Log
	}
	return b.Log
}

func (a *topicAdmin) CreateTopic(name string, partitions int32, configs map[string]string, validateOnly bool) (cluster.Topic, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := cluster.ValidateTopicName(name); err != nil {
		return cluster.Topic{}, err
	}
	if partitions <= 0 {
		return cluster.Topic{}, fmt.Errorf("%w: %d", cluster.ErrInvalidPartitions, partitions)
	}
	cfg, err := config.TopicLogConfig(a.defaults(), configs)
	if err != nil {
		return cluster.Topic{}, err
	}
	if validateOnly {
		if t, ok := a.s.cluster.Topic(name); ok {
			return t, fmt.Errorf("%w: %s", cluster.ErrTopicExists, name)
		}
		if other, ok := a.s.cluster.CollidingTopic(name); ok {
			return cluster.Topic{}, fmt.Errorf("%w: topic '%s' collides with existing topic: %s", cluster.ErrInvalidTopic, name, other)
		}
		return cluster.Topic{Name: name, Partitions: partitions, Configs: configs}, nil
	}
	t, err := a.s.cluster.CreateTopic(name, partitions, configs, false)
	if err != nil {
		return t, err
	}
	for p := range partitions {
		if _, err := a.s.replicas.Open(model.TopicPartition{Topic: name, Partition: p}, t.ID, cfg); err != nil {
			return t, err
		}
	}
	a.s.logger.Info("created topic", "topic", name, "partitions", partitions)
	return t, nil
}

func (a *topicAdmin) DeleteTopic(name string) (cluster.Topic, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, err := a.s.cluster.DeleteTopic(name)
	if err != nil {
		return t, err
	}
	var errs []error
	for p := range t.Partitions {
		errs = append(errs, a.s.replicas.Delete(model.TopicPartition{Topic: name, Partition: p}))
	}
	a.s.logger.Info("deleted topic", "topic", name)
	return t, errors.Join(errs...)
}

func (a *topicAdmin) CreatePartitions(name string, count int32, validateOnly bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.s.cluster.Topic(name)
	if !ok {
		return fmt.Errorf("%w: %s", cluster.ErrUnknownTopic, name)
	}
	if count <= t.Partitions {
		return fmt.Errorf("%w: topic %s has %d partitions; the count can only grow", cluster.ErrInvalidPartitions, name, t.Partitions)
	}
	cfg, err := config.TopicLogConfig(a.defaults(), t.Configs)
	if err != nil || validateOnly {
		return err
	}
	if err := a.s.cluster.SetPartitions(name, count); err != nil {
		return err
	}
	for p := t.Partitions; p < count; p++ {
		if _, err := a.s.replicas.Open(model.TopicPartition{Topic: name, Partition: p}, t.ID, cfg); err != nil {
			return err
		}
	}
	return nil
}

func (a *topicAdmin) SetTopicConfigs(name string, configs map[string]string, validateOnly bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.s.cluster.Topic(name); !ok {
		return fmt.Errorf("%w: %s", cluster.ErrUnknownTopic, name)
	}
	cfg, err := config.TopicLogConfig(a.defaults(), configs)
	if err != nil || validateOnly {
		return err
	}
	if err := a.s.cluster.SetTopicConfigs(name, configs); err != nil {
		return err
	}
	return a.s.replicas.SetConfig(name, cfg)
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
	topics := a.s.cluster.Topics()
	cfgs := make(map[string]log.Config, len(topics))
	for _, t := range topics {
		cfg, err := config.TopicLogConfig(b.Log, t.Configs)
		if err != nil {
			return fmt.Errorf("topic %s would be invalid: %w", t.Name, err)
		}
		cfgs[t.Name] = cfg
	}
	if validateOnly {
		return nil
	}
	if err := store(); err != nil {
		return err
	}
	var errs []error
	for name, cfg := range cfgs {
		errs = append(errs, a.s.replicas.SetConfig(name, cfg))
	}
	a.s.logger.Info("changed dynamic broker configs", "cluster", clusterDefaults, "node", node)
	return errors.Join(errs...)
}
