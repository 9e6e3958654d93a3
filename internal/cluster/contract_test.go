package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/cluster/raft"
	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/model"
)

// backendKind opens stores of one backend for the contract suite: open
// starts (or restarts, on the same storage) broker node's view.
type backendKind struct {
	name string
	// newCluster returns a function that opens node's store, on storage
	// kept for the test's lifetime.
	newCluster func(t *testing.T) (open func(node int32) *Store)
}

// raftCluster returns a backend of a metadata quorum of voters nodes on a
// simulated network and in-memory disks; the store under test is node 1's,
// and the others run for the whole test.
func raftCluster(voters int) func(t *testing.T) func(int32) *Store {
	return func(t *testing.T) func(int32) *Store {
		net := raft.NewMemNetwork(1)
		ids := map[int32]string{}
		for i := range voters {
			ids[int32(i+1)] = fmt.Sprintf("node-%d", i+1)
		}
		disks := map[int32]*vfs.MemFS{}
		open := func(node int32) *Store {
			if disks[node] == nil {
				disks[node] = vfs.NewMem()
			}
			s, err := OpenRaft(RaftConfig{NodeID: node, Voters: ids, Listen: ids[node], Dir: "/data",
				FS: disks[node], Transport: net.Endpoint(raftID(node)), TickInterval: 5 * time.Millisecond,
				SessionTimeout: -1, ProposeTimeout: 10 * time.Second,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		for node := int32(2); node <= int32(voters); node++ {
			s := open(node)
			t.Cleanup(func() { s.Close() })
		}
		return open
	}
}

// backends lists every backend; each test of the suite runs over all.
var backends = []backendKind{
	{name: "raft-1", newCluster: raftCluster(1)},
	{name: "raft-3", newCluster: raftCluster(3)},
	{name: "file", newCluster: func(t *testing.T) func(int32) *Store {
		dir := t.TempDir()
		return func(node int32) *Store {
			s, err := OpenFile(dir, node)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}},
}

// forEachBackend runs fn over every backend with a registered, live
// broker 1.
func forEachBackend(t *testing.T, fn func(t *testing.T, open func() *Store)) {
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			openNode := bk.newCluster(t)
			var cur *Store
			open := func() *Store {
				if cur != nil {
					if err := cur.Close(); err != nil {
						t.Fatal(err)
					}
				}
				cur = openNode(1)
				// A quorum still electing its first leader may drop a
				// proposal (ErrNotAvailable); the broker retries its
				// registration, and so does the contract.
				retryUnavailable(t, func() error {
					_, err := cur.EnsureClusterID("")
					return err
				})
				// A reopened store replays its log in the background; the
				// broker reads it once caught up (CatchUp), and so does
				// the contract.
				retryUnavailable(t, cur.CatchUp)
				retryUnavailable(t, func() error {
					if _, ok := cur.Broker(1); ok {
						return nil
					}
					_, err := cur.RegisterBroker("127.0.0.1", 9092, "", true)
					return err
				})
				return cur
			}
			t.Cleanup(func() {
				if cur != nil {
					cur.Close()
				}
			})
			fn(t, open)
		})
	}
}

// retryUnavailable runs op until it does not fail with ErrNotAvailable, for
// at most 10 seconds, and fails the test on any other error.
func retryUnavailable(t *testing.T, op func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotAvailable) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestContractTopics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		s := open()
		if s.ClusterID() == "" {
			t.Fatal("no cluster id")
		}
		id := s.ClusterID()
		created, err := s.CreateTopic(TopicSpec{Name: "orders", Partitions: 3, ReplicationFactor: 1,
			Configs: map[string]string{"retention.ms": "1000"}})
		if err != nil {
			t.Fatal(err)
		}
		if created.ID == (TopicID{}) || created.Partitions != 3 || len(created.States) != 3 {
			t.Fatalf("created %+v", created)
		}
		for p, st := range created.States {
			if st.Leader != 1 || len(st.Replicas) != 1 || st.Replicas[0] != 1 || len(st.ISR) != 1 || st.LeaderEpoch != 0 {
				t.Fatalf("partition %d: %+v", p, st)
			}
		}
		for _, tc := range []struct {
			spec TopicSpec
			want error
		}{
			{TopicSpec{Name: "orders", Partitions: 1, ReplicationFactor: 1}, ErrTopicExists},
			{TopicSpec{Name: "ord.ers", Partitions: 1, ReplicationFactor: 1}, nil},
			{TopicSpec{Name: "ord_ers", Partitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
			{TopicSpec{Name: "bad/name", Partitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
			{TopicSpec{Name: "zero", Partitions: 0, ReplicationFactor: 1}, ErrInvalidPartitions},
			{TopicSpec{Name: "wide", Partitions: 1, ReplicationFactor: 2}, ErrInvalidReplicationFactor},
			{TopicSpec{Name: "nofactor", Partitions: 1, ReplicationFactor: 0}, ErrInvalidReplicationFactor},
			{TopicSpec{Name: "stranger", Partitions: 1, Assignment: [][]int32{{7}}}, ErrInvalidReplicaAssignment},
			{TopicSpec{Name: "twice", Partitions: 1, Assignment: [][]int32{{1, 1}}}, ErrInvalidReplicaAssignment},
			{TopicSpec{Name: "short", Partitions: 2, Assignment: [][]int32{{1}}}, ErrInvalidReplicaAssignment},
			{TopicSpec{Name: "explicit", Partitions: 1, Assignment: [][]int32{{1}}}, nil},
		} {
			if err := s.CheckTopic(tc.spec); !errors.Is(err, tc.want) {
				t.Errorf("CheckTopic(%s) = %v, want %v", tc.spec.Name, err, tc.want)
			}
			_, err := s.CreateTopic(tc.spec)
			if !errors.Is(err, tc.want) {
				t.Errorf("CreateTopic(%s) = %v, want %v", tc.spec.Name, err, tc.want)
			}
		}
		if err := s.SetPartitions("orders", 5, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.SetPartitions("orders", 4, nil); !errors.Is(err, ErrInvalidPartitions) {
			t.Fatalf("shrinking: %v", err)
		}
		if err := s.SetPartitions("missing", 4, nil); !errors.Is(err, ErrUnknownTopic) {
			t.Fatalf("unknown topic: %v", err)
		}
		if err := s.SetTopicConfigs("orders", map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeleteTopic("ord.ers"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeleteTopic("ord.ers"); !errors.Is(err, ErrUnknownTopic) {
			t.Fatalf("deleting twice: %v", err)
		}

		s = open() // everything survives a restart
		if s.ClusterID() != id {
			t.Fatalf("cluster id %s after restart, was %s", s.ClusterID(), id)
		}
		got, ok := s.Topic("orders")
		if !ok || got.ID != created.ID || got.Partitions != 5 || len(got.States) != 5 ||
			!maps.Equal(got.Configs, map[string]string{"cleanup.policy": "compact"}) {
			t.Fatalf("after restart: %+v", got)
		}
		if byID, ok := s.TopicByID(created.ID); !ok || byID.Name != "orders" {
			t.Fatalf("by id: %+v %v", byID, ok)
		}
		names := []string{}
		for _, tp := range s.Topics() {
			names = append(names, tp.Name)
		}
		if want := []string{"explicit", "orders"}; !slices.Equal(names, want) {
			t.Fatalf("topics %v, want %v", names, want)
		}
		// The name is free again; a topic made under it gets a new id.
		again, err := s.CreateTopic(TopicSpec{Name: "ord_ers", Partitions: 1, ReplicationFactor: 1})
		if err != nil || again.ID == created.ID {
			t.Fatalf("recreate: %+v %v", again, err)
		}
	})
}

func TestContractConfigsAndProducerIDs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		s := open()
		if err := s.SetBrokerConfigs(map[string]string{"log.retention.ms": "5"}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetNodeConfigs(1, map[string]string{"log.segment.bytes": "1048576"}); err != nil {
			t.Fatal(err)
		}
		seen := map[int64]bool{}
		for range ProducerIDBlockSize + 5 {
			id, err := s.NextProducerID()
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("producer id %d handed out twice", id)
			}
			seen[id] = true
		}
		s = open()
		if got := s.BrokerConfigs(); got["log.retention.ms"] != "5" {
			t.Fatalf("broker configs %v", got)
		}
		if got := s.NodeConfigs(1); got["log.segment.bytes"] != "1048576" {
			t.Fatalf("node configs %v", got)
		}
		if err := s.SetNodeConfigs(1, nil); err != nil || len(s.NodeConfigs(1)) != 0 {
			t.Fatalf("clearing node configs: %v %v", err, s.NodeConfigs(1))
		}
		// A restart never repeats an id, even from a block cut short.
		for range 10 {
			id, err := s.NextProducerID()
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("producer id %d handed out again after a restart", id)
			}
		}
	})
}

func TestContractBrokerFencing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		s := open()
		if _, err := s.CreateTopic(TopicSpec{Name: "t", Partitions: 2, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
		b, _ := s.Broker(1)
		if err := s.FenceBroker(1, b.Epoch+100); !errors.Is(err, ErrStaleBrokerEpoch) {
			t.Fatalf("fencing a stale epoch: %v", err)
		}
		if err := s.FenceBroker(1, b.Epoch); err != nil {
			t.Fatal(err)
		}
		if st, _ := s.Partition("t", 0); st.Leader != NoLeader || st.LeaderEpoch != 1 || len(st.ISR) != 1 {
			t.Fatalf("fenced: %+v", st)
		}
		if s.LiveBrokers() != 0 {
			t.Fatalf("%d live brokers, want 0", s.LiveBrokers())
		}
		if _, err := s.CreateTopic(TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrInvalidReplicationFactor) {
			t.Fatalf("creating with no live broker: %v", err)
		}
		if err := s.UnfenceBroker(1, b.Epoch); err != nil {
			t.Fatal(err)
		}
		if st, _ := s.Partition("t", 1); st.Leader != 1 || st.LeaderEpoch != 2 || st.PartitionEpoch != 2 {
			t.Fatalf("unfenced: %+v", st)
		}
		s = open()
		if _, clustered := s.Quorum(); clustered {
			// In a cluster another process of the node registers only once
			// the old registration is fenced.
			_, err := s.RegisterBroker("127.0.0.1", 9093, "", true)
			if !errors.Is(err, ErrDuplicateBrokerRegistration) {
				t.Fatalf("registering over a live registration: %v", err)
			}
			if err := s.FenceBroker(1, b.Epoch); err != nil {
				t.Fatal(err)
			}
		}
		// A single node's restart registers again, ready at once, and keeps
		// leadership and epochs as they are.
		nb, err := s.RegisterBroker("127.0.0.1", 9093, "", true)
		if err != nil {
			t.Fatal(err)
		}
		if _, clustered := s.Quorum(); !clustered {
			if st, _ := s.Partition("t", 1); st.Leader != 1 || st.LeaderEpoch != 2 {
				t.Fatalf("after re-registering: %+v", st)
			}
		}
		if nb.Port != 9093 || nb.Epoch <= b.Epoch || nb.Incarnation == b.Incarnation || nb.Incarnation != s.Incarnation() {
			t.Fatalf("re-registered %+v after %+v", nb, b)
		}
		if _, stale := s.Superseded(); stale {
			t.Fatal("the registering process is superseded by itself")
		}
	})
}

