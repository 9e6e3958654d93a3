package compat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/testutil"
)

// TestServeKafkaServerProperties: strand serve starts from Apache Kafka
// 4.0's own config/server.properties, as its distribution ships it
// (testdata/kafka-4.0-server.properties, with the listeners' ports and
// log.dirs moved to the test's own): the settings Strand has apply, and
// the ones it has no use for are listed once, in one warning.
func TestServeKafkaServerProperties(t *testing.T) {
	t.Parallel()
	shipped, err := os.ReadFile(filepath.Join("testdata", "kafka-4.0-server.properties"))
	if err != nil {
		t.Fatal(err)
	}
	addr, controller, dataDir := testutil.FreePort(t), testutil.FreePort(t), t.TempDir()
	file := strings.NewReplacer(
		"PLAINTEXT://:9092", "PLAINTEXT://"+addr,
		"CONTROLLER://:9093", "CONTROLLER://"+controller,
		"localhost:9092", addr,
		"localhost:9093", controller,
		"/tmp/kraft-combined-logs", dataDir,
	).Replace(string(shipped))
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	// The file's listeners replace the --listen the helper gives.
	b := startBroker(t, "--config", path)

	var warnings []string
	for _, line := range strings.Split(b.Output.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "no use for") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("%d warnings about unused settings, want 1:\n%s", len(warnings), b.Output.String())
	}
	_, listed, _ := strings.Cut(warnings[0], `settings="`)
	listed, _, _ = strings.Cut(listed, `"`)
	got := strings.Split(listed, ", ")
	want := []string{"process.roles", "controller.quorum.bootstrap.servers", "num.network.threads", "num.io.threads",
		"socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir", "share.coordinator.state.topic.min.isr",
		"transaction.state.log.min.isr"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the warning lists %q, want %q", got, want)
	}

	// It serves, on the file's listener, with the file's settings.
	wantCLI(t, strandCLI(t, addr, "topic")("create", "orders"), true, "created topic orders with 1 partitions")
	wantCLI(t, run(time.Minute, "", "a\nb\n", testutil.Binary(t), "produce", "orders", "--brokers", addr), true, "wrote 2 records")
	wantCLI(t, strandCLI(t, addr, "consume")("orders", "--exit-at-end"), true, "a\nb\n")
	r := strandCLI(t, addr, "cluster")("config", "get", "socket.send.buffer.bytes", "log.retention.ms", "node.id",
		"share.coordinator.state.topic.replication.factor", "--format", "json")
	wantCLI(t, r, true)
	var described struct {
		Configs []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"configs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &described); err != nil {
		t.Fatalf("%v: %v", err, r)
	}
	values := map[string]string{}
	for _, c := range described.Configs {
		values[c.Name] = c.Value
	}
	for name, want := range map[string]string{"socket.send.buffer.bytes": "102400", "log.retention.ms": "604800000", "node.id": "1",
		"share.coordinator.state.topic.replication.factor": "1"} {
		if values[name] != want {
			t.Errorf("%s = %q, want %q (from the file)", name, values[name], want)
		}
	}
}

// TestServeConfigFileTopicDefaults: a config file sets the broker-wide
// topic defaults that have no flag of their own, as Kafka's
// server.properties does: min.insync.replicas = 2 is the broker's static
// config (DescribeConfigs says STATIC_BROKER_CONFIG), an acks=all write to
// a topic of one replica is refused (NOT_ENOUGH_REPLICAS, which the
// producer retries until its timeout), and a dynamic config set while it
// runs overrides it.
func TestServeConfigFileTopicDefaults(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte("min.insync.replicas = 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, "--config", path)
	cli := func(sub string) func(args ...string) result { return strandCLI(t, b.Addr, sub) }
	r := cli("cluster")("config", "get", "min.insync.replicas", "--format", "json")
	wantCLI(t, r, true, `"value": "2"`, `"source": "STATIC_BROKER_CONFIG"`)
	wantCLI(t, cli("topic")("create", "orders"), true)
	produce := func() result {
		// NOT_ENOUGH_REPLICAS is retriable: the producer retries it until
		// its timeout.
		return run(time.Minute, "", "a\n", testutil.Binary(t), "produce", "orders", "--acks", "all", "--timeout", "2s",
			"--brokers", b.Addr)
	}
	wantCLI(t, produce(), false, "1 records not written")
	wantCLI(t, cli("cluster")("config", "set", "--set", "min.insync.replicas=1"), true)
	wantCLI(t, produce(), true, "wrote 1 records")
}
