package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// runCommand is `strand-bench run`: one workload against a running
// broker, any Kafka-protocol broker.
func runCommand() *cobra.Command {
	w := benchWorkload{Name: "custom"}
	var (
		brokers      string
		topic        string
		topicConfigs []string
		idempotent   string
		asJSON       bool
		timeout      time.Duration
		cpuProfile   string
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Measure a running Kafka-protocol broker with one workload",
		Long: `Produce records to a broker with franz-go, then consume them all back from
the assigned partitions and verify that every record arrived once, in order
per partition, with the payload that was sent; exit non-zero otherwise.
Reports records/s, MB/s and produce latency (p50/p99/p99.9). With --rate, a
consumer reads along while records are produced at that rate, and the
end-to-end latency (produce call to consumer poll) is reported as well.
With --txn-records, one transactional producer runs back-to-back
transactions of that many records for --duration and reports committed
transactions/s and the latency of the commit and of a whole transaction;
the records are read back with read_committed.

The broker is any Kafka-protocol broker (Strand or Apache Kafka). To run the
whole side-by-side comparison, see "strand-bench suite" and bench/README.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if brokers == "" {
				return fmt.Errorf("--brokers is required")
			}
			switch idempotent {
			case "auto":
				w.Idempotent = w.Acks == "all" && w.MaxInflight == 0
			case "true":
				w.Idempotent = true
			case "false":
			default:
				return fmt.Errorf("--idempotent %q: want auto, true or false", idempotent)
			}
			w.TopicConfigs = map[string]string{}
			for _, kv := range topicConfigs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--topic-config %q: want key=value", kv)
				}
				w.TopicConfigs[k] = v
			}
			if topic == "" {
				topic = fmt.Sprintf("bench-%d", time.Now().UnixNano())
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			if cpuProfile != "" {
				// The client's own profile: what producing and verifying cost.
				pf, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			res, err := runWorkload(ctx, brokers, topic, w, nil)
			res.Broker = brokers
			if asJSON {
				js, _ := json.MarshalIndent(res, "", "  ")
				fmt.Fprintln(cmd.OutOrStdout(), string(js))
			} else if err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), w.describe())
				fmt.Fprintln(cmd.OutOrStdout(), summarize(w, res))
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&brokers, "brokers", "", "host:port of the broker to measure")
	f.StringVar(&topic, "topic", "", "topic to create and use (default: a new bench-<time> topic)")
	f.Int64Var(&w.Records, "records", 100_000, "records to produce")
	f.IntVar(&w.RecordSize, "record-size", 100, "bytes in each record's value (at least 16)")
	f.Int32Var(&w.Partitions, "partitions", 6, "partitions of the topic; records go round-robin")
	f.StringVar(&w.Acks, "acks", "all", "all, 1 or 0")
	f.DurationVar(&w.Linger, "linger", 5*time.Millisecond, "producer linger")
	f.Int32Var(&w.BatchBytes, "batch-bytes", 1<<20, "largest record batch, before compression")
	f.StringVar(&w.Compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	f.IntVar(&w.MaxInflight, "max-inflight", 0, "produce requests in flight per broker (needs a non-idempotent producer; 0: client default)")
	f.StringVar(&idempotent, "idempotent", "auto", "idempotent producer: auto (with acks=all and no --max-inflight), true or false")
	f.IntVar(&w.MaxBufferedRecords, "max-buffered-records", 0, "records the producer may hold unacknowledged (1: one at a time; 0: client default)")
	f.IntVar(&w.MaxBufferedBytes, "max-buffered-bytes", 32<<20, "bytes the producer may hold unacknowledged")
	f.IntVar(&w.Rate, "rate", 0, "end-to-end mode: produce this many records/s while consuming (replaces --records)")
	f.IntVar(&w.TxnRecords, "txn-records", 0, "transaction mode: back-to-back transactions of this many records each, for --duration (replaces --records)")
	f.DurationVar(&w.Duration, "duration", 10*time.Second, "end-to-end and transaction modes: how long to produce")
	f.DurationVar(&w.Warmup, "warmup", time.Second, "end-to-end and transaction modes: leading time left out of the figures")
	f.StringArrayVar(&topicConfigs, "topic-config", nil, "key=value config for the topic (repeatable), e.g. flush.messages=1")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the client (this process) to this file")
	return cmd
}

// suiteCommand is `strand-bench suite`: every workload against Strand,
// Apache Kafka and kfake, started here in turn (bench/run.sh fetches Kafka
// and runs it).
func suiteCommand() *cobra.Command {
	o := suiteOptions{Log: os.Stderr}
	var (
		brokers, workloads string
		machineTime        time.Duration
		warmGiB            int64
		timeout            time.Duration
		fromJSON           string
	)
	cmd := &cobra.Command{
		Use:   "suite",
		Short: "Run every workload against Strand, Apache Kafka and kfake, side by side",
		Long: `Start each broker in turn on a free loopback port with a fresh data
directory, measure its start-up (process start to first acknowledged
produce), run workloads (a)-(g) against it, record its peak RSS and stop it;
repeat for the given rounds, rotating which broker goes first, and measure
the machine's own limits (loopback TCP, write+fsync) before and after.
Writes results.md and results.json to --out and prints the Markdown; exits
non-zero if any record was lost, duplicated, reordered or corrupted, or any
broker failed.

Kafka needs --kafka-lib, a directory holding the broker's jars; bench/run.sh
fetches them from Maven Central and calls this command (see bench/README.md).

Modes: full (the sizes of the issue; about 25 minutes with Kafka), quick (a
fifth of the records, 2 rounds), smoke (seconds, Strand only, for CI).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fromJSON != "" {
				// Render an earlier run's results.json again.
				js, err := os.ReadFile(fromJSON)
				if err != nil {
					return err
				}
				var rep suiteReport
				if err := json.Unmarshal(js, &rep); err != nil {
					return fmt.Errorf("%s: %w", fromJSON, err)
				}
				fmt.Fprint(cmd.OutOrStdout(), markdownReport(&rep))
				return nil
			}
			fl := cmd.Flags()
			if !fl.Changed("rounds") {
				o.Rounds = map[string]int{"full": 3, "quick": 2, "smoke": 1}[o.Mode]
			}
			if !fl.Changed("brokers") && o.Mode == "smoke" {
				brokers = "strand"
			}
			if !fl.Changed("machine-time") {
				machineTime = map[string]time.Duration{"full": 3 * time.Second, "quick": 2 * time.Second, "smoke": 100 * time.Millisecond}[o.Mode]
			}
			if o.Rounds < 1 {
				return fmt.Errorf("--rounds %d: at least 1", o.Rounds)
			}
			o.MachineTime = machineTime
			if !fl.Changed("warm-memory") && o.Mode == "smoke" {
				warmGiB = 0
			}
			o.WarmMemory = warmGiB << 30
			o.Brokers = splitList(brokers)
			o.Workloads = splitList(workloads)
			if o.Factory.strandBin == "" {
				bin, err := strandNextToThis()
				if err != nil {
					return err
				}
				o.Factory.strandBin = bin
			}
			if o.Factory.kafkaLib != "" {
				abs, err := filepath.Abs(o.Factory.kafkaLib)
				if err != nil {
					return err
				}
				o.Factory.kafkaLib = abs
			}
			if o.Out == "" {
				o.Out = filepath.Join("bench", "results", time.Now().Format("20060102-150405")+"-"+o.Mode)
			}
			cleanWork := false
			if o.WorkDir == "" {
				dir, err := os.MkdirTemp("", "strand-bench-")
				if err != nil {
					return err
				}
				o.WorkDir, cleanWork = dir, true
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			rep, err := runSuite(ctx, o)
			if rep != nil {
				if rep.Seconds == 0 {
					rep.Seconds = time.Since(rep.Started).Seconds()
				}
				md, werr := writeReport(rep, o.Out)
				if werr != nil {
					return werr
				}
				fmt.Fprint(cmd.OutOrStdout(), md)
				fmt.Fprintf(os.Stderr, "wrote %s and %s\n", filepath.Join(o.Out, "results.md"), filepath.Join(o.Out, "results.json"))
			}
			if cleanWork && (rep == nil || len(rep.Failures) == 0) {
				os.RemoveAll(o.WorkDir)
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
	f.StringVar(&o.Mode, "mode", "full", "full, quick or smoke")
	f.IntVar(&o.Rounds, "rounds", 3, "rounds (default: full 3, quick 2, smoke 1)")
	f.StringVar(&brokers, "brokers", "strand,strand-nofsync,kafka,kafka-flush,kfake", "broker kinds to compare (smoke default: strand)")
	f.StringVar(&workloads, "workloads", "", "workloads to run, e.g. a,c (default: all of a,b,c,d,e,f,g; f is f-10 and f-1000)")
	f.StringVar(&o.Out, "out", "", "directory for results.md, results.json and profiles (default bench/results/<time>-<mode>)")
	f.StringVar(&o.WorkDir, "work-dir", "", "where the brokers keep their data, on the disk under test (default: a new temporary directory)")
	f.StringVar(&o.Factory.strandBin, "strand-bin", "", "strand binary to benchmark (default: strand in this program's directory)")
	f.StringVar(&o.Factory.kafkaLib, "kafka-lib", "", "directory of Apache Kafka's broker jars")
	f.StringVar(&o.KafkaVersion, "kafka-version", "", "Kafka version, for the report")
	f.StringVar(&o.Factory.java, "java", "java", "java executable for Kafka")
	f.StringVar(&o.Factory.kafkaHeap, "kafka-heap", "1g", "Kafka's -Xms and -Xmx (kafka-server-start.sh's default)")
	f.IntVar(&o.Cluster, "cluster", 0, "run each broker kind as a cluster of this many brokers (3: replication factor 3, min.insync.replicas 2), and time a leader's kill -9")
	f.BoolVar(&o.Profile, "cpuprofile", false, "write CPU profiles of the first round's Strand brokers to --out")
	f.DurationVar(&machineTime, "machine-time", 3*time.Second, "time for each machine-limit measurement")
	f.Int64Var(&warmGiB, "warm-memory", 8, "GiB of free memory (at most half) to touch before the first broker, so none pays for the first use of a virtual machine's memory (smoke: 0)")
	f.DurationVar(&timeout, "timeout", 2*time.Hour, "give up after this long")
	f.StringVar(&fromJSON, "from-json", "", "print the Markdown report of an earlier run's results.json and exit")
	return cmd
}

// strandNextToThis is the strand binary beside this program, where
// bench/run.sh builds both.
func strandNextToThis() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(filepath.Dir(exe), "strand")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no strand binary beside %s: give --strand-bin", exe)
	}
	return bin, nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
