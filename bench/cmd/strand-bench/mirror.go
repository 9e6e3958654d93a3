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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/brokerproc"
)

// The mirror workload (`strand-bench mirror`, `bench/run.sh mirror`):
// Strand's cluster link beside Apache Kafka's MirrorMaker 2, in one run.
//
// One Apache Kafka broker is the source. Two targets mirror its topic: a
// Strand broker, through a cluster link, and a second Kafka broker, fed by
// MirrorMaker 2 (dedicated mode, IdentityReplicationPolicy so the topic
// keeps its name, the group's offsets translated and committed on the
// target). Three measures, in this order, for both mirrors:
//
//  1. Throughput: a backlog is written to the source first; then each
//     mirror in turn is started (the link created, MirrorMaker launched)
//     and timed until its target's log end offsets hold the whole backlog.
//     The other mirror is not running yet (Strand's first), so each copy
//     has the machine to itself but for the idle brokers.
//  2. Lag under a steady rate: both mirrors running, a producer writes to
//     the source at a fixed rate; a consumer on each target (and one on the
//     source, as the baseline) reads along with read_uncommitted, and each
//     record's lag is the time its consumer's poll returned it minus the
//     time just before its Produce call (one clock, this process's).
//  3. Offset exactness: a transactional producer writes transactions that
//     commit and abort in turn; a consumer group reads the source with
//     read_committed, commits a known position per partition and leaves.
//     After the mirrors' sync interval, the group's committed offset on each
//     target is judged by what a consumer starting there would read with
//     read_committed, against what the source's consumer would have read
//     next: exact, ahead (it would skip records) or behind (it would
//     process records again), with the records counted.

const (
	mirrorTopic    = "mirror-bench"
	mirrorGroup    = "mirror-bench-group"
	mirrorLinkName = "bench"
	mirrorTxnID    = "mirror-bench-txn"
)

type mirrorOptions struct {
	Factory      brokerFactory // strandBin, java, kafkaLib, kafkaHeap
	MM2Lib       string
	MM2Heap      string
	MM2Tasks     int
	MM2Props     []string // key=value, added to the generated properties
	StrandArgs   []string // more `strand serve` flags for the target
	KafkaVersion string
	MM2Version   string

	Partitions     int32
	RecordSize     int
	BacklogMB      int64
	VerifyBacklog  bool
	Rate           int
	LagDuration    time.Duration
	LagWarmup      time.Duration
	Transactions   int
	TxnRecords     int
	SyncInterval   time.Duration // group offsets, both mirrors
	OffsetWait     time.Duration // after the group's commit, before judging
	MetadataPeriod time.Duration // the link's metadata reads, MirrorMaker's topic and group refresh

	Out, WorkDir string
	Log          io.Writer
}

// The two mirrors, in the order they are started.
var mirrorKinds = []struct{ Name, Label string }{
	{"strand-link", "Strand cluster link"},
	{"mirrormaker2", "MirrorMaker 2"},
}

type mirrorReport struct {
	Started      time.Time      `json:"started"`
	Seconds      float64        `json:"seconds"`
	Host         map[string]any `json:"host"`
	KafkaVersion string         `json:"kafka_version,omitempty"`
	MM2Version   string         `json:"mirror_maker_version,omitempty"`
	Settings     mirrorSettings `json:"settings"`
	// Backlog is the source's produce of the backlog (information only).
	Backlog  backlogResult  `json:"backlog"`
	Mirrors  []mirrorResult `json:"mirrors"`
	Source   lagResult      `json:"source_lag"` // the baseline: a consumer on the source itself
	Failures []string       `json:"failures,omitempty"`
}

type mirrorSettings struct {
	Partitions       int32    `json:"partitions"`
	RecordSize       int      `json:"record_size"`
	BacklogRecords   int64    `json:"backlog_records"`
	Rate             int      `json:"rate"`
	LagSeconds       float64  `json:"lag_seconds"`
	LagWarmupSeconds float64  `json:"lag_warmup_seconds"`
	Transactions     int      `json:"transactions"`
	TxnRecords       int      `json:"txn_records"`
	SyncIntervalSecs float64  `json:"offset_sync_interval_seconds"`
	OffsetWaitSecs   float64  `json:"offset_wait_seconds"`
	MetadataSecs     float64  `json:"metadata_interval_seconds"`
	MM2Tasks         int      `json:"mm2_tasks"`
	MM2Properties    []string `json:"mm2_properties"`
	StrandArgs       []string `json:"strand_args,omitempty"`
	BacklogVerified  bool     `json:"backlog_verified"`
	StrandDurability string   `json:"strand_durability"`
	TargetDurability string   `json:"kafka_target_durability"`
	MirrorMakerHeap  string   `json:"mirror_maker_heap"`
}

