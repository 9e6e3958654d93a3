package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// kafka-reassign-partitions.sh moves a partition onto the broker that did
// not hold it, throttled (--execute --throttle), and --verify reports it
// completed and clears the throttles it set; the metadata then names the
// new replicas, and what was written before is all there.
func TestClusterKafkaReassignPartitions(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.DefaultProduceTopic("moved"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 2, nil, "moved"); err != nil {
		t.Fatal(err)
	}
	var replicas []int32
	testutil.EventuallyEvery(t, 10*time.Second, 50*time.Millisecond, func() error {
		td, err := adm.ListTopics(ctx, "moved")
		if err == nil && td["moved"].Err == nil && len(td["moved"].Partitions) == 1 {
			replicas = td["moved"].Partitions[0].Replicas
		}
		if len(replicas) != 2 {
			return fmt.Errorf("moved-0 not placed: %v, %+v", err, td)
		}
		return nil
	})
	for i := range 100 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Onto the third broker, off the first replica (the leader).
	var spare int32
	for _, b := range []int32{0, 1, 2} {
		if !slices.Contains(replicas, b) {
			spare = b
		}
	}
	target := []int32{replicas[1], spare}
	plan, _ := json.Marshal(map[string]any{"version": 1, "partitions": []map[string]any{
		{"topic": "moved", "partition": 0, "replicas": target, "log_dirs": []string{"any", "any"}}}})
	file := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(file, plan, 0o644); err != nil {
		t.Fatal(err)
	}
	const tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
	exec := runKafkaTool(t, tool, "--bootstrap-server", c.seed(spare), "--reassignment-json-file", file,
		"--execute", "--throttle", "10000000")
	if exec.err != nil || !strings.Contains(exec.stdout, "Successfully started partition reassignment for moved-0") {
		t.Fatalf("kafka-reassign-partitions --execute: %v", exec)
	}
	var verify result
	testutil.EventuallyEvery(t, 60*time.Second, 500*time.Millisecond, func() error {
		verify = runKafkaTool(t, tool, "--bootstrap-server", c.seed(replicas[1]), "--reassignment-json-file", file, "--verify")
		if verify.err != nil || !strings.Contains(verify.stdout, "Reassignment of partition moved-0 is completed") {
			return fmt.Errorf("kafka-reassign-partitions --verify: %v", verify)
		}
		return nil
	})
	if !strings.Contains(verify.stdout, "Clearing broker-level throttles") || !strings.Contains(verify.stdout, "Clearing topic-level throttles") {
		t.Errorf("--verify did not clear the throttles: %v", verify)
	}
	testutil.EventuallyEvery(t, 15*time.Second, 200*time.Millisecond, func() error {
		// The client keeps metadata for a few seconds: ask until it
		// asks the brokers again.
		td, err := adm.ListTopics(ctx, "moved")
		if err != nil || !slices.Equal(td["moved"].Partitions[0].Replicas, target) {
			return fmt.Errorf("after the move: %+v, %v; want replicas %v", td, err, target)
		}
		return nil
	})
	configs, err := adm.DescribeTopicConfigs(ctx, "moved")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range configs {
		for _, cv := range rc.Configs {
			if strings.Contains(cv.Key, "throttled") && cv.Value != nil && *cv.Value != "" {
				t.Errorf("%s still set to %q after --verify", cv.Key, *cv.Value)
			}
		}
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.ConsumeTopics("moved"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for n := 0; n < 100; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 100 records after the move", n)
		}
		n += fs.NumRecords()
	}
}
