package group

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ConsumerGroupDescription is one group as ConsumerGroupDescribe shows it.
type ConsumerGroupDescription struct {
	Err             error
	Group           string
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ConsumerMemberDescription
}

// ConsumerMemberDescription is one member of a consumer group.
type ConsumerMemberDescription struct {
	MemberID    string
	InstanceID  *string
	RackID      *string
	MemberEpoch int32
	ClientID    string
	ClientHost  string
	TopicNames  []string
	TopicRegex  *string
	Assignment  []DescribedTopic
	Target      []DescribedTopic
	Classic     bool // a member of the classic protocol (migration.go)
}

// DescribedTopic is a topic's partitions in a description.
type DescribedTopic struct {
	ID         [16]byte
	Name       string
	Partitions []int32
}

// DescribeConsumerGroups serves ConsumerGroupDescribe. A group that is not
// a consumer group is GROUP_ID_NOT_FOUND, as Kafka answers it.
func (c *Coordinator) DescribeConsumerGroups(ids []string) []ConsumerGroupDescription {
	out := make([]ConsumerGroupDescription, 0, len(ids))
	for _, id := range ids {
		out = append(out, c.describeConsumerGroup(id))
	}
	return out
}

func (c *Coordinator) describeConsumerGroup(id string) ConsumerGroupDescription {
	d := ConsumerGroupDescription{Group: id, State: "Dead"}
	if id == "" {
		d.Err = ErrInvalidGroupID
		return d
	}
	if err := c.serves(id); err != nil {
		d.Err = err
		return d
	}
	g, ok := c.lookup(id, false)
	if !ok {
		d.Err = fmt.Errorf("%w: group %s not found", ErrGroupIDNotFound, id)
		return d
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.unloaded:
		d.Err = ErrNotCoordinator
		return d
	case g.state == stateDead:
		d.Err = fmt.Errorf("%w: group %s not found", ErrGroupIDNotFound, id)
		return d
	case g.modern == nil:
		d.Err = fmt.Errorf("%w: group %s is not a consumer group", ErrGroupIDNotFound, id)
		return d
	}
	cg := g.modern
	d.State, d.Epoch, d.AssignmentEpoch = cg.stateName(), cg.epoch, cg.assignmentEpoch
	d.Assignor = cg.assignorName
	if d.Assignor == "" {
		d.Assignor = c.cfg.ConsumerAssignors[0]
	}
	for _, m := range cg.sortedMembers() {
		md := ConsumerMemberDescription{MemberID: m.id, MemberEpoch: m.epoch, ClientID: m.clientID, ClientHost: m.clientHost,
			Classic:    m.classic != nil,
			TopicNames: slices.Clone(m.topicNames)}
		if m.instanceID != "" {
			md.InstanceID = &m.instanceID
		}
		if m.rackID != "" {
			md.RackID = &m.rackID
		}
		if m.topicRegex != "" {
			md.TopicRegex = &m.topicRegex
		}
		if md.TopicNames == nil {
			md.TopicNames = []string{}
		}
		for id, ps := range m.assigned {
			md.Assignment = append(md.Assignment, DescribedTopic{ID: id, Name: cg.names[id], Partitions: slices.Sorted(maps.Keys(ps))})
		}
		for id, ps := range cg.target[m.id] {
			md.Target = append(md.Target, DescribedTopic{ID: id, Name: cg.names[id], Partitions: slices.Clone(ps)})
		}
		sortTopics(md.Assignment)
		sortTopics(md.Target)
		d.Members = append(d.Members, md)
	}
	return d
}

func sortTopics(ts []DescribedTopic) {
	slices.SortFunc(ts, func(a, b DescribedTopic) int {
		if a.Name != b.Name {
			return strings.Compare(a.Name, b.Name)
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
}
