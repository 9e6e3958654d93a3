package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// controllerKills is how many times each test kills the active controller
// (STRAND_CONTROLLER_KILLS overrides it).
func controllerKills(t *testing.T, def int) int {
	if v := os.Getenv("STRAND_CONTROLLER_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("STRAND_CONTROLLER_KILLS=%q", v)
		}
		return n
	}
	return def
}

// topicOp is one create or delete a client made, with what it was told.
type topicOp struct {
	topic  string
	create bool
	acked  bool     // answered without error, or with a definite state
	id     [16]byte // the created topic's id, when acked
	// idUnknown: a create answered TOPIC_ALREADY_EXISTS, made by an
	// earlier attempt whose answer was lost, of an id not known here.
	idUnknown bool
	start     time.Time // when it was sent
	at        time.Time // when the answer came
	err       error     // the answer's error, or nil
}

// The active controller is killed with SIGKILL again and again while three
// clients create and delete topics through different brokers. Afterwards
// every broker holds the same topics, every acknowledged change is
// reflected (a topic acknowledged created and never deleted exists with the
// id its creation returned; one acknowledged deleted and not created again
// is gone), and each topic's id is the one its creation answered, so no
// creation applied twice. Each round measures the time from the kill to the
// first change acknowledged after it. STRAND_CONTROLLER_KILLS sets the
// kills of each cluster size (by default 8 of 3 brokers, 4 of 5): the long
// runs go through it.
func TestControllerKills(t *testing.T) {
	if testing.Short() {
		t.Skip("processes and kill -9: not in -short")
	}
	for _, tc := range []struct {
		brokers, kills int
	}{{3, controllerKills(t, 8)}, {5, controllerKills(t, 4)}} {
		t.Run(fmt.Sprintf("%d brokers", tc.brokers), func(t *testing.T) {
			testControllerKills(t, tc.brokers, tc.kills)
		})
	}
}

