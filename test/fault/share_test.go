package fault

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// shareLedger is what every member of a share group was handed and what
// the brokers confirmed, for the checker.
type shareLedger struct {
	mu sync.Mutex
	// deliveries of each value: the delivery counts, one per handing.
	deliveries map[string][]int32
	// accepted counts each value's acceptances the broker confirmed.
	accepted map[string]int
	// settledAt is the delivery count at which a value's acceptance or
	// rejection was confirmed: it is never delivered again.
	settledAt map[string]int32
	// released and rejected are the values a member released or
	// rejected, the broker confirming it.
	released, rejected map[string]bool
}

func (l *shareLedger) delivered(value string, count int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deliveries[value] = append(l.deliveries[value], count)
}

// shareAction is what the members do with a value's delivery: every
// twentieth value is rejected, the next released at its first delivery,
// the rest accepted.
func shareAction(value string, count int32) kgo.AckStatus {
	i, _ := strconv.Atoi(strings.TrimPrefix(value, "task-"))
	switch {
	case i%20 == 0:
		return kgo.AckReject
	case i%20 == 1 && count == 1:
		return kgo.AckRelease
	}
	return kgo.AckAccept
}

// shareMember reads as a franz-go share consumer until ctx ends. After
// each poll it acknowledges what it got and flushes: a partition whose
// every acknowledgement of that flush the broker confirmed counts its
// records' outcomes in the ledger.
func shareMember(ctx context.Context, t *testing.T, seeds []string, group, topic string, l *shareLedger) {
	var (
		resMu   sync.Mutex
		results kgo.ShareAckResults
	)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(300*time.Millisecond), kgo.ShareMaxRecords(50),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			resMu.Lock()
			results = append(results, rs...)
			resMu.Unlock()
		}))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 50)
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if len(recs) == 0 {
			continue
		}
		resMu.Lock()
		results = nil
		resMu.Unlock()
		for _, r := range recs {
			l.delivered(string(r.Value), r.DeliveryCount())
			cl.MarkAcks(shareAction(string(r.Value), r.DeliveryCount()), r)
		}
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.FlushAcks(fctx)
		cancel()
		if err != nil {
			continue // nothing confirmed: the records come back
		}
		resMu.Lock()
		failed := map[int32]bool{}
		confirmed := map[int32]bool{}
		for _, res := range results {
			if res.Err != nil {
				failed[res.Partition] = true
			} else {
				confirmed[res.Partition] = true
			}
		}
		resMu.Unlock()
		l.mu.Lock()
		for _, r := range recs {
			if failed[r.Partition] || !confirmed[r.Partition] {
				continue
			}
			v := string(r.Value)
			switch shareAction(v, r.DeliveryCount()) {
			case kgo.AckAccept:
				l.accepted[v]++
				l.settledAt[v] = r.DeliveryCount()
			case kgo.AckRelease:
				l.released[v] = true
			case kgo.AckReject:
				l.rejected[v] = true
				l.settledAt[v] = r.DeliveryCount()
			}
		}
		l.mu.Unlock()
	}
}

