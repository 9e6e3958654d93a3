package cluster

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/testutil"
)

// A broker whose quorum lost its majority still answers reads from what
// it has, and refuses changes with a retriable error within the proposal
// timeout, never hanging; with the majority back, changes go through.
func TestClusterLostQuorum(t *testing.T) {
	c := testutil.StartCluster(t, 3, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	survivor := c.Brokers[0]
	adm := kadm.NewClient(newClient(t, []string{survivor.Addr}))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "before"); err != nil {
		t.Fatal(err)
	}
	metadata(t, ctx, survivor.Addr, "before")
	c.Brokers[1].Stop(t)
	c.Brokers[2].Stop(t)

	start := time.Now()
	_, err := adm.CreateTopic(ctx, 1, 1, nil, "during")
	took := time.Since(start)
	if !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("creating without a quorum: %v, want REQUEST_TIMED_OUT", err)
	}
	if took > 40*time.Second {
		t.Fatalf("creating without a quorum took %v", took)
	}
	t.Logf("a change without a quorum failed after %v", took.Round(time.Millisecond))
	md := metadata(t, ctx, survivor.Addr, "before")
	if len(md.Topics[0].Partitions) != 2 {
		t.Fatalf("reads without a quorum: %+v", md.Topics)
	}

	c.Brokers[1].Restart(t)
	c.Brokers[2].Restart(t)
	c.WaitLive(t, 3, 30*time.Second)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "after"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("creating with the quorum back: %v", err)
	}
}

// A voter whose metadata log is damaged before its last record refuses to
// start and names the file, rather than rejoining with entries lost; its
// data directory is left as it was.
func TestDamagedMetadataLogRefusesToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("processes: not in -short")
	}
	c := testutil.StartProcessCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Seeds()))
	for _, name := range []string{"a", "b", "c", "d"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	victim := c.Procs[1]
	if err := victim.Stop(); err != nil {
		t.Fatal(err)
	}
	wal := filepath.Join(victim.DataDir, cluster.MetadataDir, "wal")
	entries, err := os.ReadDir(wal)
	if err != nil || len(entries) == 0 {
		t.Fatalf("metadata log: %v %v", entries, err)
	}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	segment := filepath.Join(wal, names[len(names)-1])
	data, err := os.ReadFile(segment)
	if err != nil || len(data) < 200 {
		t.Fatalf("segment %s: %d bytes, %v", segment, len(data), err)
	}
	data[len(data)/2] ^= 0xff // damage in the middle: records follow it
	if err := os.WriteFile(segment, data, 0o644); err != nil {
		t.Fatal(err)
	}

	runCtx, runCancel := context.WithTimeout(ctx, 20*time.Second)
	defer runCancel()
	out, err := exec.CommandContext(runCtx, testutil.Binary(t), victim.Args...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("a damaged metadata log: %v, want a failed start\n%s", err, out)
	}
	if !strings.Contains(string(out), segment) {
		t.Fatalf("the error does not name %s:\n%s", segment, out)
	}
	if after, _ := os.ReadFile(segment); string(after) != string(data) {
		t.Fatal("the damaged segment was changed")
	}
}

// A broker started with a cluster id other than its data directory's
// refuses to start, naming both.
func TestWrongClusterIDRefusesToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("processes: not in -short")
	}
	c := testutil.StartProcessCluster(t, 3)
	victim := c.Procs[2]
	if err := victim.Stop(); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(victim.DataDir, "meta.properties"))
	if err != nil || !strings.Contains(string(meta), "cluster.id=") || !strings.Contains(string(meta), "node.id=2") {
		t.Fatalf("meta.properties: %q %v", meta, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, args := range [][]string{
		append(slices.Clone(victim.Args), "--cluster-id", "another-cluster"),
		append(slices.Clone(victim.Args), "--node-id", "7"),
	} {
		out, err := exec.CommandContext(ctx, testutil.Binary(t), args...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || !strings.Contains(string(out), "data directory "+victim.DataDir+" belongs to") {
			t.Fatalf("%v: %v\n%s", args[len(args)-2:], err, out)
		}
	}
}