func TestContractACLs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		s := open()
		read := model.ACLBinding{ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice",
			Host: "*", Operation: 3, Permission: 3}
		write := read
		write.Operation = 4
		group := model.ACLBinding{ResourceType: 3, ResourceName: "app-", PatternType: 4, Principal: "User:alice",
			Host: "*", Operation: 3, Permission: 3}
		if _, epoch := s.ACLs(); epoch != 0 {
			t.Fatalf("a new cluster's ACL epoch %d", epoch)
		}
		if err := s.AlterACLs([]model.ACLBinding{read, write, group, read}, nil); err != nil {
			t.Fatal(err)
		}
		got, epoch := s.ACLs()
		if !slices.Equal(got, []model.ACLBinding{read, write, group}) || epoch == 0 || s.ACLsEpoch() != epoch {
			t.Fatalf("ACLs %+v at epoch %d (%d)", got, epoch, s.ACLsEpoch())
		}
		// Creating what exists changes nothing, not even the epoch.
		if err := s.AlterACLs([]model.ACLBinding{write}, nil); err != nil {
			t.Fatal(err)
		}
		if _, again := s.ACLs(); again != epoch {
			t.Fatalf("a creation of an existing ACL moved the epoch from %d to %d", epoch, again)
		}
		if err := s.AlterACLs(nil, []model.ACLBinding{write, {ResourceName: "absent"}}); err != nil {
			t.Fatal(err)
		}
		s = open()
		got, _ = s.ACLs()
		if !slices.Equal(got, []model.ACLBinding{read, group}) {
			t.Fatalf("after a deletion and a restart: %+v", got)
		}
	})
}

