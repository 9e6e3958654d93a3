package assign_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/strandlog/strand/internal/group/assign"
)

func TestRangeExact(t *testing.T) {
	tests := []struct {
		name string
		spec assign.Spec
		want assign.Assignment
	}{
		{
			name: "co-partitioned topics line up",
			spec: assign.Spec{Members: members([]string{"t1", "t2"}, "m1", "m0"), Topics: topics("t1", 3, "t2", 3)},
			want: assign.Assignment{
				"m0": {"t1": {0, 1}, "t2": {0, 1}},
				"m1": {"t1": {2}, "t2": {2}},
			},
		},
		{
			name: "the first partitions%members members get one more",
			spec: assign.Spec{Members: members([]string{"t"}, "a", "b", "c"), Topics: topics("t", 8)},
			want: assign.Assignment{"a": {"t": {0, 1, 2}}, "b": {"t": {3, 4, 5}}, "c": {"t": {6, 7}}},
		},
		{
			name: "static members first, by instance id",
			spec: assign.Spec{
				Members: []assign.Member{
					{ID: "a", Topics: []string{"t"}},
					{ID: "b", InstanceID: "i2", Topics: []string{"t"}},
					{ID: "c", InstanceID: "i1", Topics: []string{"t"}},
					{ID: "d", Topics: []string{"t"}},
				},
				Topics: topics("t", 6),
			},
			want: assign.Assignment{"c": {"t": {0, 1}}, "b": {"t": {2, 3}}, "a": {"t": {4}}, "d": {"t": {5}}},
		},
		{
			name: "per topic, only its subscribers",
			spec: assign.Spec{
				Members: []assign.Member{
					{ID: "a", Topics: []string{"t0"}},
					{ID: "b", Topics: []string{"t0", "t1"}},
					{ID: "c", Topics: []string{"t1"}},
				},
				Topics: topics("t0", 4, "t1", 3),
			},
			want: assign.Assignment{
				"a": {"t0": {0, 1}},
				"b": {"t0": {2, 3}, "t1": {0, 1}},
				"c": {"t1": {2}},
			},
		},
		{
			name: "current assignment ignored",
			spec: assign.Spec{
				Members: []assign.Member{
					{ID: "a", Topics: []string{"t"}, Current: map[string][]int32{"t": {2, 3}}},
					{ID: "b", Topics: []string{"t"}, Current: map[string][]int32{"t": {0, 1}}},
				},
				Topics: topics("t", 4),
			},
			want: assign.Assignment{"a": {"t": {0, 1}}, "b": {"t": {2, 3}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustAssign(t, assign.Range(), tt.spec); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestRangeStaticRollingBounce: static members that all restart under new
// member ids keep their partitions, dynamic ones may not.
func TestRangeStaticRollingBounce(t *testing.T) {
	spec := func(ids ...string) assign.Spec {
		ms := make([]assign.Member, len(ids))
		for k, id := range ids {
			ms[k] = assign.Member{ID: id, InstanceID: fmt.Sprintf("instance-%d", k), Topics: []string{"t1", "t2"}}
		}
		return assign.Spec{Members: ms, Topics: topics("t1", 5, "t2", 5)}
	}
	before := mustAssign(t, assign.Range(), spec("m0", "m1", "m2"))
	after := mustAssign(t, assign.Range(), spec("z9", "y8", "x7"))
	for k, pair := range [][2]string{{"m0", "z9"}, {"m1", "y8"}, {"m2", "x7"}} {
		if !reflect.DeepEqual(before[pair[0]], after[pair[1]]) {
			t.Fatalf("instance-%d: %v before, %v after", k, before[pair[0]], after[pair[1]])
		}
	}
}

func TestRangeNoChangeNoMovement(t *testing.T) {
	spec := heteroGroup(6)
	first := mustAssign(t, assign.Range(), spec)
	spec.Members = withCurrent(spec.Members, first)
	if again := mustAssign(t, assign.Range(), spec); !reflect.DeepEqual(first, again) {
		t.Fatalf("moved %d", moved(first, again))
	}
}
