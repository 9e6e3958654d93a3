package assign

import (
	"cmp"
	"encoding/binary"
	"slices"
)

type rangeAssignor struct{}

func (rangeAssignor) Name() string { return RangeName }

// Assign follows Kafka 4's RangeAssignor: it recomputes the ranges every
// time and ignores Current. Its stickiness comes from static members: a
// member that restarts under a new member id keeps its instance id, and so
// its place in the order and its ranges.
func (rangeAssignor) Assign(spec Spec) (Assignment, error) {
	g, err := newGroup(spec)
	if err != nil {
		return nil, err
	}
	return g.result(g.ranges())
}

// rangeOrder returns the member indices in range order: static members
// first, by instance id, then the others by member id.
func (g *group) rangeOrder() []int32 {
	order := make([]int32, len(g.members))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		ia, ib := g.members[a].instanceID, g.members[b].instanceID
		switch {
		case ia != "" && ib != "":
			return cmp.Compare(ia, ib)
		case ia != "":
			return -1
		case ib != "":
			return 1
		}
		return cmp.Compare(a, b) // members are sorted by id
	})
	return order
}

// rangeQuotas returns how many partitions of a topic each subscriber gets,
// in range order: partitions/subscribers each, one more for the first
// partitions%subscribers.
func rangeQuotas(partitions int32, subscribers int) []int32 {
	n := int32(subscribers)
	quotas := make([]int32, n)
	if n == 0 {
		return quotas
	}
	for s := range quotas {
		quotas[s] = partitions / n
		if int32(s) < partitions%n {
			quotas[s]++
		}
	}
	return quotas
}

// ranges computes the range assignment. Topics with the same partition
// count and the same subscribers form a co-partitioned set: partition p of
// each of them goes to the same member.
func (g *group) ranges() [][]int32 {
	subscribers := make([][]int32, len(g.topics))
	for _, i := range g.rangeOrder() {
		for _, t := range g.members[i].topics {
			subscribers[t] = append(subscribers[t], i)
		}
	}
	owners := g.newOwners()
	if !g.rackAware {
		for t := range g.topics {
			fillRanges(owners[t], subscribers[t], rangeQuotas(g.topics[t].partitions, len(subscribers[t])))
		}
		return owners
	}

	var sets [][]int32
	setOf := make(map[string]int)
	var key []byte
	for t := range g.topics {
		key = binary.AppendVarint(key[:0], int64(g.topics[t].partitions))
		for _, i := range subscribers[t] {
			key = binary.AppendVarint(key, int64(i))
		}
		k, ok := setOf[string(key)]
		if !ok {
			k = len(sets)
			setOf[string(key)] = k
			sets = append(sets, nil)
		}
		sets[k] = append(sets[k], int32(t))
	}
	for _, set := range sets {
		subs := subscribers[set[0]]
		remaining := rangeQuotas(g.topics[set[0]].partitions, len(subs))
		g.matchRacks(owners, set, subs, remaining)
		for _, t := range set {
			fillRanges(owners[t], subs, slices.Clone(remaining))
		}
	}
	return owners
}

// fillRanges gives the unowned partitions of one topic, in order, to its
// subscribers in range order, each up to its remaining quota. Without a
// rack pass before it these are plain contiguous ranges.
func fillRanges(owners []int32, subscribers []int32, remaining []int32) {
	s := 0
	for p := range owners {
		if owners[p] != unowned {
			continue
		}
		for remaining[s] == 0 {
			s++
		}
		owners[p] = subscribers[s]
		remaining[s]--
	}
}

// matchRacks is the rack pass over a co-partitioned set of topics, after
// the classic RangeAssignor of KIP-881. In partition order, partition p of
// every topic of the set goes to the first subscriber, in range order, with
// quota left whose rack holds a replica of p in each of those topics. A
// member without a rack has no preference and matches any partition. The
// quotas stay those of plain ranges, so balance does not change; and when
// every partition matches every member the result is plain ranges.
func (g *group) matchRacks(owners [][]int32, set []int32, subs []int32, remaining []int32) {
	var rackless []int32
	byRack := make(map[string][]int32)
	for s, i := range subs {
		if r := g.members[i].rack; r == "" {
			rackless = append(rackless, int32(s))
		} else {
			byRack[r] = append(byRack[r], int32(s))
		}
	}
	// first returns the first slot of list with quota left, -1 if none. The
	// cursor only moves forward: quotas only shrink.
	first := func(list []int32, cursor *int) int32 {
		for *cursor < len(list) && remaining[list[*cursor]] == 0 {
			*cursor++
		}
		if *cursor < len(list) {
			return list[*cursor]
		}
		return -1
	}
	racklessCursor := 0
	cursors := make(map[string]int)
	lead := g.topics[set[0]].racks
	for p := range g.topics[set[0]].partitions {
		best := first(rackless, &racklessCursor)
		if lead != nil {
			for _, r := range lead[p] {
				list, ok := byRack[r]
				if !ok || !g.rackHoldsAll(set[1:], p, r) {
					continue
				}
				cursor := cursors[r]
				s := first(list, &cursor)
				cursors[r] = cursor
				if s >= 0 && (best < 0 || s < best) {
					best = s
				}
			}
		}
		if best < 0 {
			continue
		}
		for _, t := range set {
			owners[t][p] = subs[best]
		}
		remaining[best]--
	}
}

// rackHoldsAll reports whether rack holds a replica of partition p of each
// of the topics.
func (g *group) rackHoldsAll(topics []int32, p int32, rack string) bool {
	for _, t := range topics {
		racks := g.topics[t].racks
		if racks == nil || !slices.Contains(racks[p], rack) {
			return false
		}
	}
	return true
}
