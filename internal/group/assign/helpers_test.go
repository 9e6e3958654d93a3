package assign_test

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/strandlog/strand/internal/group/assign"
)

// topics returns a topic map with n partitions for each name, racks unknown.
func topics(nameThenCount ...any) map[string]assign.Topic {
	out := map[string]assign.Topic{}
	for k := 0; k < len(nameThenCount); k += 2 {
		out[nameThenCount[k].(string)] = assign.Topic{Partitions: int32(nameThenCount[k+1].(int))}
	}
	return out
}

// members returns members with the given ids, all subscribed to subs.
func members(subs []string, ids ...string) []assign.Member {
	out := make([]assign.Member, len(ids))
	for k, id := range ids {
		out[k] = assign.Member{ID: id, Topics: slices.Clone(subs)}
	}
	return out
}

// withCurrent returns the members with Current set from a previous
// assignment.
func withCurrent(ms []assign.Member, prev assign.Assignment) []assign.Member {
	out := slices.Clone(ms)
	for k := range out {
		out[k].Current = prev[out[k].ID]
	}
	return out
}

func mustAssign(t testing.TB, a assign.Assignor, spec assign.Spec) assign.Assignment {
	t.Helper()
	out, err := a.Assign(spec)
	if err != nil {
		t.Fatalf("%s: %v", a.Name(), err)
	}
	if err := valid(spec, out); err != nil {
		t.Fatalf("%s: %v\nassignment: %v", a.Name(), err, out)
	}
	return out
}

// subscribed returns, per member id, the set of its topics that exist.
func subscribed(spec assign.Spec) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, m := range spec.Members {
		set := map[string]bool{}
		for _, name := range m.Topics {
			if _, ok := spec.Topics[name]; ok {
				set[name] = true
			}
		}
		out[m.ID] = set
	}
	return out
}

// valid checks the rules every assignor keeps: each member has an entry;
// it gets only partitions of topics it subscribes to, sorted, in range and
// without empty lists; every partition of a subscribed topic goes to
// exactly one member.
func valid(spec assign.Spec, a assign.Assignment) error {
	subs := subscribed(spec)
	if len(a) != len(spec.Members) {
		return fmt.Errorf("%d entries for %d members", len(a), len(spec.Members))
	}
	owner := map[string]map[int32]string{}
	for id, byTopic := range a {
		if _, ok := subs[id]; !ok {
			return fmt.Errorf("unknown member %q in the assignment", id)
		}
		if byTopic == nil {
			return fmt.Errorf("member %q has a nil assignment", id)
		}
		for name, parts := range byTopic {
			if !subs[id][name] {
				return fmt.Errorf("member %q gets %q it does not subscribe to", id, name)
			}
			if len(parts) == 0 {
				return fmt.Errorf("member %q has an empty list for %q", id, name)
			}
			if !slices.IsSorted(parts) {
				return fmt.Errorf("member %q: %q partitions not sorted: %v", id, name, parts)
			}
			for _, p := range parts {
				if p < 0 || p >= spec.Topics[name].Partitions {
					return fmt.Errorf("member %q gets %q partition %d out of range", id, name, p)
				}
				if owner[name] == nil {
					owner[name] = map[int32]string{}
				}
				if other, dup := owner[name][p]; dup {
					return fmt.Errorf("%q partition %d goes to %q and %q", name, p, other, id)
				}
				owner[name][p] = id
			}
		}
	}
	for name, meta := range spec.Topics {
		anyone := false
		for _, set := range subs {
			anyone = anyone || set[name]
		}
		if !anyone {
			continue
		}
		if got := len(owner[name]); got != int(meta.Partitions) {
			return fmt.Errorf("%q: %d of %d partitions assigned", name, got, meta.Partitions)
		}
	}
	return nil
}

// homogeneous reports whether all members subscribe to the same existing
// topics.
func homogeneous(spec assign.Spec) bool {
	subs := subscribed(spec)
	var first map[string]bool
	for _, m := range spec.Members {
		if first == nil {
			first = subs[m.ID]
		} else if !maps.Equal(first, subs[m.ID]) {
			return false
		}
	}
	return true
}

// loads returns each member's partition count.
func loads(a assign.Assignment) map[string]int {
	out := map[string]int{}
	for id, byTopic := range a {
		for _, parts := range byTopic {
			out[id] += len(parts)
		}
	}
	return out
}

// spread returns the largest minus the smallest member load.
func spread(a assign.Assignment) int {
	l := slices.Collect(maps.Values(loads(a)))
	if len(l) == 0 {
		return 0
	}
	return slices.Max(l) - slices.Min(l)
}

// owners returns topic → partition → member id.
func owners(a assign.Assignment) map[string]map[int32]string {
	out := map[string]map[int32]string{}
	for id, byTopic := range a {
		for name, parts := range byTopic {
			if out[name] == nil {
				out[name] = map[int32]string{}
			}
			for _, p := range parts {
				out[name][p] = id
			}
		}
	}
	return out
}

// moved counts the partitions owned in both assignments by different
// members.
func moved(before, after assign.Assignment) int {
	b, a := owners(before), owners(after)
	n := 0
	for name, parts := range b {
		for p, id := range parts {
			if now, ok := a[name][p]; ok && now != id {
				n++
			}
		}
	}
	return n
}

