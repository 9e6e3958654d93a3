package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// TestClusterCLI drives `strand cluster` against three brokers: info
// names them and the controller (also with the brokers taken from
// STRAND_BROKERS), health passes, and once a broker is killed health
// lists the partitions it alone held as offline and exits non-zero.
func TestClusterCLI(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "--broker-session-timeout", "3s")
	strand := strandCLI(t, c.seed(0), "cluster")
	leaders := c.spreadTopic(t, 0, "spread")

	r := strand("info", "--format", "json")
	wantCLI(t, r, true)
	var info struct {
		ClusterID  string `json:"cluster_id"`
		Controller int32  `json:"controller"`
		Brokers    []struct {
			NodeID int32 `json:"node_id"`
			Port   int32 `json:"port"`
		} `json:"brokers"`
		Features map[string]int16 `json:"features"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("cluster info --format json: %v\n%v", err, r)
	}
	if info.ClusterID == "" || len(info.Brokers) != clusterBrokers || info.Controller < 0 || info.Features["transaction.version"] != 2 {
		t.Fatalf("cluster info: %+v", info)
	}
	env := exec.Command(testutil.Binary(t), "cluster", "info")
	env.Env = append(os.Environ(), "STRAND_BROKERS="+c.seed(1))
	out, err := env.CombinedOutput()
	if err != nil || !strings.Contains(string(out), info.ClusterID) || !strings.Contains(string(out), "3 brokers") {
		t.Fatalf("cluster info with STRAND_BROKERS: %v\n%s", err, out)
	}

	wantCLI(t, strandCLI(t, c.seed(0), "topic")("create", "replicated", "--partitions", "2", "--replicas", "3"), true)
	wantCLI(t, strand("health"), true, "healthy: true", "offline: 0, under-replicated: 0")
	testClusterConfigCLI(t, c.seed(0), 2)
	checkScramEverywhere(t, c)

	// Broker 2 holds some of spread's partitions alone: killed, they are
	// offline once it is fenced.
	var alone []string
	for p, l := range leaders {
		if l == 2 {
			alone = append(alone, "spread-"+strconv.Itoa(int(p)))
		}
	}
	slices.Sort(alone)
	c.Procs[2].Kill()
	var h struct {
		Healthy         bool     `json:"healthy"`
		Offline         []string `json:"offline_partitions"`
		UnderReplicated []string `json:"under_replicated_partitions"`
	}
	testutil.EventuallyEvery(t, 20*time.Second, 200*time.Millisecond, func() error {
		r = strand("health", "--format", "json")
		h.Offline, h.UnderReplicated = nil, nil
		if err := json.Unmarshal([]byte(r.stdout), &h); err != nil {
			t.Fatalf("cluster health --format json: %v\n%v", err, r)
		}
		var spreadOffline []string
		for _, p := range h.Offline {
			if strings.HasPrefix(p, "spread-") {
				spreadOffline = append(spreadOffline, p)
			}
		}
		// Every replicated partition has lost its replica on broker 2.
		replicated := slices.Contains(h.UnderReplicated, "replicated-0") && slices.Contains(h.UnderReplicated, "replicated-1")
		if !slices.Equal(spreadOffline, alone) || !replicated {
			return fmt.Errorf("cluster health after broker 2's kill lists offline %v (want %v among them), under-replicated %v (want replicated-0 and -1): %v",
				h.Offline, alone, h.UnderReplicated, r)
		}
		return nil
	})
	if h.Healthy || r.err == nil || !strings.Contains(r.stderr, "not healthy") {
		t.Fatalf("cluster health with offline partitions: healthy %v, %v", h.Healthy, r)
	}
}

// testClusterConfigCLI: cluster config get shows a broker's configs with
// their sources; set changes them for every broker or for one, and
// --delete returns them to their defaults.
func testClusterConfigCLI(t *testing.T, addr string, broker int32) {
	t.Helper()
	strand := strandCLI(t, addr, "cluster")
	read := func(name string, args ...string) (value, source string) {
		t.Helper()
		r := strand(append([]string{"config", "get", name, "--format", "json"}, args...)...)
		wantCLI(t, r, true)
		var out struct {
			Configs []struct {
				Name   string  `json:"name"`
				Value  *string `json:"value"`
				Source string  `json:"source"`
			} `json:"configs"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Configs) != 1 || out.Configs[0].Value == nil {
			t.Fatalf("config get %s: %v\n%v", name, err, r)
		}
		return *out.Configs[0].Value, out.Configs[0].Source
	}
	// Kafka applies a change to its brokers' configs a moment after it
	// answers: wait for the value wanted.
	get := func(name, want string, args ...string) (value, source string) {
		t.Helper()
		testutil.EventuallyEvery(t, 10*time.Second, 100*time.Millisecond, func() error {
			if value, source = read(name, args...); value != want {
				return fmt.Errorf("%s %v is %s from %s, want %s", name, args, value, source, want)
			}
			return nil
		})
		return value, source
	}
	b := strconv.Itoa(int(broker))
	const name = "message.max.bytes" // dynamic in Kafka too, for every broker and for one
	if v, src := get(name, "1048588", "--broker", b); v != "1048588" || src != "DEFAULT_CONFIG" {
		t.Fatalf("%s before: %s from %s", name, v, src)
	}
	wantCLI(t, strand("config", "set", "--set", name+"=2000000"), true, "altered 1 configs of every broker")
	if v, src := get(name, "2000000", "--broker", b); v != "2000000" || src != "DYNAMIC_DEFAULT_BROKER_CONFIG" {
		t.Fatalf("%s after the cluster-wide set: %s from %s", name, v, src)
	}
	wantCLI(t, strand("config", "set", "--broker", b, "--set", name+"=3000000"), true, "of broker "+b)
	if v, src := get(name, "3000000", "--broker", b); v != "3000000" || src != "DYNAMIC_BROKER_CONFIG" {
		t.Fatalf("%s after broker %s's own set: %s from %s", name, b, v, src)
	}
	wantCLI(t, strand("config", "set", "--broker", b, "--delete", name), true)
	if v, src := get(name, "2000000", "--broker", b); v != "2000000" || src != "DYNAMIC_DEFAULT_BROKER_CONFIG" {
		t.Fatalf("%s after deleting broker %s's own: %s from %s", name, b, v, src)
	}
	wantCLI(t, strand("config", "set", "--delete", name), true)
	if v, src := get(name, "1048588", "--broker", b); v != "1048588" || src != "DEFAULT_CONFIG" {
		t.Fatalf("%s after the deletes: %s from %s, want the default", name, v, src)
	}
	wantCLI(t, strand("config", "get", "no.such.config"), false, "no such broker configs: no.such.config")
	wantCLI(t, strand("config", "set", "--set", "log.retention.ms"), false, "name=value")
}

// checkScramEverywhere: a user's SCRAM credential set through one broker
// is in the cluster metadata every broker reads.
func checkScramEverywhere(t *testing.T, c *cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(client(t, c.seed(0))).AlterUserSCRAMs(ctx, nil,
		[]kadm.UpsertSCRAM{{User: "everywhere", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw"}})
	if err != nil || res["everywhere"].Err != nil {
		t.Fatalf("setting a SCRAM credential: %v %+v", err, res)
	}
	for i := range int32(clusterBrokers) {
		adm := kadm.NewClient(client(t, c.seed(i), kgo.RetryTimeout(3*time.Second)))
		testutil.EventuallyEvery(t, 10*time.Second, 100*time.Millisecond, func() error {
			d, err := adm.DescribeUserSCRAMs(ctx, "everywhere")
			if err != nil || d["everywhere"].Err != nil || len(d["everywhere"].CredInfos) != 1 {
				return fmt.Errorf("broker %d does not describe the credential: %+v %v", i, d, err)
			}
			return nil
		})
	}
}
