package compat

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/test/javatest"
)

// runKafkaTool runs one of Kafka's command-line tools (kafka-tools, in the
// Java helper's class path) by its main class, as its shell script does.
func runKafkaTool(t *testing.T, class string, args ...string) result {
	t.Helper()
	java, cp := javatest.Helper(t)
	jargs := append([]string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp, class}, args...)
	return run(time.Minute, "", "", java, jargs...)
}

// Kafka's own tools against a 3-broker cluster: kafka-metadata-quorum.sh
// shows the quorum (leader, voters with their controller listeners, every
// voter caught up) through any broker; kafka-topics.sh creates a topic
// spread over the brokers, describes it, creates one with three replicas
// (all in sync), and gets Kafka's refusal for more replicas than brokers;
// kafka-leader-election.sh finds the preferred replica leading, and
// kafka-log-dirs.sh lists the replica on every broker.
func TestClusterKafkaTools(t *testing.T) {
	c := startCluster(t)
	const quorumTool = "org.apache.kafka.tools.MetadataQuorumCommand"
	status := runKafkaTool(t, quorumTool, "--bootstrap-server", c.seed(2), "describe", "--status")
	if status.err != nil {
		t.Fatalf("describe --status: %v", status)
	}
	for _, want := range []string{`(?m)^LeaderId:\s+[012]$`, `(?m)^HighWatermark:\s+[1-9]`, `(?m)^MaxFollowerLag:\s+0$`,
		`CurrentVoters:\s+\[\{"id": 0, "endpoints": \["CONTROLLER://127\.0\.0\.1:\d+"\]\}, \{"id": 1, .*\{"id": 2, `} {
		if !regexp.MustCompile(want).MatchString(status.stdout) {
			t.Errorf("describe --status lacks %s:\n%s", want, status.stdout)
		}
	}
	repl := runKafkaTool(t, quorumTool, "--bootstrap-server", c.seed(0), "describe", "--replication")
	if repl.err != nil {
		t.Fatalf("describe --replication: %v", repl)
	}
	leaders, followers := strings.Count(repl.stdout, "Leader"), strings.Count(repl.stdout, "Follower")
	if leaders != 1 || followers != 2 {
		t.Errorf("describe --replication: %d leaders, %d followers:\n%s", leaders, followers, repl.stdout)
	}

	const topicTool = "org.apache.kafka.tools.TopicCommand"
	create := runKafkaTool(t, topicTool, "--bootstrap-server", c.seed(1), "--create", "--topic", "tooled",
		"--partitions", "6", "--replication-factor", "1")
	if create.err != nil || !strings.Contains(create.stdout, "Created topic tooled.") {
		t.Fatalf("kafka-topics --create: %v", create)
	}
	c.waitLeaders(t, "tooled", []int32{0, 1, 2}, 10*time.Second, func(l map[int32]int32) bool { return len(l) == 6 })
	describe := runKafkaTool(t, topicTool, "--bootstrap-server", c.seed(0), "--describe", "--topic", "tooled")
	if describe.err != nil {
		t.Fatalf("kafka-topics --describe: %v", describe)
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`Partition: \d+\s+Leader: (\d+)\s+Replicas: (\d+)\s+Isr: (\d+)`).FindAllStringSubmatch(describe.stdout, -1) {
		if m[1] != m[2] || m[2] != m[3] {
			t.Errorf("partition line %q: leader, replicas and in-sync set differ", m[0])
		}
		seen[m[1]] = true
	}
	if len(seen) != 3 {
		t.Errorf("kafka-topics --describe: leaders on %v, want all three brokers:\n%s", seen, describe.stdout)
	}
	// Three replicas on three brokers, all in sync; four are refused.
	if wide := runKafkaTool(t, topicTool, "--bootstrap-server", c.seed(0), "--create", "--topic", "wide",
		"--partitions", "1", "--replication-factor", "3"); wide.err != nil {
		t.Fatalf("kafka-topics --create --replication-factor 3: %v", wide)
	}
	describeWide := runKafkaTool(t, topicTool, "--bootstrap-server", c.seed(1), "--describe", "--topic", "wide")
	m := regexp.MustCompile(`Leader: (\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]+)`).FindStringSubmatch(describeWide.stdout)
	if describeWide.err != nil || m == nil || len(strings.Split(m[2], ",")) != 3 || len(strings.Split(m[3], ",")) != 3 ||
		!strings.Contains(m[2], m[1]) {
		t.Errorf("kafka-topics --describe of a topic with three replicas: %v", describeWide)
	}
	// kafka-leader-election.sh: the preferred replica leads already.
	elect := runKafkaTool(t, "org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server", c.seed(2),
		"--election-type", "PREFERRED", "--topic", "wide", "--partition", "0")
	if elect.err != nil || !strings.Contains(elect.stdout, "Valid replica already elected for partitions wide-0") {
		t.Errorf("kafka-leader-election --election-type PREFERRED: %v", elect)
	}
	// kafka-log-dirs.sh: every broker holds a replica of wide-0.
	dirs := runKafkaTool(t, "org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", c.seed(1), "--describe",
		"--topic-list", "wide")
	var described struct {
		Brokers []struct {
			Broker  int32 `json:"broker"`
			LogDirs []struct {
				LogDir     string `json:"logDir"`
				Partitions []struct {
					Partition string `json:"partition"`
				} `json:"partitions"`
			} `json:"logDirs"`
		} `json:"brokers"`
	}
	if i := strings.Index(dirs.stdout, "{"); dirs.err != nil || i < 0 || json.Unmarshal([]byte(strings.TrimSpace(dirs.stdout[i:])), &described) != nil {
		t.Errorf("kafka-log-dirs --describe: %v", dirs)
	}
	holding := 0
	for _, b := range described.Brokers {
		for _, d := range b.LogDirs {
			if len(d.Partitions) == 1 && d.Partitions[0].Partition == "wide-0" && d.LogDir != "" {
				holding++
			}
		}
	}
	if holding != 3 {
		t.Errorf("kafka-log-dirs lists wide-0 on %d brokers, want 3: %s", holding, dirs.stdout)
	}
	wider := runKafkaTool(t, topicTool, "--bootstrap-server", c.seed(0), "--create", "--topic", "wider",
		"--partitions", "1", "--replication-factor", "4")
	if wider.err == nil || !strings.Contains(wider.stdout+wider.stderr, "InvalidReplicationFactorException") {
		t.Errorf("kafka-topics --create --replication-factor 4 on three brokers: %v", wider)
	}
}
