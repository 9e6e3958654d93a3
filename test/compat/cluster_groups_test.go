package compat

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
)

// clusterMember starts a group member of one client: addr is the one
// broker it is given; lazy members commit only every few seconds, so that
// a kill leaves processed records uncommitted.
type clusterMember func(t *testing.T, addr, topic, group, name string, lazy bool) grouptest.Member

// lazyCommit is how often a lazy member commits.
const lazyCommit = 3 * time.Second

var clusterMembers = map[string]clusterMember{
	"java": func(t *testing.T, addr, topic, group, name string, lazy bool) grouptest.Member {
		var props []string
		if lazy {
			props = []string{fmt.Sprintf("compat.commit.ms=%d", lazyCommit.Milliseconds()), "compat.commit.every=1000000"}
		}
		return javaMember(t, addr, topic, group, name, props...)
	},
	"kafka-python": func(t *testing.T, addr, topic, group, name string, lazy bool) grouptest.Member {
		var args []string
		if lazy {
			args = []string{"--commit-ms", fmt.Sprint(lazyCommit.Milliseconds()), "--commit-every", "1000000"}
		}
		return pythonMember(t, addr, topic, group, name, args...)
	},
	"franz-go": func(t *testing.T, addr, topic, group, name string, lazy bool) grouptest.Member {
		if lazy {
			t.Fatal("no lazy franz-go member")
		}
		return kgoMember(t, addr, topic, group, name)
	},
}

// clientReady skips (or fails, under CI) when a client is missing, before
// brokers are started for it.
func clientReady(t *testing.T, client string) {
	switch client {
	case "java":
		javatest.Helper(t)
	case "kafka-python":
		needKafkaPython(t)
	}
}

// produceOpts are the options of the franz-go producers writing for a
// client's consumers: gzip, which kafka-python reads (not snappy, franz-go's
// default).
var produceOpts = []kgo.Opt{kgo.ProducerBatchCompression(kgo.GzipCompression())}

// TestClusterGroupResume: a group whose coordinator (by FindCoordinator
// on every broker, and by model.CoordinatorPartition over
// __consumer_offsets' metadata) is another broker than the one its members
// are given and than the leaders of four of its six partitions. With the
// Java consumer and with kafka-python: a member reads and commits
// everything produced so far, then reads more (committing only every 3 s)
// and is killed (SIGKILL) as soon as it has, most likely before committing
// it; the coordinator holds at least what the member saw committed; a new
// member, given a third broker, starts each partition at exactly the
// committed offset, so that nothing is lost and the records read twice are
// exactly the dead member's uncommitted tail; it closes cleanly,
// committing the end offsets.
func TestClusterGroupResume(t *testing.T) {
	c := startCluster(t)
	for _, client := range []string{"java", "kafka-python"} {
		t.Run(client, func(t *testing.T) {
			clientReady(t, client)
			testGroupResume(t, c, client, clusterMembers[client])
		})
	}
}

