package compat

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// TestMigrateWatch runs the real binary's `migrate watch` on a group that
// moves from v1 to v2 of an app (told apart by their client software), in
// both group protocols: one refresh shows each version with its members,
// partitions and lag, and the hand-offs to v2; a watch left running sees
// v2 leave, the assignment change and v1 take its partitions back.
func TestMigrateWatch(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"classic", "consumer"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			testMigrateWatch(t, protocol)
		})
	}
}

func testMigrateWatch(t *testing.T, protocol string) {
	b := startBroker(t, groupBrokerArgs...)
	ctx := groupCtx(t, 2*time.Minute)
	const topic, group, partitions = "watched", "orders-processor", 4
	createTopic(t, b.Addr, topic, partitions, nil)
	produce := func(perPartition int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for p := range int32(partitions) {
			for range perPartition {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}, nil)
			}
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(10)
	member := func(name, version string) *kgo.Client {
		opts := []kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.ClientID(name), kgo.SoftwareNameAndVersion("orders-app", version),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit()}
		if protocol == "consumer" {
			opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	// poll keeps a member fetching (an unpolled franz-go client stops),
	// committing nothing, until the returned stop is called or the test
	// ends.
	var wg sync.WaitGroup
	defer wg.Wait()
	poll := func(cl *kgo.Client) (stop func()) {
		pctx, cancel := context.WithCancel(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				fctx, fcancel := context.WithTimeout(pctx, 200*time.Millisecond)
				cl.PollFetches(fctx)
				fcancel()
			}
		}()
		return cancel
	}

	// v1 reads everything and commits 6 of each partition's 10 records:
	// lag 16.
	v1 := member("orders-v1", "1.0")
	for got := 0; got < 10*partitions; {
		got += v1.PollFetches(ctx).NumRecords()
		if ctx.Err() != nil {
			t.Fatal("v1 did not read the topic")
		}
	}
	var commit []*kgo.Record
	for p := range int32(partitions) {
		commit = append(commit, &kgo.Record{Topic: topic, Partition: p, Offset: 5, LeaderEpoch: -1})
	}
	if err := v1.CommitRecords(ctx, commit...); err != nil {
		t.Fatal(err)
	}
	defer poll(v1)()
	// The v2 canary joins and takes half the partitions.
	v2 := member("orders-v2", "2.0")
	stopV2 := poll(v2)
	defer stopV2()
	waitHandoffs(t, ctx, b.Addr, group, partitions+partitions/2, "orders-v2 to take its partitions")

	watch := func(args ...string) result {
		t.Helper()
		return run(time.Minute, "", "", testutil.Binary(t),
			append([]string{"migrate", "watch", "--brokers", b.Addr, "--group", group}, args...)...)
	}
	r := watch("--iterations", "1")
	if r.err != nil {
		t.Fatalf("%v", r)
	}
	t.Logf("strand migrate watch:\n%s", r.stdout)
	for _, want := range []string{
		"2 members, 4 partitions, total lag 16",
		"hand-offs since",
		"-> orders-v2 [orders-app 2.0]",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("no %q in:\n%s", want, r.stdout)
		}
	}
	// group describe reads either protocol's members too ...
	d := run(time.Minute, "", "", testutil.Binary(t), "group", "describe", "--brokers", b.Addr, "--group", group)
	if d.err != nil || !strings.Contains(d.stdout, protocol+", state Stable") || !strings.Contains(d.stdout, "2 members") ||
		!strings.Contains(d.stdout, "total lag 16") {
		t.Fatalf("group describe: %v", d)
	}
	// ... and refuses to move the offsets of a group with members.
	if rs := run(time.Minute, "", "", testutil.Binary(t), "group", "reset-offsets", "--brokers", b.Addr, "--group", group,
		"--to", "earliest", "--execute"); rs.err == nil || !strings.Contains(rs.stderr, "the group has members") {
		t.Fatalf("group reset-offsets of a live group: %v", rs)
	}
	versions := versionRows(r.stdout)
	if versions["1.0"] != "1 2 8" || versions["2.0"] != "1 2 8" {
		t.Fatalf("versions (members partitions lag): %v", versions)
	}

	// A watch left running sees v2 leave and v1 take its partitions.
	var mu sync.Mutex
	var lines []string
	cmd := exec.Command(testutil.Binary(t), "migrate", "watch", "--brokers", b.Addr, "--group", group, "--interval", "200ms",
		"--iterations", "100")
	cmd.Stdout = &lineWriter{line: func(l string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, l)
	}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	output := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		testutil.EventuallyEvery(t, 15*time.Second, 50*time.Millisecond, func() error {
			if out := output(); !ok(out) {
				return fmt.Errorf("migrate watch has not shown %s:\n%s", what, out)
			}
			return nil
		})
	}
	waitFor("a first view", func(s string) bool { return strings.Contains(s, "SOFTWARE") })
	stopV2()
	v2.Close() // a clean leave
	waitFor("v2 leaving and v1 taking its partitions back", func(s string) bool {
		return strings.Contains(s, "assignment changed; left orders-v2 [orders-app 2.0]") &&
			strings.Contains(s, "orders-v2 [orders-app 2.0] -> orders-v1 [orders-app 1.0]")
	})
	last := output()
	last = last[strings.LastIndex(last, "migrate watch "+group):]
	t.Logf("the last view:\n%s", last)
	if versions := versionRows(last); versions["1.0"] != "1 4 16" || versions["2.0"] != "" {
		t.Errorf("versions after v2 left (members partitions lag): %v", versions)
	}
}

// versionRows are the SOFTWARE table's rows of one view: version ->
// "members partitions lag", with a lag in seconds that is a positive
// number where there is lag.
func versionRows(view string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(view, "\n") {
		if fs := strings.Fields(line); len(fs) == 6 && fs[0] == "orders-app" {
			out[fs[1]] = strings.Join(fs[2:5], " ")
			if s, err := strconv.ParseFloat(fs[5], 64); err != nil || s <= 0 && fs[4] != "0" {
				out[fs[1]] += " lagging " + fs[5] + " s"
			}
		}
	}
	return out
}
