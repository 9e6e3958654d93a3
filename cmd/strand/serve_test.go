package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigFileKafkaNames: the config file takes settings under their
// Kafka names, as a server.properties has them, and under flag names;
// unknown keys and key stores other than PEM are refused.
func TestConfigFileKafkaNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`# as Kafka's
node.id = 3
log.retention.hours = 24
group.initial.rebalance.delay.ms = 1500
offsets.retention.minutes = 60
leader.imbalance.check.interval.seconds = 30
listeners = SSL://127.0.0.1:9093
advertised.listeners = SSL://k1.example:9093
ssl.keystore.type = PEM
ssl.keystore.location = /etc/strand/server.pem
auto.create.topics.enable = false
segment-bytes = 1048576
`)
	cmd := serveCommand()
	if err := applyEnvAndFile(cmd.Flags(), path); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"node-id": "3", "retention-ms": "86400000", "group-initial-rebalance-delay": "1.5s",
		"offsets-retention": "1h0m0s", "leader-imbalance-check-interval": "30s", "listeners": "SSL://127.0.0.1:9093",
		"advertised-listeners": "SSL://k1.example:9093", "ssl-cert": "/etc/strand/server.pem", "auto-create-topics": "false",
		"segment-bytes": "1048576"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
	for bad, why := range map[string]string{"no.such.setting = 1": "unknown setting", "ssl.keystore.type = JKS": "only PEM",
		"node.id": "want flag = value"} {
		write(bad + "\n")
		if err := applyEnvAndFile(serveCommand().Flags(), path); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want %q", bad, err, why)
		}
	}
}