func testGroupResume(t *testing.T, c *cluster, client string, start clusterMember) {
	ctx := groupCtx(t, 2*time.Minute)
	topic := client + "-resume"
	group, coord := c.groupCoordinatedBy(t, topic, func(node int32) bool { return node != 0 })
	leaders := c.spreadTopic(t, 0, topic)
	var elsewhere []int32
	for p, l := range leaders {
		if l != coord {
			elsewhere = append(elsewhere, p)
		}
	}
	slices.Sort(elsewhere)
	if len(elsewhere) == 0 {
		t.Fatalf("every partition of %s is led by %s's coordinator %d", topic, group, coord)
	}
	t.Logf("group %s: coordinator broker %d; %s leaders %v (partitions %v led elsewhere); members given broker 0, then broker %d",
		group, coord, topic, leaders, elsewhere, 3-coord)
	adm := grouptest.Admin(t, c.seed(0))

	produced := grouptest.Produced{}
	produceKeyed(t, ctx, c.seed(1), topic, "a", 300, produced, produceOpts...)
	first := start(t, c.seed(0), topic, group, group+"-first", true)
	grouptest.WaitProcessed(t, ctx, produced, first)
	waitCommitted(t, ctx, adm, group, topic, produced.Ends())

	// More records, read and (most likely) not committed yet when the
	// member dies.
	produceKeyed(t, ctx, c.seed(2), topic, "b", 200, produced, produceOpts...)
	grouptest.WaitProcessed(t, ctx, produced, first)
	first.Kill()
	logged := lastCommitted(first.Log())
	committed, err := committedOffsets(ctx, c.seed(2), group, topic)
	if err != nil {
		t.Fatalf("fetching %s's offsets through broker 2: %v", group, err)
	}
	// The member logs a commit after the coordinator answered it: the
	// coordinator may hold one commit more than the log shows, never less.
	for p, o := range logged {
		if committed[p] < o {
			t.Errorf("partition %d: the member saw %d committed, the coordinator holds %d", p, o, committed[p])
		}
	}
	tail := 0
	for _, r := range processedRecs(first.Log()) {
		if r.O >= committed[r.P] {
			tail++
		}
	}
	t.Logf("first member killed: committed %v, %d records processed beyond them", committed, tail)

	produceKeyed(t, ctx, c.seed(1), topic, "c", 100, produced, produceOpts...)
	restart := time.Now()
	second := start(t, c.seed(3-coord), topic, group, group+"-second", false)
	grouptest.WaitProcessed(t, ctx, produced, first, second)
	t.Logf("the second member read everything %v after it started", time.Since(restart).Round(time.Millisecond))
	// While it reads on: a member that leaves writes what its hand-offs
	// know at once, and reads answered elsewhere come up to an interval
	// and a replication later.
	checkClusterHandoffs(t, ctx, c.seed(0), group, topic, committed, first.Log(), second.Log())
	if err := second.Stop(); err != nil {
		t.Error(err)
	}
	starts := map[int32]int64{}
	for _, r := range processedRecs(second.Log()) {
		if _, ok := starts[r.P]; !ok {
			starts[r.P] = r.O
		}
	}
	if !maps.Equal(starts, committed) {
		t.Errorf("the second member started partitions at %v, the committed offsets are %v", starts, committed)
	}
	rep := checkAccounting(t, "after the restart", produced, tail, first, second)
	if rep.Duplicates != tail {
		t.Errorf("%d records processed twice, want the %d the first member had not committed", rep.Duplicates, tail)
	}
	checkCommitted(t, ctx, adm, group, topic, produced.Ends())
	checkLeftAfterFirstFetch(t, ctx, c, group, topic, 3-coord, produced)
}

// checkLeftAfterFirstFetch: a member that leaves right after its first
// fetch still has it in the ledger, on the partitions led elsewhere too,
// whose leaders report it after the leave.
func checkLeftAfterFirstFetch(t *testing.T, ctx context.Context, c *cluster, group, topic string, node int32, produced grouptest.Produced) {
	t.Helper()
	ends := produced.Ends()
	produceKeyed(t, ctx, c.seed(1), topic, "d", 60, produced, produceOpts...)
	cl := client(t, c.seed(node), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	read := map[int32]bool{}
	for len(read) == 0 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { read[r.Partition] = true })
	}
	member, _ := cl.GroupMetadata()
	cl.Close() // leaves the group at once
	var mine []ledger.Entry
	for deadline := time.Now().Add(30 * time.Second); len(mine) < len(ends) && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		es, err := grouptest.ReadLedger(ctx, c.seed(0), group)
		if err != nil {
			t.Fatal(err)
		}
		mine = slices.DeleteFunc(es, func(e ledger.Entry) bool {
			return e.Type != ledger.TypeHandoff || e.Topic != topic || e.To.MemberID != member
		})
	}
	t.Logf("the last member read partitions %v, then left; %d hand-offs to it in the ledger", slices.Sorted(maps.Keys(read)), len(mine))
	for _, e := range mine {
		if !read[e.Partition] {
			continue
		}
		if e.FirstFetched != ends[e.Partition] {
			t.Errorf("partition %d, read by the last member: the ledger says it first fetched %d, it started at %d",
				e.Partition, e.FirstFetched, ends[e.Partition])
		}
		delete(read, e.Partition)
	}
	if len(read) > 0 {
		t.Errorf("no hand-off to the last member of partitions %v it read", slices.Sorted(maps.Keys(read)))
	}
}

