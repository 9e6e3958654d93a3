package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/model"
)

// A group is read whichever protocol it speaks: a classic group answers
// DescribeGroups, a consumer group (KIP-848) ConsumerGroupDescribe, and a
// consumer group is Dead to DescribeGroups, as in Kafka.

// groupState is a group as the tools show it.
type groupState struct {
	group, groupType, state, protocolType, protocol string
	members                                         []groupMember
	partitions                                      []partitionLag // sorted
}

// groupMember is one member with the partitions it owns.
type groupMember struct {
	id, instance, clientID, host string
	owned                        []model.TopicPartition // sorted
}

// ownedLabel is a member's partitions as the tables show them.
func (m groupMember) ownedLabel() string {
	parts := make([]string, len(m.owned))
	for i, tp := range m.owned {
		parts[i] = tp.String()
	}
	return orDash(strings.Join(parts, " "))
}

// partitionLag is one partition the group owns or has committed.
type partitionLag struct {
	model.TopicPartition
	// committed is -1 when the group has no commit; end -1 when it could
	// not be listed; lag -1 when unknown (without a commit it counts from
	// the partition's start, as Kafka's tools do).
	committed, end, lag int64
	owner               *groupMember
}

// groupData is a group as --format json and yaml print it: -1 for an
// offset or lag that is not known.
type groupData struct {
	Group        string          `json:"group"`
	Type         string          `json:"type"`
	State        string          `json:"state"`
	ProtocolType string          `json:"protocol_type"`
	Protocol     string          `json:"protocol"`
	Members      []memberData    `json:"members"`
	Partitions   []partitionData `json:"partitions"`
	TotalLag     int64           `json:"total_lag"`
}

type memberData struct {
	MemberID   string         `json:"member_id"`
	InstanceID string         `json:"instance_id,omitempty"`
	ClientID   string         `json:"client_id"`
	Host       string         `json:"host"`
	Owned      []partitionRef `json:"partitions"`
}

type partitionRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

type partitionData struct {
	partitionRef
	Committed int64  `json:"committed"`
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
	MemberID  string `json:"member_id,omitempty"`
}

func (g groupState) data() groupData {
	d := groupData{Group: g.group, Type: g.groupType, State: g.state, ProtocolType: g.protocolType, Protocol: g.protocol,
		Members: []memberData{}, Partitions: []partitionData{}, TotalLag: g.totalLag()}
	for _, m := range g.members {
		md := memberData{MemberID: m.id, InstanceID: m.instance, ClientID: m.clientID, Host: m.host, Owned: []partitionRef{}}
		for _, tp := range m.owned {
			md.Owned = append(md.Owned, partitionRef{tp.Topic, tp.Partition})
		}
		d.Members = append(d.Members, md)
	}
	for _, p := range g.partitions {
		pd := partitionData{partitionRef: partitionRef{p.Topic, p.Partition}, Committed: p.committed, End: p.end, Lag: p.lag}
		if p.owner != nil {
			pd.MemberID = p.owner.id
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d
}

// exists says whether the group is known to the cluster.
func (g groupState) exists() bool { return g.groupType != "" }

// totalLag sums the known lags.
func (g groupState) totalLag() int64 {
	var n int64
	for _, p := range g.partitions {
		n += max(p.lag, 0)
	}
	return n
}

// readGroup reads group's members, their partitions, and the lag of each
// partition it owns or has committed. A group the cluster does not know
// has no type.
func readGroup(ctx context.Context, adm *kadm.Client, group string) (groupState, error) {
	g := groupState{group: group}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return g, err
	}
	l, ok := listed[group]
	if !ok {
		return g, nil
	}
	g.groupType, g.state, g.protocolType = cmp.Or(l.GroupType, "classic"), l.State, l.ProtocolType
	add := func(m groupMember, parts kadm.TopicsSet) {
		parts.Each(func(t string, p int32) { m.owned = append(m.owned, model.TopicPartition{Topic: t, Partition: p}) })
		slices.SortFunc(m.owned, compareTP)
		g.members = append(g.members, m)
	}
	if g.groupType == "consumer" {
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return g, err
		}
		d := ds[group]
		if d.Err != nil {
			return g, fmt.Errorf("describing group %s: %w", group, d.Err)
		}
		g.state, g.protocolType, g.protocol = d.State, "consumer", d.AssignorName
		for _, m := range d.Members {
			add(groupMember{id: m.MemberID, instance: deref(m.InstanceID), clientID: m.ClientID, host: m.ClientHost}, m.Assignment)
		}
	} else {
		ds, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return g, err
		}
		d := ds[group]
		if d.Err != nil {
			return g, fmt.Errorf("describing group %s: %w", group, d.Err)
		}
		g.state, g.protocolType, g.protocol = d.State, d.ProtocolType, d.Protocol
		for _, m := range d.Members {
			parts := kadm.TopicsSet{}
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					parts.Add(t.Topic, t.Partitions...)
				}
			}
			add(groupMember{id: m.MemberID, instance: deref(m.InstanceID), clientID: m.ClientID, host: m.ClientHost}, parts)
		}
	}

	commits, err := fetchOffsets(ctx, adm, group)
	if err == nil {
		err = commits.Error()
	}
	if err != nil {
		return g, fmt.Errorf("fetching the offsets of group %s: %w", group, err)
	}
	lags := map[model.TopicPartition]*partitionLag{}
	lagOf := func(tp model.TopicPartition) *partitionLag {
		if pl, ok := lags[tp]; ok {
			return pl
		}
		pl := &partitionLag{TopicPartition: tp, committed: -1, end: -1, lag: -1}
		lags[tp] = pl
		return pl
	}
	commits.Each(func(r kadm.OffsetResponse) {
		lagOf(model.TopicPartition{Topic: r.Topic, Partition: r.Partition}).committed = r.At
	})
	for i := range g.members {
		for _, tp := range g.members[i].owned {
			lagOf(tp).owner = &g.members[i]
		}
	}
	var topics []string
	for tp := range lags {
		topics = append(topics, tp.Topic)
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	if len(topics) > 0 {
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return g, fmt.Errorf("listing end offsets: %w", err)
		}
		starts, err := adm.ListStartOffsets(ctx, topics...)
		if err != nil {
			return g, fmt.Errorf("listing start offsets: %w", err)
		}
		for tp, pl := range lags {
			end, ok := ends.Lookup(tp.Topic, tp.Partition)
			if !ok || end.Err != nil {
				continue
			}
			pl.end = end.Offset
			from := pl.committed
			if from < 0 {
				if start, ok := starts.Lookup(tp.Topic, tp.Partition); ok && start.Err == nil {
					from = start.Offset
				}
			}
			if from >= 0 {
				pl.lag = max(0, pl.end-from)
			}
		}
	}
	for _, pl := range lags {
		g.partitions = append(g.partitions, *pl)
	}
	slices.SortFunc(g.partitions, func(a, b partitionLag) int { return compareTP(a.TopicPartition, b.TopicPartition) })
	return g, nil
}

func compareTP(a, b model.TopicPartition) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
