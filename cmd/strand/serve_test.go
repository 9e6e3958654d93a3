package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/internal/config"
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
min.insync.replicas = 2
log.cleanup.policy = compact
leader.replication.throttled.rate = 1000000
`)
	cmd, cfg := serveCommand(), config.Defaults()
	if _, err := applyEnvAndFile(cmd.Flags(), path, &cfg); err != nil {
		t.Fatal(err)
	}
	// The settings without a flag of their own are the broker's static
	// values.
	for name, want := range map[string]string{"min.insync.replicas": "2", "log.cleanup.policy": "compact",
		"leader.replication.throttled.rate": "1000000"} {
		d, _ := config.LookupBrokerDef(name)
		if got := d.Get(cfg); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
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
		"node.id": "want key = value"} {
		write(bad + "\n")
		cfg := config.Defaults()
		if _, err := applyEnvAndFile(serveCommand().Flags(), path, &cfg); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want %q", bad, err, why)
		}
	}
}

// TestConfigFileErrors: strand serve refuses a config file's unknown key
// with its line and the settings closest to it, names a bad value by the
// key as the file or the environment writes it, and accepts Kafka's
// settings it has no use for.
func TestConfigFileErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	for _, tc := range []struct {
		file, env string
		want      []string
	}{
		{file: "node.id = 1\n# a comment\nnum.partition = 3\nlog.retention.msx = 5\n",
			want: []string{path + ":3: unknown setting \"num.partition\"; did you mean num.partitions?",
				path + ":4: unknown setting \"log.retention.msx\"; did you mean log.retention.ms?"}},
		{file: "retension-ms = 5\n", want: []string{path + ":1: unknown setting \"retension-ms\"; did you mean retention-ms?"}},
		{file: "log.retention.ms = 1d\n", want: []string{path + `:1: Invalid value 1d for configuration log.retention.ms: Not a number of type LONG`}},
		{file: "\nretention-ms = 1d\n", want: []string{path + `:2: retention-ms = "1d": not a whole number of milliseconds`}},
		{file: "num.partitions = six\n", want: []string{path + `:1: num.partitions = "six": not a whole number`}},
		{file: "log.retention.hours = 1d\n", want: []string{path + `:1: log.retention.hours = "1d": not a whole number`}},
		{env: "1d", want: []string{`STRAND_RETENTION_MS="1d": not a whole number of milliseconds`}},
		{file: "\n\nmin.insync.replicas = two\n", want: []string{path + ":3: ", "min.insync.replicas"}},
	} {
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		if tc.env != "" {
			t.Setenv("STRAND_RETENTION_MS", tc.env)
		}
		_, err := strandRun(t, "serve", "--config", path, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--admin-listen", "", "--log-level", "bogus")
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %v, want %q", tc.file, err, want)
			}
		}
		os.Unsetenv("STRAND_RETENTION_MS")
	}

	// Kafka's settings that Strand does without are returned for one
	// warning, each once; its own are applied.
	if err := os.WriteFile(path, []byte("num.io.threads=8\nprocess.roles=broker,controller\nnum.io.threads=16\nnum.partitions=3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, cfg := serveCommand(), config.Defaults()
	unused, err := applyEnvAndFile(cmd.Flags(), path, &cfg)
	if err != nil || !slices.Equal(unused, []string{"num.io.threads", "process.roles"}) {
		t.Fatalf("unused %q, %v", unused, err)
	}
	if got := cmd.Flags().Lookup("default-partitions").Value.String(); got != "3" {
		t.Errorf("num.partitions gave --default-partitions %s", got)
	}
}

// TestFsyncSettings: --fsync and --fsync-interval-ms are the flags of
// log.flush.interval.messages and log.flush.interval.ms, so a config
// file's Kafka lines for them take effect, a flag given on the command
// line or in the environment wins over them, and DescribeConfigs says what
// is in force.
func TestFsyncSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	kafkaLines := "log.flush.interval.ms = 250\nlog.flush.interval.messages = 10000\n"
	for _, tc := range []struct {
		name, file, env string
		args            []string
		messages, ms    string // as DescribeConfigs gives them
	}{
		{name: "built-in", messages: "1", ms: "9223372036854775807"},
		{name: "Kafka's lines", file: kafkaLines, messages: "9223372036854775807", ms: "250"},
		{name: "the flag wins", file: kafkaLines, args: []string{"--fsync", "every-append"}, messages: "1", ms: "9223372036854775807"},
		{name: "the environment wins", file: kafkaLines, env: "never", messages: "9223372036854775807", ms: "9223372036854775807"},
		{name: "flags", args: []string{"--fsync", "interval", "--fsync-interval-ms", "40"}, messages: "9223372036854775807", ms: "40"},
		{name: "flag names in the file", file: "fsync = interval\nfsync-interval-ms = 40\n", messages: "9223372036854775807", ms: "40"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("STRAND_FSYNC", tc.env)
			}
			args := tc.args
			if tc.file != "" {
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			cfg, o := config.Defaults(), serveOptions{}
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			bindServeFlags(fs, &cfg, &o)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if _, err := o.settings(fs, &cfg); err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			for name, want := range map[string]string{"log.flush.interval.messages": tc.messages, "log.flush.interval.ms": tc.ms} {
				d, _ := config.LookupBrokerDef(name)
				if got := d.Get(cfg); got != want {
					t.Errorf("%s = %s, want %s", name, got, want)
				}
			}
		})
	}
}

// TestKafkaSyntaxFlags: --listeners, --advertised-listeners and
// --listener-security-protocol-map, declared by their settings' rows, set
// the listeners.
func TestKafkaSyntaxFlags(t *testing.T) {
	cfg, o := config.Defaults(), serveOptions{}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	bindServeFlags(fs, &cfg, &o)
	if err := fs.Parse([]string{"--listeners", "CLIENT://127.0.0.1:9192,INTERNAL://127.0.0.1:9193",
		"--advertised-listeners", "CLIENT://c.example:9192", "--listener-security-protocol-map", "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
		"--inter-broker-listener-name", "INTERNAL"}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.settings(fs, &cfg); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"listeners": "CLIENT://127.0.0.1:9192,INTERNAL://127.0.0.1:9193",
		"advertised.listeners": "CLIENT://c.example:9192,INTERNAL://127.0.0.1:9193"} {
		d, _ := config.LookupBrokerDef(name)
		if got := d.Get(cfg); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}
