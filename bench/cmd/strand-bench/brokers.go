package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// benchBroker is one broker under test: started fresh for a round, used
// for every workload of that round, then stopped and its data removed.
type benchBroker interface {
	// Start launches the broker and returns the moment its process (or, for
	// an in-process broker, its constructor) started; the suite times the
	// first successful produce from there.
	Start(ctx context.Context) (time.Time, error)
	Addr() string
	// PeakRSS is the broker process's peak resident set (VmHWM) in bytes,
	// or -1 when the broker has no process of its own.
	PeakRSS() int64
	// CPU is the broker process's CPU time so far, or -1.
	CPU() time.Duration
	Stop() error
}

// brokerKind is one column of the comparison.
type brokerKind struct {
	Name       string `json:"name"`
	Label      string `json:"label"`
	Durability string `json:"durability"`
	// TopicConfigs are given to every topic the workloads create.
	TopicConfigs map[string]string `json:"topic_configs,omitempty"`
	// TxnStateConfigs are set on __transaction_state before a transaction
	// workload, so the coordinator's writes are as durable as the data's.
	TxnStateConfigs map[string]string `json:"txn_state_configs,omitempty"`
}

var brokerKinds = map[string]brokerKind{
	"strand": {Name: "strand", Label: "Strand",
		Durability: "fsync before every acknowledgement (default)"},
	"strand-nofsync": {Name: "strand-nofsync", Label: "Strand --fsync never",
		Durability: "fsync left to the OS"},
	"kafka": {Name: "kafka", Label: "Kafka",
		Durability: "fsync left to the OS (Kafka's default)"},
	"kafka-flush": {Name: "kafka-flush", Label: "Kafka flush.messages=1",
		Durability:   "fsync after every append, before the acknowledgement (in (f) __transaction_state too)",
		TopicConfigs: map[string]string{"flush.messages": "1"}, TxnStateConfigs: map[string]string{"flush.messages": "1"}},
	"kfake": {Name: "kfake", Label: "kfake",
		Durability: "in memory, in the bench process (no disk, no durability)"},
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// process is a broker running as a child process.
type process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	logFile *os.File
}

func startProcess(name string, args []string, dir, logPath string, env []string) (*process, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, so an interrupted bench can end it whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{}), logFile: lf}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// peakRSS reads VmHWM, the process's peak resident set, from /proc.
func (p *process) peakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// stop sends SIGTERM and waits up to grace for a clean exit, then kills.
func (p *process) stop(grace time.Duration) error {
	defer p.logFile.Close()
	if p.exited() {
		return fmt.Errorf("exited early: %v", p.waitErr)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%w: did not stop within %s", errKilled, grace)
	}
}

var errKilled = errors.New("killed")

// strandBroker runs `strand serve` from a binary (this one by default).
type strandBroker struct {
	bin     string
	dataDir string
	logPath string
	extra   []string
	addr    string // set before Start for a cluster member, else chosen
	proc    *process
}

func (b *strandBroker) Start(context.Context) (time.Time, error) {
	if b.addr == "" {
		port, err := freePort()
		if err != nil {
			return time.Time{}, err
		}
		b.addr = fmt.Sprintf("127.0.0.1:%d", port)
	}
	adminPort, err := freePort()
	if err != nil {
		return time.Time{}, err
	}
	args := append([]string{"serve", "--data-dir", b.dataDir, "--listen", b.addr,
		"--admin-listen", fmt.Sprintf("127.0.0.1:%d", adminPort)}, b.extra...)
	start := time.Now()
	b.proc, err = startProcess(b.bin, args, "", b.logPath, nil)
	return start, err
}

func (b *strandBroker) CPU() time.Duration { return processCPU(b.proc.cmd.Process.Pid) }
func (b *strandBroker) Addr() string       { return b.addr }
func (b *strandBroker) PeakRSS() int64     { return b.proc.peakRSS() }
func (b *strandBroker) Stop() error {
	if b.proc == nil {
		return nil
	}
	if err := b.proc.stop(60 * time.Second); err != nil {
		return fmt.Errorf("strand (log %s): %w", b.logPath, err)
	}
	return nil
}

// kafkaBroker runs Apache Kafka as a single KRaft node, controller and
// broker in one JVM, from the jars in lib (see bench/run.sh).
type kafkaBroker struct {
	java    string
	lib     string // directory of jars
	heap    string // -Xmx and -Xms
	dir     string // config, logs and data
	addr    string
	proc    *process
	logPath string
	// FormatSeconds is how long kafka-storage format took (not part of the
	// start-up time, which counts from starting kafka.Kafka).
	FormatSeconds float64
	// Killed: it did not stop within the grace period after SIGTERM.
	Killed bool
	// A cluster member (newKafkaCluster) has these set before Start: its node
	// id, ports, the quorum's voters and the cluster id; a single node
	// leaves them zero.
	node        int
	port, cport int
	voters      string
	clusterID   string
}

// The JVM options of Kafka's kafka-server-start.sh and kafka-run-class.sh
// (KAFKA_JVM_PERFORMANCE_OPTS), with the heap from --kafka-heap.
func (b *kafkaBroker) jvmArgs() []string {
	return []string{
		"-Xmx" + b.heap, "-Xms" + b.heap,
		"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(b.dir, "log4j2.properties"),
		"-cp", filepath.Join(b.lib, "*"),
	}
}

