package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/brokerproc"
)

// mirrorMaker runs Apache Kafka's MirrorMaker 2 in dedicated mode
// (org.apache.kafka.connect.mirror.MirrorMaker, as connect-mirror-maker.sh
// does) from the jars in Lib, with a properties file written to Dir.
type mirrorMaker struct {
	Java  string
	Lib   string // connect-mirror, connect-mirror-client and their dependencies
	Heap  string // -Xmx; -Xms is 256M, as connect-mirror-maker.sh sets them
	Dir   string
	Props [][2]string // in the order written

	proc *brokerproc.Process
}

// mm2Properties is the MirrorMaker 2 configuration of the mirror workload:
// one flow, source->target, of the topic and the group, with topic names
// kept (IdentityReplicationPolicy) and the group's offsets translated and
// committed on the target every interval. Every internal topic has one
// replica (each cluster is one broker). Heartbeats and ACL sync are off:
// neither takes part in what is measured. Plugins are found through their
// ServiceLoader manifests, as MirrorMaker's own start-up warning advises
// (the default also scans the class path, twice, for seconds). extra
// (key=value) comes last and overrides.
func mm2Properties(source, target, topic, group string, tasks int, interval, refresh time.Duration, extra []string) ([][2]string, error) {
	secs := func(d time.Duration) string { return fmt.Sprint(max(1, int64((d+time.Second/2)/time.Second))) }
	props := [][2]string{
		{"clusters", "source, target"},
		{"source.bootstrap.servers", source},
		{"target.bootstrap.servers", target},
		{"source->target.enabled", "true"},
		{"target->source.enabled", "false"},
		{"source->target.topics", "^" + topic + "$"},
		{"source->target.groups", "^" + group + "$"},
		{"replication.policy.class", "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"},
		{"sync.group.offsets.enabled", "true"},
		{"sync.group.offsets.interval.seconds", secs(interval)},
		{"emit.checkpoints.interval.seconds", secs(interval)},
		{"refresh.topics.interval.seconds", secs(refresh)},
		{"refresh.groups.interval.seconds", secs(refresh)},
		{"emit.heartbeats.enabled", "false"},
		{"sync.topic.acls.enabled", "false"},
		{"plugin.discovery", "service_load"},
		{"tasks.max", fmt.Sprint(tasks)},
		{"replication.factor", "1"},
		{"checkpoints.topic.replication.factor", "1"},
		{"heartbeats.topic.replication.factor", "1"},
		{"offset-syncs.topic.replication.factor", "1"},
		{"offset.storage.replication.factor", "1"},
		{"status.storage.replication.factor", "1"},
		{"config.storage.replication.factor", "1"},
	}
	for _, kv := range extra {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--mm2-property %q: want key=value", kv)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if i := slices.IndexFunc(props, func(p [2]string) bool { return p[0] == k }); i >= 0 {
			props[i][1] = v
		} else {
			props = append(props, [2]string{k, v})
		}
	}
	return props, nil
}

// Start writes mm2.properties and a log4j2 configuration (its log goes to
// mm2.log in Dir) and starts the JVM.
func (m *mirrorMaker) Start() (time.Time, error) {
	if m.Heap == "" {
		m.Heap = "2G"
	}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return time.Time{}, err
	}
	var b strings.Builder
	for _, p := range m.Props {
		fmt.Fprintf(&b, "%s = %s\n", p[0], p[1])
	}
	propsPath := filepath.Join(m.Dir, "mm2.properties")
	if err := os.WriteFile(propsPath, []byte(b.String()), 0o644); err != nil {
		return time.Time{}, err
	}
	log4j := `status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ` + filepath.Join(m.Dir, "mm2.log") + `
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
`
	log4jPath := filepath.Join(m.Dir, "log4j2.properties")
	if err := os.WriteFile(log4jPath, []byte(log4j), 0o644); err != nil {
		return time.Time{}, err
	}
	// kafka-run-class.sh's JVM options, with connect-mirror-maker.sh's heap.
	args := []string{
		"-Xms256M", "-Xmx" + m.Heap,
		"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + log4jPath,
		"-cp", filepath.Join(m.Lib, "*"),
		"org.apache.kafka.connect.mirror.MirrorMaker", propsPath,
	}
	start := time.Now()
	var err error
	m.proc, err = brokerproc.Start(m.Java, args, m.Dir, filepath.Join(m.Dir, "stdout.log"), nil)
	return start, err
}

// CPU is the JVM's CPU time so far, or -1.
func (m *mirrorMaker) CPU() time.Duration {
	if m.proc == nil {
		return -1
	}
	return m.proc.CPU()
}

// PeakRSS is the JVM's peak resident set, or -1.
func (m *mirrorMaker) PeakRSS() int64 {
	if m.proc == nil {
		return -1
	}
	return m.proc.PeakRSS()
}

// Exited says whether the JVM has ended (it should run until Stop).
func (m *mirrorMaker) Exited() bool { return m.proc != nil && m.proc.Exited() }

// Stop sends SIGTERM and kills the JVM after 20 s; being killed is not an
// error here, its shutdown is not measured.
func (m *mirrorMaker) Stop() error {
	if m.proc == nil {
		return nil
	}
	if err := m.proc.Stop(20 * time.Second); err != nil && !errors.Is(err, brokerproc.ErrKilled) {
		return fmt.Errorf("mirror maker (logs in %s): %w", m.Dir, err)
	}
	return nil
}
