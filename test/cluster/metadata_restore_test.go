package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/testutil"
)

// TestMetadataRestore: the README's backup and restore of the metadata.
// A copy of one voter's data directory, taken while the cluster runs, is
// backed up with strand metadata backup. Then every voter loses its
// metadata log (the partitions' data is kept); strand metadata restore
// seeds each from the backup, and the restarted cluster has the topic
// under its id, with its configs and the client quota, and serves the
// records written before the backup and new ones.
func TestMetadataRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("processes: not in -short")
	}
	c := testutil.StartProcessCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "kept"
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	retention := "123456789"
	if r, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"retention.ms": &retention}, topic); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	quota := 1048576.0
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: kmsg.StringPtr("restored-client")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quota}},
	}}); err != nil {
		t.Fatal(err)
	}
	produce := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
				t.Fatalf("produce %s-%d: %v", prefix, i, err)
			}
		}
	}
	produce("before", 30)
	ids := topicIDs(t, ctx, adm)

	// The backup, from a copy of node 0's directory taken while it runs.
	bin := testutil.Binary(t)
	strand := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("strand %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Not from under a running broker: reading recovers the log.
	if out, err := exec.CommandContext(ctx, bin, "metadata", "backup", "--data-dir", c.Procs[0].DataDir, "--out",
		filepath.Join(t.TempDir(), "refused.json")).CombinedOutput(); err == nil || !strings.Contains(string(out), "copy the directory") {
		t.Errorf("a backup from a running broker's directory: %v\n%s", err, out)
	}
	copyDir := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(copyDir, os.DirFS(c.Procs[0].DataDir)); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "metadata.json")
	t.Log(strings.TrimSpace(strand("metadata", "backup", "--data-dir", copyDir, "--out", backup)))
	var b cluster.Backup
	if data, err := os.ReadFile(backup); err != nil || json.Unmarshal(data, &b) != nil || !strings.Contains(string(b.Image), topic) {
		t.Fatalf("the backup %s does not hold the topic: %v", backup, err)
	}

	// Every voter's metadata log lost; each restored from the backup.
	for _, p := range c.Procs {
		p.Kill()
		if err := os.RemoveAll(filepath.Join(p.DataDir, cluster.MetadataDir)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range c.Procs {
		args := append([]string{"metadata", "restore", "--from", backup}, p.Args[1:]...) // serve's flags
		t.Log(strings.TrimSpace(strand(args...)))
		// A log that exists is never written over.
		if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err == nil || !strings.Contains(string(out), "not empty") {
			t.Errorf("restoring over a restored log: %v\n%s", err, out)
		}
	}
	for _, p := range c.Procs {
		p.Restart(t)
	}
	c.WaitLive(t, 3, 30*time.Second)

	testutil.Eventually(t, 30*time.Second, func() error {
		got := topicIDs(t, ctx, adm)
		if got[topic] != ids[topic] {
			return fmt.Errorf("topic %s has id %v after the restore, %v before", topic, got[topic], ids[topic])
		}
		return nil
	})
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := rc.On(topic, nil); configValue(v, "retention.ms") != retention {
		t.Errorf("retention.ms %q after the restore, %s before", configValue(v, "retention.ms"), retention)
	}
	quotas, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(quotas) != 1 || quotas[0].Values[0].Value != quota {
		t.Errorf("client quotas after the restore: %+v", quotas)
	}
	produce("after", 10)
	read := map[string]bool{}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for len(read) < 40 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the 40 records after the restore", len(read))
		}
		fs.EachRecord(func(r *kgo.Record) { read[string(r.Value)] = true })
	}
	for _, want := range []string{"before-0", "before-29", "after-9"} {
		if !read[want] {
			t.Errorf("%s not read after the restore", want)
		}
	}
}

func topicIDs(t *testing.T, ctx context.Context, adm *kadm.Client) map[string]kadm.TopicID {
	t.Helper()
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kadm.TopicID{}
	for name, td := range tds {
		out[name] = td.ID
	}
	return out
}

func configValue(rc kadm.ResourceConfig, key string) string {
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue()
		}
	}
	return ""
}
