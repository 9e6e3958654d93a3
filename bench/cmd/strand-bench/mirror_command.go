package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// mirrorCommand is `strand-bench mirror`: Strand's cluster link beside
// MirrorMaker 2 (mirror.go).
func mirrorCommand() *cobra.Command {
	o := mirrorOptions{Log: os.Stderr}
	var (
		timeout  time.Duration
		fromJSON string
	)
	cmd := &cobra.Command{
		Use:   "mirror",
		Short: "Mirror one Kafka broker into Strand (cluster link) and into Kafka (MirrorMaker 2), side by side",
		Long: `Start a source Apache Kafka broker and two targets: a Strand broker with a
cluster link from the source, and a second Kafka broker fed by MirrorMaker 2.
Then, in one run, for both mirrors:

  1. throughput: a backlog (--backlog-mb) is written to the source, then each
     mirror in turn is started and timed until its target holds all of it;
  2. lag: a producer writes --rate records/s to the source for --lag-duration
     while a consumer on each target reads along; per record, the time its
     consumer got it minus the time it was produced (p50, p99, max);
  3. offsets: transactions that commit and abort in turn, a consumer group
     that reads part of them at the source and commits; after the sync
     interval, each target's committed offsets are judged by what a consumer
     starting there would read: exact, ahead (skips records) or behind
     (processes records again).

Writes results.md and results.json to --out and prints the Markdown; exits
non-zero if a mirror failed. Needs --kafka-lib (the broker's jars) and
--mm2-lib (MirrorMaker 2's): bench/run.sh mirror fetches both. See
bench/README.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fromJSON != "" {
				js, err := os.ReadFile(fromJSON)
				if err != nil {
					return err
				}
				var rep mirrorReport
				if err := json.Unmarshal(js, &rep); err != nil {
					return fmt.Errorf("%s: %w", fromJSON, err)
				}
				fmt.Fprint(cmd.OutOrStdout(), markdownMirror(&rep))
				return nil
			}
			if o.Factory.strandBin == "" {
				bin, err := strandNextToThis()
				if err != nil {
					return err
				}
				o.Factory.strandBin = bin
			}
			for _, p := range []*string{&o.Factory.kafkaLib, &o.MM2Lib} {
				if *p != "" {
					abs, err := filepath.Abs(*p)
					if err != nil {
						return err
					}
					*p = abs
				}
			}
			if o.Out == "" {
				o.Out = filepath.Join("bench", "results", time.Now().Format("20060102-150405")+"-mirror")
			}
			cleanWork := false
			if o.WorkDir == "" {
				dir, err := os.MkdirTemp("", "strand-bench-mirror-")
				if err != nil {
					return err
				}
				o.WorkDir, cleanWork = dir, true
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			rep, err := runMirror(ctx, o)
			if rep != nil {
				rep.Seconds = time.Since(rep.Started).Seconds() // the brokers' stops too
				if err != nil {
					rep.Failures = append(rep.Failures, err.Error())
				}
				js, jerr := json.MarshalIndent(rep, "", "  ")
				if jerr != nil {
					return jerr
				}
				md := markdownMirror(rep)
				if werr := os.WriteFile(filepath.Join(o.Out, "results.json"), append(js, '\n'), 0o644); werr != nil {
					return werr
				}
				if werr := os.WriteFile(filepath.Join(o.Out, "results.md"), []byte(md), 0o644); werr != nil {
					return werr
				}
				fmt.Fprint(cmd.OutOrStdout(), md)
				fmt.Fprintf(os.Stderr, "wrote %s and %s\n", filepath.Join(o.Out, "results.md"), filepath.Join(o.Out, "results.json"))
			}
			if cleanWork && err == nil && rep != nil && len(rep.Failures) == 0 {
				os.RemoveAll(o.WorkDir)
			} else if rep != nil {
				fmt.Fprintf(os.Stderr, "kept %s (brokers' and MirrorMaker's logs) for inspection\n", o.WorkDir)
			}
			if err != nil {
				return err
			}
			if len(rep.Failures) > 0 {
				return fmt.Errorf("%w: %d failure(s), first: %s", errBenchFailed, len(rep.Failures), rep.Failures[0])
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.BacklogMB, "backlog-mb", 1000, "the backlog written before the mirrors start, in MB (10^6 bytes) of payload")
	f.BoolVar(&o.VerifyBacklog, "verify-backlog", true, "read the whole backlog back from both targets and check every record")
	f.IntVar(&o.RecordSize, "record-size", 1024, "bytes in each record's value (at least 16)")
	f.Int32Var(&o.Partitions, "partitions", 6, "partitions of the mirrored topic")
	f.IntVar(&o.Rate, "rate", 20_000, "records/s produced while the lag is measured")
	f.DurationVar(&o.LagDuration, "lag-duration", 20*time.Second, "how long to produce at --rate")
	f.DurationVar(&o.LagWarmup, "lag-warmup", 2*time.Second, "leading part of --lag-duration left out of the lag figures")
	f.IntVar(&o.Transactions, "transactions", 30, "transactions written before the group commits (every third aborted)")
	f.IntVar(&o.TxnRecords, "txn-records", 60, "records in each transaction, round-robin over the partitions")
	f.DurationVar(&o.SyncInterval, "offset-sync-interval", time.Second, "how often each mirror copies the group's offsets (MirrorMaker: whole seconds)")
	f.DurationVar(&o.OffsetWait, "offset-wait", 10*time.Second, "after the group's commit at the source, how long to watch the targets' offsets before judging them")
	f.DurationVar(&o.MetadataPeriod, "metadata-interval", time.Second, "how often the link reads the source's metadata (--link-metadata-interval) and MirrorMaker refreshes topics and groups")
	f.IntVar(&o.MM2Tasks, "mm2-tasks", 1, "MirrorMaker 2's tasks.max")
	f.StringArrayVar(&o.MM2Props, "mm2-property", nil, "key=value for MirrorMaker 2's properties, added or overriding (repeatable)")
	f.StringArrayVar(&o.StrandArgs, "strand-arg", nil, "one more flag for the target's strand serve, e.g. --strand-arg=--fsync=never (repeatable)")
	f.StringVar(&o.Factory.strandBin, "strand-bin", "", "strand binary (default: strand in this program's directory)")
	f.StringVar(&o.Factory.kafkaLib, "kafka-lib", "", "directory of Apache Kafka's broker jars")
	f.StringVar(&o.MM2Lib, "mm2-lib", "", "directory of MirrorMaker 2's jars (connect-mirror and its dependencies)")
	f.StringVar(&o.KafkaVersion, "kafka-version", "", "Kafka version of the brokers, for the report")
	f.StringVar(&o.MM2Version, "mm2-version", "", "MirrorMaker 2's version, for the report")
	f.StringVar(&o.Factory.java, "java", "java", "java executable for Kafka and MirrorMaker")
	f.StringVar(&o.Factory.kafkaHeap, "kafka-heap", "1g", "each Kafka broker's -Xms and -Xmx")
	f.StringVar(&o.MM2Heap, "mm2-heap", "2G", "MirrorMaker's -Xmx (connect-mirror-maker.sh's default)")
	f.StringVar(&o.Out, "out", "", "directory for results.md and results.json (default bench/results/<time>-mirror)")
	f.StringVar(&o.WorkDir, "work-dir", "", "where the brokers and MirrorMaker keep their data and logs (default: a new temporary directory)")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long")
	f.StringVar(&fromJSON, "from-json", "", "print the Markdown report of an earlier run's results.json and exit")
	return cmd
}

// markdownMirror renders a mirror run: one table with a column per mirror
// and the ratio Strand ÷ MirrorMaker 2.
func markdownMirror(rep *mirrorReport) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	s := rep.Settings
	p("## Strand cluster link vs MirrorMaker 2, one run\n\n")
	p("%s · %v CPUs (%v) · %v · %v", rep.Started.Format("2006-01-02 15:04 MST"), rep.Host["cpus"], rep.Host["cpu"], rep.Host["memory"], rep.Host["go"])
	if rep.KafkaVersion != "" {
		p(" · Kafka %s brokers on %v", rep.KafkaVersion, rep.Host["java"])
	}
	if rep.MM2Version != "" {
		p(" · MirrorMaker 2 from Kafka %s", rep.MM2Version)
	}
	p(" · load average at start %v · %s in all\n\n", rep.Host["load_at_start"], (time.Duration(rep.Seconds) * time.Second).String())
	p("The source is one Apache Kafka broker. One target is a Strand broker with a cluster link from it (`strand link create`); ")
	p("the other is an Apache Kafka broker fed by MirrorMaker 2 (dedicated mode, `tasks.max=%d`, IdentityReplicationPolicy). ", s.MM2Tasks)
	p("One topic of %d partitions, records of %s, no compression. Strand: %s. Kafka target: %s. ", s.Partitions, bytesStr(s.RecordSize), s.StrandDurability, s.TargetDurability)
	p("All on the same machine, in one run: compare the ratio, not the absolute figures. Ratio: Strand's figure over MirrorMaker's; above 1 is better for rates, below 1 for times, lags and CPU.\n\n")

	m := func(i int) *mirrorResult {
		if i < len(rep.Mirrors) {
			return &rep.Mirrors[i]
		}
		return &mirrorResult{}
	}
	sl, mm := m(0), m(1)
	p("| measure | %s | %s | Strand ÷ MM2 |\n|---|---|---|---|\n", sl.Label, mm.Label)
	row := func(name string, a, z float64, format func(float64) string) {
		cellOf := func(v float64) string {
			if v <= 0 || math.IsNaN(v) {
				return "—"
			}
			return format(v)
		}
		r := "—"
		if a > 0 && z > 0 {
			r = fmt.Sprintf("%.2f×", a/z)
		}
		p("| %s | %s | %s | %s |\n", name, cellOf(a), cellOf(z), r)
	}
	text := func(name, a, z string) { p("| %s | %s | %s | |\n", name, a, z) }
	secs := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	perGB := func(cpu float64) float64 {
		if rep.Backlog.PayloadBytes == 0 {
			return 0
		}
		return cpu / (float64(rep.Backlog.PayloadBytes) / 1e9)
	}
	p("| **(1) backlog** of %s MB (%s records), written before the mirror starts | | | |\n",
		fmtMB(float64(rep.Backlog.PayloadBytes)/1e6), countStr(rep.Backlog.Records))
	row("mirror start to the whole backlog on the target, s", sl.Copy.AllSeconds, mm.Copy.AllSeconds, secs)
	row("MB/s, from the mirror's start", sl.Copy.MBPerSec, mm.Copy.MBPerSec, fmtMB)
	row("MB/s, from the first record on the target", sl.Copy.CopyMBPerSec, mm.Copy.CopyMBPerSec, fmtMB)
	row("mirror start to the first record on the target, s", sl.Copy.FirstRecordSeconds, mm.Copy.FirstRecordSeconds, secs)
	row("CPU of the mirror, s per GB (Strand's broker; MirrorMaker's JVM and its target broker)", perGB(sl.Copy.MirrorCPUSeconds), perGB(mm.Copy.MirrorCPUSeconds), fmtMs)
	row("CPU of the source broker meanwhile, s per GB", perGB(sl.Copy.SourceCPUSeconds), perGB(mm.Copy.SourceCPUSeconds), fmtMs)
	verified := func(r *mirrorResult) string {
		switch {
		case r.Copy.Verified:
			return "yes"
		case s.BacklogVerified:
			return "**no**"
		}
		return "not read back"
	}
	text("every record read back from the target, in order, bytes checked", verified(sl), verified(mm))
	p("| **(2) lag** at %s records/s × %s for %.0f s (first %.0f s not counted), both mirrors running | | | |\n",
		fmtRate(float64(s.Rate)), bytesStr(s.RecordSize), s.LagSeconds, s.LagWarmupSeconds)
	row("lag p50, ms", sl.Lag.P50Ms, mm.Lag.P50Ms, fmtMs)
	row("lag p99, ms", sl.Lag.P99Ms, mm.Lag.P99Ms, fmtMs)
	row("lag max, ms", sl.Lag.MaxMs, mm.Lag.MaxMs, fmtMs)
	p("| **(3) offsets**: %d transactions of %d records, every third aborted; the group commits part-way at the source | | | |\n", s.Transactions, s.TxnRecords)
	of := func(n, total int) string { return fmt.Sprintf("%d of %d", n, total) }
	text("partitions exact", of(sl.Offset.Exact, sl.Offset.Partitions), of(mm.Offset.Exact, mm.Offset.Partitions))
	abm := func(r offsetResult) string {
		return fmt.Sprintf("%d / %d / %d / %d", r.Ahead, r.Behind, r.Mixed, r.Missing)
	}
	text("partitions ahead (would skip) / behind (would process again) / both / no offset", abm(sl.Offset), abm(mm.Offset))
	sd := func(r offsetResult) string { return fmt.Sprintf("%d / %d", r.Skipped, r.Duplicated) }
	text("records a consumer starting there would skip / process again", sd(sl.Offset), sd(mm.Offset))
	text("partitions whose offset is the source's number", of(sl.Offset.Identical, sl.Offset.Partitions), of(mm.Offset.Identical, mm.Offset.Partitions))
	text("records of aborted transactions a read_committed consumer reads on the target", fmt.Sprint(sl.Offset.AbortedReadable), fmt.Sprint(mm.Offset.AbortedReadable))
	settled := func(r offsetResult) string {
		if r.SettledSeconds < 0 {
			return "never changed"
		}
		return secs(r.SettledSeconds)
	}
	text(fmt.Sprintf("offsets last changed after the group's commit, s (watched for %.0f s; sync interval %.0f s)", s.OffsetWaitSecs, s.SyncIntervalSecs), settled(sl.Offset), settled(mm.Offset))
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	row("peak RSS, MiB (Strand's broker; MirrorMaker's JVM and its target broker)", mib(sl.PeakRSSBytes), mib(mm.PeakRSSBytes), func(v float64) string { return fmt.Sprintf("%.0f", v) })
	p("\n")

	p("Backlog: produced to the source at %.0f MB/s. Lag baseline, a consumer on the source itself: p50 %s ms, p99 %s ms, max %s ms (%.0f records/s achieved).\n\n",
		rep.Backlog.ProduceMBPerS, fmtMs(rep.Source.P50Ms), fmtMs(rep.Source.P99Ms), fmtMs(rep.Source.MaxMs), rep.Source.AchievedRate)
	p("How each figure is taken: (1) each mirror in turn, the other not yet started, from the link's creation or MirrorMaker's launch, polling the target's log end offsets every 50 ms; ")
	p("(2) per record, the time a consumer on the target (read_uncommitted) got it minus the time just before its produce call, one clock; ")
	p("(3) the group's committed offset on each target, read %.0f s after the commit at the source, judged by what a read_committed consumer starting there would read against what the group would read next at the source, records known by their payload.\n\n", s.OffsetWaitSecs)

	if len(sl.Offset.PerPartition) > 0 || len(mm.Offset.PerPartition) > 0 {
		p("Offsets per partition (source's committed offset; each target's, and its verdict):\n\n")
		p("| partition | source | %s | %s |\n|---|---|---|---|\n", sl.Label, mm.Label)
		n := max(len(sl.Offset.PerPartition), len(mm.Offset.PerPartition))
		one := func(r offsetResult, i int) string {
			if i >= len(r.PerPartition) {
				return "—"
			}
			po := r.PerPartition[i]
			if po.Target < 0 {
				return "none"
			}
			v := fmt.Sprintf("%d, %s", po.Target, po.Verdict)
			if po.Skipped > 0 {
				v += fmt.Sprintf(", %d skipped", po.Skipped)
			}
			if po.Duplicated > 0 {
				v += fmt.Sprintf(", %d again", po.Duplicated)
			}
			return v
		}
		for i := range n {
			var part, src int64
			for _, r := range []offsetResult{sl.Offset, mm.Offset} {
				if i < len(r.PerPartition) {
					part, src = int64(r.PerPartition[i].Partition), r.PerPartition[i].Source
				}
			}
			p("| %d | %d | %s | %s |\n", part, src, one(sl.Offset, i), one(mm.Offset, i))
		}
		p("\n")
	}
	p("MirrorMaker 2's properties: `%s`.\n\n", strings.Join(s.MM2Properties, "`, `"))
	if len(rep.Failures) > 0 {
		p("### Failures\n\n")
		for _, f := range rep.Failures {
			p("- %s\n", strings.ReplaceAll(f, "\n", " "))
		}
		p("\n")
	}
	return b.String()
}
