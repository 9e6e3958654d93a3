package assign_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/strandlog/strand/internal/group/assign"
)

var assignors = []assign.Assignor{assign.Uniform(), assign.Range()}

func TestByName(t *testing.T) {
	for _, name := range []string{"uniform", "range"} {
		a, ok := assign.ByName(name)
		if !ok || a.Name() != name {
			t.Errorf("ByName(%q) = %v, %v", name, a, ok)
		}
	}
	for _, name := range []string{"", "sticky", "Uniform", "simple"} {
		if a, ok := assign.ByName(name); ok {
			t.Errorf("ByName(%q) = %v", name, a.Name())
		}
	}
}

func TestInvalidSpec(t *testing.T) {
	tests := []struct {
		name string
		spec assign.Spec
	}{
		{"duplicate member id", assign.Spec{
			Members: members([]string{"t"}, "a", "b", "a"),
			Topics:  topics("t", 3),
		}},
		{"empty member id", assign.Spec{
			Members: members([]string{"t"}, "a", ""),
			Topics:  topics("t", 3),
		}},
		{"negative partitions", assign.Spec{
			Members: members([]string{"t"}, "a"),
			Topics:  topics("t", -1),
		}},
		{"negative partitions of a topic nobody subscribes to", assign.Spec{
			Members: members([]string{"t"}, "a"),
			Topics:  topics("t", 2, "u", -4),
		}},
		{"empty topic name", assign.Spec{
			Members: members([]string{"t"}, "a"),
			Topics:  topics("t", 2, "", 1),
		}},
		{"racks shorter than partitions", assign.Spec{
			Members: members([]string{"t"}, "a"),
			Topics:  map[string]assign.Topic{"t": {Partitions: 3, Racks: [][]string{{"r"}, {"r"}}}},
		}},
		{"duplicate instance id", assign.Spec{
			Members: []assign.Member{
				{ID: "a", InstanceID: "i", Topics: []string{"t"}},
				{ID: "b", InstanceID: "i", Topics: []string{"t"}},
			},
			Topics: topics("t", 2),
		}},
	}
	for _, tt := range tests {
		for _, a := range assignors {
			t.Run(tt.name+"/"+a.Name(), func(t *testing.T) {
				out, err := a.Assign(tt.spec)
				if !errors.Is(err, assign.ErrInvalidSpec) || out != nil {
					t.Fatalf("got %v, %v; want ErrInvalidSpec", out, err)
				}
			})
		}
	}
}

// TestBasicRules runs both assignors over small specs that exercise the
// rules every assignor keeps.
func TestBasicRules(t *testing.T) {
	tests := []struct {
		name string
		spec assign.Spec
		want map[string]int // member → partition count, when both agree
	}{
		{"no members", assign.Spec{Topics: topics("t", 3)}, map[string]int{}},
		{"no topics", assign.Spec{Members: members(nil, "a", "b")}, map[string]int{"a": 0, "b": 0}},
		{"topic without partitions", assign.Spec{
			Members: members([]string{"t"}, "a", "b"),
			Topics:  topics("t", 0),
		}, map[string]int{"a": 0, "b": 0}},
		{"only unknown topics", assign.Spec{
			Members: members([]string{"x", "y"}, "a", "b"),
			Topics:  topics("t", 3),
		}, map[string]int{"a": 0, "b": 0}},
		{"unknown topic beside a known one", assign.Spec{
			Members: members([]string{"x", "t"}, "a", "b"),
			Topics:  topics("t", 4),
		}, map[string]int{"a": 2, "b": 2}},
		{"more members than partitions", assign.Spec{
			Members: members([]string{"t"}, "a", "b", "c", "d"),
			Topics:  topics("t", 2),
		}, map[string]int{"a": 1, "b": 1, "c": 0, "d": 0}},
		{"one member subscribes to nothing", assign.Spec{
			Members: append(members([]string{"t"}, "a", "b"), assign.Member{ID: "c"}),
			Topics:  topics("t", 4),
		}, map[string]int{"a": 2, "b": 2, "c": 0}},
		{"duplicate topic in a subscription", assign.Spec{
			Members: members([]string{"t", "t"}, "a", "b"),
			Topics:  topics("t", 4),
		}, map[string]int{"a": 2, "b": 2}},
		{"current partitions out of range and of unknown topics", assign.Spec{
			Members: []assign.Member{
				{ID: "a", Topics: []string{"t"}, Current: map[string][]int32{"t": {7, -1, 0, 0}, "gone": {0}}},
				{ID: "b", Topics: []string{"t"}, Current: map[string][]int32{"t": {0, 1}}},
			},
			Topics: topics("t", 2),
		}, map[string]int{"a": 1, "b": 1}},
	}
	for _, tt := range tests {
		for _, a := range assignors {
			t.Run(tt.name+"/"+a.Name(), func(t *testing.T) {
				out := mustAssign(t, a, tt.spec)
				got := loads(out)
				for id := range out {
					if _, ok := got[id]; !ok {
						got[id] = 0
					}
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("loads %v, want %v (%v)", got, tt.want, out)
				}
			})
		}
	}
}
