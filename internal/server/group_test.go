package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// End-to-end consumer groups: franz-go consumers against an in-process
// broker.

const groupTopicPartitions = 10

// groupBroker starts a broker whose groups form at once (no initial
// rebalance delay) and allow short sessions.
func groupBroker(t *testing.T) *testutil.Broker {
	return testutil.StartBroker(t, func(c *config.Broker) {
		c.GroupInitialRebalanceDelay = 0
		c.GroupMinSessionTimeout = 500 * time.Millisecond
	})
}

func groupCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func adminFor(t *testing.T, b *testutil.Broker) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// produceN writes n records round robin over the partitions, values
// "<prefix>-<i>".
func produceN(t *testing.T, ctx context.Context, b *testutil.Broker, topic, prefix string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Partition: int32(i % groupTopicPartitions), Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consumer is a group member that records what it is assigned and what it
// reads.
type consumer struct {
	name string
	cl   *kgo.Client
	ks   *grouptest.KillSwitch
	done chan struct{}

	mu       sync.Mutex
	assigned map[int32]bool
	records  []*kgo.Record
}

func startConsumer(t *testing.T, b *testutil.Broker, groupID, topic, name string, opts ...kgo.Opt) *consumer {
	t.Helper()
	c := &consumer{name: name, ks: &grouptest.KillSwitch{}, assigned: map[int32]bool{}, done: make(chan struct{})}
	set := func(ps map[string][]int32, on bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range ps[topic] {
			if on {
				c.assigned[p] = true
			} else {
				delete(c.assigned, p)
			}
		}
	}
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(b.Addr), kgo.ClientID(name), kgo.Dialer(c.ks.Dial),
		kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.RetryTimeout(5 * time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { set(ps, true) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			cl.CommitMarkedOffsets(ctx)
			set(ps, false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { set(ps, false) }),
		kgo.AutoCommitMarks(), kgo.AutoCommitInterval(200 * time.Millisecond),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	go c.poll()
	t.Cleanup(c.close)
	return c
}

// poll reads until the client closes, marking every record it got for
// commit.
func (c *consumer) poll() {
	defer close(c.done)
	for {
		fs := c.cl.PollFetches(context.Background())
		if fs.IsClientClosed() {
			return
		}
		// Marked in the same critical section as they become visible: a
		// test that saw a record and then closes the client commits it.
		c.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			c.records = append(c.records, r)
			c.cl.MarkCommitRecords(r)
		})
		c.mu.Unlock()
	}
}

func (c *consumer) close() {
	c.cl.Close()
	<-c.done
}

// crash cuts the client off without a LeaveGroup.
func (c *consumer) crash() {
	c.ks.Kill()
	c.close()
}

func (c *consumer) owned() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ps []int32
	for p := range c.assigned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func (c *consumer) values() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var vs []string
	for _, r := range c.records {
		vs = append(vs, string(r.Value))
	}
	return vs
}

