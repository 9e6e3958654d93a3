package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
)

// DeleteTopics: v1-6
//
// Behaviour (as Kafka's controller answers):
//   - Deletes topics by name (v1-5: TopicNames; v6: Topics with a name) or,
//     v6, by topic id; the metadata goes first, then the partitions' data.
//     Each deleted topic is answered with its name and id.
//   - An unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id
//     UNKNOWN_TOPIC_ID.
//   - INVALID_REQUEST: a name or id given twice (one answer for it), a v6
//     entry with both a name and an id or with neither, or a name whose id
//     was also given.
//
// Not supported: delete.topic.enable (deletion is always allowed) and
// controller mutation quotas. Answers are in a fixed order (Kafka shuffles
// them, which clients must not rely on either).
//
// Authorization: DELETE on the topic (TOPIC_AUTHORIZATION_FAILED, whether or
// not a topic named so exists; an unknown id stays UNKNOWN_TOPIC_ID).

func init() { register(20, 1, 6, handleDeleteTopics) }

func handleDeleteTopics(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	answer := func(name *string, id cluster.TopicID, err error) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = name, id
		st.ErrorCode = errorCode(err)
		if err != nil {
			st.ErrorMessage = errorMessage(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	var zero cluster.TopicID

	// The names and ids given, in order, each once.
	var names []string
	var ids []cluster.TopicID
	nameCount, idCount := map[string]int{}, map[cluster.TopicID]int{}
	addName := func(n string) {
		if nameCount[n]++; nameCount[n] == 1 {
			names = append(names, n)
		}
	}
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			addName(n)
		}
	}
	for _, t := range req.Topics {
		if req.Version < 6 {
			break
		}
		switch {
		case t.Topic == nil && t.TopicID == zero:
			answer(nil, zero, newAPIError(errInvalidRequest, "Neither topic name nor id were specified."))
		case t.Topic == nil:
			if idCount[t.TopicID]++; idCount[t.TopicID] == 1 {
				ids = append(ids, t.TopicID)
			}
		case t.TopicID == zero:
			addName(*t.Topic)
		default:
			answer(t.Topic, t.TopicID, newAPIError(errInvalidRequest, "You may not specify both topic name and topic id."))
		}
	}
	for _, n := range names {
		if nameCount[n] > 1 {
			answer(kmsg.StringPtr(n), zero, newAPIError(errInvalidRequest, "Duplicate topic name."))
		}
	}
	for _, id := range ids {
		if idCount[id] > 1 {
			answer(nil, id, newAPIError(errInvalidRequest, "Duplicate topic id."))
		}
	}

	// Resolve everything to the topics to delete, by id as Kafka does.
	type target struct {
		name string
		id   cluster.TopicID
	}
	var targets []target
	byID := map[cluster.TopicID]int{} // index in targets
	for _, id := range ids {
		if idCount[id] > 1 {
			continue
		}
		t, ok := b.Cluster.TopicByID(id)
		if !ok {
			answer(nil, id, newAPIError(errUnknownTopicID, "%s", kerr.UnknownTopicID.Description))
			continue
		}
		if !b.allowed(r, acl.Delete, acl.Topic, t.Name) {
			answer(nil, id, newAPIError(kerr.TopicAuthorizationFailed, "Authorization failed."))
			continue
		}
		byID[id] = len(targets)
		targets = append(targets, target{t.Name, id})
	}
	dropped := map[int]bool{}
	for _, n := range names {
		if nameCount[n] > 1 {
			continue
		}
		if !b.allowed(r, acl.Delete, acl.Topic, n) {
			answer(kmsg.StringPtr(n), zero, newAPIError(kerr.TopicAuthorizationFailed, "Authorization failed."))
			continue
		}
		t, ok := b.Cluster.Topic(n)
		if !ok {
			answer(kmsg.StringPtr(n), zero, newAPIError(cluster.ErrUnknownTopic, "%s", kerr.UnknownTopicOrPartition.Description))
			continue
		}
		if i, dup := byID[t.ID]; dup {
			dropped[i] = true
			answer(kmsg.StringPtr(n), t.ID, newAPIError(errInvalidRequest, "The provided topic name maps to an ID that was already supplied."))
			continue
		}
		byID[t.ID] = len(targets)
		targets = append(targets, target{n, t.ID})
	}

	gate := b.mutations(r, req.Version >= 5)
	for i, t := range targets {
		if dropped[i] {
			continue
		}
		// Deleting by name, check the id still names the topic: it may
		// have been deleted and created again meanwhile.
		cur, ok := b.Cluster.Topic(t.name)
		if !ok || cur.ID != t.id {
			answer(kmsg.StringPtr(t.name), t.id, newAPIError(errUnknownTopicID, "%s", kerr.UnknownTopicID.Description))
			continue
		}
		if err := gate.refused(); err != nil {
			answer(kmsg.StringPtr(t.name), t.id, err)
			continue
		}
		_, err := b.Topics.DeleteTopic(t.name)
		if errors.Is(err, cluster.ErrUnknownTopic) {
			err = newAPIError(errUnknownTopicID, "%s", kerr.UnknownTopicID.Description)
		}
		if err == nil {
			gate.count(int(cur.Partitions))
		}
		answer(kmsg.StringPtr(t.name), t.id, err)
	}
	gate.finish(resp)
	return reply(resp)
}
