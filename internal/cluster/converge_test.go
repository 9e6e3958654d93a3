package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/cluster/raft"
	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/testutil/poll"
)

// Three brokers change the metadata at once over a lossy, reordering
// network, one of them restarted from a crash clone of its disk midway:
// afterwards every image is identical, every change acknowledged to its
// proposer is in it, and none applied twice (producer-id blocks are
// never handed out twice).
func TestImagesConverge(t *testing.T) {
	net := raft.NewMemNetwork(3)
	net.SetLoss(0.05)
	net.SetDelay(0, 3*time.Millisecond)
	voters := map[int32]string{1: "a", 2: "b", 3: "c"}
	disks := map[int32]*vfs.MemFS{1: vfs.NewMem(), 2: vfs.NewMem(), 3: vfs.NewMem()}
	open := func(node int32) *Store {
		s, err := OpenRaft(RaftConfig{NodeID: node, Voters: voters, Listen: voters[node], Dir: "/d", FS: disks[node],
			Transport: net.Endpoint(raftID(node)), TickInterval: 5 * time.Millisecond, SessionTimeout: -1,
			ProposeTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var mu sync.Mutex
	stores := map[int32]*Store{1: open(1), 2: open(2), 3: open(3)}
	store := func(n int32) *Store { mu.Lock(); defer mu.Unlock(); return stores[n] }
	t.Cleanup(func() {
		for _, s := range stores {
			s.Close()
		}
	})
	if _, err := stores[1].EnsureClusterID("c"); err != nil {
		t.Fatal(err)
	}
	for n := range stores {
		for {
			if _, err := store(n).RegisterBroker("h", n, "", true); err == nil {
				break
			}
		}
	}

	type acked struct {
		topic string
		id    TopicID
	}
	var (
		amu     sync.Mutex
		created []acked
		pids    = map[int64]int32{}
	)
	var wg sync.WaitGroup
	for n := int32(1); n <= 3; n++ {
		wg.Go(func() {
			for i := range 40 {
				s := store(n)
				name := fmt.Sprintf("t%d-%d", n, i)
				tp, err := s.CreateTopic(TopicSpec{Name: name, Partitions: 2, ReplicationFactor: 1})
				if err == nil {
					amu.Lock()
					created = append(created, acked{name, tp.ID})
					amu.Unlock()
				} else if !errors.Is(err, ErrNotAvailable) && !errors.Is(err, ErrTopicExists) {
					t.Errorf("create %s: %v", name, err)
				}
				if id, err := s.NextProducerID(); err == nil {
					amu.Lock()
					if other, dup := pids[id]; dup {
						t.Errorf("producer id %d handed to broker %d and %d", id, other, n)
					}
					pids[id] = n
					amu.Unlock()
				}
			}
		})
	}
	// Crash broker 3 midway and bring it back from what it had synced.
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	net.Kill(raftID(3))
	stores[3].Close()
	disks[3] = disks[3].CrashClone(vfs.CrashOptions{})
	stores[3] = open(3)
	mu.Unlock()
	wg.Wait()

	// One more change through each broker: once it applies there, that
	// broker has everything committed before it.
	for n := int32(1); n <= 3; n++ {
		poll.Until(t, 20*time.Second, 0, func() error {
			if err := store(n).SetBrokerConfigs(map[string]string{"log.retention.ms": fmt.Sprint(n)}); err != nil {
				return fmt.Errorf("broker %d takes no change: %w", n, err)
			}
			return nil
		})
	}
	var images []string
	poll.Until(t, 10*time.Second, 10*time.Millisecond, func() error {
		images = images[:0]
		for n := int32(1); n <= 3; n++ {
			s := store(n)
			s.mu.RLock()
			b, _ := json.Marshal(s.im)
			s.mu.RUnlock()
			images = append(images, string(b))
		}
		if images[0] != images[1] || images[1] != images[2] {
			return fmt.Errorf("images differ:\n%s\n%s\n%s", images[0], images[1], images[2])
		}
		return nil
	})
	for _, a := range created {
		tp, ok := stores[1].Topic(a.topic)
		if !ok || tp.ID != a.id {
			t.Errorf("acknowledged topic %s (id %s): now %+v %v", a.topic, a.id, tp, ok)
		}
	}
	if len(created) < 60 {
		t.Fatalf("only %d of 120 creations acknowledged", len(created))
	}
	t.Logf("%d topics acknowledged, %d producer ids, image of %d bytes", len(created), len(pids), len(images[0]))
}
