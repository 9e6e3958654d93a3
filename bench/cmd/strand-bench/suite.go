package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/brokerproc"
)

// suiteWorkloads returns the workloads of a mode: full (the sizes),
// quick (the same shapes, about a fifth of the records) or smoke (tiny,
// seconds in all, to keep the tool working in CI). (f) is two workloads,
// f-10 and f-1000 (records per transaction); --workloads f selects both.
// (g) is share groups: a backlog drained by 8 members of one share group,
// then records at a fixed rate while they read along.
func suiteWorkloads(mode string) ([]benchWorkload, error) {
	const kib = 1024
	a := benchWorkload{Name: "a", Title: "(a) throughput, small records", Records: 2_000_000, RecordSize: 100, Partitions: 6,
		Acks: "all", Idempotent: true, Compression: "lz4", Linger: 5 * time.Millisecond, BatchBytes: 1 << 20,
		MaxBufferedBytes: 32 << 20}
	b := benchWorkload{Name: "b", Title: "(b) throughput, large records", Records: 200_000, RecordSize: 10 * kib, Partitions: 6,
		Acks: "all", Idempotent: true, Compression: "none", Linger: 5 * time.Millisecond, BatchBytes: 1 << 20,
		MaxBufferedBytes: 32 << 20}
	c := benchWorkload{Name: "c", Title: "(c) latency-bound produce", Records: 20_000, RecordSize: 100, Partitions: 1,
		Acks: "1", Compression: "none", Linger: 0, MaxInflight: 1, MaxBufferedRecords: 1}
	d := benchWorkload{Name: "d", Title: "(d) end-to-end latency", RecordSize: 100, Partitions: 6,
		Acks: "all", Idempotent: true, Compression: "none", Linger: 0,
		Rate: 20_000, Duration: 15 * time.Second, Warmup: 2 * time.Second}
	e := benchWorkload{Name: "e", Title: "(e) 1000 partitions", Records: 1_000_000, RecordSize: 100, Partitions: 1000,
		Acks: "all", Idempotent: true, Compression: "lz4", Linger: 5 * time.Millisecond, BatchBytes: 1 << 20,
		MaxBufferedBytes: 32 << 20}
	txn := func(records int) benchWorkload {
		return benchWorkload{Name: fmt.Sprintf("f-%d", records), Title: fmt.Sprintf("(f) transactions of %d records", records),
			TxnRecords: records, RecordSize: 100, Partitions: 6, Acks: "all", Idempotent: true, Compression: "none",
			Linger: 5 * time.Millisecond, BatchBytes: 1 << 20, MaxBufferedBytes: 32 << 20,
			Duration: 15 * time.Second, Warmup: 2 * time.Second}
	}
	f10, f1000 := txn(10), txn(1000)
	g := benchWorkload{Name: "g", Title: "(g) share groups", Records: 1_000_000, RecordSize: 100, Partitions: 3,
		Acks: "all", Idempotent: true, Compression: "none", Linger: 5 * time.Millisecond, BatchBytes: 1 << 20,
		MaxBufferedBytes: 32 << 20, Rate: 10_000, Duration: 15 * time.Second, Warmup: 2 * time.Second, ShareConsumers: 8}
	switch mode {
	case "full":
	case "quick":
		a.Records, b.Records, c.Records, e.Records = 400_000, 40_000, 5_000, 200_000
		d.Duration, d.Warmup = 6*time.Second, time.Second
		f10.Duration, f10.Warmup, f1000.Duration, f1000.Warmup = 6*time.Second, time.Second, 6*time.Second, time.Second
		g.Records, g.Duration, g.Warmup = 200_000, 6*time.Second, time.Second
	case "smoke":
		a.Records, b.Records, c.Records, e.Records = 5_000, 100, 200, 5_000
		d.Rate, d.Duration, d.Warmup = 2_000, time.Second, 200*time.Millisecond
		e.Partitions = 50
		e.Title = "(e) many partitions"
		f10.Duration, f10.Warmup, f1000.Duration, f1000.Warmup = time.Second, 200*time.Millisecond, time.Second, 200*time.Millisecond
		g.Records, g.Rate, g.Duration, g.Warmup = 5_000, 1_000, time.Second, 200*time.Millisecond
	default:
		return nil, fmt.Errorf("mode %q: want full, quick or smoke", mode)
	}
	return []benchWorkload{a, b, c, d, e, f10, f1000, g}, nil
}

