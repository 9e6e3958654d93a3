package brokerproc

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Kafka runs Apache Kafka as a KRaft node, controller and broker in one
// JVM (combined mode), from the jars in Lib. A single node leaves Node,
// the ports, Voters and ClusterID zero; a cluster's members have them set
// before Start.
type Kafka struct {
	Java string // the java executable
	Lib  string // directory of Kafka's jars
	Heap string // -Xmx and -Xms, e.g. 1g
	Dir  string // config, logs and data

	Node                 int
	Port, ControllerPort int
	Voters               string // the quorum, id@host:port,...
	ClusterID            string
	// Props are more server.properties (tests: shorter group timings).
	Props map[string]string

	// FormatSeconds is how long kafka-storage format took (not part of the
	// start-up, which counts from starting kafka.Kafka).
	FormatSeconds float64
	// Killed: it did not stop within the grace period after SIGTERM.
	Killed bool

	addr    string
	proc    *Process
	logPath string
}

// NewClusterID is a cluster id as kafka-storage random-uuid makes one.
// Like Kafka's Uuid.randomUuid it never starts with "-": kafka-storage
// format would read such an id as an option, and fail.
func NewClusterID() string {
	for {
		var id [16]byte
		rand.Read(id[:])
		if s := base64.RawURLEncoding.EncodeToString(id[:]); s[0] != '-' {
			return s
		}
	}
}

// The JVM options of Kafka's kafka-server-start.sh and kafka-run-class.sh
// (KAFKA_JVM_PERFORMANCE_OPTS), with the heap from Heap.
func (k *Kafka) jvmArgs() []string {
	return []string{
		"-Xmx" + k.Heap, "-Xms" + k.Heap,
		"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(k.Dir, "log4j2.properties"),
		"-cp", filepath.Join(k.Lib, "*"),
	}
}

// The storage tool runs with a small heap, as kafka-storage.sh does.
func (k *Kafka) jvmArgsTool() []string {
	return []string{"-Xmx256m", "-Dlog4j2.configurationFile=" + filepath.Join(k.Dir, "log4j2.properties"),
		"-cp", filepath.Join(k.Lib, "*")}
}

// Start writes the configuration, formats the storage and starts the
// broker; it returns when kafka.Kafka was started (not when it serves).
func (k *Kafka) Start(ctx context.Context) (time.Time, error) {
	if k.Heap == "" {
		k.Heap = "1g"
	}
	if k.Java == "" {
		k.Java = "java"
	}
	var err error
	if k.Port == 0 {
		if k.Port, err = FreePort(); err != nil {
			return time.Time{}, err
		}
		if k.ControllerPort, err = FreePort(); err != nil {
			return time.Time{}, err
		}
		k.Node, k.Voters = 1, fmt.Sprintf("1@127.0.0.1:%d", k.ControllerPort)
	}
	k.addr = fmt.Sprintf("127.0.0.1:%d", k.Port)
	data := filepath.Join(k.Dir, "data")
	// Internal topics as replicated as the cluster allows, with the
	// in-sync minimum Kafka recommends for three brokers.
	rf, minISR := 1, 1
	if k.ClusterID != "" {
		rf, minISR = strings.Count(k.Voters, "@"), 2
	}
	props := fmt.Sprintf(`# KRaft: controller and broker in one process (combined mode).
process.roles=broker,controller
node.id=%[4]d
controller.quorum.voters=%[5]s
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%[3]s
num.partitions=1
offsets.topic.replication.factor=%[6]d
transaction.state.log.replication.factor=%[6]d
transaction.state.log.min.isr=%[7]d
share.coordinator.state.topic.replication.factor=%[6]d
share.coordinator.state.topic.min.isr=%[7]d
group.initial.rebalance.delay.ms=0
`, k.Port, k.ControllerPort, data, k.Node, k.Voters, rf, minISR)
	for _, name := range slices.Sorted(maps.Keys(k.Props)) {
		props += name + "=" + k.Props[name] + "\n"
	}
	// Everything else is Kafka's default: 3 network and 8 I/O threads,
	// log.flush.interval.messages unset (fsync left to the OS), 1 GiB segments.
	if err := os.MkdirAll(k.Dir, 0o755); err != nil {
		return time.Time{}, err
	}
	propsPath := filepath.Join(k.Dir, "server.properties")
	if err := os.WriteFile(propsPath, []byte(props), 0o644); err != nil {
		return time.Time{}, err
	}
	log4j := `status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ` + filepath.Join(k.Dir, "server.log") + `
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
`
	if err := os.WriteFile(filepath.Join(k.Dir, "log4j2.properties"), []byte(log4j), 0o644); err != nil {
		return time.Time{}, err
	}
	// kafka-storage.sh format -t <cluster id> -c server.properties
	clusterID := k.ClusterID
	if clusterID == "" {
		clusterID = NewClusterID()
	}
	start := time.Now()
	format := exec.CommandContext(ctx, k.Java, append(k.jvmArgsTool(), "kafka.tools.StorageTool",
		"format", "-t", clusterID, "-c", propsPath)...)
	if out, err := format.CombinedOutput(); err != nil {
		return time.Time{}, fmt.Errorf("kafka-storage format: %v\n%s", err, LastLines(string(out), 20))
	}
	k.FormatSeconds = time.Since(start).Seconds()
	k.logPath = filepath.Join(k.Dir, "stdout.log")
	start = time.Now()
	k.proc, err = Start(k.Java, append(k.jvmArgs(), "kafka.Kafka", propsPath), k.Dir, k.logPath, nil)
	return start, err
}

// Addr is the broker's client address, once started.
func (k *Kafka) Addr() string { return k.addr }

// Process is the running JVM, nil before Start.
func (k *Kafka) Process() *Process { return k.proc }

// CPU is the JVM's CPU time so far.
func (k *Kafka) CPU() time.Duration { return k.proc.CPU() }

// PeakRSS is the JVM's peak resident set in bytes.
func (k *Kafka) PeakRSS() int64 { return k.proc.PeakRSS() }

// Stop asks Kafka to shut down (SIGTERM, as kafka-server-stop.sh does) and
// kills it after 20 s (Killed): a combined controller and broker sometimes
// waits long in its controlled shutdown.
func (k *Kafka) Stop() error {
	if k.proc == nil {
		return nil
	}
	err := k.proc.Stop(20 * time.Second)
	if errors.Is(err, ErrKilled) {
		k.Killed = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("kafka (logs in %s): %w", k.Dir, err)
	}
	return nil
}
