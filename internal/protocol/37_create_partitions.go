package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
)

// CreatePartitions: v0-3
//
// Behaviour (as Kafka's controller checks, with its messages):
//   - Raises each topic's partition count to Count, opening the new
//     partitions with the topic's settings; ValidateOnly checks without
//     changing anything.
//   - A topic named twice is INVALID_REQUEST (one answer for it); an unknown
//     topic UNKNOWN_TOPIC_OR_PARTITION; a count that is not above the
//     current one INVALID_PARTITIONS.
//   - Assignments, when given, must be one per new partition, each naming
//     registered brokers once: INVALID_REPLICA_ASSIGNMENT otherwise. Without
//     them the new partitions are spread over the live brokers.
//   - More than 10000 new partitions in one request is POLICY_VIOLATION for
//     every topic of it (the limit Kafka's controller applies to creations).
//
// Not supported: controller mutation quotas; TimeoutMillis is not needed.
//
// Authorization: ALTER on the topic (TOPIC_AUTHORIZATION_FAILED).

func init() { register(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	answer := func(topic string, err error) {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = topic
		st.ErrorCode, st.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Topics = append(resp.Topics, st)
	}
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	added := 0 // partitions to add, over the topics named once
	for _, rt := range req.Topics {
		if count[rt.Topic] > 1 {
			continue
		}
		if t, ok := b.Cluster.Topic(rt.Topic); ok && rt.Count > t.Partitions {
			added += int(rt.Count - t.Partitions)
		}
	}
	gate := b.mutations(r, req.Version >= 3)
	for _, rt := range req.Topics {
		switch n := count[rt.Topic]; {
		case n > 1:
			answer(rt.Topic, newAPIError(errInvalidRequest, "Duplicate topic name."))
			count[rt.Topic] = -1
			continue
		case n < 0:
			continue
		}
		var err error
		switch {
		case !b.allowed(r, acl.Alter, acl.Topic, rt.Topic):
			err = newAPIError(kerr.TopicAuthorizationFailed, "Authorization failed.")
		case added > maxPartitionsPerRequest:
			err = newAPIError(errPolicyViolation, "Excessively large number of partitions per request.")
		case req.ValidateOnly:
			err = b.createPartitions(&rt, true)
		default:
			before, _ := b.Cluster.Topic(rt.Topic)
			if err = gate.refused(); err == nil {
				err = b.createPartitions(&rt, false)
			}
			if err == nil {
				gate.count(int(rt.Count - before.Partitions))
			}
		}
		answer(rt.Topic, err)
	}
	gate.finish(resp)
	return reply(resp)
}

func (b *Broker) createPartitions(rt *kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	t, ok := b.Cluster.Topic(rt.Topic)
	if !ok {
		return newAPIError(cluster.ErrUnknownTopic, "%s", kerr.UnknownTopicOrPartition.Description)
	}
	switch {
	case rt.Count == t.Partitions:
		return newAPIError(cluster.ErrInvalidPartitions, "Topic already has %d partition(s).", t.Partitions)
	case rt.Count < t.Partitions:
		return newAPIError(cluster.ErrInvalidPartitions,
			"The topic %s currently has %d partition(s); %d would not be an increase.", rt.Topic, t.Partitions, rt.Count)
	}
	additional := rt.Count - t.Partitions
	var assignment [][]int32
	if rt.Assignment != nil {
		if int32(len(rt.Assignment)) != additional {
			return newAPIError(errInvalidReplicaAssignment,
				"Attempted to add %d additional partition(s), but only %d assignment(s) were specified.",
				additional, len(rt.Assignment))
		}
		for _, a := range rt.Assignment {
			if err := b.checkReplicas(a.Replicas); err != nil {
				return err
			}
			assignment = append(assignment, a.Replicas)
		}
	}
	err := b.Topics.CreatePartitions(rt.Topic, rt.Count, assignment, validateOnly)
	if errors.Is(err, cluster.ErrUnknownTopic) {
		return newAPIError(cluster.ErrUnknownTopic, "%s", kerr.UnknownTopicOrPartition.Description)
	}
	return err
}
