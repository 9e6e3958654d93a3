package assign

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

type uniformAssignor struct{}

func (uniformAssignor) Name() string { return UniformName }

// Assign picks the builder as Kafka's UniformAssignor does: the homogeneous
// one when every member subscribes to the same topics, the heterogeneous
// one otherwise.
func (uniformAssignor) Assign(spec Spec) (Assignment, error) {
	g, err := newGroup(spec)
	if err != nil {
		return nil, err
	}
	var owners [][]int32
	if g.homogeneous() {
		owners, err = g.uniformHomogeneous()
		if err != nil {
			return nil, err
		}
	} else {
		owners = g.uniformHeterogeneous()
	}
	return g.result(owners)
}

// uniformHomogeneous follows Kafka's UniformHomogeneousAssignmentBuilder.
// Each member's quota is total/members partitions, and total%members
// members get one more. A member keeps what it owns up to its quota; what
// is left over goes to the members below their quota, in member order.
func (g *group) uniformHomogeneous() ([][]int32, error) {
	owners := g.currentOwners()
	n := len(g.members)
	if n == 0 {
		return owners, nil
	}
	total := 0
	for _, t := range g.topics {
		total += int(t.partitions)
	}
	minQuota, spare := total/n, total%n

	// owned lists each member's partitions in topic and partition order,
	// so which ones it keeps never depends on the order of Current.
	owned := make([][]tp, n)
	for t, table := range owners {
		for p, o := range table {
			if o != unowned {
				owned[o] = append(owned[o], tp{int32(t), int32(p)})
			}
		}
	}

	quota := make([]int, n)
	for i := range quota {
		quota[i] = minQuota
	}
	// The spare partitions go first to members that hold more than the
	// minimum, so each of those keeps one more. Kafka hands them to the
	// first members it meets, which can move partitions in a group that is
	// already balanced.
	for i := 0; i < n && spare > 0; i++ {
		if len(owned[i]) > minQuota {
			quota[i]++
			spare--
		}
	}
	for i := 0; i < n && spare > 0; i++ {
		if quota[i] == minQuota {
			quota[i]++
			spare--
		}
	}

	var takers []int32
	for i := range owned {
		switch excess := len(owned[i]) - quota[i]; {
		case excess > 0:
			for _, it := range g.shed(int32(i), owned[i], excess) {
				owners[it.topic][it.partition] = unowned
			}
		case excess < 0:
			takers = append(takers, int32(i))
		}
	}

	var free []tp
	for t, table := range owners {
		for p, o := range table {
			if o == unowned {
				free = append(free, tp{int32(t), int32(p)})
			}
		}
	}
	pool := g.newPool(free, g.rackSet(takers))
	for _, i := range takers {
		for k := len(owned[i]); k < quota[i]; k++ {
			it, ok := pool.take(g.members[i].rack)
			if !ok {
				return nil, fmt.Errorf("assign: internal error: quotas exceed the %d partitions", total)
			}
			owners[it.topic][it.partition] = i
		}
	}
	return owners, nil
}

// shed picks n of member i's owned partitions to give up: the last ones,
// those without a replica on its rack before those with one.
func (g *group) shed(i int32, owned []tp, n int) []tp {
	out := make([]tp, 0, n)
	for k := len(owned) - 1; k >= 0 && len(out) < n; k-- {
		if !g.local(i, owned[k].topic, owned[k].partition) {
			out = append(out, owned[k])
		}
	}
	for k := len(owned) - 1; k >= 0 && len(out) < n; k-- {
		if g.local(i, owned[k].topic, owned[k].partition) {
			out = append(out, owned[k])
		}
	}
	return out
}

// maxBalancePasses bounds the balancing rounds over all topics, as Kafka's
// heterogeneous builder does (16 iterations). A round usually settles the
// group; overlapping subscriptions can take more, and past the bound the
// group stays slightly unbalanced rather than cost more.
const maxBalancePasses = 16

// heterogeneous is the state of Kafka's UniformHeterogeneousAssignmentBuilder
// at work. While it runs, owners hold slots: a member's position among the
// topic's subscribers.
type heterogeneous struct {
	g      *group
	owners [][]int32
	// original holds the owners (member indices) the run started from:
	// moving a partition back to its original owner, or on from a member
	// that only got it during this run, costs no extra movement.
	original [][]int32
	load     []int32   // per member, partitions of all topics
	count    [][]int32 // per topic and slot, partitions of that topic
}

