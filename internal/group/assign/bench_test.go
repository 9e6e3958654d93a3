package assign_test

import (
	"fmt"
	"testing"

	"github.com/strandlog/strand/internal/group/assign"
)

// benchSpec returns a group of m members over ten topics holding p
// partitions in all. Alike members subscribe to every topic; otherwise
// member k subscribes to topics k%10, (k+1)%10 and (k+3)%10. With racks,
// members sit on three racks and each partition has replicas on two.
func benchSpec(p, m int, alike, racks bool) assign.Spec {
	const topicCount = 10
	spec := assign.Spec{Topics: map[string]assign.Topic{}}
	names := make([]string, topicCount)
	for k := range names {
		names[k] = fmt.Sprintf("topic-%d", k)
		tp := assign.Topic{Partitions: int32(p / topicCount)}
		if racks {
			tp = rackedTopic(p/topicCount, func(q int) []string {
				return []string{fmt.Sprint("rack-", q%3), fmt.Sprint("rack-", (q+1)%3)}
			})
		}
		spec.Topics[names[k]] = tp
	}
	for k := range m {
		member := assign.Member{ID: fmt.Sprintf("member-%04d", k), Topics: names}
		if !alike {
			member.Topics = []string{names[k%topicCount], names[(k+1)%topicCount], names[(k+3)%topicCount]}
		}
		if racks {
			member.Rack = fmt.Sprint("rack-", k%3)
		}
		spec.Members = append(spec.Members, member)
	}
	return spec
}

// BenchmarkAssign times each assignor on a fresh group and on a member
// joining a group that is already assigned.
func BenchmarkAssign(b *testing.B) {
	sizes := []struct{ partitions, members int }{{1000, 1000}, {10000, 50}}
	for _, a := range assignors {
		for _, size := range sizes {
			for _, subs := range []string{"alike", "different"} {
				for _, racks := range []bool{false, true} {
					spec := benchSpec(size.partitions, size.members, subs == "alike", racks)
					name := fmt.Sprintf("%s/%dp-%dm/%s", a.Name(), size.partitions, size.members, subs)
					if racks {
						name += "/racks"
					}
					b.Run(name+"/fresh", func(b *testing.B) {
						for b.Loop() {
							if _, err := a.Assign(spec); err != nil {
								b.Fatal(err)
							}
						}
					})
					before := mustAssign(b, a, assign.Spec{Members: spec.Members[1:], Topics: spec.Topics})
					join := assign.Spec{Members: withCurrent(spec.Members, before), Topics: spec.Topics}
					b.Run(name+"/join", func(b *testing.B) {
						for b.Loop() {
							if _, err := a.Assign(join); err != nil {
								b.Fatal(err)
							}
						}
					})
				}
			}
		}
	}
}
