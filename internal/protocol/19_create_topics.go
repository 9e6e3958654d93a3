package protocol

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
)

// CreateTopics: v2-7
//
// Behaviour (as Kafka's controller checks, in this order, with its messages):
//   - A name given twice in one request is INVALID_REQUEST for that name
//     (one answer), and __cluster_metadata cannot be created.
//   - An illegal name, or one that differs from an existing topic's only by
//     '.' against '_', is INVALID_TOPIC_EXCEPTION; an existing one is
//     TOPIC_ALREADY_EXISTS.
//   - Configs must be topic configs Strand serves with valid values
//     (config.TopicConfig, over the broker's defaults including the
//     dynamic ones); a null value or anything else is INVALID_CONFIG.
//   - Replica assignments (RF and partition count then -1) may only name
//     registered brokers, once per partition, for partitions 0..n-1:
//     INVALID_REPLICA_ASSIGNMENT otherwise. Without them the replication
//     factor must be positive or -1 (default.replication.factor) and at
//     most the live broker count, and the partition count positive or -1
//     (num.partitions). Until partition data is replicated, a factor above
//     1 is refused the same way (INVALID_REPLICATION_FACTOR).
//   - Partitions are placed by the metadata log when the creation applies
//     (cluster.Store.CreateTopic): leaders spread over the live brokers,
//     racks alternating.
//   - More than 10000 new partitions in one request is POLICY_VIOLATION for
//     every topic of it (Kafka 4.0's controller limit).
//   - ValidateOnly runs every check and answers as a creation would, without
//     creating (the topic id is then zero).
//   - v5+: a created topic's answer lists its partition count, replication
//     factor (1) and every topic config with its value and source; v7: its
//     topic id.
//
// Not supported: CreateTopicPolicy (no policies are configured) and
// controller mutation quotas; TimeoutMillis is not needed (creation is done
// when the answer is sent).
//
// Authorization: CREATE on the cluster or the topic
// (TOPIC_AUTHORIZATION_FAILED); the configs in the answer need
// DESCRIBE_CONFIGS on the topic.

func init() { register(19, 2, 7, handleCreateTopics) }

func handleCreateTopics(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)

	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	total := 0 // partitions to create, over the topics named once
	for _, rt := range req.Topics {
		if count[rt.Topic] > 1 {
			continue
		}
		switch {
		case len(rt.ReplicaAssignment) > 0:
			total += len(rt.ReplicaAssignment)
		case rt.NumPartitions == -1:
			total += int(b.Config.DefaultPartitions)
		case rt.NumPartitions > 0:
			total += int(rt.NumPartitions)
		}
	}
	tooMany := total > maxPartitionsPerRequest
	createAny := b.allowedCluster(r, acl.Create)
	gate := b.mutations(r, req.Version >= 6)
	layers := b.configLayers()
	var dups []string
	for _, rt := range req.Topics {
		if count[rt.Topic] > 1 {
			if !slices.Contains(dups, rt.Topic) {
				dups = append(dups, rt.Topic)
			}
			continue
		}
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case !createAny && !b.allowed(r, acl.Create, acl.Topic, rt.Topic):
			err = newAPIError(kerr.TopicAuthorizationFailed, "Authorization failed.")
		case tooMany:
			err = newAPIError(errPolicyViolation, "Excessively large number of partitions per request.")
		case req.ValidateOnly:
			err = b.createTopic(&rt, true, layers, &st)
		default:
			if err = gate.refused(); err == nil {
				err = b.createTopic(&rt, false, layers, &st)
			}
			if err == nil {
				gate.count(int(st.NumPartitions))
			}
		}
		if err == nil && !b.allowed(r, acl.DescribeConfigs, acl.Topic, rt.Topic) {
			// Its configs are shown only to who may describe them.
			st.Configs, st.ConfigErrorCode = nil, kerr.TopicAuthorizationFailed.Code
		}
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errorCode(err), errorMessage(err)
			st.NumPartitions, st.ReplicationFactor = -1, -1
		}
		resp.Topics = append(resp.Topics, st)
	}
	for _, name := range dups {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = name
		st.ErrorCode = kerr.InvalidRequest.Code
		st.ErrorMessage = kmsg.StringPtr("Duplicate topic name.")
		resp.Topics = append(resp.Topics, st)
	}
	gate.finish(resp)
	return reply(resp)
}

