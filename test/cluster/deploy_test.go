package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// TestDeployExample runs the three-machine cluster of deploy/ as a
// newcomer would: deploy/strand.properties on every node with its node.id,
// advertised host and rack made its own, each started by the command line
// of deploy/systemd/strand.service. systemd-analyze, where it is
// installed, accepts that unit with this binary and root in place of
// /usr/local/bin/strand and the strand user. On loopback, each host's
// ports are free ones. The cluster forms, takes a topic at the example's
// replication factor (3, two in sync at least), spreads replicas over the
// three racks, and serves writes and reads. Then the README's rolling
// upgrade: each node in turn stopped (SIGTERM, as systemctl stop sends),
// started again, and waited for with strand cluster health --wait, while
// a producer writes with acks=all; strand cluster elect-leaders gives the
// partitions back to their preferred replicas. No write fails and every
// acknowledged one is read back.
func TestDeployExample(t *testing.T) {
	if testing.Short() {
		t.Skip("processes: not in -short")
	}
	root := filepath.Join("..", "..", "deploy")
	example, err := os.ReadFile(filepath.Join(root, "strand.properties"))
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join(root, "systemd", "strand.service"))
	if err != nil {
		t.Fatal(err)
	}
	execStart := regexp.MustCompile(`(?m)^ExecStart=(\S+) (.*)$`).FindSubmatch(unit)
	if execStart == nil {
		t.Fatal("strand.service has no ExecStart")
	}
	bin := testutil.Binary(t)
	if analyze, err := exec.LookPath("systemd-analyze"); err == nil {
		local := strings.NewReplacer(string(execStart[1]), bin, "User=strand", "User=root", "Group=strand", "Group=root").Replace(string(unit))
		path := filepath.Join(t.TempDir(), "strand.service")
		if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil {
			t.Fatalf("systemd-analyze verify strand.service: %v\n%s", err, out)
		}
	}
	args := strings.Fields(string(execStart[2])) // serve --config /etc/strand/strand.properties
	configAt := -1
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			configAt = i + 1
		}
	}
	if configAt < 0 {
		t.Fatalf("ExecStart gives no --config: %q", args)
	}

	const nodes = 3
	client, quorum, admin := make([]string, nodes+1), make([]string, nodes+1), make([]string, nodes+1)
	for n := 1; n <= nodes; n++ {
		client[n], quorum[n], admin[n] = testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)
	}
	hostPort := regexp.MustCompile(`strand-(\d)\.example:(9092|9093)`)
	var procs []*testutil.Process
	for n := 1; n <= nodes; n++ {
		// This machine's own lines, as the example's comments say.
		var lines []string
		for _, line := range strings.Split(string(example), "\n") {
			key, _, _ := strings.Cut(line, " =")
			switch key {
			case "node.id":
				line = fmt.Sprintf("node.id = %d", n)
			case "log.dirs":
				line = "log.dirs = " + t.TempDir()
			case "listeners":
				line = fmt.Sprintf("listeners = PLAINTEXT://%s,CONTROLLER://%s", client[n], quorum[n])
			case "advertised.listeners":
				line = "advertised.listeners = PLAINTEXT://strand-" + fmt.Sprint(n) + ".example:9092"
			case "broker.rack":
				line = fmt.Sprintf("broker.rack = zone-%d", n)
			case "admin.listener":
				line = "admin.listener = " + admin[n]
			}
			// Every host's name and port, to loopback.
			line = hostPort.ReplaceAllStringFunc(line, func(s string) string {
				m := hostPort.FindStringSubmatch(s)
				k := int(m[1][0] - '0')
				if m[2] == "9092" {
					return client[k]
				}
				return quorum[k]
			})
			lines = append(lines, line)
		}
		path := filepath.Join(t.TempDir(), "strand.properties")
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		a := append([]string(nil), args...)
		a[configAt] = path
		p := testutil.StartCommand(t, a...)
		p.Addr, p.Admin = client[n], admin[n]
		procs = append(procs, p)
	}
	c := &testutil.ProcessCluster{Procs: procs}
	c.WaitLive(t, nodes, 30*time.Second)

	// The example's defaults: three replicas, two in sync at least.
	partitions := servesReplicated(t, c, "deployed", -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rack := map[int32]string{}
	for _, b := range brokers {
		if b.Rack != nil {
			rack[b.NodeID] = *b.Rack
		}
	}
	for _, p := range partitions {
		zones := map[string]bool{}
		for _, r := range p.Replicas {
			zones[rack[r]] = true
		}
		if len(p.Replicas) != 3 || len(zones) != 3 {
			t.Errorf("partition %d has replicas %v in zones %v, want three in three", p.Partition, p.Replicas, zones)
		}
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, "deployed")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := cfgs.On("deployed", nil)
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" && c.MaybeValue() != "2" {
			t.Errorf("min.insync.replicas %s, the example sets 2", c.MaybeValue())
		}
	}
	rollingUpgrade(t, c, bin, "deployed")
}

// rollingUpgrade restarts each node of c in turn as the README's rolling
// upgrade does, while a producer writes to topic with acks=all, and
// checks that nothing was unavailable: no write failed, each was
// acknowledged, and every acknowledged one is read back; then that the
// preferred replicas lead again.
func rollingUpgrade(t *testing.T, c *testutil.ProcessCluster, bin, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	strand := func(args ...string) string {
		t.Helper()
		args = append(args, "--brokers", strings.Join(c.Seeds(), ","), "--timeout", "90s")
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("strand %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	var (
		mu       sync.Mutex
		acked    = map[string]bool{}
		failed   []error
		slowest  time.Duration
		stop     = make(chan struct{})
		produced = make(chan struct{})
	)
	go func() {
		defer close(produced)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 20000; i++ { // bounded: 100 s at this pace
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			v := fmt.Sprintf("upgrade-%d", i)
			sent := time.Now()
			producer.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, err)
					return
				}
				acked[v] = true
				slowest = max(slowest, time.Since(sent))
			})
		}
	}()
	for i, p := range c.Procs {
		if err := p.Stop(); err != nil {
			t.Errorf("node %d did not stop cleanly: %v", i+1, err)
		}
		p.Restart(t) // the new binary, in an upgrade
		strand("cluster", "health", "--wait")
	}
	close(stop)
	<-produced
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	t.Logf("rolling upgrade: %d writes acknowledged, %d failed, the slowest acknowledged after %v", len(acked), len(failed), slowest)
	if len(failed) > 0 {
		t.Errorf("%d writes failed during the rolling upgrade, the first: %v", len(failed), failed[0])
	}
	want := len(acked)
	mu.Unlock()
	t.Log(strings.TrimSpace(strand("cluster", "elect-leaders")))
	testutil.Eventually(t, 30*time.Second, func() error {
		adm := kadm.NewClient(producer)
		topics, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		for _, p := range topics[topic].Partitions {
			if len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
				return fmt.Errorf("partition %d led by %d, its preferred replica is %v", p.Partition, p.Leader, p.Replicas)
			}
		}
		return nil
	})
	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	read := 0
	for read < want {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of the %d acknowledged writes", read, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if acked[string(r.Value)] {
				read++
				delete(acked, string(r.Value)) // each once
			}
		})
	}
}