// waitAssigned waits until the group is Stable with exactly the consumers
// given as members and they own every partition once between them, by
// their own account and by DescribeGroups.
func waitAssigned(t *testing.T, ctx context.Context, adm *kadm.Client, groupID string, cs ...*consumer) {
	t.Helper()
	var last string
	for ctx.Err() == nil {
		last = assignedOnce(ctx, adm, groupID, cs)
		if last == "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("group %s never settled: %s", groupID, last)
}

// assignedOnce says what is wrong with the group's assignment, "" if
// nothing.
func assignedOnce(ctx context.Context, adm *kadm.Client, groupID string, cs []*consumer) string {
	seen := map[int32]string{}
	for _, c := range cs {
		for _, p := range c.owned() {
			if other, ok := seen[p]; ok {
				return fmt.Sprintf("partition %d owned by %s and %s", p, other, c.name)
			}
			seen[p] = c.name
		}
	}
	if len(seen) != groupTopicPartitions {
		return fmt.Sprintf("%d partitions owned: %v", len(seen), seen)
	}
	ds, err := adm.DescribeGroups(ctx, groupID)
	if err != nil {
		return err.Error()
	}
	d := ds[groupID]
	if d.State != "Stable" || len(d.Members) != len(cs) {
		return fmt.Sprintf("group %s with %d members", d.State, len(d.Members))
	}
	n := 0
	for _, ps := range d.AssignedPartitions() {
		n += len(ps)
	}
	if n != groupTopicPartitions {
		return fmt.Sprintf("DescribeGroups shows %d partitions assigned", n)
	}
	return ""
}

// waitConsumed waits until the consumers between them read want (values,
// each once).
func waitConsumed(t *testing.T, ctx context.Context, want []string, cs ...*consumer) {
	t.Helper()
	for {
		var got []string
		for _, c := range cs {
			got = append(got, c.values()...)
		}
		if len(got) >= len(want) || ctx.Err() != nil {
			slices.Sort(got)
			w := slices.Clone(want)
			slices.Sort(w)
			if !slices.Equal(got, w) {
				t.Fatalf("consumed %d records, want %d exactly once; first difference in %v", len(got), len(w), firstDiff(got, w))
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: got %q, want %q", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(got), len(want))
}

func values(prefix string, n int) []string {
	var vs []string
	for i := range n {
		vs = append(vs, fmt.Sprintf("%s-%d", prefix, i))
	}
	return vs
}

func TestGroupAssignsEveryPartitionOnce(t *testing.T) {
	for _, bal := range []kgo.GroupBalancer{kgo.RangeBalancer(), kgo.CooperativeStickyBalancer()} {
		t.Run(bal.ProtocolName(), func(t *testing.T) {
			b := groupBroker(t)
			ctx := groupCtx(t)
			adm := adminFor(t, b)
			createTopic(t, b.Addr, "orders", groupTopicPartitions)
			var cs []*consumer
			for i := range 3 {
				cs = append(cs, startConsumer(t, b, "g", "orders", fmt.Sprint("c", i), kgo.Balancers(bal)))
			}
			waitAssigned(t, ctx, adm, "g", cs...)
			ds, _ := adm.DescribeGroups(ctx, "g")
			if d := ds["g"]; d.Protocol != bal.ProtocolName() || d.ProtocolType != "consumer" {
				t.Fatalf("protocol %s/%s", d.ProtocolType, d.Protocol)
			}
			for _, c := range cs {
				if n := len(c.owned()); n < 3 || n > 4 {
					t.Errorf("%s owns %v: not balanced", c.name, c.owned())
				}
			}
			produceN(t, ctx, b, "orders", "r", 300)
			waitConsumed(t, ctx, values("r", 300), cs...)
		})
	}
}

func TestGroupMemberCrashMovesPartitions(t *testing.T) {
	// Slow: a crashed member is removed only after its session timeout.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	b := groupBroker(t)
	ctx := groupCtx(t)
	adm := adminFor(t, b)
	createTopic(t, b.Addr, "events", groupTopicPartitions)
	const session = 1500 * time.Millisecond
	var cs []*consumer
	for i := range 3 {
		cs = append(cs, startConsumer(t, b, "g", "events", fmt.Sprint("c", i), kgo.SessionTimeout(session)))
	}
	waitAssigned(t, ctx, adm, "g", cs...)
	produceN(t, ctx, b, "events", "a", 200)
	waitConsumed(t, ctx, values("a", 200), cs...)

	dead := cs[2]
	lost := dead.owned()
	killed := time.Now()
	dead.crash()
	waitAssigned(t, ctx, adm, "g", cs[:2]...)
	took := time.Since(killed)
	t.Logf("partitions %v of the crashed member moved after %v (session timeout %v)", lost, took, session)
	// Detection takes up to the session timeout; the rebalance then needs
	// a heartbeat round and a join.
	if took > session+2*time.Second {
		t.Errorf("took %v to move the partitions, session timeout %v", took, session)
	}

	// The rest of the records reach the survivors; what the dead member
	// read but had not committed is read again.
	produceN(t, ctx, b, "events", "b", 100)
	deadSaw := map[string]bool{}
	for _, v := range dead.values() {
		deadSaw[v] = true
	}
	for ctx.Err() == nil {
		got := map[string]bool{}
		for _, c := range cs[:2] {
			for _, v := range c.values() {
				got[v] = true
			}
		}
		missing := 0
		for _, v := range append(values("a", 200), values("b", 100)...) {
			if !got[v] && !deadSaw[v] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The rebalance history shows each hand-off with its offsets.
	h, ok := b.Server().Groups().History("g")
	if !ok {
		t.Fatal("no history")
	}
	var expired bool
	for _, ev := range h.Events {
		expired = expired || ev.Kind == group.EventMemberExpired && ev.Member.ClientID == "c2"
	}
	if !expired {
		t.Errorf("no expiry of c2 in %+v", h.Events)
	}
	moved := 0
	for _, ho := range h.Handoffs {
		if ho.From.ClientID != "c2" || !slices.Contains(lost, ho.Partition) {
			continue
		}
		moved++
		if ho.To.ClientID == "c2" || ho.LastFetched < 0 || ho.FirstFetched < 0 || (ho.Committed >= 0 && ho.FirstFetched != ho.Committed) {
			t.Errorf("hand-off %+v", ho)
		}
	}
	if moved != len(lost) {
		t.Errorf("%d hand-offs from c2, want %d: %+v", moved, len(lost), h.Handoffs)
	}
}

func TestGroupResumesFromCommittedOffsets(t *testing.T) {
	b := groupBroker(t)
	ctx := groupCtx(t)
	adm := adminFor(t, b)
	createTopic(t, b.Addr, "jobs", groupTopicPartitions)
	produceN(t, ctx, b, "jobs", "x", 100)

	first := startConsumer(t, b, "g", "jobs", "first")
	waitConsumed(t, ctx, values("x", 100), first)
	first.close() // commits what it marked, then leaves
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(groupTopicPartitions) {
		if o, ok := offs.Lookup("jobs", p); !ok || o.At != 10 {
			t.Fatalf("partition %d committed %+v", p, o)
		}
	}

	// A new member starts where the group left off...
	produceN(t, ctx, b, "jobs", "y", 50)
	second := startConsumer(t, b, "g", "jobs", "second")
	waitConsumed(t, ctx, values("y", 50), second)
	second.close()

	// ... and so does one after a broker restart.
	b.Restart(t)
	adm = adminFor(t, b)
	produceN(t, ctx, b, "jobs", "z", 20)
	third := startConsumer(t, b, "g", "jobs", "third")
	waitConsumed(t, ctx, values("z", 20), third)
}

func TestGroupSurvivesBrokerRestart(t *testing.T) {
	b := groupBroker(t)
	ctx := groupCtx(t)
	adm := adminFor(t, b)
	createTopic(t, b.Addr, "stream", groupTopicPartitions)
	cs := []*consumer{startConsumer(t, b, "g", "stream", "c0"), startConsumer(t, b, "g", "stream", "c1")}
	waitAssigned(t, ctx, adm, "g", cs...)
	produceN(t, ctx, b, "stream", "before", 200)
	waitConsumed(t, ctx, values("before", 200), cs...)
	// Wait for the marks to be committed.
	for ctx.Err() == nil {
		offs, _ := adm.FetchOffsets(ctx, "g")
		n := int64(0)
		for p := range int32(groupTopicPartitions) {
			o, _ := offs.Lookup("stream", p)
			n += o.At
		}
		if n == 200 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	b.Restart(t)
	adm = adminFor(t, b)
	// The group came back with its members, and they carry on.
	produceN(t, ctx, b, "stream", "after", 200)
	waitConsumed(t, ctx, append(values("before", 200), values("after", 200)...), cs...)
	waitAssigned(t, ctx, adm, "g", cs...)
	h, _ := b.Server().Groups().History("g")
	if h.Events[0].Kind != group.EventLoaded {
		t.Fatalf("history after restart: %+v", h.Events)
	}

	// Consumers that come back after a restart resume from the commits.
	for _, c := range cs {
		c.close()
	}
	b.Restart(t)
	produceN(t, ctx, b, "stream", "later", 30)
	c := startConsumer(t, b, "g", "stream", "c2")
	waitConsumed(t, ctx, values("later", 30), c)
}

func TestGroupStaticMemberRestart(t *testing.T) {
	b := groupBroker(t)
	ctx := groupCtx(t)
	adm := adminFor(t, b)
	createTopic(t, b.Addr, "static", groupTopicPartitions)
	// c0 first, alone, so that it leads the group and its metadata names
	// the partitions it keeps. A restarted static leader gets its old
	// assignment (KIP-814) and franz-go, balancing anyway, rejoins when its
	// own plan differs; with both members' metadata empty (both in the
	// first generation) the plan follows the order of the member ids,
	// which the restart changes, and that rebalance would be the client's
	// doing, as against Kafka.
	c0 := startConsumer(t, b, "g", "static", "c0", kgo.InstanceID("i0"))
	waitAssigned(t, ctx, adm, "g", c0)
	c1 := startConsumer(t, b, "g", "static", "c1", kgo.InstanceID("i1"))
	waitAssigned(t, ctx, adm, "g", c0, c1)
	owned := c1.owned()
	h, _ := b.Server().Groups().History("g")
	events := len(h.Events)

	// The instance restarts within its session: it takes its place back
	// without a rebalance.
	c1.close() // a static member does not leave on close
	again := startConsumer(t, b, "g", "static", "c1", kgo.InstanceID("i1"))
	waitAssigned(t, ctx, adm, "g", c0, again)
	if got := again.owned(); !slices.Equal(got, owned) {
		t.Fatalf("restarted instance owns %v, had %v", got, owned)
	}
	h, _ = b.Server().Groups().History("g")
	var kinds []group.EventKind
	for _, ev := range h.Events[events:] {
		kinds = append(kinds, ev.Kind)
	}
	if !slices.Equal(kinds, []group.EventKind{group.EventMemberReplaced}) {
		for _, ev := range h.Events[events:] {
			t.Logf("%s %s gen %d: %s", ev.Kind, ev.Member.MemberID, ev.Generation, ev.Reason)
		}
		t.Fatalf("events after the restart: %v", kinds)
	}
	ds, _ := adm.DescribeGroups(ctx, "g")
	for _, m := range ds["g"].Members {
		if m.InstanceID == nil {
			t.Fatalf("member without instance id: %+v", m)
		}
	}
}

func TestGroupAdmin(t *testing.T) {
	b := groupBroker(t)
	ctx := groupCtx(t)
	adm := adminFor(t, b)
	createTopic(t, b.Addr, "adm", groupTopicPartitions)
	createTopic(t, b.Addr, "other", 1)

	// Offsets committed from outside group management make a group.
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "other", Partition: 0, At: 7, LeaderEpoch: -1, Metadata: "m"})
	if err := adm.CommitAllOffsets(ctx, "simple", os); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CommitOffsets(ctx, "simple", kadm.Offsets{"nope": {0: {Topic: "nope", At: 1}}}); err != nil {
		t.Fatal(err)
	}
	resp, _ := adm.CommitOffsets(ctx, "simple", kadm.Offsets{"nope": {0: {Topic: "nope", At: 1, LeaderEpoch: -1}}})
	if r, _ := resp.Lookup("nope", 0); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("commit to an unknown topic: %v", r.Err)
	}
	offs, err := adm.FetchOffsets(ctx, "simple")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("other", 0); !ok || o.At != 7 || o.Metadata != "m" {
		t.Fatalf("%+v", offs)
	}

	c := startConsumer(t, b, "live", "adm", "c0")
	waitAssigned(t, ctx, adm, "live", c)
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := listed["live"]; l.State != "Stable" || l.ProtocolType != "consumer" || l.GroupType != "classic" {
		t.Fatalf("%+v", listed)
	}
	if l := listed["simple"]; l.State != "Empty" || l.ProtocolType != "" {
		t.Fatalf("%+v", listed)
	}
	if listed, _ := adm.ListGroups(ctx, "Empty"); len(listed) != 1 || listed["simple"].Group != "simple" {
		t.Fatalf("filtered: %+v", listed)
	}
	ds, err := adm.DescribeGroups(ctx, "live", "simple", "missing")
	if err != nil {
		t.Fatal(err)
	}
	live := ds["live"]
	if m := live.Members; len(m) != 1 || m[0].ClientID != "c0" || m[0].ClientHost != "/127.0.0.1" || live.Protocol != "cooperative-sticky" {
		t.Fatalf("%+v", live)
	}
	if ds["missing"].State != "Dead" || ds["missing"].Err != nil {
		t.Fatalf("%+v", ds["missing"])
	}

	// Offsets of a subscribed topic cannot go; others can.
	if err := adm.CommitAllOffsets(ctx, "live", kadm.Offsets{"other": {0: {Topic: "other", At: 1, LeaderEpoch: -1}}}); err == nil {
		t.Fatal("a commit from outside a live group was taken")
	}
	c.cl.CommitUncommittedOffsets(ctx)
	del, err := adm.DeleteOffsets(ctx, "live", kadm.TopicsSet{"adm": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := del.Lookup("adm", 0); !errors.Is(err, kerr.GroupSubscribedToTopic) {
		t.Fatalf("deleting a subscribed topic's offset: %v", err)
	}
	del, err = adm.DeleteOffsets(ctx, "simple", kadm.TopicsSet{"other": {0: {}}})
	if err != nil || del.Error() != nil {
		t.Fatal(err, del.Error())
	}
	if offs, _ := adm.FetchOffsets(ctx, "simple"); len(offs) != 0 {
		t.Fatalf("deleted offset still there: %+v", offs)
	}

	// Groups with members cannot be deleted; empty ones can.
	dr, err := adm.DeleteGroups(ctx, "live", "simple", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(dr["live"].Err, kerr.NonEmptyGroup) || dr["simple"].Err != nil || !errors.Is(dr["missing"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("%+v", dr)
	}
	c.close()
	if dr, err := adm.DeleteGroups(ctx, "live"); err != nil || dr["live"].Err != nil {
		t.Fatal(err, dr)
	}
	if listed, _ := adm.ListGroups(ctx); len(listed) != 0 {
		t.Fatalf("%+v", listed)
	}
	b.Restart(t)
	adm = adminFor(t, b)
	if listed, _ := adm.ListGroups(ctx); len(listed) != 0 {
		t.Fatalf("deleted groups back after restart: %+v", listed)
	}
}