// checkClusterHandoffs: the ledger's figures of the hand-offs from the
// first member to the second are the consumers' own, on the partitions
// their coordinator leads and on those led elsewhere alike: the second
// started at the committed offset, nothing skipped, and the records it
// processed again are within the duplicate risk reported.
func checkClusterHandoffs(t *testing.T, ctx context.Context, addr, group, topic string, committed map[int32]int64,
	first, second *grouptest.Log) {
	t.Helper()
	seen := map[int32]map[int64]bool{}
	for _, r := range processedRecs(first) {
		if seen[r.P] == nil {
			seen[r.P] = map[int64]bool{}
		}
		seen[r.P][r.O] = true
	}
	again := map[int32]int64{}
	for _, r := range processedRecs(second) {
		if seen[r.P][r.O] {
			again[r.P]++
		}
	}
	es := waitHandoffs(t, ctx, addr, group, 2*len(committed), "the hand-offs to the second member")
	moved := 0
	for _, e := range es {
		if e.Type != ledger.TypeHandoff || e.Topic != topic || e.From == nil {
			continue
		}
		moved++
		p := e.Partition
		t.Logf("partition %d: committed %d, last sent %d, first fetched %d, duplicate risk %d (processed again %d), skipped %d, unowned %d ms",
			p, e.Committed, e.LastSent, e.FirstFetched, e.DuplicateRisk, again[p], e.Skipped, e.UnownedMs)
		if e.FirstFetched != committed[p] || e.Skipped != 0 || e.LastSent < 0 || again[p] > e.DuplicateRisk {
			t.Errorf("partition %d: ledger says first fetched %d, skipped %d, last sent %d, duplicate risk %d; "+
				"the consumers say started at %d, %d processed again", p, e.FirstFetched, e.Skipped, e.LastSent,
				e.DuplicateRisk, committed[p], again[p])
		}
	}
	if moved != len(committed) {
		t.Errorf("%d hand-offs from the first member to the second in the ledger, want %d", moved, len(committed))
	}
}

// lastCommitted is the offsets a member's log shows committed last, by
// partition.
func lastCommitted(l *grouptest.Log) map[int32]int64 {
	out := map[int32]int64{}
	for _, e := range l.Events {
		if e.Kind == grouptest.Committed {
			maps.Copy(out, e.Offsets)
		}
	}
	return out
}

// TestClusterCoordinatorKilled kills (SIGKILL) the broker that leads a
// group's __consumer_offsets partition, and two of the group's six
// partitions (which have one replica), while a member reads, with the Java
// consumer and with franz-go. __consumer_offsets has three replicas, so the
// coordinator fails over: once the broker is fenced, the survivors answer
// FindCoordinator with one of them, which has loaded every committed
// offset, and the group commits again while the broker is dead; the
// hand-off ledger entries it wrote, on a ledger partition it led, are read
// back field for field from the survivors; records
// written to the partitions the survivors lead are acknowledged and read;
// the member does not crash. When the broker is restarted the member reads
// every record, the ones written to the dead broker's partitions after its
// return too, duplicates only from what it had not committed. The test
// logs how long the coordinator took to move.
func TestClusterCoordinatorKilled(t *testing.T) {
	for _, client := range []string{"java", "franz-go"} {
		t.Run(client, func(t *testing.T) {
			clientReady(t, client)
			testCoordinatorKilled(t, client+"-killed", clusterMembers[client])
		})
	}
}

// outage is how long the coordinator stays dead.
const outage = 10 * time.Second