type suiteOptions struct {
	Mode         string
	Rounds       int
	Brokers      []string
	Workloads    []string // names to run; empty: all
	Out          string
	WorkDir      string
	KafkaVersion string
	Profile      bool // CPU-profile the Strand brokers of the first round
	MachineTime  time.Duration
	WarmMemory   int64 // bytes of free memory to touch before the first broker; 0: none
	// Cluster > 1 runs every kind as that many brokers: topics with a
	// replica on each, min.insync.replicas 2, and a failover measured.
	Cluster int
	Factory brokerFactory
	Log     io.Writer
}

// brokerRun is one broker instance: one kind in one round.
type brokerRun struct {
	Broker        string  `json:"broker"`
	Round         int     `json:"round"`
	StartupMs     float64 `json:"startup_ms"` // process start to first acknowledged produce
	PeakRSSBytes  int64   `json:"peak_rss_bytes"`
	FormatSeconds float64 `json:"kafka_format_seconds,omitempty"`
	StopSeconds   float64 `json:"stop_seconds"`
	Killed        bool    `json:"killed_after_sigterm,omitempty"`
	// Failover is the cluster mode's kill -9 of a partition's leader.
	Failover *failoverResult `json:"failover,omitempty"`
	Error    string          `json:"error,omitempty"`
}

type suiteReport struct {
	Started      time.Time       `json:"started"`
	Seconds      float64         `json:"seconds"`
	Mode         string          `json:"mode"`
	Cluster      int             `json:"cluster,omitempty"`
	Rounds       int             `json:"rounds"`
	Host         map[string]any  `json:"host"`
	KafkaVersion string          `json:"kafka_version,omitempty"`
	Brokers      []brokerKind    `json:"brokers"`
	Workloads    []benchWorkload `json:"workloads"`
	Machine      []machineLimits `json:"machine"` // before and after the brokers
	Results      []benchResult   `json:"results"`
	BrokerRuns   []brokerRun     `json:"broker_runs"`
	Failures     []string        `json:"failures,omitempty"`
}

func runSuite(ctx context.Context, o suiteOptions) (*suiteReport, error) {
	all, err := suiteWorkloads(o.Mode)
	if err != nil {
		return nil, err
	}
	for _, n := range o.Workloads {
		if !slices.ContainsFunc(all, func(w benchWorkload) bool { return w.Name == n || w.group() == n }) {
			return nil, fmt.Errorf("unknown workload %q (want a, b, c, d, e, f, f-10, f-1000 or g)", n)
		}
	}
	var ws []benchWorkload
	for _, w := range all {
		if len(o.Workloads) == 0 || slices.Contains(o.Workloads, w.Name) || slices.Contains(o.Workloads, w.group()) {
			ws = append(ws, w)
		}
	}
	rep := &suiteReport{Started: time.Now(), Mode: o.Mode, Cluster: o.Cluster, Rounds: o.Rounds, Workloads: ws,
		KafkaVersion: o.KafkaVersion, Host: hostInfo(o.Factory.java)}
	for _, k := range o.Brokers {
		kind, ok := brokerKinds[k]
		if !ok {
			return nil, fmt.Errorf("unknown broker %q (want strand, strand-nofsync, kafka, kafka-flush or kfake)", k)
		}
		rep.Brokers = append(rep.Brokers, kind)
		if strings.HasPrefix(k, "kafka") && o.Factory.kafkaLib == "" {
			return nil, fmt.Errorf("broker %s needs --kafka-lib, the directory of Kafka's jars (bench/run.sh fetches them)", k)
		}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(o.Log, format+"\n", args...) }
	if fs := fsType(o.WorkDir); fs == "tmpfs" {
		logf("warning: %s is on tmpfs, where fsync costs nothing: give --work-dir on a disk", o.WorkDir)
	}

	measure := func(when string) {
		logf("machine limits (%s): measuring", when)
		m, err := measureMachine(o.WorkDir, o.MachineTime)
		if err != nil {
			rep.Failures = append(rep.Failures, "machine limits: "+err.Error())
			return
		}
		logf("  loopback TCP %.0f MB/s, write+fsync %.0f MB/s (1 MiB), %.0f fsyncs/s (4 KiB), buffered write %.0f MB/s, %s",
			m.LoopbackMBPerSec, m.WriteFsyncMBPerSec, m.SmallFsyncsPerSec, m.BufferedWriteMBPerSec, m.FileSystem)
		rep.Machine = append(rep.Machine, m)
	}
	measure("before")
	if o.WarmMemory > 0 && len(rep.Machine) > 0 {
		gib, secs := warmMemory(o.WarmMemory)
		rep.Machine[0].WarmedGiB, rep.Machine[0].WarmedSeconds = gib, secs
		logf("  warmed %.0f GiB of memory in %.1f s", gib, secs)
	}

	for round := range o.Rounds {
		// Alternate: each round starts with the next broker kind.
		order := append(slices.Clone(o.Brokers[round%len(o.Brokers):]), o.Brokers[:round%len(o.Brokers)]...)
		for _, kind := range order {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			runOneBroker(ctx, o, rep, ws, kind, round, logf)
		}
	}
	measure("after")
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}

