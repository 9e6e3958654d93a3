package cluster

import (
	"fmt"
	"slices"
)

// place returns the states of count new partitions numbered from first:
// the explicit assignment when there is one, else factor replicas each,
// spread over the live brokers.
//
// Spreading follows Kafka's rack-unaware assignment, on a broker list
// ordered so that consecutive brokers are in different racks when racks are
// set (Kafka's rack-aware order): partition p's leader is the broker at
// (seed+p) mod n, and its other replicas the brokers after it. So leaders
// spread evenly, a rack never holds two replicas of a partition while other
// racks are free, and the seed keeps every topic from starting on the same
// broker.
func (im *image) place(count, first int32, factor int16, assignment [][]int32, seed uint32) ([]Partition, error) {
	if len(assignment) > 0 {
		return im.placeExplicit(count, assignment)
	}
	live := im.rackOrder(im.live())
	switch {
	case factor < 1:
		return nil, fmt.Errorf("%w: replication factor must be at least 1, got %d", ErrInvalidReplicationFactor, factor)
	case int(factor) > len(live):
		return nil, fmt.Errorf("%w: replication factor %d is larger than the %d available brokers",
			ErrInvalidReplicationFactor, factor, len(live))
	}
	n := uint64(len(live))
	states := make([]Partition, count)
	for i := range states {
		start := (uint64(seed) + uint64(first) + uint64(i)) % n
		replicas := make([]int32, factor)
		for j := range replicas {
			replicas[j] = live[(start+uint64(j))%n]
		}
		states[i] = im.newPartition(replicas)
	}
	return states, nil
}

func (im *image) placeExplicit(count int32, assignment [][]int32) ([]Partition, error) {
	if len(assignment) != int(count) {
		return nil, fmt.Errorf("%w: %d partitions but %d assignments", ErrInvalidReplicaAssignment, count, len(assignment))
	}
	states := make([]Partition, count)
	for i, replicas := range assignment {
		switch {
		case len(replicas) == 0:
			return nil, fmt.Errorf("%w: partition %d has no replicas", ErrInvalidReplicaAssignment, i)
		case len(replicas) != len(assignment[0]):
			return nil, fmt.Errorf("%w: partitions have different replica counts", ErrInvalidReplicaAssignment)
		}
		for j, r := range replicas {
			if im.broker(r) == nil {
				return nil, fmt.Errorf("%w: broker %d is not registered", ErrInvalidReplicaAssignment, r)
			}
			if slices.Contains(replicas[:j], r) {
				return nil, fmt.Errorf("%w: partition %d names broker %d twice", ErrInvalidReplicaAssignment, i, r)
			}
		}
		states[i] = im.newPartition(slices.Clone(replicas))
	}
	return states, nil
}

// newPartition is a new partition on replicas, led by the first live one.
func (im *image) newPartition(replicas []int32) Partition {
	p := Partition{Replicas: replicas, ISR: slices.Clone(replicas), Leader: NoLeader}
	for _, r := range replicas {
		if im.isLive(r) {
			p.Leader = r
			break
		}
	}
	return p
}

// rackOrder orders nodes so that racks alternate: the first broker of each
// rack (racks by name), then the second of each, and so on. Without racks
// the order is unchanged.
func (im *image) rackOrder(nodes []int32) []int32 {
	byRack := map[string][]int32{}
	var racks []string
	for _, n := range nodes {
		rack := im.broker(n).Rack
		if _, ok := byRack[rack]; !ok {
			racks = append(racks, rack)
		}
		byRack[rack] = append(byRack[rack], n)
	}
	if len(racks) <= 1 {
		return nodes
	}
	slices.Sort(racks)
	out := make([]int32, 0, len(nodes))
	for i := 0; len(out) < len(nodes); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}
