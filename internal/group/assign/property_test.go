package assign_test

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/strandlog/strand/internal/group/assign"
)

// propertyRuns is how many random specs the property test draws per
// assignor; the seed is fixed so a failure reproduces.
const propertyRuns = 3000

var rackNames = []string{"a", "b", "c", "d"}

// randomSpec draws a small group: some topics (with or without replica
// racks), members with alike or different subscriptions (some to topics
// that do not exist), static or not, racks or not, and a current
// assignment that is empty, left by an earlier assignment of a group that
// has since changed, or arbitrary.
func randomSpec(r *rand.Rand) assign.Spec {
	spec := assign.Spec{Topics: map[string]assign.Topic{}}
	topicRacks := r.IntN(2) == 0
	var names []string
	for k := range r.IntN(7) {
		name := fmt.Sprintf("t%d", k)
		names = append(names, name)
		tp := assign.Topic{Partitions: int32(r.IntN(25))}
		if topicRacks && r.IntN(4) != 0 {
			tp.Racks = make([][]string, tp.Partitions)
			for p := range tp.Racks {
				for range r.IntN(3) {
					tp.Racks[p] = append(tp.Racks[p], rackNames[r.IntN(len(rackNames))])
				}
			}
		}
		spec.Topics[name] = tp
	}
	pick := func() []string {
		var subs []string
		for _, name := range append(slices.Clone(names), "missing") {
			if r.IntN(2) == 0 {
				subs = append(subs, name)
			}
		}
		return subs
	}
	alike := r.IntN(3) == 0
	shared := pick()
	memberRacks := r.IntN(2) == 0
	for k, id := range r.Perm(r.IntN(11)) {
		m := assign.Member{ID: fmt.Sprintf("m%d", id), Topics: shared}
		if !alike {
			m.Topics = pick()
		}
		if r.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("i%d", r.IntN(1000)*100+k)
		}
		if memberRacks && r.IntN(5) != 0 {
			m.Rack = rackNames[r.IntN(len(rackNames))]
		}
		spec.Members = append(spec.Members, m)
	}

	switch r.IntN(3) {
	case 1: // left by an earlier group: some members were not there, some subscribed otherwise
		earlier := assign.Spec{Topics: spec.Topics}
		for _, m := range spec.Members {
			if r.IntN(4) == 0 {
				continue
			}
			if r.IntN(4) == 0 {
				m.Topics = pick()
			}
			earlier.Members = append(earlier.Members, m)
		}
		earlier.Members = append(earlier.Members, assign.Member{ID: "gone", Topics: names})
		prev, err := assign.Uniform().Assign(earlier)
		if err != nil {
			panic(err)
		}
		spec.Members = withCurrent(spec.Members, prev)
	case 2: // arbitrary, with conflicts, duplicates and partitions out of range
		for k := range spec.Members {
			cur := map[string][]int32{}
			for _, name := range append(slices.Clone(names), "missing") {
				for range r.IntN(8) {
					cur[name] = append(cur[name], int32(r.IntN(30)-2))
				}
			}
			spec.Members[k].Current = cur
		}
	}
	return spec
}

// shuffled returns spec with its members, their topics and their current
// partitions in another order.
func shuffled(r *rand.Rand, spec assign.Spec) assign.Spec {
	out := assign.Spec{Topics: spec.Topics, Members: slices.Clone(spec.Members)}
	r.Shuffle(len(out.Members), func(i, j int) { out.Members[i], out.Members[j] = out.Members[j], out.Members[i] })
	for k := range out.Members {
		m := &out.Members[k]
		m.Topics = slices.Clone(m.Topics)
		r.Shuffle(len(m.Topics), func(i, j int) { m.Topics[i], m.Topics[j] = m.Topics[j], m.Topics[i] })
		if m.Current != nil {
			cur := map[string][]int32{}
			for name, parts := range m.Current {
				parts = slices.Clone(parts)
				r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
				cur[name] = parts
			}
			m.Current = cur
		}
	}
	return out
}

// withoutRacks returns spec with every rack unknown.
func withoutRacks(spec assign.Spec) assign.Spec {
	out := assign.Spec{Topics: map[string]assign.Topic{}, Members: slices.Clone(spec.Members)}
	for name, tp := range spec.Topics {
		out.Topics[name] = assign.Topic{Partitions: tp.Partitions}
	}
	for k := range out.Members {
		out.Members[k].Rack = ""
	}
	return out
}

// referenceRange is the range assignment written the plain way: per
// topic, its subscribers in order (static by instance id, then dynamic by
// member id), each a contiguous range, the first partitions%subscribers
// one partition longer.
func referenceRange(spec assign.Spec) assign.Assignment {
	ms := slices.Clone(spec.Members)
	slices.SortFunc(ms, func(a, b assign.Member) int {
		switch {
		case a.InstanceID != "" && b.InstanceID != "":
			return cmp.Compare(a.InstanceID, b.InstanceID)
		case a.InstanceID != "":
			return -1
		case b.InstanceID != "":
			return 1
		}
		return cmp.Compare(a.ID, b.ID)
	})
	subs := subscribed(spec)
	out := assign.Assignment{}
	for _, m := range ms {
		out[m.ID] = map[string][]int32{}
	}
	for name, tp := range spec.Topics {
		var order []string
		for _, m := range ms {
			if subs[m.ID][name] {
				order = append(order, m.ID)
			}
		}
		if len(order) == 0 {
			continue
		}
		n := int32(len(order))
		next := int32(0)
		for k, id := range order {
			size := tp.Partitions / n
			if int32(k) < tp.Partitions%n {
				size++
			}
			for p := next; p < next+size; p++ {
				out[id][name] = append(out[id][name], p)
			}
			next += size
		}
	}
	return out
}