// counts returns member id → topic → number of partitions.
func counts(a assign.Assignment) map[string]map[string]int {
	out := map[string]map[string]int{}
	for id, byTopic := range a {
		out[id] = map[string]int{}
		for name, parts := range byTopic {
			out[id][name] = len(parts)
		}
	}
	return out
}

// validCurrent returns what each member may keep of its current
// assignment: partitions in range, of topics it subscribes to, and not
// claimed by a member with a smaller id.
func validCurrent(spec assign.Spec) assign.Assignment {
	subs := subscribed(spec)
	ms := slices.Clone(spec.Members)
	slices.SortFunc(ms, func(a, b assign.Member) int { return cmp.Compare(a.ID, b.ID) })
	taken := map[string]map[int32]bool{}
	out := assign.Assignment{}
	for _, m := range ms {
		out[m.ID] = map[string][]int32{}
		for name, parts := range m.Current {
			if !subs[m.ID][name] {
				continue
			}
			if taken[name] == nil {
				taken[name] = map[int32]bool{}
			}
			for _, p := range parts {
				if p >= 0 && p < spec.Topics[name].Partitions && !taken[name][p] {
					taken[name][p] = true
					out[m.ID][name] = append(out[m.ID][name], p)
				}
			}
		}
	}
	return out
}

// kept counts the partitions of before that after leaves with the same
// member.
func kept(before, after assign.Assignment) int {
	a := owners(after)
	n := 0
	for id, byTopic := range before {
		for name, parts := range byTopic {
			for _, p := range parts {
				if a[name][p] == id {
					n++
				}
			}
		}
	}
	return n
}

// locallyBalanced checks the heterogeneous builder's goal: for every topic,
// no subscriber holding one of its partitions has two or more partitions
// than another subscriber of it.
func locallyBalanced(spec assign.Spec, a assign.Assignment) error {
	subs := subscribed(spec)
	l := loads(a)
	for name := range spec.Topics {
		var holders, all []string
		for _, m := range spec.Members {
			if subs[m.ID][name] {
				all = append(all, m.ID)
				if len(a[m.ID][name]) > 0 {
					holders = append(holders, m.ID)
				}
			}
		}
		for _, h := range holders {
			for _, o := range all {
				if l[h]-l[o] > 1 {
					return fmt.Errorf("%q: %q holds %d partitions, %q only %d", name, h, l[h], o, l[o])
				}
			}
		}
	}
	return nil
}

// minMoves returns the fewest partitions any assignment must move, from the
// members' valid current assignments, to give every member of spec the
// load it has in after. It is a min-cost flow: each topic sends its
// partitions to its subscribers; a partition sent to the member that owns
// it now costs nothing, any other costs one; a member takes its load.
func minMoves(spec assign.Spec, after assign.Assignment) int {
	subs := subscribed(spec)
	current := validCurrent(spec)
	ms := slices.Clone(spec.Members)
	slices.SortFunc(ms, func(a, b assign.Member) int { return cmp.Compare(a.ID, b.ID) })
	names := slices.Sorted(maps.Keys(spec.Topics))
	// Nodes: 0 source, 1 sink, then topics, then members.
	topicNode := func(k int) int { return 2 + k }
	memberNode := func(k int) int { return 2 + len(names) + k }
	n := 2 + len(names) + len(ms)
	type edge struct{ to, rev, cap, cost int }
	graph := make([][]edge, n)
	add := func(from, to, cap, cost int) {
		graph[from] = append(graph[from], edge{to, len(graph[to]), cap, cost})
		graph[to] = append(graph[to], edge{from, len(graph[from]) - 1, 0, -cost})
	}
	l := loads(after)
	for k, name := range names {
		add(0, topicNode(k), int(spec.Topics[name].Partitions), 0)
		for j, m := range ms {
			if subs[m.ID][name] {
				if c := len(current[m.ID][name]); c > 0 {
					add(topicNode(k), memberNode(j), c, 0)
				}
				add(topicNode(k), memberNode(j), 1<<30, 1)
			}
		}
	}
	for j, m := range ms {
		add(memberNode(j), 1, l[m.ID], 0)
	}
	cost := 0
	for {
		// Bellman-Ford: the graph is tiny and has negative residual costs.
		dist := make([]int, n)
		prev := make([][2]int, n)
		for v := range dist {
			dist[v] = 1 << 40
		}
		dist[0] = 0
		for changed := true; changed; {
			changed = false
			for v := range graph {
				if dist[v] == 1<<40 {
					continue
				}
				for e, ed := range graph[v] {
					if ed.cap > 0 && dist[v]+ed.cost < dist[ed.to] {
						dist[ed.to] = dist[v] + ed.cost
						prev[ed.to] = [2]int{v, e}
						changed = true
					}
				}
			}
		}
		if dist[1] == 1<<40 {
			return cost
		}
		push := 1 << 30
		for v := 1; v != 0; v = prev[v][0] {
			push = min(push, graph[prev[v][0]][prev[v][1]].cap)
		}
		for v := 1; v != 0; v = prev[v][0] {
			ed := &graph[prev[v][0]][prev[v][1]]
			ed.cap -= push
			graph[v][ed.rev].cap += push
		}
		cost += push * dist[1]
	}
}

// movedFromCurrent counts the partitions of after not with the member
// whose valid current assignment holds them.
func movedFromCurrent(spec assign.Spec, after assign.Assignment) int {
	total := 0
	for _, byTopic := range after {
		for _, parts := range byTopic {
			total += len(parts)
		}
	}
	return total - kept(validCurrent(spec), after)
}