// createTopic checks and creates one topic and fills in its answer.
func (b *Broker) createTopic(rt *kmsg.CreateTopicsRequestTopic, validateOnly bool, layers configLayers,
	st *kmsg.CreateTopicsResponseTopic) error {
	name := rt.Topic
	if name == "__cluster_metadata" {
		return newAPIError(errInvalidRequest, "Creation of internal topic __cluster_metadata is prohibited.")
	}
	if err := cluster.ValidateTopicName(name); err != nil {
		return err
	}
	if _, ok := b.Cluster.Topic(name); ok {
		return newAPIError(cluster.ErrTopicExists, "Topic '%s' already exists.", name)
	}
	if other, ok := b.Cluster.CollidingTopic(name); ok {
		return newAPIError(cluster.ErrInvalidTopic, "Topic '%s' collides with existing topic: %s", name, other)
	}

	configs := map[string]string{}
	var nulls []string
	for _, c := range rt.Configs {
		if c.Value == nil {
			nulls = append(nulls, c.Name)
			continue
		}
		configs[c.Name] = *c.Value
	}
	if len(nulls) > 0 {
		return newAPIError(config.ErrInvalidConfig, "Null value not supported for topic configs: %s", strings.Join(nulls, ","))
	}
	if _, err := config.TopicConfig(layers.effective().Topic, configs); err != nil {
		return err
	}

	spec, err := b.topicSpec(rt)
	if err != nil {
		return err
	}
	spec.Name, spec.Configs = name, configs
	t, err := b.Topics.CreateTopic(spec, validateOnly)
	if errors.Is(err, cluster.ErrTopicExists) { // created meanwhile
		return newAPIError(cluster.ErrTopicExists, "Topic '%s' already exists.", name)
	}
	if err != nil {
		return err
	}
	if !validateOnly {
		st.TopicID = t.ID
	}
	st.NumPartitions, st.ReplicationFactor = spec.Partitions, spec.ReplicationFactor
	for _, e := range layers.topicEntries(configs, nil) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value, c.Source = e.name, kmsg.StringPtr(e.value), int8(e.source)
		st.Configs = append(st.Configs, c)
	}
	return nil
}

// topicSpec checks a new topic's replica assignments, or its replication
// factor and partition count, and returns them.
func (b *Broker) topicSpec(rt *kmsg.CreateTopicsRequestTopic) (cluster.TopicSpec, error) {
	var spec cluster.TopicSpec
	if len(rt.ReplicaAssignment) == 0 {
		spec.Partitions, spec.ReplicationFactor = rt.NumPartitions, rt.ReplicationFactor
		switch {
		case rt.ReplicationFactor < -1 || rt.ReplicationFactor == 0:
			return spec, newAPIError(errInvalidReplicationFactor,
				"Replication factor must be larger than 0, or -1 to use the default value.")
		case rt.NumPartitions < -1 || rt.NumPartitions == 0:
			return spec, newAPIError(cluster.ErrInvalidPartitions,
				"Number of partitions was set to an invalid non-positive value.")
		}
		if spec.Partitions == -1 {
			spec.Partitions = b.Config.DefaultPartitions
		}
		if spec.ReplicationFactor == -1 {
			spec.ReplicationFactor = b.defaultReplicationFactor()
		}
		return spec, b.checkReplicationFactor(spec.ReplicationFactor)
	}
	if rt.ReplicationFactor != -1 {
		return spec, newAPIError(errInvalidRequest,
			"A manual partition assignment was specified, but replication factor was not set to -1.")
	}
	if rt.NumPartitions != -1 {
		return spec, newAPIError(errInvalidRequest,
			"A manual partition assignment was specified, but numPartitions was not set to -1.")
	}
	byPartition := map[int32][]int32{}
	for _, a := range rt.ReplicaAssignment {
		if _, ok := byPartition[a.Partition]; ok {
			return spec, newAPIError(errInvalidReplicaAssignment,
				"Found multiple manual partition assignments for partition %d", a.Partition)
		}
		byPartition[a.Partition] = a.Replicas
		if err := b.checkReplicas(a.Replicas); err != nil {
			return spec, err
		}
	}
	spec.Partitions = int32(len(rt.ReplicaAssignment))
	for p := range spec.Partitions {
		replicas, ok := byPartition[p]
		if !ok {
			return spec, newAPIError(errInvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
		}
		spec.Assignment = append(spec.Assignment, replicas)
	}
	spec.ReplicationFactor = int16(len(spec.Assignment[0]))
	return spec, b.checkReplicationFactor(spec.ReplicationFactor)
}

// defaultReplicationFactor is default.replication.factor, capped at what
// the cluster can hold now.
func (b *Broker) defaultReplicationFactor() int16 {
	return int16(max(1, min(int(b.Config.DefaultReplicationFactor), b.Cluster.LiveBrokers())))
}

// checkReplicationFactor refuses more replicas than live brokers, as
// Kafka's controller does.
func (b *Broker) checkReplicationFactor(factor int16) error {
	if live := b.Cluster.LiveBrokers(); int(factor) > live {
		return newAPIError(errInvalidReplicationFactor,
			"Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.",
			factor, factor, live)
	}
	return nil
}

// checkReplicas checks one partition's manual assignment: registered
// brokers, each once, as Kafka checks.
func (b *Broker) checkReplicas(replicas []int32) error {
	if len(replicas) == 0 {
		return newAPIError(errInvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	sorted := slices.Sorted(slices.Values(replicas))
	for i, id := range sorted {
		if _, ok := b.Cluster.Broker(id); !ok {
			return newAPIError(errInvalidReplicaAssignment,
				"The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
		if i > 0 && sorted[i-1] == id {
			return newAPIError(errInvalidReplicaAssignment,
				"The manual partition assignment includes the broker %d more than once.", id)
		}
	}
	return nil
}
