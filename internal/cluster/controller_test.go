package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/cluster/raft"
	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/testutil/poll"
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
		poll.Until(t, 10*time.Second, 5*time.Millisecond, func() error {
			if !ok() {
				return fmt.Errorf("waiting for %s: brokers %+v", what, stores[1].Brokers())
			}
			return nil
		})
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

// A broker whose process is gone (its address refuses connections) is
// fenced at once, long before its session timeout; one cut off by the
// network refuses nothing and keeps its session.
func TestControllerFencesADeadProcessAtOnce(t *testing.T) {
	net := raft.NewMemNetwork(9)
	voters := map[int32]string{1: "n1", 2: "n2", 3: "n3"}
	stores := map[int32]*Store{}
	for node := range voters {
		s, err := OpenRaft(RaftConfig{NodeID: node, Voters: voters, Listen: voters[node], Dir: "/d", FS: vfs.NewMem(),
			Transport: net.Endpoint(raftID(node)), TickInterval: 5 * time.Millisecond,
			SessionTimeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		stores[node] = s
		t.Cleanup(func() { s.Close() })
	}
	for node, s := range stores {
		quorumRetry(t, "the cluster id", func() error { _, err := s.EnsureClusterID("c1"); return err })
		quorumRetry(t, fmt.Sprintf("registering %d", node), func() error {
			_, err := s.RegisterBroker("127.0.0.1", 9000+node, "", false)
			return err
		})
	}
	poll.Until(t, 10*time.Second, 5*time.Millisecond, func() error {
		if stores[1].LiveBrokers() != 3 {
			return fmt.Errorf("brokers not unfenced: %+v", stores[1].Brokers())
		}
		return nil
	})
	var others []int32
	for n := int32(1); n <= 3; n++ {
		if n != stores[1].Controller() {
			others = append(others, n)
		}
	}
	cut, dead := others[0], others[1]
	controller := stores[stores[1].Controller()]
	fenced := func(n int32) bool {
		b, _ := controller.Broker(n)
		return b.Fenced
	}
	net.Cut(raftID(cut), raftID(controller.NodeID()))
	net.Cut(raftID(cut), raftID(dead))
	time.Sleep(1500 * time.Millisecond)
	if fenced(cut) {
		t.Fatalf("broker %d, cut off by the network for 1.5 s, fenced before its 5 s session timeout", cut)
	}
	net.Heal()
	start := time.Now()
	net.Kill(raftID(dead))
	for !fenced(dead) {
		if time.Since(start) > 2500*time.Millisecond {
			t.Fatalf("broker %d, its process gone, not fenced after %v (session timeout 5 s)", dead, time.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("a dead process fenced after %v", time.Since(start).Round(time.Millisecond))
}

// openQuorumStore opens node's store on the simulated network with its own
// endpoint, which becomes the node's route.
func openQuorumStore(t *testing.T, net *raft.MemNetwork, voters map[int32]string, node int32, fsys vfs.FS) (*Store, raft.Transport) {
	t.Helper()
	ep := net.Endpoint(raftID(node))
	s, err := OpenRaft(RaftConfig{NodeID: node, Voters: voters, Listen: fmt.Sprintf("n%d", node), Dir: "/d", FS: fsys,
		Transport: ep, TickInterval: 5 * time.Millisecond,
		SessionTimeout: 3 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ep
}

// quorumRetry runs op until the quorum takes it: with a 5 ms tick on a
// loaded machine the leader may change while a proposal waits.
func quorumRetry(t *testing.T, what string, op func() error) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := op()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotAvailable) || time.Now().After(end) {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// registerUntil registers s, retrying while another process of its node
// holds a live registration, and returns the registration and how many
// times it was refused so.
func registerUntil(t *testing.T, s *Store, deadline time.Duration) (Broker, int) {
	t.Helper()
	refused := 0
	for end := time.Now().Add(deadline); ; time.Sleep(20 * time.Millisecond) {
		b, err := s.RegisterBroker("127.0.0.1", 9000+s.node, "", false)
		if err == nil {
			return b, refused
		}
		if errors.Is(err, ErrDuplicateBrokerRegistration) {
			refused++
		}
		if time.Now().After(end) {
			t.Fatalf("node %d not registered after %v (%d refusals): %v; brokers %+v", s.node, deadline, refused, err, s.Brokers())
		}
	}
}

// A restarted broker process (kill -9, then started on the same data) is
// refused while its predecessor's registration is live, and takes over
// once the controller sees that only the new process speaks for the node,
// well before a session timeout. The predecessor's silence counts even
// though the node id is heard from all along.
func TestControllerRestartedProcessTakesOver(t *testing.T) {
	net := raft.NewMemNetwork(11)
	voters := map[int32]string{1: "n1", 2: "n2", 3: "n3"}
	stores := map[int32]*Store{}
	disks := map[int32]*vfs.MemFS{}
	for node := range voters {
		disks[node] = vfs.NewMem()
		stores[node], _ = openQuorumStore(t, net, voters, node, disks[node])
	}
	for _, s := range stores {
		if _, err := s.EnsureClusterID("c1"); err != nil {
			t.Fatal(err)
		}
		registerUntil(t, s, 10*time.Second)
	}
	waitUntil(t, "every broker unfenced", func() bool { return stores[1].LiveBrokers() == 3 })
	victim := int32(1)
	for victim == stores[1].Controller() {
		victim++
	}
	old, _ := stores[victim].Broker(victim)
	stores[victim].Close()
	start := time.Now()
	restarted, _ := openQuorumStore(t, net, voters, victim, disks[victim])
	b, refused := registerUntil(t, restarted, 10*time.Second)
	took := time.Since(start)
	if refused == 0 {
		t.Error("the restart registered over a live registration")
	}
	if b.Epoch <= old.Epoch || b.Incarnation != restarted.Incarnation() {
		t.Fatalf("registered %+v after %+v", b, old)
	}
	if took >= 3*time.Second {
		t.Errorf("the restart took over after %v, a session timeout or more", took)
	}
	t.Logf("a restarted process registered after %v (%d refusals)", took.Round(time.Millisecond), refused)
	waitUntil(t, "the restarted broker unfenced", func() bool {
		nb, _ := stores[victim%3+1].Broker(victim)
		return !nb.Fenced && nb.Epoch == b.Epoch
	})
}

// A replacement process started for a node whose process is paused, on a
// copy of its disk, takes its registration once the paused one is silent;
// when the paused process is reached again it is fenced: it finds itself
// superseded, or its log no longer fits the leader's and it stops.
func TestControllerStaleProcessSuperseded(t *testing.T) {
	net := raft.NewMemNetwork(12)
	voters, any := startVoters(t, net)
	// Node 4 is a broker that is not a voter: its address is its own.
	disk := vfs.NewMem()
	paused, pausedEp := openQuorumStore(t, net, voters, 4, disk)
	first, _ := registerUntil(t, paused, 10*time.Second)
	waitUntil(t, "broker 4 unfenced", func() bool { b, _ := any.Broker(4); return !b.Fenced })
	// The replacement takes the address: the paused process hears nothing.
	replacement, _ := openQuorumStore(t, net, voters, 4, disk.CrashClone(vfs.CrashOptions{}))
	second, _ := registerUntil(t, replacement, 10*time.Second)
	if second.Epoch <= first.Epoch || second.Incarnation == first.Incarnation {
		t.Fatalf("replacement registered %+v after %+v", second, first)
	}
	waitUntil(t, "the replacement unfenced", func() bool { b, _ := any.Broker(4); return !b.Fenced && b.Epoch == second.Epoch })
	if _, stale := paused.Superseded(); stale {
		t.Fatal("the paused process knew it was superseded before hearing the log")
	}
	// The paused process resumes and is reached. Either it applies the
	// replacement's registration and finds itself superseded, or Raft
	// finds its log behind what the leader knows of the node and stops it.
	net.Reroute(pausedEp)
	waitUntil(t, "the paused process fenced", func() bool {
		b, stale := paused.Superseded()
		select {
		case <-paused.Stopped():
			t.Logf("the paused process stopped: %v", paused.Failure())
			return errors.Is(paused.Failure(), raft.ErrCorrupt)
		default:
		}
		return stale && b.Epoch == second.Epoch
	})
	if _, stale := replacement.Superseded(); stale {
		t.Fatal("the replacement is superseded")
	}
}

// startVoters starts a three-voter quorum with a cluster id and returns
// the voters and one of their stores.
func startVoters(t *testing.T, net *raft.MemNetwork) (map[int32]string, *Store) {
	t.Helper()
	voters := map[int32]string{1: "n1", 2: "n2", 3: "n3"}
	var any *Store
	for node := range voters {
		any, _ = openQuorumStore(t, net, voters, node, vfs.NewMem())
	}
	if _, err := any.EnsureClusterID("c1"); err != nil {
		t.Fatal(err)
	}
	return voters, any
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, 5*time.Millisecond, func() error {
		if !ok() {
			return fmt.Errorf("waiting for %s", what)
		}
		return nil
	})
}

// A process started for a member on an empty disk (its log lost) stops its
// metadata log with an error the broker reports, instead of crashing when
// the leader's commit index lies past its log's end.
func TestLostLogStopsTheNode(t *testing.T) {
	net := raft.NewMemNetwork(13)
	voters, _ := startVoters(t, net)
	member, _ := openQuorumStore(t, net, voters, 4, vfs.NewMem())
	registerUntil(t, member, 10*time.Second)
	member.Close()
	lost, _ := openQuorumStore(t, net, voters, 4, vfs.NewMem())
	select {
	case <-lost.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("a node whose log was lost still runs")
	}
	if err := lost.Failure(); !errors.Is(err, raft.ErrCorrupt) {
		t.Fatalf("stopped with %v", err)
	}
	if _, err := lost.RegisterBroker("h", 1, "", false); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("registering on a stopped log: %v", err)
	}
}
