package assign

import "slices"

// tp names one partition: a topic index and a partition number.
type tp struct{ topic, partition int32 }

// local reports whether member i's rack holds a replica of partition p of
// topic t. A member or partition whose racks are unknown is local to
// nothing.
func (g *group) local(i, t, p int32) bool {
	rack := g.members[i].rack
	racks := g.topics[t].racks
	if rack == "" || racks == nil {
		return false
	}
	return slices.Contains(racks[p], rack)
}

// rackSet returns the known racks of the given members, nil when rack
// logic is off.
func (g *group) rackSet(members []int32) map[string]bool {
	if !g.rackAware {
		return nil
	}
	set := make(map[string]bool)
	for _, i := range members {
		if r := g.members[i].rack; r != "" {
			set[r] = true
		}
	}
	return set
}

// pool holds the partitions that need a new owner. A taker gets one with a
// replica on its rack while one is left, otherwise the first one left.
// Partitions local to none of the takers come first in that order, so a
// taker with no local choice leaves the local ones to the others. Without
// racks a pool hands the partitions out in the order given, so the rack
// logic changes only which partition a taker gets, never how many.
type pool struct {
	items    []tp
	taken    []bool
	next     int
	byRack   map[string][]int32 // rack → indices into items, ascending
	rackNext map[string]int
}

// newPool returns a pool of items for takers on the given racks.
func (g *group) newPool(items []tp, racks map[string]bool) *pool {
	p := &pool{items: items, taken: make([]bool, len(items))}
	if len(racks) == 0 {
		return p
	}
	near := func(it tp) bool {
		if g.topics[it.topic].racks == nil {
			return false
		}
		for _, r := range g.topics[it.topic].racks[it.partition] {
			if racks[r] {
				return true
			}
		}
		return false
	}
	ordered := make([]tp, 0, len(items))
	for _, it := range items {
		if !near(it) {
			ordered = append(ordered, it)
		}
	}
	firstNear := len(ordered)
	for _, it := range items {
		if near(it) {
			ordered = append(ordered, it)
		}
	}
	p.items = ordered
	p.byRack = make(map[string][]int32)
	p.rackNext = make(map[string]int)
	for idx := firstNear; idx < len(ordered); idx++ {
		it := ordered[idx]
		for _, r := range g.topics[it.topic].racks[it.partition] {
			list := p.byRack[r]
			// Two replicas on one rack must not list the partition twice.
			if racks[r] && (len(list) == 0 || list[len(list)-1] != int32(idx)) {
				p.byRack[r] = append(list, int32(idx))
			}
		}
	}
	return p
}

// take hands out a partition for a taker on rack ("" when unknown), false
// when the pool is empty.
func (p *pool) take(rack string) (tp, bool) {
	if list := p.byRack[rack]; rack != "" && len(list) > 0 {
		n := p.rackNext[rack]
		for n < len(list) && p.taken[list[n]] {
			n++
		}
		p.rackNext[rack] = n
		if n < len(list) {
			idx := list[n]
			p.taken[idx] = true
			return p.items[idx], true
		}
	}
	for p.next < len(p.items) && p.taken[p.next] {
		p.next++
	}
	if p.next == len(p.items) {
		return tp{}, false
	}
	p.taken[p.next] = true
	return p.items[p.next], true
}