func (b *kafkaBroker) Start(ctx context.Context) (time.Time, error) {
	var err error
	if b.port == 0 {
		if b.port, err = freePort(); err != nil {
			return time.Time{}, err
		}
		if b.cport, err = freePort(); err != nil {
			return time.Time{}, err
		}
		b.node, b.voters = 1, fmt.Sprintf("1@127.0.0.1:%d", b.cport)
	}
	port, cport := b.port, b.cport
	b.addr = fmt.Sprintf("127.0.0.1:%d", port)
	data := filepath.Join(b.dir, "data")
	// Internal topics as replicated as the cluster allows, with the
	// in-sync minimum Kafka recommends for three brokers.
	rf, minISR := 1, 1
	if b.clusterID != "" {
		rf, minISR = strings.Count(b.voters, "@"), 2
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
`, port, cport, data, b.node, b.voters, rf, minISR)
	// Everything else is Kafka's default: 3 network and 8 I/O threads,
	// log.flush.interval.messages unset (fsync left to the OS), 1 GiB segments.
	propsPath := filepath.Join(b.dir, "server.properties")
	if err := os.WriteFile(propsPath, []byte(props), 0o644); err != nil {
		return time.Time{}, err
	}
	log4j := `status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ` + filepath.Join(b.dir, "server.log") + `
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
`
	if err := os.WriteFile(filepath.Join(b.dir, "log4j2.properties"), []byte(log4j), 0o644); err != nil {
		return time.Time{}, err
	}
	// kafka-storage.sh format -t <cluster id> -c server.properties
	clusterID := b.clusterID
	if clusterID == "" {
		var id [16]byte
		rand.Read(id[:])
		clusterID = base64.RawURLEncoding.EncodeToString(id[:])
	}
	start := time.Now()
	format := exec.CommandContext(ctx, b.java, append(b.jvmArgsTool(), "kafka.tools.StorageTool",
		"format", "-t", clusterID, "-c", propsPath)...)
	if out, err := format.CombinedOutput(); err != nil {
		return time.Time{}, fmt.Errorf("kafka-storage format: %v\n%s", err, lastLines(string(out), 20))
	}
	b.FormatSeconds = time.Since(start).Seconds()
	b.logPath = filepath.Join(b.dir, "stdout.log")
	start = time.Now()
	b.proc, err = startProcess(b.java, append(b.jvmArgs(), "kafka.Kafka", propsPath), b.dir, b.logPath, nil)
	return start, err
}

// The storage tool runs with a small heap, as kafka-storage.sh does.
func (b *kafkaBroker) jvmArgsTool() []string {
	return []string{"-Xmx256m", "-Dlog4j2.configurationFile=" + filepath.Join(b.dir, "log4j2.properties"),
		"-cp", filepath.Join(b.lib, "*")}
}

func (b *kafkaBroker) CPU() time.Duration { return processCPU(b.proc.cmd.Process.Pid) }
func (b *kafkaBroker) Addr() string       { return b.addr }
func (b *kafkaBroker) PeakRSS() int64     { return b.proc.peakRSS() }

// Stop asks Kafka to shut down (SIGTERM, as kafka-server-stop.sh does) and
// kills it after 20 s: a combined controller+broker sometimes waits long in
// its controlled shutdown, which is not what this benchmark measures.
func (b *kafkaBroker) Stop() error {
	if b.proc == nil {
		return nil
	}
	err := b.proc.stop(20 * time.Second)
	if errors.Is(err, errKilled) {
		b.Killed = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("kafka (logs in %s): %w", b.dir, err)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kfakeBroker is franz-go's in-memory fake Kafka, in this process.
type kfakeBroker struct {
	c *kfake.Cluster
}

func (b *kfakeBroker) Start(context.Context) (time.Time, error) {
	port, err := freePort()
	if err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	b.c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.AllowAutoTopicCreation())
	return start, err
}

func (b *kfakeBroker) CPU() time.Duration { return -1 }
func (b *kfakeBroker) Addr() string       { return b.c.ListenAddrs()[0] }
func (b *kfakeBroker) PeakRSS() int64     { return -1 }
func (b *kfakeBroker) Stop() error {
	if b.c == nil {
		return nil
	}
	b.c.Close()
	return nil
}

// brokerFactory builds a fresh broker of a kind in dir.
type brokerFactory struct {
	strandBin  string
	java       string
	kafkaLib   string
	kafkaHeap  string
	cpuProfile string // strand kinds: write a CPU profile here (empty: none)
}

func (f brokerFactory) make(kind, dir string) (benchBroker, error) {
	switch kind {
	case "strand", "strand-nofsync":
		b := &strandBroker{bin: f.strandBin, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "strand.log")}
		if kind == "strand-nofsync" {
			b.extra = append(b.extra, "--fsync", "never")
		}
		if f.cpuProfile != "" {
			b.extra = append(b.extra, "--cpuprofile", f.cpuProfile)
		}
		return b, nil
	case "kafka", "kafka-flush":
		if f.kafkaLib == "" {
			return nil, errors.New("no Kafka jars: give --kafka-lib (bench/run.sh fetches them)")
		}
		return &kafkaBroker{java: f.java, lib: f.kafkaLib, heap: f.kafkaHeap, dir: dir}, nil
	case "kfake":
		return &kfakeBroker{}, nil
	}
	return nil, fmt.Errorf("unknown broker %q (want strand, strand-nofsync, kafka, kafka-flush or kfake)", kind)
}
