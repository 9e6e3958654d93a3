package mirrorcheck

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// OffsetFetcher reads a group's committed offsets; kadm's client is one.
type OffsetFetcher interface {
	FetchOffsets(ctx context.Context, group string) (kadm.OffsetResponses, error)
}

// GroupReport is what a comparison of groups' committed offsets found.
type GroupReport struct {
	// Committed counts, per group, the partitions with a commit on the source.
	Committed  map[string]int
	Mismatches []OffsetMismatch
}

// OffsetMismatch is one partition whose commit differs between the sides.
type OffsetMismatch struct {
	Group     string
	Topic     string
	Partition int32
	// Source and Mirror are the commits; nil where that side has none.
	Source, Mirror *kadm.Offset
	// Fields names what differs: "Offset", "LeaderEpoch", "Metadata", or
	// "Commit" when one side has none.
	Fields []string
}

func (m OffsetMismatch) String() string {
	show := func(o *kadm.Offset) string {
		if o == nil {
			return "none"
		}
		return fmt.Sprintf("%d (leader epoch %d, metadata %q)", o.At, o.LeaderEpoch, o.Metadata)
	}
	return fmt.Sprintf("group %s %s/%d: %s differ: source %s, mirror %s", m.Group, m.Topic, m.Partition,
		strings.Join(m.Fields, ", "), show(m.Source), show(m.Mirror))
}

// Equal says whether every commit is the same on both sides.
func (r GroupReport) Equal() bool { return len(r.Mismatches) == 0 }

func (r GroupReport) String() string {
	var b strings.Builder
	for _, g := range slices.Sorted(maps.Keys(r.Committed)) {
		fmt.Fprintf(&b, "group %s: %d commits on the source\n", g, r.Committed[g])
	}
	for _, m := range r.Mismatches {
		fmt.Fprintf(&b, "%s\n", m)
	}
	if r.Equal() {
		b.WriteString("equal")
	} else {
		fmt.Fprintf(&b, "NOT equal: %d mismatches", len(r.Mismatches))
	}
	return b.String()
}

// CompareGroupOffsets compares every committed offset of each group, with
// its leader epoch and metadata, between the source and the mirror.
func CompareGroupOffsets(ctx context.Context, source, mirror *kadm.Client, groups ...string) (GroupReport, error) {
	return CompareOffsets(ctx, source, mirror, groups...)
}

// CompareOffsets is CompareGroupOffsets over any two OffsetFetchers.
func CompareOffsets(ctx context.Context, source, mirror OffsetFetcher, groups ...string) (GroupReport, error) {
	rep := GroupReport{Committed: map[string]int{}}
	for _, g := range groups {
		so, err := committed(ctx, source, g)
		if err != nil {
			return rep, fmt.Errorf("source: %w", err)
		}
		mo, err := committed(ctx, mirror, g)
		if err != nil {
			return rep, fmt.Errorf("mirror: %w", err)
		}
		rep.Committed[g] = len(so)
		keys := map[topicPartition]bool{}
		for k := range so {
			keys[k] = true
		}
		for k := range mo {
			keys[k] = true
		}
		sorted := slices.SortedFunc(maps.Keys(keys), func(a, b topicPartition) int {
			return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
		})
		for _, k := range sorted {
			s, m := so[k], mo[k]
			var fields []string
			switch {
			case s == nil || m == nil:
				fields = []string{"Commit"}
			default:
				if s.At != m.At {
					fields = append(fields, "Offset")
				}
				if s.LeaderEpoch != m.LeaderEpoch {
					fields = append(fields, "LeaderEpoch")
				}
				if s.Metadata != m.Metadata {
					fields = append(fields, "Metadata")
				}
			}
			if len(fields) > 0 {
				rep.Mismatches = append(rep.Mismatches, OffsetMismatch{Group: g, Topic: k.topic, Partition: k.partition,
					Source: s, Mirror: m, Fields: fields})
			}
		}
	}
	return rep, nil
}

type topicPartition struct {
	topic     string
	partition int32
}

// committed reads a group's commits; a partition answered without one
// (offset -1) has none.
func committed(ctx context.Context, f OffsetFetcher, group string) (map[topicPartition]*kadm.Offset, error) {
	resps, err := f.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("offsets of group %s: %w", group, err)
	}
	out := map[topicPartition]*kadm.Offset{}
	for topic, ps := range resps {
		for p, r := range ps {
			if r.Err != nil {
				return nil, fmt.Errorf("offset of group %s on %s/%d: %w", group, topic, p, r.Err)
			}
			if r.At < 0 {
				continue
			}
			o := r.Offset
			out[topicPartition{topic, p}] = &o
		}
	}
	return out, nil
}
