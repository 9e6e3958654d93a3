package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/strandlog/strand/internal/brokerproc"
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
	// StateConfigs are set on the coordinator state topic a workload
	// writes (__transaction_state in (f), __share_group_state in (g)), so
	// the coordinator's writes are as durable as the data's.
	StateConfigs map[string]string `json:"state_configs,omitempty"`
}

var brokerKinds = map[string]brokerKind{
	"strand": {Name: "strand", Label: "Strand",
		Durability: "fsync before every acknowledgement (default)"},
	"strand-nofsync": {Name: "strand-nofsync", Label: "Strand --fsync never",
		Durability: "fsync left to the OS"},
	"strand-tls": {Name: "strand-tls", Label: "Strand over TLS",
		Durability: "fsync before every acknowledgement (default); clients over TLS 1.3"},
	"kafka": {Name: "kafka", Label: "Kafka",
		Durability: "fsync left to the OS (Kafka's default)"},
	"kafka-flush": {Name: "kafka-flush", Label: "Kafka flush.messages=1",
		Durability:   "fsync after every append, before the acknowledgement (in (f) __transaction_state too, in (g) __share_group_state)",
		TopicConfigs: map[string]string{"flush.messages": "1"}, StateConfigs: map[string]string{"flush.messages": "1"}},
	"kfake": {Name: "kfake", Label: "kfake",
		Durability: "in memory, in the bench process (no disk, no durability)"},
}

// strandBroker runs `strand serve` from a binary (this one by default).
type strandBroker struct {
	bin     string
	dataDir string
	logPath string
	extra   []string
	tls     bool   // serve the client listener over TLS
	addr    string // set before Start for a cluster member, else chosen
	admin   string // the admin listener's host:port, chosen by Start
	proc    *brokerproc.Process
}

func (b *strandBroker) Start(context.Context) (time.Time, error) {
	if b.addr == "" {
		port, err := brokerproc.FreePort()
		if err != nil {
			return time.Time{}, err
		}
		b.addr = fmt.Sprintf("127.0.0.1:%d", port)
	}
	adminPort, err := brokerproc.FreePort()
	if err != nil {
		return time.Time{}, err
	}
	b.admin = fmt.Sprintf("127.0.0.1:%d", adminPort)
	args := []string{"serve", "--data-dir", b.dataDir, "--listen", b.addr, "--admin-listen", b.admin}
	if b.tls {
		cert, key, pool, err := writeCertificate(filepath.Join(filepath.Dir(b.dataDir), "tls"))
		if err != nil {
			return time.Time{}, err
		}
		args = append(args, "--listeners", "SSL://"+b.addr, "--ssl-cert", cert, "--ssl-key", key)
		tlsBrokers.Store(b.addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	}
	args = append(args, b.extra...)
	start := time.Now()
	b.proc, err = brokerproc.Start(b.bin, args, "", b.logPath, nil)
	return start, err
}

func (b *strandBroker) CPU() time.Duration { return b.proc.CPU() }
func (b *strandBroker) Addr() string       { return b.addr }
func (b *strandBroker) PeakRSS() int64     { return b.proc.PeakRSS() }
func (b *strandBroker) Stop() error {
	if b.proc == nil {
		return nil
	}
	if err := b.proc.Stop(60 * time.Second); err != nil {
		return fmt.Errorf("strand (log %s): %w", b.logPath, err)
	}
	return nil
}

// kfakeBroker is franz-go's in-memory fake Kafka, in this process.
type kfakeBroker struct {
	c *kfake.Cluster
}

func (b *kfakeBroker) Start(context.Context) (time.Time, error) {
	port, err := brokerproc.FreePort()
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
	case "strand", "strand-nofsync", "strand-tls":
		b := &strandBroker{bin: f.strandBin, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "strand.log"),
			tls: kind == "strand-tls"}
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
		return &brokerproc.Kafka{Java: f.java, Lib: f.kafkaLib, Heap: f.kafkaHeap, Dir: dir}, nil
	case "kfake":
		return &kfakeBroker{}, nil
	}
	return nil, fmt.Errorf("unknown broker %q (want strand, strand-nofsync, strand-tls, kafka, kafka-flush or kfake)", kind)
}
