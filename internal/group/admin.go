package group

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/strandlog/strand/internal/model"
)

// GroupDescription is one group as DescribeGroups shows it.
type GroupDescription struct {
	Group        string
	Err          error
	State        string
	ProtocolType string
	Protocol     string // while Stable
	Members      []MemberDescription
}

// MemberDescription is one member; Metadata and Assignment are set while
// the group is Stable.
type MemberDescription struct {
	MemberID   string
	InstanceID *string
	ClientID   string
	ClientHost string
	Metadata   []byte
	Assignment []byte
}

// Describe serves DescribeGroups. An unknown group is described as Dead
// with no error, as Kafka does before DescribeGroups v6.
func (c *Coordinator) Describe(ids []string) []GroupDescription {
	out := make([]GroupDescription, 0, len(ids))
	for _, id := range ids {
		out = append(out, c.describe(id))
	}
	return out
}

func (c *Coordinator) describe(id string) GroupDescription {
	d := GroupDescription{Group: id, State: stateDead.String()}
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
		return d
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unloaded {
		d.Err = ErrNotCoordinator
		return d
	}
	if g.modern != nil {
		// Kafka: DescribeGroups describes classic groups only; a
		// consumer group answers ConsumerGroupDescribe.
		d.Err = fmt.Errorf("%w: group %s is not a classic group", ErrGroupIDNotFound, id)
		return d
	}
	d.State, d.ProtocolType = g.state.String(), g.protocolType
	stable := g.state == stateStable
	if stable {
		d.Protocol = g.protocolName
	}
	for _, m := range g.sortedMembers() {
		md := MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
		if stable {
			md.Metadata, md.Assignment = m.metadata(g.protocolName), m.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d
}

// ListedGroup is one group as ListGroups shows it.
type ListedGroup struct {
	Group        string
	ProtocolType string
	State        string
	Type         string // "classic" or "consumer"
}

// List serves ListGroups: every group, or those in one of states and of one
// of types (both matched without regard to case; empty matches all).
func (c *Coordinator) List(states, types []string) []ListedGroup {
	var out []ListedGroup
	for _, g := range c.snapshot() {
		g.mu.Lock()
		k := g.kind()
		lg := ListedGroup{Group: g.id, ProtocolType: g.protocolType, State: k.stateName(), Type: k.typeName()}
		dead := g.state == stateDead
		g.mu.Unlock()
		if dead || !matchesAny(states, lg.State) || !matchesAny(types, lg.Type) {
			continue
		}
		out = append(out, lg)
	}
	slices.SortFunc(out, func(a, b ListedGroup) int { return strings.Compare(a.Group, b.Group) })
	return out
}

func matchesAny(filter []string, v string) bool {
	if len(filter) == 0 {
		return true
	}
	return slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
}

// DeleteGroup serves one group of a DeleteGroups: an empty group is gone
// at once, with its offsets pending in open transactions, and the answer
// comes once its tombstones (each offset's and the group's) are durable.
func (c *Coordinator) DeleteGroup(id string) <-chan error {
	ch := make(chan error, 1)
	if id == "" {
		ch <- ErrInvalidGroupID
		return ch
	}
	if err := c.serves(id); err != nil {
		ch <- err
		return ch
	}
	g, ok := c.lookup(id, false)
	if !ok {
		ch <- ErrGroupIDNotFound
		return ch
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case stateDead:
		ch <- ErrGroupIDNotFound
		return ch
	case stateStable, statePreparingRebalance, stateCompletingRebalance:
		ch <- ErrNonEmptyGroup
		return ch
	}
	if g.hasMembers() {
		ch <- ErrNonEmptyGroup
		return ch
	}
	if g.unloaded {
		ch <- ErrNotCoordinator
		return ch
	}
	var recs []model.KeyValue
	for _, tp := range sortedPartitions(g.offsets.committed) {
		recs = append(recs, model.KeyValue{Key: offsetKey(g.id, tp)})
	}
	// Offsets pending in open transactions go too, as in Kafka's
	// deleteAllOffsets: a tombstone for each partition that has no
	// committed offset (one tombstone per partition is enough), so that
	// replay drops them and a commit marker brings nothing back.
	pendingOnly := map[model.TopicPartition]offset{}
	for _, pend := range g.offsets.pending {
		for tp, o := range pend {
			if _, ok := g.offsets.committed[tp]; !ok {
				pendingOnly[tp] = o
			}
		}
	}
	for _, tp := range sortedPartitions(pendingOnly) {
		recs = append(recs, model.KeyValue{Key: offsetKey(g.id, tp)})
	}
	recs = append(recs, g.kind().deleteRecords(g.id)...)
	clear(g.offsets.committed)
	clear(g.offsets.pending)
	g.die()
	c.log.Info("deleted group", "group", id)
	if err := g.write(recs, func(_ int64, err error) { ch <- storeError(err) }); err != nil {
		ch <- storeError(err)
	}
	return ch
}

func sortedPartitions(m map[model.TopicPartition]offset) []model.TopicPartition {
	tps := make([]model.TopicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b model.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return tps
}
