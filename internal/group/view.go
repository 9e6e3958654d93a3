package group

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/strandlog/strand/internal/model"
)

// View is a group as the admin listener shows it, whichever protocol it
// speaks: its members with their client software and partitions, and its
// committed offsets.
type View struct {
	Group        string
	Type         string // classic or consumer
	State        string
	ProtocolType string
	// Protocol is the classic generation's protocol (the assignor), or a
	// consumer group's server assignor.
	Protocol   string
	Generation int32 // the generation, or the group epoch
	Members    []MemberView
	// Offsets are the group's committed offsets, and the partitions a
	// member owns without one (Committed -1), sorted.
	Offsets []OffsetView
}

// MemberView is one member of a View.
type MemberView struct {
	Owner
	// Protocol is the protocol the member speaks: classic or consumer
	// (a consumer group may have classic members while it migrates).
	Protocol   string
	Assignment []model.TopicPartition // sorted
}

// OffsetView is one partition of a View.
type OffsetView struct {
	model.TopicPartition
	Committed int64  // -1: none
	Metadata  string // the commit's metadata
	Owner     string // the member id of its owner; empty when nobody owns it
}

// Views are the groups this coordinator serves, sorted by id.
func (c *Coordinator) Views() []View {
	var out []View
	for _, g := range c.snapshot() {
		if v, ok := g.view(); ok {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b View) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// View is one group; false when this coordinator serves no such group.
func (c *Coordinator) View(id string) (View, bool) {
	if c.serves(id) != nil {
		return View{}, false
	}
	g, ok := c.lookup(id, false)
	if !ok {
		return View{}, false
	}
	return g.view()
}

func (g *group) view() (View, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unloaded || g.state == stateDead {
		return View{}, false
	}
	k := g.kind()
	v := View{Group: g.id, Type: k.typeName(), State: k.stateName(), ProtocolType: g.protocolType}
	var live map[string]bool
	v.Protocol, v.Generation, v.Members, live = k.memberViews()
	if g.modern != nil && v.Protocol == "" {
		v.Protocol = g.c.cfg.ConsumerAssignors[0]
	}
	// A partition's owner stays in owners after it left (the previous
	// owner of the next hand-off): only members still here own.
	owned := map[string][]model.TopicPartition{}
	owner := map[model.TopicPartition]string{}
	for tp, o := range g.owners {
		if live[o.MemberID] {
			owned[o.MemberID] = append(owned[o.MemberID], tp)
			owner[tp] = o.MemberID
		}
	}
	for i := range v.Members {
		v.Members[i].Assignment = slices.SortedFunc(slices.Values(owned[v.Members[i].MemberID]), compareTP)
	}
	for tp, o := range g.offsets.committed {
		v.Offsets = append(v.Offsets, OffsetView{TopicPartition: tp, Committed: o.Offset, Metadata: o.Metadata, Owner: owner[tp]})
	}
	for tp, id := range owner {
		if _, ok := g.offsets.committed[tp]; !ok {
			v.Offsets = append(v.Offsets, OffsetView{TopicPartition: tp, Committed: -1, Owner: id})
		}
	}
	slices.SortFunc(v.Offsets, func(a, b OffsetView) int { return compareTP(a.TopicPartition, b.TopicPartition) })
	return v, true
}

func compareTP(a, b model.TopicPartition) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// memberViews: the generation's protocol, the generation, the members
// (without assignments) and their ids.
func (cl *classicGroup) memberViews() (string, int32, []MemberView, map[string]bool) {
	live := make(map[string]bool, len(cl.members))
	var ms []MemberView
	for _, id := range slices.Sorted(maps.Keys(cl.members)) {
		live[id] = true
		ms = append(ms, MemberView{Owner: ownerOf(cl.members[id]), Protocol: "classic"})
	}
	return cl.protocolName, cl.generation, ms, live
}

func (cg *consumerGroup) memberViews() (string, int32, []MemberView, map[string]bool) {
	live := make(map[string]bool, len(cg.members))
	var ms []MemberView
	for _, m := range cg.sortedMembers() {
		live[m.id] = true
		mv := MemberView{Owner: m.owner(), Protocol: "consumer"}
		if m.classic != nil {
			mv.Protocol = "classic"
		}
		ms = append(ms, mv)
	}
	return cg.assignorName, cg.epoch, ms, live
}