func runOneBroker(ctx context.Context, o suiteOptions, rep *suiteReport, ws []benchWorkload, kind string, round int, logf func(string, ...any)) {
	run := brokerRun{Broker: kind, Round: round + 1, PeakRSSBytes: -1}
	failf := func(format string, args ...any) {
		msg := fmt.Sprintf("round %d, %s: ", round+1, kind) + fmt.Sprintf(format, args...)
		logf("FAIL %s", msg)
		rep.Failures = append(rep.Failures, msg)
		if run.Error == "" {
			run.Error = msg
		}
	}
	defer func() { rep.BrokerRuns = append(rep.BrokerRuns, run) }()

	dir := filepath.Join(o.WorkDir, fmt.Sprintf("r%d-%s", round+1, kind))
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		failf("%v", err)
		return
	}
	f := o.Factory
	if o.Profile && round == 0 && strings.HasPrefix(kind, "strand") {
		f.cpuProfile, _ = filepath.Abs(filepath.Join(o.Out, "cpu-"+kind+".pprof"))
	}
	var b benchBroker
	var err error
	if o.Cluster > 1 {
		b, err = f.makeCluster(kind, dir, o.Cluster)
	} else {
		b, err = f.make(kind, dir)
	}
	if err != nil {
		failf("%v", err)
		return
	}
	logf("round %d/%d: %s", round+1, o.Rounds, brokerKinds[kind].Label)
	launched, err := b.Start(ctx)
	if err != nil {
		failf("starting: %v", err)
		return
	}
	keepDir := false
	defer func() {
		stopStart := time.Now()
		if err := b.Stop(); err != nil {
			failf("stopping: %v", err)
			keepDir = true
		}
		run.StopSeconds = time.Since(stopStart).Seconds()
		if kb, ok := b.(*brokerproc.Kafka); ok && kb.Killed {
			run.Killed = true
			logf("  stopped: no clean exit within 20 s of SIGTERM, killed")
		} else {
			logf("  stopped in %.1f s", run.StopSeconds)
		}
		if keepDir {
			logf("  kept %s for inspection", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	first, err := firstProduce(sctx, b.Addr())
	cancel()
	if err != nil {
		failf("start-up: %v", err)
		keepDir = true
		return
	}
	run.StartupMs = float64(first.Sub(launched).Microseconds()) / 1000
	cb, clustered := b.(clusterBroker)
	if clustered {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := waitBrokers(sctx, b.Addr(), cb.Size())
		cancel()
		if err != nil {
			failf("start-up: %v", err)
			keepDir = true
			return
		}
	}
	if kb, ok := b.(*brokerproc.Kafka); ok {
		run.FormatSeconds = kb.FormatSeconds
		logf("  start-up to first produce %.0f ms (after %.1f s of kafka-storage format)", run.StartupMs, kb.FormatSeconds)
	} else {
		logf("  start-up to first produce %.1f ms", run.StartupMs)
	}
	for _, w := range ws {
		w.TopicConfigs = brokerKinds[kind].TopicConfigs
		if clustered {
			w.ReplicationFactor = int16(cb.Size())
			w.TopicConfigs = clusterTopicConfigs(w.TopicConfigs)
		}
		if w.TxnRecords > 0 || w.ShareConsumers > 0 {
			w.StateConfigs = brokerKinds[kind].StateConfigs
		}
		wctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
		res, err := runWorkload(wctx, b.Addr(), fmt.Sprintf("bench-%s-r%d", w.Name, round+1), w, b.CPU)
		cancel()
		res.Broker, res.Round = kind, round+1
		rep.Results = append(rep.Results, res)
		if err != nil {
			failf("workload %s: %v", w.Name, err)
			keepDir = true
			continue
		}
		logf("  %s", summarize(w, res))
	}
	if clustered && ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		fo, err := measureFailover(fctx, cb, clusterTopicConfigs(brokerKinds[kind].TopicConfigs))
		cancel()
		run.Failover = &fo
		if err != nil {
			failf("failover: %v", err)
		} else {
			logf("  failover: broker %d killed, its partition took a write again after %.0f ms (%d records acknowledged, none lost)",
				fo.Killed, fo.Ms, fo.Acked)
		}
	}
	run.PeakRSSBytes = b.PeakRSS()
	if run.PeakRSSBytes > 0 {
		logf("  peak RSS %.0f MiB", float64(run.PeakRSSBytes)/(1<<20))
	}
}

func summarize(w benchWorkload, r benchResult) string {
	if w.ShareConsumers > 0 {
		return fmt.Sprintf("%s: %d share consumers drained %d records at %.0f rec/s, %.1f MB/s; at %.0f rec/s end-to-end p50 %.2f / p99 %.2f / max %.2f ms; %d records received more than once, %d acknowledgements refused; every record received",
			w.Name, w.ShareConsumers, w.Records, r.ConsumeRecordsPerSec, r.ConsumeMBPerSec, r.AchievedRate, r.E2EP50Ms, r.E2EP99Ms, r.E2EMaxMs, r.Redelivered, r.AckErrors)
	}
	cpu := fmt.Sprintf("CPU: client %.2f cores", r.ClientCPUSeconds/r.ProduceSeconds)
	if r.BrokerCPUSeconds > 0 {
		cpu += fmt.Sprintf(", broker %.2f cores", r.BrokerCPUSeconds/r.ProduceSeconds)
	}
	if w.TxnRecords > 0 {
		return fmt.Sprintf("%s: %d transactions counted, %.0f txn/s, %.0f rec/s; commit p50 %.2f / p99 %.2f ms, transaction p50 %.2f / p99 %.2f ms; consume (read_committed) %.0f rec/s; %s; verified",
			w.Name, r.Transactions, r.TxnPerSec, r.ProduceRecordsPerSec, r.CommitP50Ms, r.CommitP99Ms, r.TxnP50Ms, r.TxnP99Ms, r.ConsumeRecordsPerSec, cpu)
	}
	if w.Rate > 0 {
		return fmt.Sprintf("%s: %.0f rec/s; end-to-end p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms; produce p99 %.2f ms; %s; verified",
			w.Name, r.AchievedRate, r.E2EP50Ms, r.E2EP99Ms, r.E2EP999Ms, r.ProduceP99Ms, cpu)
	}
	consumeCPU := ""
	if r.ConsumeSeconds > 0 {
		consumeCPU = fmt.Sprintf(" (CPU: client %.2f cores", r.ConsumeClientCPUSeconds/r.ConsumeSeconds)
		if r.ConsumeBrokerCPUSeconds > 0 {
			consumeCPU += fmt.Sprintf(", broker %.2f cores", r.ConsumeBrokerCPUSeconds/r.ConsumeSeconds)
		}
		consumeCPU += ")"
	}
	return fmt.Sprintf("%s: produce %.0f rec/s, %.1f MB/s (%.1f MB/s on the wire), latency p50 %.2f / p99 %.2f / p99.9 %.2f ms; consume %.0f rec/s%s; %s; verified",
		w.Name, r.ProduceRecordsPerSec, r.ProduceMBPerSec, r.ProduceWireMBPerSec, r.ProduceP50Ms, r.ProduceP99Ms, r.ProduceP999Ms, r.ConsumeRecordsPerSec, consumeCPU, cpu)
}

func hostInfo(java string) map[string]any {
	h := map[string]any{"cpus": runtime.NumCPU(), "go": runtime.Version(), "os": runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				h["cpu"] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		var kb int64
		fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "MemTotal:")), "%d", &kb)
		h["memory"] = fmt.Sprintf("%.0f GiB RAM", float64(kb)/(1<<20))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		h["load_at_start"] = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if java != "" {
		if out, err := exec.Command(java, "-version").CombinedOutput(); err == nil {
			line, _, _ := strings.Cut(string(out), "\n")
			h["java"] = strings.TrimSpace(line)
		}
	}
	return h
}

func writeReport(rep *suiteReport, out string) (string, error) {
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), append(js, '\n'), 0o644); err != nil {
		return "", err
	}
	md := markdownReport(rep)
	if err := os.WriteFile(filepath.Join(out, "results.md"), []byte(md), 0o644); err != nil {
		return "", err
	}
	return md, nil
}

var errBenchFailed = errors.New("benchmark failed")
