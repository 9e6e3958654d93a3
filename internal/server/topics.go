package server

import (
	"errors"
	"fmt"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/model"
)

// topicAdmin changes topics in the cluster metadata and in the partitions
// served, in the order that a crash between the two leaves repairable:
// metadata first on creation (partitions open on restart), metadata first
// on deletion too (orphaned data is removed on restart).
type topicAdmin struct{ s *Server }

func (a *topicAdmin) CreateTopic(name string, partitions int32, configs map[string]string, validateOnly bool) (cluster.Topic, error) {
	if err := cluster.ValidateTopicName(name); err != nil {
		return cluster.Topic{}, err
	}
	if partitions <= 0 {
		return cluster.Topic{}, fmt.Errorf("%w: %d", cluster.ErrInvalidPartitions, partitions)
	}
	cfg, err := config.TopicLogConfig(a.s.cfg.Log, configs)
	if err != nil {
		return cluster.Topic{}, err
	}
	if validateOnly {
		if t, ok := a.s.cluster.Topic(name); ok {
			return t, fmt.Errorf("%w: %s", cluster.ErrTopicExists, name)
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
	t, ok := a.s.cluster.Topic(name)
	if !ok {
		return fmt.Errorf("%w: %s", cluster.ErrUnknownTopic, name)
	}
	if count <= t.Partitions {
		return fmt.Errorf("%w: topic %s has %d partitions; the count can only grow", cluster.ErrInvalidPartitions, name, t.Partitions)
	}
	cfg, err := config.TopicLogConfig(a.s.cfg.Log, t.Configs)
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
	if _, ok := a.s.cluster.Topic(name); !ok {
		return fmt.Errorf("%w: %s", cluster.ErrUnknownTopic, name)
	}
	cfg, err := config.TopicLogConfig(a.s.cfg.Log, configs)
	if err != nil || validateOnly {
		return err
	}
	if err := a.s.cluster.SetTopicConfigs(name, configs); err != nil {
		return err
	}
	return a.s.replicas.SetConfig(name, cfg)
}

func (a *topicAdmin) SetBrokerConfigs(configs map[string]string, validateOnly bool) error {
	return fmt.Errorf("%w: dynamic broker configs are not supported yet", config.ErrInvalidConfig)
}