func testCoordinatorKilled(t *testing.T, topic string, start clusterMember) {
	// Fenced 3 s after its last heartbeat, so that most of the outage is
	// served by the survivors' fenced view.
	c := startCluster(t, "--broker-session-timeout", "3s")
	ctx := groupCtx(t, 2*time.Minute)
	group, coord := c.groupCoordinatedBy(t, topic, func(node int32) bool { return node != 0 })
	leaders := c.spreadTopic(t, 0, topic)
	var dead, live []int32
	for p := range int32(clusterPartitions) {
		if leaders[p] == coord {
			dead = append(dead, p)
		} else {
			live = append(live, p)
		}
	}
	survivors := c.others(coord)
	other := survivors[len(survivors)-1] // a survivor, not the members' broker 0
	t.Logf("group %s: coordinator broker %d, which leads %s partitions %v; the member is given broker 0", group, coord, topic, dead)

	produced := grouptest.Produced{}
	produceKeyed(t, ctx, c.seed(other), topic, "a", 300, produced, produceOpts...)
	m := start(t, c.seed(0), topic, group, group+"-0", false)
	crasher, _ := m.(grouptest.Crasher)
	alive := func(when string) {
		t.Helper()
		if crasher == nil {
			return
		}
		if err := crasher.Crashed(); err != nil {
			t.Fatalf("%s: the member crashed: %v", when, err)
		}
	}
	grouptest.WaitProcessed(t, ctx, produced, m)
	waitCommitted(t, ctx, grouptest.Admin(t, c.seed(other)), group, topic, produced.Ends())
	committedBefore := produced.Ends()
	// The coordinator has written the hand-offs of the partitions it leads
	// (it sees their fetches) to the ledger, on a partition it leads too.
	ledgerBefore := waitHandoffs(t, ctx, c.seed(other), group, len(dead), "the first assignments")
	ledgerLeaders, err := leadersAt(c.seed(other), ledger.Topic)
	if err != nil || !slices.Contains(slices.Collect(maps.Values(ledgerLeaders)), coord) {
		t.Fatalf("the coordinator %d leads no partition of %s (leaders %v, error %v): its kill would not move the ledger",
			coord, ledger.Topic, ledgerLeaders, err)
	}

	killed := time.Now()
	c.Procs[coord].Kill()
	c.waitLeaders(t, topic, survivors, 20*time.Second, func(l map[int32]int32) bool {
		for _, p := range dead {
			if l[p] != -1 {
				return false
			}
		}
		return len(l) == clusterPartitions
	})
	t.Logf("broker %d killed; the survivors list its partitions without a leader after %v", coord,
		time.Since(killed).Round(time.Millisecond))
	// The coordinator moves to a survivor, with every committed offset.
	for _, b := range survivors {
		var node int32
		testutil.EventuallyEvery(t, 10*time.Second, 50*time.Millisecond, func() error {
			var err error
			if node, err = findCoordinatorAt(ctx, c.seed(b), group); err != nil || node == coord {
				return fmt.Errorf("broker %d answers FindCoordinator %s with coordinator %d, error %v while broker %d is dead; want a survivor",
					b, group, node, err, coord)
			}
			return nil
		})
		if !slices.Contains(survivors, node) {
			t.Fatalf("broker %d answers FindCoordinator %s with coordinator %d while broker %d is dead; want a survivor",
				b, group, node, coord)
		}
		t.Logf("broker %d names broker %d coordinator %v after the kill", b, node, time.Since(killed).Round(time.Millisecond))
	}
	offs, err := committedOffsets(ctx, c.seed(other), group, topic)
	if err != nil {
		t.Fatalf("fetching the offsets of %s from the new coordinator: %v", group, err)
	}
	checkLedgerKept(t, ctx, c.seed(other), group, ledgerBefore)
	t.Logf("the survivors serve the %d ledger entries written before the kill %v after it", len(ledgerBefore),
		time.Since(killed).Round(time.Millisecond))
	for p, end := range committedBefore {
		if offs[p] < end {
			t.Errorf("partition %d: the new coordinator has offset %d, %d was committed before the kill", p, offs[p], end)
		}
	}

	// Records for the partitions the survivors lead are acknowledged.
	during := grouptest.Produced{}
	{
		cl := client(t, c.seed(other), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			produceOpts[0])
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		var rs []*kgo.Record
		for i := range 120 {
			rs = append(rs, &kgo.Record{Partition: live[i%len(live)], Key: fmt.Appendf(nil, "key-%d", i),
				Value: fmt.Appendf(nil, "b-%d", i)})
		}
		err := cl.ProduceSync(pctx, rs...).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("producing to partitions %v, led by the survivors: %v", live, err)
		}
		for _, r := range rs {
			if during[r.Partition] == nil {
				during[r.Partition] = map[int64]grouptest.Record{}
			}
			during[r.Partition][r.Offset] = grouptest.Record{Key: string(r.Key), Value: string(r.Value)}
		}
		produced.Add(during)
	}
	for time.Since(killed) < outage {
		alive("while the coordinator is dead")
		time.Sleep(200 * time.Millisecond)
	}
	alive("after the outage")
	var commitsDuring, readDuring int
	for _, e := range m.Log().Events {
		if e.Kind == grouptest.Committed && e.Time.After(killed) {
			commitsDuring++
		}
	}
	for _, r := range processedRecs(m.Log()) {
		if _, ok := during[r.P][r.O]; ok {
			readDuring++
		}
	}
	if commitsDuring == 0 {
		t.Errorf("the member committed nothing while the old coordinator was dead")
	}
	t.Logf("during the %v outage the member read %d of the %d records written to the survivors' partitions and committed %d times",
		outage, readDuring, during.Count(), commitsDuring)

	restarted := time.Now()
	c.Procs[coord].Restart(t)
	ready := time.Now()
	c.waitLeaders(t, topic, c.others(-1), 30*time.Second, allLed(clusterPartitions))
	led := time.Since(ready)
	// A fresh client with a short metadata age, so that it does not wait
	// for franz-go's 5 s refresh if it still finds no leader.
	produceKeyed(t, ctx, c.seed(other), topic, "c", 150, produced, append(slices.Clone(produceOpts),
		kgo.MetadataMinAge(100*time.Millisecond))...)
	grouptest.WaitProcessed(t, ctx, produced, m)
	readAllAfter := time.Since(ready)
	alive("after the restart")
	var commitAfter time.Duration
	for _, e := range m.Log().Events {
		if e.Kind == grouptest.Committed && e.Time.After(ready) {
			commitAfter = e.Time.Sub(ready)
			break
		}
	}
	if commitAfter == 0 {
		// Maybe not yet: every record is read, a commit follows.
		waitCommitted(t, ctx, grouptest.Admin(t, c.seed(other)), group, topic, produced.Ends())
		commitAfter = time.Since(ready)
	}
	t.Logf("broker %d restarted in %v; after that, every broker listed its partitions led again after %v, "+
		"the group committed again after %v (the stall's end), and every record was read after %v", coord,
		ready.Sub(restarted).Round(time.Millisecond), led.Round(time.Millisecond), commitAfter.Round(time.Millisecond),
		readAllAfter.Round(time.Millisecond))
	if err := m.Stop(); err != nil {
		t.Error(err)
	}
	checkAccounting(t, "after the coordinator's restart", produced, -1, m)
	checkCommitted(t, ctx, grouptest.Admin(t, c.seed(0)), group, topic, produced.Ends())
}

