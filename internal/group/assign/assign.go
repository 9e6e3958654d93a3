package assign

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Names of the assignors, as consumers give them in group.remote.assignor.
const (
	UniformName = "uniform"
	RangeName   = "range"
)

// ErrInvalidSpec wraps the error Assign returns for a malformed spec. A
// well-formed spec never fails.
var ErrInvalidSpec = errors.New("assign: invalid spec")

// Member is one member of the group as an assignor sees it.
type Member struct {
	ID         string
	InstanceID string // "" unless the member is static
	Rack       string // "" when unknown
	// Topics are the subscribed topic names, already resolved from names
	// or a regex. Names missing from Spec.Topics are ignored.
	Topics []string
	// Current is the member's current target assignment, for stickiness.
	// Partitions of topics it no longer subscribes to, out of range, or
	// claimed by a member with a smaller ID are ignored.
	Current map[string][]int32
}

// Topic is one topic's metadata.
type Topic struct {
	Partitions int32
	// Racks holds, per partition, the racks of its replicas. Nil when
	// unknown; an empty entry means that partition's racks are unknown.
	Racks [][]string
}

// Spec is everything an assignor needs: the members and the metadata of
// the topics they may subscribe to, by name.
type Spec struct {
	Members []Member
	Topics  map[string]Topic
}

// Assignment maps member ID → topic name → sorted partitions. Every member
// of the spec has an entry, empty when it gets nothing; a topic it gets no
// partition of has no entry.
type Assignment map[string]map[string][]int32

// Assignor computes a group's target assignment.
type Assignor interface {
	Name() string
	Assign(Spec) (Assignment, error)
}

// Uniform returns the default assignor: balanced and sticky.
func Uniform() Assignor { return uniformAssignor{} }

// Range returns the assignor that gives each member contiguous ranges of
// every topic it subscribes to.
func Range() Assignor { return rangeAssignor{} }

// ByName returns the assignor a consumer names, false for an unknown name.
func ByName(name string) (Assignor, bool) {
	switch name {
	case UniformName:
		return Uniform(), true
	case RangeName:
		return Range(), true
	}
	return nil, false
}

// member is a Member resolved against the subscribed topics.
type member struct {
	id, instanceID, rack string
	// topics are indices into group.topics, ascending.
	topics  []int32
	current map[string][]int32
}

// topic is a topic at least one member subscribes to.
type topic struct {
	name       string
	partitions int32
	racks      [][]string
	// subscribers are member indices, ascending.
	subscribers []int32
}

// group is a validated spec: members sorted by ID, so that the input order
// never matters, and the subscribed topics sorted by name.
type group struct {
	members []member
	topics  []topic
	index   map[string]int32
	// rackAware is set when some member knows its rack and some subscribed
	// topic knows its replicas' racks. Without both no rack logic runs.
	rackAware bool
}

func newGroup(spec Spec) (*group, error) {
	for name, t := range spec.Topics {
		if name == "" {
			return nil, fmt.Errorf("%w: topic with an empty name", ErrInvalidSpec)
		}
		if t.Partitions < 0 {
			return nil, fmt.Errorf("%w: topic %q has %d partitions", ErrInvalidSpec, name, t.Partitions)
		}
		if t.Racks != nil && len(t.Racks) != int(t.Partitions) {
			return nil, fmt.Errorf("%w: topic %q has racks for %d of its %d partitions", ErrInvalidSpec, name, len(t.Racks), t.Partitions)
		}
	}

	sorted := slices.Clone(spec.Members)
	slices.SortFunc(sorted, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	instances := make(map[string]string)
	for i, m := range sorted {
		if m.ID == "" {
			return nil, fmt.Errorf("%w: member with an empty id", ErrInvalidSpec)
		}
		if i > 0 && sorted[i-1].ID == m.ID {
			return nil, fmt.Errorf("%w: duplicate member id %q", ErrInvalidSpec, m.ID)
		}
		if m.InstanceID != "" {
			if other, ok := instances[m.InstanceID]; ok {
				return nil, fmt.Errorf("%w: members %q and %q share instance id %q", ErrInvalidSpec, other, m.ID, m.InstanceID)
			}
			instances[m.InstanceID] = m.ID
		}
	}

	var names []string
	seen := make(map[string]bool)
	for _, m := range sorted {
		for _, name := range m.Topics {
			if _, ok := spec.Topics[name]; ok && !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)

	g := &group{
		members: make([]member, len(sorted)),
		topics:  make([]topic, len(names)),
		index:   make(map[string]int32, len(names)),
	}
	for t, name := range names {
		meta := spec.Topics[name]
		g.topics[t] = topic{name: name, partitions: meta.Partitions, racks: meta.Racks}
		g.index[name] = int32(t)
		if meta.Racks != nil {
			g.rackAware = true
		}
	}
	anyRack := false
	for i, m := range sorted {
		var topics []int32
		for _, name := range m.Topics {
			if t, ok := g.index[name]; ok {
				topics = append(topics, t)
			}
		}
		slices.Sort(topics)
		topics = slices.Compact(topics)
		for _, t := range topics {
			g.topics[t].subscribers = append(g.topics[t].subscribers, int32(i))
		}
		g.members[i] = member{id: m.ID, instanceID: m.InstanceID, rack: m.Rack, topics: topics, current: m.Current}
		anyRack = anyRack || m.Rack != ""
	}
	g.rackAware = g.rackAware && anyRack
	return g, nil
}

// homogeneous reports whether all members subscribe to the same topics.
func (g *group) homogeneous() bool {
	for i := 1; i < len(g.members); i++ {
		if !slices.Equal(g.members[i].topics, g.members[0].topics) {
			return false
		}
	}
	return true
}

// subscribes reports whether member i subscribes to topic t.
func (g *group) subscribes(i, t int32) bool {
	_, ok := slices.BinarySearch(g.members[i].topics, t)
	return ok
}

// unowned marks a partition without an owner in an owners table.
const unowned = -1

// newOwners returns, per topic, a table of partition owners, all unowned.
func (g *group) newOwners() [][]int32 {
	owners := make([][]int32, len(g.topics))
	for t := range g.topics {
		owners[t] = make([]int32, g.topics[t].partitions)
		for p := range owners[t] {
			owners[t][p] = unowned
		}
	}
	return owners
}

// currentOwners returns the owners the members' current assignments give,
// keeping only what each member may still own. A partition two members
// claim goes to the one with the smaller ID, so the outcome never depends
// on map order.
func (g *group) currentOwners() [][]int32 {
	owners := g.newOwners()
	for i, m := range g.members {
		for name, partitions := range m.current {
			t, ok := g.index[name]
			if !ok || !g.subscribes(int32(i), t) {
				continue
			}
			for _, p := range partitions {
				if p >= 0 && p < g.topics[t].partitions && owners[t][p] == unowned {
					owners[t][p] = int32(i)
				}
			}
		}
	}
	return owners
}

// result turns an owners table of member indices into an Assignment.
func (g *group) result(owners [][]int32) (Assignment, error) {
	out := make(Assignment, len(g.members))
	for _, m := range g.members {
		out[m.id] = map[string][]int32{}
	}
	for t, table := range owners {
		name := g.topics[t].name
		for p, o := range table {
			if o == unowned {
				return nil, fmt.Errorf("assign: internal error: partition %d of %q left unassigned", p, name)
			}
			dst := out[g.members[o].id]
			dst[name] = append(dst[name], int32(p))
		}
	}
	return out, nil
}