func testControllerKills(t *testing.T, brokers, kills int) {
	c := testutil.StartProcessCluster(t, brokers, "--broker-session-timeout", "3s")
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(kills)*20*time.Second+60*time.Second)
	defer cancel()

	var (
		mu  sync.Mutex
		ops []topicOp
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()[w%brokers]), kgo.RetryTimeout(5*time.Second),
			kgo.RequestTimeoutOverhead(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		wg.Go(func() {
			exists := map[string]bool{} // what this client last learned of its topics
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				topic := fmt.Sprintf("w%d-%d", w, i%8) // names come back: create after delete
				op := topicOp{topic: topic, create: !exists[topic], start: time.Now()}
				opCtx, opCancel := context.WithTimeout(ctx, 8*time.Second)
				var err error
				if op.create {
					var r kadm.CreateTopicResponse
					r, err = adm.CreateTopic(opCtx, 1, 1, nil, topic)
					op.id = r.ID
				} else {
					_, err = adm.DeleteTopic(opCtx, topic)
				}
				opCancel()
				op.acked, op.at, op.err = err == nil, time.Now(), err
				switch {
				case errors.Is(err, kerr.TopicAlreadyExists), errors.Is(err, kerr.UnknownTopicOrPartition):
					// A definite answer: the topic exists (or not) now.
					// The client retries a request whose answer was lost,
					// so the change may be this request's own, made by
					// its first attempt; only this worker changes the
					// topic, so it stands as the topic's last change, of
					// an id not known for a create.
					op.acked, op.idUnknown = true, op.create
					exists[topic] = op.create
				case err == nil:
					exists[topic] = op.create
				}
				mu.Lock()
				ops = append(ops, op)
				mu.Unlock()
				if err != nil {
					if os.Getenv("STRAND_DEBUG_OPS") != "" {
						t.Logf("%s create=%v: %v", topic, op.create, err)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}

	var failovers, elections []time.Duration
	for round := range kills {
		time.Sleep(300 * time.Millisecond) // let the clients get going
		controller := controllerOf(t, c)
		victim := c.Procs[controller]
		killed := time.Now()
		victim.Kill()
		// A survivor names a new leader of the metadata quorum.
		for elected := false; !elected; time.Sleep(5 * time.Millisecond) {
			if time.Since(killed) > 30*time.Second {
				t.Fatalf("round %d: no new controller 30 s after killing %d", round, controller)
			}
			for i, p := range c.Procs {
				if int32(i) == controller {
					continue
				}
				if l, err := testutil.QuorumLeader(p.Addr); err == nil && l >= 0 && l != controller {
					elected = true
					break
				}
			}
		}
		elections = append(elections, time.Since(killed))
		// The first change sent after the kill and acknowledged marks
		// the new controller's first decision as a client sees it.
		var took time.Duration
		for took == 0 {
			if time.Since(killed) > 30*time.Second {
				t.Fatalf("round %d: no change acknowledged for 30 s after killing controller %d", round, controller)
			}
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			for _, op := range ops {
				if op.acked && op.start.After(killed) {
					took = op.at.Sub(killed)
					break
				}
			}
			mu.Unlock()
		}
		failovers = append(failovers, took)
		victim.Restart(t)
	}
	close(stop)
	wg.Wait()
	c.WaitLive(t, brokers, 30*time.Second)

	// The model: the last acknowledged change of each topic decides it.
	// A change that was not acknowledged (it timed out: its outcome is
	// unknown) may take effect at any time after it was sent, even after
	// later changes were acknowledged, as a timed-out CreateTopics or
	// DeleteTopics goes on in Kafka too: its outcome is allowed as well.
	type verdict struct {
		known, exists, anyID bool // the last acknowledged change's outcome
		id                   [16]byte
		mayBeGone, mayExist  bool // an unacknowledged delete, create
	}
	want := map[string]verdict{}
	acked := 0
	for _, op := range ops {
		v := want[op.topic]
		switch {
		case !op.acked && op.create:
			v.mayExist = true
		case !op.acked:
			v.mayBeGone = true
		default:
			acked++
			v.known, v.exists, v.id, v.anyID = true, op.create, op.id, op.idUnknown
		}
		want[op.topic] = v
	}
	if acked < 4*kills {
		t.Fatalf("only %d of %d changes acknowledged over %d kills", acked, len(ops), kills)
	}
	topicIDs := func(p *testutil.Process) map[string][16]byte {
		md, err := testutil.BrokerMetadata(p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string][16]byte{}
		for _, tp := range md.Topics {
			ids[*tp.Topic] = tp.TopicID
		}
		return ids
	}
	// Broker 0's topics are the reference: the others catch up to them.
	first := topicIDs(c.Procs[0])
	for i := 1; i < len(c.Procs); i++ {
		testutil.EventuallyEvery(t, 10*time.Second, 50*time.Millisecond, func() error {
			if got := topicIDs(c.Procs[i]); !mapsEqual(got, first) {
				return fmt.Errorf("broker %d holds %v, broker 0 %v", i, got, first)
			}
			return nil
		})
	}
	for topic, v := range want {
		id, exists := first[topic]
		switch {
		case !v.known:
		case exists && v.mayExist, !exists && v.mayBeGone:
		case v.exists && (!exists || (id != v.id && !v.anyID)):
			t.Errorf("%s: acknowledged created with id %x, now exists=%v id %x; its changes:\n%s", topic, v.id, exists, id, history(ops, topic))
		case !v.exists && exists:
			t.Errorf("%s: acknowledged deleted, still exists; its changes:\n%s", topic, history(ops, topic))
		}
	}
	slices.Sort(failovers)
	slices.Sort(elections)
	t.Logf("%d brokers, %d controller kills, %d changes (%d acknowledged): new controller after a kill p50 %v, max %v; first acknowledged change p50 %v, max %v",
		brokers, kills, len(ops), acked, elections[len(elections)/2].Round(time.Millisecond), elections[len(elections)-1].Round(time.Millisecond),
		failovers[len(failovers)/2].Round(time.Millisecond), failovers[len(failovers)-1].Round(time.Millisecond))
}

// controllerOf asks the brokers which one is the active controller (the
// metadata quorum's leader), until one names it.
func controllerOf(t *testing.T, c *testutil.ProcessCluster) int32 {
	t.Helper()
	var leader int32
	testutil.Eventually(t, 30*time.Second, func() error {
		var answers []string
		for i, p := range c.Procs {
			l, err := testutil.QuorumLeader(p.Addr)
			if err == nil && l >= 0 {
				leader = l
				return nil
			}
			answers = append(answers, fmt.Sprintf("broker %d: leader %d, error %v", i, l, err))
		}
		return fmt.Errorf("no active controller: %s", strings.Join(answers, "; "))
	})
	return leader
}

func mapsEqual(a, b map[string][16]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// history lists the recorded changes of one topic, for a failure message.
func history(ops []topicOp, topic string) string {
	var b strings.Builder
	for _, op := range ops {
		if op.topic == topic {
			fmt.Fprintf(&b, "  %s..%s create=%v acked=%v id=%x err=%v\n", op.start.Format("15:04:05.000"),
				op.at.Format("15:04:05.000"), op.create, op.acked, op.id[:4], op.err)
		}
	}
	return b.String()
}