// checkLedgerKept waits until every entry of before can be read from the
// ledger through addr, field for field.
func checkLedgerKept(t *testing.T, ctx context.Context, addr, group string, before []ledger.Entry) {
	t.Helper()
	testutil.EventuallyEvery(t, 20*time.Second, 200*time.Millisecond, func() error {
		es, err := grouptest.ReadLedger(ctx, addr, group)
		if err != nil {
			return fmt.Errorf("reading the ledger through %s: %w", addr, err)
		}
		var missing []ledger.Entry
		for _, want := range before {
			if !slices.ContainsFunc(es, func(e ledger.Entry) bool { return reflect.DeepEqual(normalEntry(e), normalEntry(want)) }) {
				missing = append(missing, want)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the ledger read through %s lacks %d of the %d entries written before the kill: first %+v",
				addr, len(missing), len(before), missing[0])
		}
		return nil
	})
}

// normalEntry drops the monotonic clock readings, so that an entry read
// back compares equal to itself.
func normalEntry(e ledger.Entry) ledger.Entry {
	e.Time = e.Time.Round(0)
	for _, p := range []**time.Time{&e.LostAt, &e.LastFetchedAt, &e.FirstFetchedAt} {
		if *p != nil {
			v := (*p).Round(0)
			*p = &v
		}
	}
	return e
}
