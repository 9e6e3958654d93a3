package compat

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
	}
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("cluster info --format json: %v\n%v", err, r)
	}
	if info.ClusterID == "" || len(info.Brokers) != clusterBrokers || info.Controller < 0 {
		t.Fatalf("cluster info: %+v", info)
	}
	env := exec.Command(testutil.Binary(t), "cluster", "info")
	env.Env = append(os.Environ(), "STRAND_BROKERS="+c.seed(1))
	out, err := env.CombinedOutput()
	if err != nil || !strings.Contains(string(out), info.ClusterID) || !strings.Contains(string(out), "3 brokers") {
		t.Fatalf("cluster info with STRAND_BROKERS: %v\n%s", err, out)
	}

	wantCLI(t, strand("health"), true, "healthy: true", "offline: 0, under-replicated: 0")

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
		Healthy bool     `json:"healthy"`
		Offline []string `json:"offline_partitions"`
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r = strand("health", "--format", "json")
		h.Offline = nil
		if err := json.Unmarshal([]byte(r.stdout), &h); err != nil {
			t.Fatalf("cluster health --format json: %v\n%v", err, r)
		}
		var spreadOffline []string
		for _, p := range h.Offline {
			if strings.HasPrefix(p, "spread-") {
				spreadOffline = append(spreadOffline, p)
			}
		}
		if slices.Equal(spreadOffline, alone) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster health after broker 2's kill lists offline %v, want %v among them: %v", h.Offline, alone, r)
		}
	}
	if h.Healthy || r.err == nil || !strings.Contains(r.stderr, "not healthy") {
		t.Fatalf("cluster health with offline partitions: healthy %v, %v", h.Healthy, r)
	}
}