type backlogResult struct {
	Records        int64   `json:"records"`
	PayloadBytes   int64   `json:"payload_bytes"`
	ProduceSeconds float64 `json:"produce_seconds"`
	ProduceMBPerS  float64 `json:"produce_mb_per_sec"`
}

type mirrorResult struct {
	Mirror string       `json:"mirror"`
	Label  string       `json:"label"`
	Copy   copyResult   `json:"copy"`
	Lag    lagResult    `json:"lag"`
	Offset offsetResult `json:"offsets"`
	// PeakRSSBytes: Strand's broker; MirrorMaker's JVM plus its target
	// Kafka broker's (what the mirror adds beside its target).
	PeakRSSBytes int64  `json:"peak_rss_bytes"`
	Error        string `json:"error,omitempty"`
}

// copyResult is the backlog copy: from the mirror's start (the link's
// creation; MirrorMaker's launch) to the first record on the target and to
// the whole backlog there.
type copyResult struct {
	FirstRecordSeconds float64 `json:"first_record_seconds"`
	AllSeconds         float64 `json:"all_seconds"`
	MBPerSec           float64 `json:"mb_per_sec"`      // payload, start to all
	CopyMBPerSec       float64 `json:"copy_mb_per_sec"` // payload, first record to all
	// CPU over the copy: the mirror's own processes (Strand's broker; the
	// MirrorMaker JVM and the target Kafka broker), and the source's.
	MirrorCPUSeconds float64 `json:"mirror_cpu_seconds"`
	SourceCPUSeconds float64 `json:"source_cpu_seconds"`
	Verified         bool    `json:"verified"`
}

