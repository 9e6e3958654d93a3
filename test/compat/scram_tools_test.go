package compat

import (
	"strings"
	"testing"
)

// configTool is kafka-configs.sh's main class.
const configTool = "org.apache.kafka.tools.ConfigCommand"

// TestKafkaConfigsScram: Kafka's own kafka-configs.sh adds, describes and
// deletes users' SCRAM credentials on Strand, as its docs show.
func TestKafkaConfigsScram(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	kc := func(args ...string) result {
		t.Helper()
		return runKafkaTool(t, configTool, append([]string{"--bootstrap-server", b.Addr}, args...)...)
	}
	add := kc("--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]",
		"--entity-type", "users", "--entity-name", "alice")
	wantCLI(t, add, true, "Completed updating config for user alice")
	d := kc("--describe", "--entity-type", "users", "--entity-name", "alice")
	wantCLI(t, d, true, "SCRAM-SHA-256=iterations=8192", "SCRAM-SHA-512=iterations=4096")
	if containsAny(d.stdout, "alice-secret", "salt") {
		t.Fatalf("the description gives secrets away: %v", d)
	}
	wantCLI(t, kc("--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users", "--entity-name", "alice"), true)
	d = kc("--describe", "--entity-type", "users", "--entity-name", "alice")
	wantCLI(t, d, true, "SCRAM-SHA-256=iterations=8192")
	if containsAny(d.stdout, "SCRAM-SHA-512") {
		t.Fatalf("SCRAM-SHA-512 still described after its deletion: %v", d)
	}
}

// containsAny says whether s holds any of parts.
func containsAny(s string, parts ...string) bool {
	for _, p := range parts {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
