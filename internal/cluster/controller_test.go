package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/cluster/raft"
	"github.com/strandlog/strand/internal/log/vfs"
)

// The active controller unfences a broker once it has registered and
// caught up, and fences one it stops hearing from; the broker's partitions
// follow (no leader while fenced, with one replica).
func TestControllerLiveness(t *testing.T) {
	net := raft.NewMemNetwork(7)
	voters := map[int32]string{1: "n1", 2: "n2", 3: "n3"}
	stores := map[int32]*Store{}
	for node := range voters {
		s, err := OpenRaft(RaftConfig{NodeID: node, Voters: voters, Listen: voters[node], Dir: "/d", FS: vfs.NewMem(),
			Transport: net.Endpoint(raftID(node)), TickInterval: 5 * time.Millisecond,
			SessionTimeout: 400 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		stores[node] = s
		t.Cleanup(func() { s.Close() })
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: brokers %+v", what, stores[1].Brokers())
			}
		}
	}
	for node, s := range stores {
		if _, err := s.EnsureClusterID("c1"); err != nil {
			t.Fatal(err)
		}
		b, err := s.RegisterBroker("127.0.0.1", 9000+node, "", false)
		if err != nil || !b.Fenced {
			t.Fatalf("registering %d: %+v %v", node, b, err)
		}
	}
	waitFor("every broker unfenced", func() bool { return stores[1].LiveBrokers() == 3 })
	if _, err := stores[1].CreateTopic(TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	// Stop hearing from one broker that is not the controller.
	victim := int32(1)
	for victim == stores[1].Controller() {
		victim++
	}
	net.Kill(raftID(victim))
	other := stores[victim%3+1]
	waitFor(fmt.Sprintf("broker %d fenced", victim), func() bool {
		b, _ := other.Broker(victim)
		return b.Fenced
	})
	tp, _ := other.Topic("t")
	for i, st := range tp.States {
		if st.Replicas[0] == victim && (st.Leader != NoLeader || st.LeaderEpoch != 1) {
			t.Fatalf("partition %d of the fenced broker: %+v", i, st)
		}
		if st.Replicas[0] != victim && (st.Leader != st.Replicas[0] || st.LeaderEpoch != 0) {
			t.Fatalf("partition %d of a live broker: %+v", i, st)
		}
	}
}