func TestContractClientQuotas(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		s := open()
		alice := []QuotaEntityPart{{Type: "user", Name: "alice"}}
		anyClient := []QuotaEntityPart{{Type: "client-id", Default: true}}
		if err := s.AlterClientQuotas([]ClientQuotaChange{
			{Entity: alice, Set: map[string]float64{"producer_byte_rate": 1024, "consumer_byte_rate": 2048}},
			{Entity: anyClient, Set: map[string]float64{"request_percentage": 50}},
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.AlterClientQuotas([]ClientQuotaChange{
			{Entity: alice, Remove: []string{"consumer_byte_rate"}},
			{Entity: anyClient, Remove: []string{"request_percentage"}},
		}); err != nil {
			t.Fatal(err)
		}
		s = open()
		got, epoch := s.ClientQuotas()
		if len(got) != 1 || !slices.Equal(got[0].Entity, alice) || !maps.Equal(got[0].Values, map[string]float64{"producer_byte_rate": 1024}) ||
			epoch == 0 || s.ClientQuotasEpoch() != epoch {
			t.Fatalf("quotas %+v at epoch %d", got, epoch)
		}
	})
}

func TestContractLinks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		s := open()
		link := Link{Name: "kafka-prod", Source: LinkSource{BootstrapServers: []string{"10.0.0.1:9092"},
			SecurityProtocol: "SASL_SSL", SASLMechanism: "SCRAM-SHA-512", SASLUsername: "mirror", SASLPassword: "s3cret"},
			Topics: Filter{Include: []string{"orders.*"}, Exclude: []string{"orders-tmp"}}, CreatedAtMs: 7}
		if _, err := s.CreateLink(link); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateLink(link); !errors.Is(err, ErrLinkExists) {
			t.Fatalf("a second link of the name: %v", err)
		}
		for _, bad := range []Link{
			{Name: "x", Source: LinkSource{BootstrapServers: []string{"a:1"}}, Topics: Filter{Include: []string{"("}}},
			{Name: "x", Source: LinkSource{BootstrapServers: []string{"nohost"}}, Topics: Filter{Include: []string{"a"}}},
			{Name: "x", Source: LinkSource{BootstrapServers: []string{"a:1"}}},
			{Name: "bad name", Source: LinkSource{BootstrapServers: []string{"a:1"}}, Topics: Filter{Include: []string{"a"}}},
		} {
			if _, err := s.CreateLink(bad); !errors.Is(err, ErrInvalidLink) {
				t.Fatalf("link %+v: %v", bad, err)
			}
		}
		id := TopicID{4, 2}
		mirror := &TopicMirror{Link: "kafka-prod", State: MirrorActive}
		if _, err := s.CreateTopic(TopicSpec{Name: "orders", Partitions: 3, ReplicationFactor: 1, ID: id, Mirror: mirror}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateTopic(TopicSpec{Name: "refunds", Partitions: 1, ReplicationFactor: 1,
			Mirror: &TopicMirror{Link: "absent", State: MirrorActive}}); !errors.Is(err, ErrUnknownLink) {
			t.Fatalf("a mirror of an unknown link: %v", err)
		}
		link.Paused = true
		link.CreatedAtMs = 99
		if err := s.AlterLink(link); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteLink("kafka-prod"); !errors.Is(err, ErrLinkInUse) {
			t.Fatalf("deleting a link with a mirror: %v", err)
		}
		s = open()
		got, ok := s.Link("kafka-prod")
		if !ok || !got.Paused || got.CreatedAtMs != 7 || got.Source.SASLPassword != "s3cret" {
			t.Fatalf("after a restart: %+v %v", got, ok)
		}
		if red := got.Source.Redacted(); red.SASLPassword == "s3cret" {
			t.Fatal("the redacted source shows the password")
		}
		if top, ok := s.TopicByID(id); !ok || top.Name != "orders" || top.Mirror == nil || top.Mirror.State != MirrorActive {
			t.Fatalf("mirror topic by id: %+v %v", top, ok)
		}
		if err := s.SetMirrorState("orders", "kafka-prod", MirrorStopped, "source topic deleted"); err != nil {
			t.Fatal(err)
		}
		if top, _ := s.Topic("orders"); top.Mirror.State != MirrorStopped || top.Mirror.Reason == "" {
			t.Fatalf("stopped mirror: %+v", top.Mirror)
		}
		if err := s.SetMirrorState("orders", "other", "", ""); !errors.Is(err, ErrInvalidLink) {
			t.Fatalf("promoting through another link: %v", err)
		}
		if err := s.SetMirrorState("orders", "kafka-prod", "", ""); err != nil {
			t.Fatal(err)
		}
		if top, _ := s.Topic("orders"); top.Mirror != nil {
			t.Fatalf("promoted topic still a mirror: %+v", top.Mirror)
		}
		if err := s.DeleteLink("kafka-prod"); err != nil {
			t.Fatal(err)
		}
		if len(s.Links()) != 0 {
			t.Fatalf("links after deletion: %+v", s.Links())
		}
	})
}

// A producer id a mirrored partition carries is never handed out, not even
// from a block this broker took before the reservation.
func TestContractReservedProducerIDs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *Store) {
		s := open()
		first, err := s.NextProducerID()
		if err != nil {
			t.Fatal(err)
		}
		above := first + 3*ProducerIDBlockSize + 17
		if err := s.ReserveProducerIDs(above); err != nil {
			t.Fatal(err)
		}
		if id, err := s.NextProducerID(); err != nil || id <= above {
			t.Fatalf("after reserving up to %d: id %d, %v", above, id, err)
		}
		s = open()
		if id, err := s.NextProducerID(); err != nil || id <= above {
			t.Fatalf("after a restart: id %d, %v", id, err)
		}
	})
}