type lagResult struct {
	Records      int64   `json:"records"` // counted, after the warm-up
	AchievedRate float64 `json:"achieved_rate"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
}

func runMirror(ctx context.Context, o mirrorOptions) (*mirrorReport, error) {
	if o.RecordSize < payloadHeader {
		return nil, fmt.Errorf("--record-size %d: at least %d bytes", o.RecordSize, payloadHeader)
	}
	if o.Partitions < 1 || o.BacklogMB < 1 || o.Rate < 1 || o.LagDuration <= o.LagWarmup || o.Transactions < 2 || o.TxnRecords < 1 {
		return nil, errors.New("sizes: --partitions, --backlog-mb and --rate at least 1, --lag-duration longer than --lag-warmup, --transactions at least 2, --txn-records at least 1")
	}
	if o.Factory.kafkaLib == "" || o.MM2Lib == "" {
		return nil, errors.New("needs --kafka-lib (the broker's jars) and --mm2-lib (MirrorMaker 2's jars): bench/run.sh mirror fetches both")
	}
	if _, err := mm2Properties("", "", mirrorTopic, mirrorGroup, o.MM2Tasks, o.SyncInterval, o.MetadataPeriod, o.MM2Props); err != nil {
		return nil, err
	}
	backlog := o.BacklogMB * 1_000_000 / int64(o.RecordSize)
	rep := &mirrorReport{Started: time.Now(), Host: hostInfo(o.Factory.java), KafkaVersion: o.KafkaVersion, MM2Version: o.MM2Version,
		Settings: mirrorSettings{Partitions: o.Partitions, RecordSize: o.RecordSize, BacklogRecords: backlog, Rate: o.Rate,
			LagSeconds: o.LagDuration.Seconds(), LagWarmupSeconds: o.LagWarmup.Seconds(), Transactions: o.Transactions,
			TxnRecords: o.TxnRecords, SyncIntervalSecs: o.SyncInterval.Seconds(), OffsetWaitSecs: o.OffsetWait.Seconds(),
			MetadataSecs: o.MetadataPeriod.Seconds(), MM2Tasks: o.MM2Tasks, StrandArgs: o.StrandArgs, BacklogVerified: o.VerifyBacklog,
			StrandDurability: "what the link appends is fsynced (strand serve's default, --fsync every-append)",
			TargetDurability: "fsync left to the OS (Kafka's default)", MirrorMakerHeap: o.MM2Heap}}
	if slices.ContainsFunc(o.StrandArgs, func(a string) bool { return strings.Contains(a, "fsync") }) {
		rep.Settings.StrandDurability = "as set by " + strings.Join(o.StrandArgs, " ")
	}
	for _, k := range mirrorKinds {
		rep.Mirrors = append(rep.Mirrors, mirrorResult{Mirror: k.Name, Label: k.Label, PeakRSSBytes: -1})
	}
	strandRes, mm2Res := &rep.Mirrors[0], &rep.Mirrors[1]
	logf := func(format string, args ...any) { fmt.Fprintf(o.Log, format+"\n", args...) }
	failf := func(res *mirrorResult, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if res != nil {
			msg = res.Label + ": " + msg
			if res.Error == "" {
				res.Error = msg
			}
		}
		logf("FAIL %s", msg)
		rep.Failures = append(rep.Failures, msg)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}

	// The brokers: source Kafka, target Kafka, target Strand.
	f := o.Factory
	source := &brokerproc.Kafka{Java: f.java, Lib: f.kafkaLib, Heap: f.kafkaHeap, Dir: filepath.Join(o.WorkDir, "source-kafka")}
	target := &brokerproc.Kafka{Java: f.java, Lib: f.kafkaLib, Heap: f.kafkaHeap, Dir: filepath.Join(o.WorkDir, "target-kafka")}
	strandDir := filepath.Join(o.WorkDir, "target-strand")
	if err := os.MkdirAll(strandDir, 0o755); err != nil {
		return nil, err
	}
	strand := &strandBroker{bin: f.strandBin, dataDir: filepath.Join(strandDir, "data"), logPath: filepath.Join(strandDir, "strand.log"),
		extra: append([]string{"--link-metadata-interval", o.MetadataPeriod.String()}, o.StrandArgs...)}
	mm := &mirrorMaker{Java: f.java, Lib: o.MM2Lib, Heap: o.MM2Heap, Dir: filepath.Join(o.WorkDir, "mirror-maker")}
	started := []interface{ Stop() error }{}
	defer func() {
		// MirrorMaker first, then the brokers side by side (a Kafka broker
		// can take its 20 s grace to stop).
		if err := mm.Stop(); err != nil {
			failf(mm2Res, "stopping: %v", err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, b := range started {
			wg.Go(func() {
				if err := b.Stop(); err != nil {
					mu.Lock()
					failf(nil, "stopping a broker: %v", err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}()
	for _, b := range []struct {
		name  string
		start func(context.Context) (time.Time, error)
		stop  interface{ Stop() error }
		addr  func() string
	}{
		{"source Kafka", source.Start, source, source.Addr},
		{"target Kafka", target.Start, target, target.Addr},
		{"target Strand", strand.Start, strand, strand.Addr},
	} {
		logf("starting the %s", b.name)
		if _, err := b.start(ctx); err != nil {
			return rep, fmt.Errorf("starting the %s: %w", b.name, err)
		}
		started = append(started, b.stop)
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := firstProduce(sctx, b.addr())
		cancel()
		if err != nil {
			return rep, fmt.Errorf("the %s: %w", b.name, err)
		}
	}
	mm.Props, _ = mm2Properties(source.Addr(), target.Addr(), mirrorTopic, mirrorGroup, o.MM2Tasks, o.SyncInterval, o.MetadataPeriod, o.MM2Props)
	for _, p := range mm.Props {
		rep.Settings.MM2Properties = append(rep.Settings.MM2Properties, p[0]+"="+p[1])
	}

	src, err := newAdmin(source.Addr())
	if err != nil {
		return rep, err
	}
	defer src.Close()
	strandAdm, err := newAdmin(strand.Addr())
	if err != nil {
		return rep, err
	}
	defer strandAdm.Close()
	kafkaAdm, err := newAdmin(target.Addr())
	if err != nil {
		return rep, err
	}
	defer kafkaAdm.Close()
	if err := createTopicRF(ctx, source.Addr(), mirrorTopic, o.Partitions, 1, nil); err != nil {
		return rep, err
	}
	// The group exists before either mirror starts, as a long-running
	// consumer's would, so that neither measure includes finding it.
	if err := commitGroup(ctx, src, mirrorGroup, mirrorTopic, zeroOffsets(o.Partitions)); err != nil {
		return rep, fmt.Errorf("creating the group at the source: %w", err)
	}

	// 1. Throughput.
	wb := benchWorkload{Name: "mirror-backlog", Records: backlog, RecordSize: o.RecordSize, Partitions: o.Partitions, Acks: "all",
		Idempotent: true, Compression: "none", Linger: 5 * time.Millisecond, BatchBytes: 1 << 20, MaxBufferedBytes: 32 << 20}
	counts := splitCounts(backlog, o.Partitions)
	logf("backlog: producing %s records of %s (%d MB) to the source", countStr(backlog), bytesStr(o.RecordSize), o.BacklogMB)
	pstart, pend, _, err := produce(ctx, source.Addr(), mirrorTopic, wb, backlog)
	if err != nil {
		return rep, fmt.Errorf("producing the backlog: %w", err)
	}
	rep.Backlog = backlogResult{Records: backlog, PayloadBytes: backlog * int64(o.RecordSize), ProduceSeconds: pend.Sub(pstart).Seconds()}
	rep.Backlog.ProduceMBPerS = float64(rep.Backlog.PayloadBytes) / 1e6 / rep.Backlog.ProduceSeconds
	logf("  %.1f s, %.0f MB/s", rep.Backlog.ProduceSeconds, rep.Backlog.ProduceMBPerS)
	want := map[int32]int64{}
	for p, n := range counts {
		want[int32(p)] = n
	}

	strandCreate := func() (time.Time, error) {
		t := time.Now()
		return t, strandCLI(ctx, f.strandBin, "link", "create", mirrorLinkName, "--admin", strand.admin,
			"--source-brokers", source.Addr(), "--topics", "^"+mirrorTopic+"$", "--groups", "^"+mirrorGroup+"$",
			"--offset-sync-interval", o.SyncInterval.String())
	}
	mirrors := []struct {
		res    *mirrorResult
		start  func() (time.Time, error)
		adm    *kadm.Client
		addr   string
		cpu    func() time.Duration
		exited func() bool
		failed bool
	}{
		{strandRes, strandCreate, strandAdm, strand.Addr(), strand.CPU, strand.proc.Exited, false},
		{mm2Res, mm.Start, kafkaAdm, target.Addr(), func() time.Duration {
			// Before its start MirrorMaker has used nothing.
			return max(mm.CPU(), 0) + target.CPU()
		}, func() bool { return mm.Exited() || target.Process().Exited() }, false},
	}
	for i := range mirrors {
		m := &mirrors[i]
		logf("%s: copying the backlog", m.res.Label)
		cctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
		cr, err := measureCopy(cctx, m.start, m.adm, want, int64(backlog)*int64(o.RecordSize), m.cpu, source.CPU, m.exited)
		cancel()
		m.res.Copy = cr
		if err != nil {
			failf(m.res, "copying the backlog: %v", err)
			m.failed = true
			continue
		}
		logf("  first record after %.1f s, all after %.1f s: %.0f MB/s from the start, %.0f MB/s from the first record; CPU %.1f s (source %.1f s)",
			cr.FirstRecordSeconds, cr.AllSeconds, cr.MBPerSec, cr.CopyMBPerSec, cr.MirrorCPUSeconds, cr.SourceCPUSeconds)
	}
	if !mirrors[0].failed {
		if err := checkLinkStatus(ctx, f.strandBin, strand.admin, want); err != nil {
			failf(strandRes, "strand link status: %v", err)
		}
	}
	if o.VerifyBacklog {
		for i := range mirrors {
			m := &mirrors[i]
			if m.failed {
				continue
			}
			logf("%s: reading the backlog back from the target", m.res.Label)
			vctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			err := verifyFrom(vctx, m.addr, wb, counts, nil)
			cancel()
			if err != nil {
				failf(m.res, "the backlog on the target: %v", err)
				m.failed = true
				continue
			}
			m.res.Copy.Verified = true
		}
	}

	// 2. Lag under a steady rate.
	if ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, o.LagDuration+5*time.Minute)
		err := measureLag(lctx, o, rep, source.Addr(), []string{strand.Addr(), target.Addr()}, []*kadm.Client{src, strandAdm, kafkaAdm}, logf)
		cancel()
		if err != nil {
			failf(nil, "lag: %v", err)
		}
	}

	// 3. Offset exactness.
	if ctx.Err() == nil {
		octx, cancel := context.WithTimeout(ctx, o.OffsetWait+5*time.Minute)
		err := measureOffsets(octx, o, rep, source.Addr(), src, []string{strand.Addr(), target.Addr()}, []*kadm.Client{strandAdm, kafkaAdm}, logf)
		cancel()
		if err != nil {
			failf(nil, "offsets: %v", err)
		}
	}
	if mm.Exited() {
		failf(mm2Res, "MirrorMaker exited before the end (log in %s)", mm.Dir)
	}
	if strand.proc.Exited() {
		failf(strandRes, "the Strand broker exited before the end (log in %s)", strand.logPath)
	}
	strandRes.PeakRSSBytes = strand.PeakRSS()
	if rss := mm.PeakRSS(); rss > 0 {
		mm2Res.PeakRSSBytes = rss + target.PeakRSS()
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, ctx.Err()
}

// newAdmin is an admin client that polls: its metadata may be refreshed
// every 10 ms (franz-go's default, 5 s, would hold a poll for a topic not
// created yet that long, and the copy's first record would be seen late).
func newAdmin(addr string) (*kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), dialer, kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

func zeroOffsets(partitions int32) map[int32]int64 {
	m := map[int32]int64{}
	for p := range partitions {
		m[p] = 0
	}
	return m
}

// commitGroup commits offsets for an empty group (as kafka-consumer-groups
// --reset-offsets does).
func commitGroup(ctx context.Context, adm *kadm.Client, group, topic string, at map[int32]int64) error {
	offs := kadm.Offsets{}
	for p, o := range at {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, group, offs)
	if err == nil {
		err = resp.Error()
	}
	return err
}

// splitCounts is how many of n round-robin records each partition gets.
func splitCounts(n int64, partitions int32) []int64 {
	counts := make([]int64, partitions)
	for i := range partitions {
		counts[i] = n / int64(partitions)
		if int64(i) < n%int64(partitions) {
			counts[i]++
		}
	}
	return counts
}

// listEnds is a topic's log end offsets; an error while the topic does not
// exist yet.
func listEnds(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	listed, err := adm.ListEndOffsets(lctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var first error
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			first = cmpOr(first, o.Err)
			return
		}
		out[o.Partition] = o.Offset
	})
	return out, first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// measureCopy starts a mirror and polls its target's log end offsets every
// 50 ms until every partition holds want. exited says whether a mirror
// process ended early (nil: it has none).
func measureCopy(ctx context.Context, start func() (time.Time, error), target *kadm.Client, want map[int32]int64, payload int64,
	mirrorCPU, sourceCPU func() time.Duration, exited func() bool) (copyResult, error) {
	var res copyResult
	m0, s0 := mirrorCPU(), sourceCPU()
	t0, err := start()
	if err != nil {
		return res, fmt.Errorf("starting: %w", err)
	}
	var first time.Time
	var last map[int32]int64
	var lastErr error
	for {
		ends, err := listEnds(ctx, target, mirrorTopic)
		now := time.Now()
		if err == nil {
			var sum int64
			done := true
			for p, n := range want {
				sum += ends[p]
				done = done && ends[p] >= n
			}
			if sum > 0 && first.IsZero() {
				first = now
			}
			if done {
				res.FirstRecordSeconds = first.Sub(t0).Seconds()
				res.AllSeconds = now.Sub(t0).Seconds()
				res.MBPerSec = float64(payload) / 1e6 / res.AllSeconds
				if d := now.Sub(first).Seconds(); d > 0 {
					res.CopyMBPerSec = float64(payload) / 1e6 / d
				}
				if m1, s1 := mirrorCPU(), sourceCPU(); m0 >= 0 && m1 >= 0 {
					res.MirrorCPUSeconds, res.SourceCPUSeconds = (m1 - m0).Seconds(), (s1 - s0).Seconds()
				}
				return res, nil
			}
			last = ends
		} else {
			lastErr = err
		}
		if exited() {
			return res, errors.New("a process of the mirror exited (see its log)")
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("%w: target at %v of %v (last error: %v)", ctx.Err(), last, want, lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// verifyFrom reads counts records per partition from start (nil: the log
// start) and checks each one's payload and order.
func verifyFrom(ctx context.Context, addr string, w benchWorkload, counts []int64, start map[int32]int64) error {
	c, err := newConsumerFrom(addr, mirrorTopic, w, counts, start)
	if err != nil {
		return err
	}
	defer c.close()
	return c.run(ctx)
}

// strandCLI runs the strand binary, as an operator would.
func strandCLI(ctx context.Context, bin string, args ...string) error {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("strand %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// linkStatus is the part of `strand link status --format json` read here.
type linkStatus struct {
	State  string `json:"state"`
	Error  string `json:"error"`
	Topics []struct {
		Topic      string `json:"topic"`
		Partitions []struct {
			Partition  int32   `json:"partition"`
			SourceEnd  int64   `json:"source_end"`
			MirrorEnd  int64   `json:"mirror_end"`
			LagRecords int64   `json:"lag_records"`
			LagSeconds float64 `json:"lag_seconds"`
		} `json:"partitions"`
	} `json:"topics"`
}

// checkLinkStatus: the link's own status says every mirror partition holds
// the source's end, with no lag.
func checkLinkStatus(ctx context.Context, bin, admin string, want map[int32]int64) error {
	out, err := exec.CommandContext(ctx, bin, "link", "status", mirrorLinkName, "--admin", admin, "--format", "json").Output()
	if err != nil {
		return err
	}
	var st linkStatus
	if err := json.Unmarshal(out, &st); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	seen := 0
	for _, t := range st.Topics {
		if t.Topic != mirrorTopic {
			continue
		}
		for _, p := range t.Partitions {
			seen++
			if p.SourceEnd != want[p.Partition] || p.MirrorEnd != want[p.Partition] || p.LagRecords != 0 || p.LagSeconds != 0 {
				return fmt.Errorf("partition %d: source end %d, mirror end %d, lag %d records, %.1f s; %d records produced",
					p.Partition, p.SourceEnd, p.MirrorEnd, p.LagRecords, p.LagSeconds, want[p.Partition])
			}
		}
	}
	if seen != len(want) {
		return fmt.Errorf("%d partitions of %s listed, want %d (state %s %s)", seen, mirrorTopic, len(want), st.State, st.Error)
	}
	return nil
}

// measureLag produces at o.Rate for o.LagDuration while a consumer on the
// source and one on each target read along.
func measureLag(ctx context.Context, o mirrorOptions, rep *mirrorReport, source string, targets []string, adms []*kadm.Client, logf func(string, ...any)) error {
	w := benchWorkload{Name: "mirror-lag", RecordSize: o.RecordSize, Partitions: o.Partitions, Acks: "all", Idempotent: true,
		Compression: "none", Linger: 0, MaxBufferedBytes: 32 << 20, Rate: o.Rate, Duration: o.LagDuration, Warmup: o.LagWarmup}
	counts := splitCounts(w.total(), o.Partitions)
	addrs := append([]string{source}, targets...)
	cons := make([]*consumer, len(addrs))
	for i, addr := range addrs {
		start, err := listEnds(ctx, adms[i], mirrorTopic)
		if err != nil {
			return err
		}
		c, err := newConsumerFrom(addr, mirrorTopic, w, counts, start)
		if err != nil {
			return err
		}
		defer c.close()
		if err := c.waitReady(ctx); err != nil {
			return err
		}
		cons[i] = c
	}
	// One warm-up cut for all three: records sent from here on count.
	warm := monoNow() + int64(w.Warmup)
	errs := make([]error, len(cons))
	var wg sync.WaitGroup
	for i, c := range cons {
		c.warmupTS = warm
		wg.Go(func() { errs[i] = c.run(ctx) })
	}
	logf("lag: %d records/s of %s for %s", o.Rate, bytesStr(o.RecordSize), o.LagDuration)
	pstart, pend, _, perr := produce(ctx, source, mirrorTopic, w, w.total())
	if perr != nil {
		// The consumers would wait for records never sent.
		return fmt.Errorf("producing: %w", perr)
	}
	wg.Wait()
	rate := float64(w.total()) / pend.Sub(pstart).Seconds()
	results := []*lagResult{&rep.Source, &rep.Mirrors[0].Lag, &rep.Mirrors[1].Lag}
	names := []string{"source (baseline)", rep.Mirrors[0].Label, rep.Mirrors[1].Label}
	var failed []string
	for i, c := range cons {
		if errs[i] != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", names[i], errs[i]))
			if i > 0 && rep.Mirrors[i-1].Error == "" {
				rep.Mirrors[i-1].Error = "lag: " + errs[i].Error()
			}
			continue
		}
		r := results[i]
		r.Records, r.AchievedRate = int64(len(c.e2e)), rate
		r.P50Ms, r.P99Ms, r.MaxMs = lagPercentiles(c.e2e)
		logf("  %s: p50 %s ms, p99 %s ms, max %s ms over %d records (%.0f records/s)", names[i], fmtMs(r.P50Ms), fmtMs(r.P99Ms), fmtMs(r.MaxMs), r.Records, rate)
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// lagPercentiles is p50, p99 and the maximum of microsecond samples, in ms.
func lagPercentiles(us []uint32) (p50, p99, maxMs float64) {
	if len(us) == 0 {
		return 0, 0, 0
	}
	p50, p99, _ = percentilesMs(us)
	return p50, p99, float64(slices.Max(us)) / 1000
}
