package assign_test

import (
	"reflect"
	"testing"

	"github.com/strandlog/strand/internal/group/assign"
)

// rackedTopic returns a topic whose partition p has one replica per rack
// given by racksOf(p).
func rackedTopic(n int, racksOf func(p int) []string) assign.Topic {
	t := assign.Topic{Partitions: int32(n), Racks: make([][]string, n)}
	for p := range n {
		t.Racks[p] = racksOf(p)
	}
	return t
}

// roundRobinRacks puts partition p on rack racks[p%len(racks)].
func roundRobinRacks(racks ...string) func(p int) []string {
	return func(p int) []string { return []string{racks[p%len(racks)]} }
}

func onRacks(ms []assign.Member, racks ...string) []assign.Member {
	out := make([]assign.Member, len(ms))
	copy(out, ms)
	for k := range out {
		out[k].Rack = racks[k%len(racks)]
	}
	return out
}

// localShare returns the fraction of partitions assigned to a member on a
// rack holding one of their replicas.
func localShare(spec assign.Spec, a assign.Assignment) float64 {
	rack := map[string]string{}
	for _, m := range spec.Members {
		rack[m.ID] = m.Rack
	}
	local, total := 0, 0
	for id, byTopic := range a {
		for name, parts := range byTopic {
			for _, p := range parts {
				total++
				for _, r := range spec.Topics[name].Racks[p] {
					if r == rack[id] {
						local++
						break
					}
				}
			}
		}
	}
	return float64(local) / float64(total)
}

func TestRacksUnknownChangeNothing(t *testing.T) {
	plain := []assign.Spec{bigGroup(4), heteroGroup(5)}
	for _, a := range assignors {
		for _, spec := range plain {
			want := mustAssign(t, a, spec)

			// Members know their racks, topics do not.
			membersOnly := spec
			membersOnly.Members = onRacks(spec.Members, "a", "b", "c")
			if got := mustAssign(t, a, membersOnly); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, member racks only:\ngot  %v\nwant %v", a.Name(), got, want)
			}

			// Topics know their racks, members do not.
			topicsOnly := spec
			topicsOnly.Topics = map[string]assign.Topic{}
			for name, tp := range spec.Topics {
				topicsOnly.Topics[name] = rackedTopic(int(tp.Partitions), roundRobinRacks("a", "b", "c"))
			}
			if got := mustAssign(t, a, topicsOnly); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, topic racks only:\ngot  %v\nwant %v", a.Name(), got, want)
			}
		}
	}
}

