package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/inspect"
)

// TestPlanDecommission: node 3's place goes to a broker in a rack the
// partition lacks, else the least loaded; partitions without a replica
// there stay; one with nowhere to go is refused by name.
func TestPlanDecommission(t *testing.T) {
	up := func(id int32, rack string, parts int) inspect.Broker {
		return inspect.Broker{NodeID: id, Rack: rack, Status: inspect.BrokerUp, Partitions: make([]string, parts)}
	}
	brokers := []inspect.Broker{up(0, "a", 5), up(1, "a", 1), up(2, "b", 9), up(3, "b", 4), up(4, "c", 0)}
	brokers[4].Status = inspect.BrokerDown
	topics := kadm.TopicDetails{"t": {Topic: "t", Partitions: kadm.PartitionDetails{
		0: {Partition: 0, Replicas: []int32{3, 0}},    // rack b is left: broker 2, loaded as it is
		1: {Partition: 1, Replicas: []int32{0, 2, 3}}, // broker 1 alone is live and lacking
		2: {Partition: 2, Replicas: []int32{0, 1}},    // untouched
	}}}
	plan, err := planDecommission(3, brokers, topics)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32][]int32{0: {2, 0}, 1: {0, 2, 1}}
	if len(plan["t"]) != len(want) {
		t.Fatalf("plan %v, want %v", plan, want)
	}
	for p, r := range want {
		if !slices.Equal(plan["t"][p], r) {
			t.Errorf("partition %d: %v, want %v", p, plan["t"][p], r)
		}
	}
	topics["t"].Partitions[3] = kadm.PartitionDetail{Partition: 3, Replicas: []int32{0, 1, 2, 3}}
	if _, err := planDecommission(3, brokers, topics); err == nil || !strings.Contains(err.Error(), "t-3") {
		t.Errorf("a partition on every live broker: %v", err)
	}
	if _, err := planDecommission(9, brokers, topics); err == nil {
		t.Error("an unknown broker was planned for")
	}
}