// coPartitioned checks that topics with the same partition count and the
// same subscribers give each member the same partition numbers.
func coPartitioned(spec assign.Spec, a assign.Assignment) error {
	subs := subscribed(spec)
	key := func(name string) string {
		var ids []string
		for _, m := range spec.Members {
			if subs[m.ID][name] {
				ids = append(ids, m.ID)
			}
		}
		slices.Sort(ids)
		return fmt.Sprint(spec.Topics[name].Partitions, ids)
	}
	names := slices.Sorted(maps.Keys(spec.Topics))
	for i, x := range names {
		for _, y := range names[i+1:] {
			if key(x) != key(y) {
				continue
			}
			for id, byTopic := range a {
				if !slices.Equal(byTopic[x], byTopic[y]) {
					return fmt.Errorf("%q and %q are co-partitioned but %q gets %v and %v", x, y, id, byTopic[x], byTopic[y])
				}
			}
		}
	}
	return nil
}

// maxKeptHomogeneous is the most partitions any balanced assignment of a
// group with alike subscriptions lets members keep: each up to the
// minimum quota, and one more for as many members holding more as there
// are spare partitions.
func maxKeptHomogeneous(spec assign.Spec) int {
	if len(spec.Members) == 0 {
		return 0
	}
	total := 0
	for name := range subscribed(spec)[spec.Members[0].ID] {
		total += int(spec.Topics[name].Partitions)
	}
	quota, spare := total/len(spec.Members), total%len(spec.Members)
	best := 0
	for _, byTopic := range validCurrent(spec) {
		c := 0
		for _, parts := range byTopic {
			c += len(parts)
		}
		best += min(c, quota)
		if c > quota && spare > 0 {
			best++
			spare--
		}
	}
	return best
}

func TestProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(848, 2024))
	var heteroMoved, heteroLeast int
	for run := range propertyRuns {
		spec := randomSpec(r)
		for _, a := range assignors {
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("run %d, %s: %s\nspec: %+v", run, a.Name(), fmt.Sprintf(format, args...), spec)
			}
			got, err := a.Assign(spec)
			if err != nil {
				fail("%v", err)
			}
			if err := valid(spec, got); err != nil {
				fail("%v\nassignment: %v", err, got)
			}
			if again, _ := a.Assign(shuffled(r, spec)); !reflect.DeepEqual(again, got) {
				fail("member order changed the result:\n%v\n%v", got, again)
			}

			plain, err := a.Assign(withoutRacks(spec))
			if err != nil {
				fail("%v", err)
			}
			if !reflect.DeepEqual(loads(got), loads(plain)) {
				fail("racks changed the loads: %v, without %v", loads(got), loads(plain))
			}

			switch {
			case a.Name() == "range":
				if want := referenceRange(spec); !reflect.DeepEqual(plain, want) {
					fail("without racks:\ngot  %v\nwant %v", plain, want)
				}
				if !reflect.DeepEqual(counts(got), counts(plain)) {
					fail("racks changed the counts: %v, without %v", counts(got), counts(plain))
				}
				if err := coPartitioned(spec, got); err != nil {
					fail("%v", err)
				}
			case homogeneous(spec):
				if s := spread(got); s > 1 {
					fail("loads %v differ by %d", loads(got), s)
				}
				if k, want := kept(validCurrent(spec), got), maxKeptHomogeneous(spec); k != want {
					fail("kept %d partitions, balance allows %d", k, want)
				}
			default:
				if err := locallyBalanced(spec, got); err != nil {
					fail("%v\nassignment: %v", err, got)
				}
				if !reflect.DeepEqual(counts(got), counts(plain)) {
					fail("racks changed the counts: %v, without %v", counts(got), counts(plain))
				}
				n, least := movedFromCurrent(spec, got), minMoves(spec, got)
				if n > least+least/2+1 {
					fail("moved %d partitions where %d would reach the same loads", n, least)
				}
				heteroMoved += n
				heteroLeast += least
			}
			if a.Name() == "uniform" {
				if movedFromCurrent(spec, got) != movedFromCurrent(spec, plain) {
					fail("racks changed the stickiness: %d moved, %d without", movedFromCurrent(spec, got), movedFromCurrent(spec, plain))
				}
			}

			// An assignment fed back as the current one stays as it is.
			next := spec
			next.Members = withCurrent(spec.Members, got)
			if again, _ := a.Assign(next); !reflect.DeepEqual(again, got) {
				fail("not a fixed point: moved %d\n%v\n%v", moved(got, again), got, again)
			}
		}
	}
	t.Logf("different subscriptions: %d partitions moved where at least %d had to", heteroMoved, heteroLeast)
}
