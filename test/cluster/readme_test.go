package cluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// TestREADMEClusterExample runs the README's "A cluster" example as
// written: the strand serve commands of that section's block, each as a
// real process, with every port in them moved to a free one (the same
// README port to the same free port in every command) and the data
// directories into the test's. The three form one cluster: a topic with
// replication factor 3 takes records with acks=all and gives them back,
// and every broker's admin listener answers.
func TestREADMEClusterExample(t *testing.T) {
	if testing.Short() {
		t.Skip("processes: not in -short")
	}
	commands := serveCommands(t, testutil.SectionBlock(t, testutil.README(t), "## A cluster"))
	if len(commands) != 3 {
		t.Fatalf("the README's cluster example has %d strand serve commands, want 3: %q", len(commands), commands)
	}
	ports := map[string]string{} // README host:port -> free host:port
	dirs := t.TempDir()
	addr := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	var procs []*testutil.Process
	for _, args := range commands {
		var client, admin string
		for i, a := range args {
			a = addr.ReplaceAllStringFunc(a, func(readmeAddr string) string {
				if _, ok := ports[readmeAddr]; !ok {
					ports[readmeAddr] = testutil.FreePort(t)
				}
				return ports[readmeAddr]
			})
			if i > 0 && args[i-1] == "--data-dir" {
				a = filepath.Join(dirs, a)
			}
			if i > 0 && args[i-1] == "--admin-listen" {
				admin = a
			}
			if m := regexp.MustCompile(`PLAINTEXT://([^,]+)`).FindStringSubmatch(a); i > 0 && args[i-1] == "--listeners" && m != nil {
				client = m[1]
			}
			args[i] = a
		}
		if client == "" || admin == "" {
			t.Fatalf("no PLAINTEXT listener or no --admin-listen in %q", args)
		}
		p := testutil.StartCommand(t, args[1:]...) // after "strand"
		p.Addr, p.Admin = client, admin
		procs = append(procs, p)
	}
	c := &testutil.ProcessCluster{Procs: procs}
	c.WaitLive(t, 3, 30*time.Second)

	for _, p := range servesReplicated(t, c, "readme", 3) {
		if len(p.Replicas) != 3 {
			t.Errorf("partition %d has replicas %v, want 3", p.Partition, p.Replicas)
		}
	}
	for i, p := range procs {
		resp, err := http.Get("http://" + p.Admin + "/api/health")
		if err != nil {
			t.Fatalf("node %d's admin listener: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("node %d's /api/health: %s", i, resp.Status)
		}
	}
}

// serveCommands are the block's strand serve commands, each as its words
// (continued lines joined, comments dropped).
func serveCommands(t *testing.T, block string) [][]string {
	t.Helper()
	var out [][]string
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		line, _, _ = strings.Cut(line, "#")
		words := strings.Fields(line)
		if len(words) >= 2 && words[0] == "strand" && words[1] == "serve" {
			out = append(out, words)
		} else if len(words) > 0 {
			t.Fatalf("the example's line %q is not a strand serve command", line)
		}
	}
	return out
}

// servesReplicated creates topic through c with three partitions at
// replication factor rf (-1: the cluster's default), writes records to it
// with acks=all, reads every one back, and returns its partitions with
// their replicas.
func servesReplicated(t *testing.T, c *testutil.ProcessCluster, topic string, rf int16) kadm.PartitionDetails {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 3, rf, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("topic %s at replication factor %d: %v %v", topic, rf, err, resp.Err)
	}
	const n = 30
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "record-%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	got := map[string]bool{}
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of %d records", len(got), n)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return topics[topic].Partitions
}