// uniformHeterogeneous keeps every member's current partitions of the
// topics it subscribes to, hands the other partitions topic by topic to
// the least loaded subscribers, then moves partitions from the most to the
// least loaded subscribers of each topic until no move helps.
func (g *group) uniformHeterogeneous() [][]int32 {
	h := &heterogeneous{
		g:      g,
		owners: g.currentOwners(),
		load:   make([]int32, len(g.members)),
		count:  make([][]int32, len(g.topics)),
	}
	h.original = make([][]int32, len(h.owners))
	for t := range h.owners {
		h.original[t] = slices.Clone(h.owners[t])
	}
	for t := range g.topics {
		subs := g.topics[t].subscribers
		h.count[t] = make([]int32, len(subs))
		for p, o := range h.owners[t] {
			if o == unowned {
				continue
			}
			s, _ := slices.BinarySearch(subs, o)
			h.owners[t][p] = int32(s)
			h.count[t][s]++
			h.load[o]++
		}
	}

	// Topics with the most partitions per subscriber go first: they are
	// the hardest to spread evenly.
	order := make([]int32, len(g.topics))
	for t := range order {
		order[t] = int32(t)
	}
	slices.SortFunc(order, func(a, b int32) int {
		ta, tb := &g.topics[a], &g.topics[b]
		pa, sa := int64(ta.partitions), int64(len(ta.subscribers))
		pb, sb := int64(tb.partitions), int64(len(tb.subscribers))
		if c := cmp.Compare(pb*sa, pa*sb); c != 0 {
			return c
		}
		if c := cmp.Compare(sa, sb); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, t := range order {
		h.placeUnowned(t)
	}
	h.balance(order)

	for t := range h.owners {
		subs := g.topics[t].subscribers
		for p, s := range h.owners[t] {
			h.owners[t][p] = subs[s]
		}
	}
	return h.owners
}

// leastLoaded orders a topic's slots by their member's load, then slot.
func (h *heterogeneous) leastLoaded(t int32) func(a, b int32) bool {
	subs := h.g.topics[t].subscribers
	return func(a, b int32) bool {
		la, lb := h.load[subs[a]], h.load[subs[b]]
		return la < lb || la == lb && a < b
	}
}

// placeUnowned gives each unowned partition of topic t to its least loaded
// subscriber at that moment.
func (h *heterogeneous) placeUnowned(t int32) {
	var free []tp
	for p, o := range h.owners[t] {
		if o == unowned {
			free = append(free, tp{t, int32(p)})
		}
	}
	if len(free) == 0 {
		return
	}
	subs := h.g.topics[t].subscribers
	least := newSlotHeap(len(subs), h.leastLoaded(t))
	for s := range subs {
		least.push(int32(s))
	}
	pool := h.g.newPool(free, h.g.rackSet(subs))
	for range free {
		s := least.top()
		it, _ := pool.take(h.g.members[subs[s]].rack)
		h.owners[t][it.partition] = s
		h.count[t][s]++
		h.load[subs[s]]++
		least.fix(s)
	}
}

// balance balances topic after topic until a whole round moves nothing.
func (h *heterogeneous) balance(order []int32) {
	var topics []int32
	for _, t := range order {
		if len(h.g.topics[t].subscribers) >= 2 {
			topics = append(topics, t)
		}
	}
	lastMoved := -1
	for range maxBalancePasses {
		for k, t := range topics {
			if k == lastMoved {
				return
			}
			if h.balanceTopic(t) > 0 || lastMoved == -1 {
				lastMoved = k
			}
		}
	}
}

// balanceTopic moves partitions of topic t from its most loaded subscriber
// that owns one to its least loaded subscriber, while their loads differ by
// more than one. It plans the moves on counts first, then picks the
// partitions, and returns how many moved.
func (h *heterogeneous) balanceTopic(t int32) int {
	subs := h.g.topics[t].subscribers
	count := h.count[t]
	least, most := int32(math.MaxInt32), int32(-1)
	for s, i := range subs {
		least = min(least, h.load[i])
		if count[s] > 0 {
			most = max(most, h.load[i])
		}
	}
	if most-least <= 1 {
		return 0
	}

	byLeast := newSlotHeap(len(subs), h.leastLoaded(t))
	byMost := newSlotHeap(len(subs), func(a, b int32) bool {
		la, lb := h.load[subs[a]], h.load[subs[b]]
		return la > lb || la == lb && a > b
	})
	for s := range subs {
		byLeast.push(int32(s))
		if count[s] > 0 {
			byMost.push(int32(s))
		}
	}
	delta := make([]int32, len(subs))
	moves := 0
	for {
		from, to := byMost.top(), byLeast.top()
		if h.load[subs[from]]-h.load[subs[to]] <= 1 {
			break
		}
		h.load[subs[from]]--
		count[from]--
		delta[from]--
		h.load[subs[to]]++
		count[to]++
		delta[to]++
		moves++
		if count[from] == 0 {
			byMost.remove(from)
		} else {
			byMost.fix(from)
		}
		byLeast.fix(from)
		byLeast.fix(to)
		if byMost.has(to) {
			byMost.fix(to)
		} else {
			byMost.push(to)
		}
	}
	h.move(t, delta)
	return moves
}

// move carries out a plan: slot s gives up -delta[s] partitions of topic t
// or gains delta[s]. First, partitions go back to an original owner that
// is to gain. Then a giver gives what it got during this run before what
// it owned at the start, each time those without a replica on its rack
// first, its last partitions first; and a taker takes partitions with a
// replica on its rack first.
func (h *heterogeneous) move(t int32, delta []int32) {
	g, owners, original, subs := h.g, h.owners[t], h.original[t], h.g.topics[t].subscribers
	type candidate struct{ partition, tier int32 }
	var candidates []candidate
	for p := int32(len(owners)) - 1; p >= 0; p-- {
		s := owners[p]
		if s == unowned || delta[s] >= 0 {
			continue
		}
		if o := original[p]; o != unowned && o != subs[s] {
			if back, ok := slices.BinarySearch(subs, o); ok && delta[back] > 0 {
				owners[p] = int32(back)
				delta[s]++
				delta[back]--
				continue
			}
		}
		var tier int32
		if original[p] == subs[s] {
			tier += 2
		}
		if g.local(subs[s], t, p) {
			tier++
		}
		candidates = append(candidates, candidate{p, tier})
	}
	var freed []tp
	for tier := range int32(4) {
		for _, c := range candidates {
			if s := owners[c.partition]; c.tier == tier && delta[s] < 0 {
				owners[c.partition] = unowned
				delta[s]++
				freed = append(freed, tp{t, c.partition})
			}
		}
	}
	slices.SortFunc(freed, func(a, b tp) int { return cmp.Compare(a.partition, b.partition) })

	var takers []int32
	for s, d := range delta {
		if d > 0 {
			takers = append(takers, subs[s])
		}
	}
	pool := g.newPool(freed, g.rackSet(takers))
	for s := range delta {
		for ; delta[s] > 0; delta[s]-- {
			it, _ := pool.take(g.members[subs[s]].rack)
			owners[it.partition] = int32(s)
		}
	}
}

// slotHeap is a binary heap of slots ordered by less that can fix or drop
// a slot whose key changed.
type slotHeap struct {
	slots []int32
	at    []int32 // slot → its index in slots, -1 when absent
	less  func(a, b int32) bool
}

func newSlotHeap(n int, less func(a, b int32) bool) *slotHeap {
	h := &slotHeap{slots: make([]int32, 0, n), at: make([]int32, n), less: less}
	for s := range h.at {
		h.at[s] = -1
	}
	return h
}

func (h *slotHeap) top() int32       { return h.slots[0] }
func (h *slotHeap) has(s int32) bool { return h.at[s] >= 0 }

func (h *slotHeap) push(s int32) {
	h.slots = append(h.slots, s)
	h.at[s] = int32(len(h.slots) - 1)
	h.up(len(h.slots) - 1)
}

func (h *slotHeap) remove(s int32) {
	k, last := int(h.at[s]), len(h.slots)-1
	h.swap(k, last)
	h.slots = h.slots[:last]
	h.at[s] = -1
	if k < last {
		h.fix(h.slots[k])
	}
}

func (h *slotHeap) fix(s int32) {
	k := int(h.at[s])
	h.up(k)
	h.down(int(h.at[s]))
}

func (h *slotHeap) swap(a, b int) {
	h.slots[a], h.slots[b] = h.slots[b], h.slots[a]
	h.at[h.slots[a]] = int32(a)
	h.at[h.slots[b]] = int32(b)
}

func (h *slotHeap) up(k int) {
	for k > 0 {
		parent := (k - 1) / 2
		if !h.less(h.slots[k], h.slots[parent]) {
			return
		}
		h.swap(k, parent)
		k = parent
	}
}

func (h *slotHeap) down(k int) {
	n := len(h.slots)
	for {
		child := 2*k + 1
		if child >= n {
			return
		}
		if right := child + 1; right < n && h.less(h.slots[right], h.slots[child]) {
			child = right
		}
		if !h.less(h.slots[child], h.slots[k]) {
			return
		}
		h.swap(k, child)
		k = child
	}
}