// TestShareGroupFaults: eight members of a share group read a topic of
// three partitions on three brokers: seven franz-go share consumers,
// which reject, release and accept, and `strand consume --share-group`,
// killed with SIGKILL while it reads; beside them a ninth member takes
// records once and stalls, its locks (3 s) running out. Then the group's
// coordinator broker is killed with SIGKILL, and started again once the
// group has another coordinator. The checker, over everything handed out:
// every record delivered and, at the end, done with (the group's lag 0 on
// every partition); no acceptance the brokers confirmed twice; a record
// whose acceptance or rejection was confirmed never delivered again (two
// members never both settle a record); a released one, and one the
// stalled member held, delivered again with a higher delivery count;
// delivery counts within the delivery limit.
func TestShareGroupFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("three broker processes, a killed consumer and a killed coordinator")
	}
	c := testutil.StartProcessCluster(t, 3, "--group-share-record-lock-duration", "3s",
		"--group-share-session-timeout", "6s", "--group-share-heartbeat-interval", "1s")
	seeds := c.Seeds()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := newClient(t, seeds)
	adm := kadm.NewClient(admin)
	testutil.EnableShareGroups(t, admin)
	const topic, group, n = "tasks", "workers", 3000
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	testutil.SetGroupConfig(t, admin, group, "share.auto.offset.reset", "earliest")
	testutil.AwaitGroupConfig(t, seeds, group, "share.auto.offset.reset", "earliest")
	prod := newClient(t, seeds, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "task-%05d", i)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	l := &shareLedger{deliveries: map[string][]int32{}, accepted: map[string]int{}, settledAt: map[string]int32{},
		released: map[string]bool{}, rejected: map[string]bool{}}

	// A member that stalls: it takes records once, then neither
	// acknowledges nor polls again, its connection open. Its locks run
	// out and its records go to the others.
	stalled, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.ShareMaxRecords(20))
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	held := map[string]int32{}
	for len(held) == 0 && ctx.Err() == nil {
		stalled.PollRecords(ctx, 20).EachRecord(func(r *kgo.Record) {
			held[string(r.Value)] = r.DeliveryCount()
			l.delivered(string(r.Value), r.DeliveryCount())
		})
	}

	members, stopMembers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 7 {
		wg.Go(func() { shareMember(members, t, seeds, group, topic, l) })
	}
	defer wg.Wait()
	defer stopMembers()

	// The eighth member, a process, is killed once it has printed 100
	// records; what it printed counts as delivered.
	cmd := exec.Command(testutil.Binary(t), "consume", topic, "--share-group", group, "--brokers", strings.Join(seeds, ","),
		"--format", `%v %c\n`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	printed := make(chan struct{})
	var readDone sync.WaitGroup
	lines := 0 // read once readDone is done
	readDone.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var v string
			var count int32
			if _, err := fmt.Sscanf(sc.Text(), "%s %d", &v, &count); err == nil {
				l.delivered(v, count)
			}
			if lines++; lines == 100 {
				close(printed)
			}
		}
		if lines < 100 {
			close(printed)
		}
	})
	select {
	case <-printed:
	case <-ctx.Done():
		t.Fatal("the strand consume member printed nothing")
	}
	cmd.Process.Kill()
	cmd.Wait()
	readDone.Wait()
	if lines < 100 {
		t.Fatalf("the strand consume member ended by itself after %d records, before it was killed", lines)
	}

	// Then the group's coordinator dies, and comes back.
	coord := adm.FindGroupCoordinators(ctx, group)[group]
	if coord.Err != nil {
		t.Fatal(coord.Err)
	}
	c.Procs[coord.NodeID].Kill()
	// The group has another coordinator before the broker comes back.
	testutil.Eventually(t, 30*time.Second, func() error {
		now := adm.FindGroupCoordinators(ctx, group)[group]
		switch {
		case now.Err != nil:
			return now.Err
		case now.NodeID == coord.NodeID:
			return fmt.Errorf("broker %d, killed, still coordinates %s", coord.NodeID, group)
		}
		return nil
	})
	c.Procs[coord.NodeID].Restart(t)
	c.WaitLive(t, 3, 30*time.Second)

	// Done when the group has nothing left on any partition.
	testutil.EventuallyEvery(t, 2*time.Minute, 500*time.Millisecond, func() error {
		offs, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err != nil {
			return err
		}
		if offs[group].Err != nil {
			return offs[group].Err
		}
		for p := range int32(3) {
			o, ok := offs[group].Offsets.Lookup(topic, p)
			if !ok || o.Err != nil || o.Lag != 0 {
				return fmt.Errorf("partition %d: %+v", p, o)
			}
		}
		return nil
	})
	stopMembers()
	wg.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	redelivered := 0
	for i := range n {
		v := fmt.Sprintf("task-%05d", i)
		counts := l.deliveries[v]
		if len(counts) == 0 {
			t.Errorf("%s was never delivered", v)
			continue
		}
		redelivered += len(counts) - 1
		if l.accepted[v] > 1 {
			t.Errorf("%s: %d acceptances confirmed (deliveries %v)", v, l.accepted[v], counts)
		}
		most := int32(0)
		for _, c := range counts {
			if c < 1 || c > 5 {
				t.Errorf("%s delivered with count %d (deliveries %v)", v, c, counts)
			}
			most = max(most, c)
		}
		if at, ok := l.settledAt[v]; ok && most > at {
			t.Errorf("%s delivered again after its settling at delivery %d was confirmed (deliveries %v)", v, at, counts)
		}
		if l.released[v] && most < 2 {
			t.Errorf("%s released, never delivered again (deliveries %v)", v, counts)
		}
		if c, ok := held[v]; ok && most <= c {
			t.Errorf("%s, held by the stalled member at delivery %d, not delivered again (deliveries %v)", v, c, counts)
		}
	}
	t.Logf("%d records, %d deliveries again, %d acceptances and %d rejections confirmed to the franz-go members, "+
		"%d records held by the stalled member", n, redelivered, len(l.accepted), len(l.rejected), len(held))
}