func TestRackPreference(t *testing.T) {
	threeRacks := map[string]assign.Topic{"t": rackedTopic(9, roundRobinRacks("a", "b", "c"))}
	tests := []struct {
		name     string
		assignor assign.Assignor
		spec     assign.Spec
		want     assign.Assignment
	}{
		{
			name:     "uniform, fresh: each member takes the partitions on its rack",
			assignor: assign.Uniform(),
			spec:     assign.Spec{Members: onRacks(members([]string{"t"}, "m0", "m1", "m2"), "a", "b", "c"), Topics: threeRacks},
			want: assign.Assignment{
				"m0": {"t": {0, 3, 6}},
				"m1": {"t": {1, 4, 7}},
				"m2": {"t": {2, 5, 8}},
			},
		},
		{
			name:     "uniform: stickiness beats racks",
			assignor: assign.Uniform(),
			spec: assign.Spec{
				Members: []assign.Member{
					{ID: "m0", Rack: "a", Topics: []string{"t"}, Current: map[string][]int32{"t": {0, 1, 2}}},
					{ID: "m1", Rack: "b", Topics: []string{"t"}, Current: map[string][]int32{"t": {3, 4, 5}}},
					{ID: "m2", Rack: "c", Topics: []string{"t"}, Current: map[string][]int32{"t": {6, 7, 8}}},
				},
				Topics: threeRacks,
			},
			want: assign.Assignment{
				"m0": {"t": {0, 1, 2}},
				"m1": {"t": {3, 4, 5}},
				"m2": {"t": {6, 7, 8}},
			},
		},
		{
			name:     "uniform: a member giving up partitions keeps those on its rack",
			assignor: assign.Uniform(),
			spec: assign.Spec{
				Members: []assign.Member{
					{ID: "m0", Rack: "a", Topics: []string{"t"}, Current: map[string][]int32{"t": {0, 1, 2, 3, 4, 5}}},
					{ID: "m1", Rack: "b", Topics: []string{"t"}},
				},
				Topics: map[string]assign.Topic{"t": rackedTopic(6, roundRobinRacks("a", "b"))},
			},
			want: assign.Assignment{"m0": {"t": {0, 2, 4}}, "m1": {"t": {1, 3, 5}}},
		},
		{
			name:     "uniform, different subscriptions: subscribers take partitions on their rack",
			assignor: assign.Uniform(),
			spec: assign.Spec{
				Members: []assign.Member{
					{ID: "m0", Rack: "a", Topics: []string{"t", "u"}},
					{ID: "m1", Rack: "b", Topics: []string{"t"}},
					{ID: "m2", Rack: "c", Topics: []string{"t"}},
				},
				Topics: map[string]assign.Topic{
					"t": rackedTopic(9, roundRobinRacks("a", "b", "c")),
					"u": rackedTopic(1, roundRobinRacks("a")),
				},
			},
			want: assign.Assignment{
				"m0": {"t": {0, 3, 6}, "u": {0}},
				"m1": {"t": {1, 4, 7}},
				"m2": {"t": {2, 5, 8}},
			},
		},
		{
			name:     "range: same counts as plain ranges, on the members' racks",
			assignor: assign.Range(),
			spec: assign.Spec{
				Members: onRacks(members([]string{"t"}, "m0", "m1"), "x", "y"),
				Topics: map[string]assign.Topic{"t": rackedTopic(5, func(p int) []string {
					if p < 2 {
						return []string{"y"}
					}
					return []string{"x"}
				})},
			},
			// Plain ranges would give m0 three (0-2) and m1 two (3, 4).
			want: assign.Assignment{"m0": {"t": {2, 3, 4}}, "m1": {"t": {0, 1}}},
		},
		{
			name:     "range: replicas on every rack give plain ranges",
			assignor: assign.Range(),
			spec: assign.Spec{
				Members: onRacks(members([]string{"t"}, "m0", "m1"), "x", "y"),
				Topics:  map[string]assign.Topic{"t": rackedTopic(4, func(int) []string { return []string{"x", "y"} })},
			},
			want: assign.Assignment{"m0": {"t": {0, 1}}, "m1": {"t": {2, 3}}},
		},
		{
			name:     "range: co-partitioned topics still line up",
			assignor: assign.Range(),
			spec: assign.Spec{
				Members: onRacks(members([]string{"t1", "t2"}, "m0", "m1"), "a", "b"),
				Topics: map[string]assign.Topic{
					"t1": rackedTopic(4, roundRobinRacks("a", "b")),
					// Partition 2 of t2 is on rack b, so only partition 0
					// matches m0 in both topics.
					"t2": rackedTopic(4, func(p int) []string { return [][]string{{"a"}, {"b"}, {"b"}, {"b"}}[p] }),
				},
			},
			want: assign.Assignment{
				"m0": {"t1": {0, 2}, "t2": {0, 2}},
				"m1": {"t1": {1, 3}, "t2": {1, 3}},
			},
		},
		{
			name:     "range: a member without a rack keeps its plain range",
			assignor: assign.Range(),
			spec: assign.Spec{
				Members: onRacks(members([]string{"t"}, "m0", "m1", "m2"), "", "a", "b"),
				Topics:  map[string]assign.Topic{"t": rackedTopic(6, roundRobinRacks("b", "a"))},
			},
			want: assign.Assignment{"m0": {"t": {0, 1}}, "m1": {"t": {3, 5}}, "m2": {"t": {2, 4}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustAssign(t, tt.assignor, tt.spec)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestRacksKeepCountsAndRaiseLocality runs bigger groups with racks: the
// member loads are those without racks, and more partitions land on their
// members' racks.
func TestRacksKeepCountsAndRaiseLocality(t *testing.T) {
	for _, a := range assignors {
		for _, plain := range []assign.Spec{bigGroup(6), heteroGroup(7)} {
			racked := plain
			racked.Members = onRacks(plain.Members, "a", "b", "c")
			racked.Topics = map[string]assign.Topic{}
			for name, tp := range plain.Topics {
				racked.Topics[name] = rackedTopic(int(tp.Partitions), func(p int) []string {
					return []string{[]string{"a", "b", "c"}[p%3], []string{"a", "b", "c"}[(p+1)%3]}
				})
			}
			without := mustAssign(t, a, assign.Spec{Members: racked.Members, Topics: plain.Topics})
			with := mustAssign(t, a, racked)
			if !reflect.DeepEqual(loads(with), loads(without)) {
				t.Fatalf("%s: loads changed with racks:\n%v\n%v", a.Name(), loads(with), loads(without))
			}
			// With the same subscriptions uniform hands partitions of any
			// topic to any member, so only the totals stay. Otherwise each
			// topic's counts stay too.
			if (a.Name() == "range" || !homogeneous(racked)) && !reflect.DeepEqual(counts(with), counts(without)) {
				t.Fatalf("%s: counts changed with racks:\n%v\n%v", a.Name(), counts(with), counts(without))
			}
			before, after := localShare(racked, without), localShare(racked, with)
			if after < before || after < 0.9 {
				t.Fatalf("%s: local share %.2f with racks, %.2f without", a.Name(), after, before)
			}
		}
	}
}
