package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// stat summarizes one metric over the rounds.
type stat struct {
	Med, Min, Max float64
	N             int
}

func statOf(xs []float64) stat {
	if len(xs) == 0 {
		return stat{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{Med: m, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

type metric struct {
	Name   string
	Get    func(benchResult) float64
	Format func(float64) string
	// Lower is better (latencies): the ratio reads "Strand takes x× as long".
	Lower bool
	// NoRatio: the ratio would mean nothing (the client's CPU).
	NoRatio bool
}

func fmtRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtMB(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtMs(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func metricsFor(w benchWorkload) []metric {
	lat := func(name string, get func(benchResult) float64) metric {
		return metric{Name: name, Get: get, Format: fmtMs, Lower: true}
	}
	brokerCPU := metric{Name: "broker CPU per 1M records, s", Format: fmtMs, Lower: true, Get: func(r benchResult) float64 {
		if r.BrokerCPUSeconds <= 0 {
			return math.NaN()
		}
		return r.BrokerCPUSeconds / float64(r.Records) * 1e6
	}}
	clientCPU := metric{Name: "client CPU while producing, cores", Format: fmtCores, NoRatio: true, Get: func(r benchResult) float64 {
		return r.ClientCPUSeconds / r.ProduceSeconds
	}}
	switch {
	case w.ShareConsumers > 0:
		return []metric{
			{Name: "share consume records/s (backlog)", Get: func(r benchResult) float64 { return r.ConsumeRecordsPerSec }, Format: fmtRate},
			{Name: "share consume MB/s (payload)", Get: func(r benchResult) float64 { return r.ConsumeMBPerSec }, Format: fmtMB},
			{Name: "achieved records/s (fixed rate)", Get: func(r benchResult) float64 { return r.AchievedRate }, Format: fmtRate},
			lat("end-to-end p50 ms", func(r benchResult) float64 { return r.E2EP50Ms }),
			lat("end-to-end p99 ms", func(r benchResult) float64 { return r.E2EP99Ms }),
			lat("end-to-end max ms", func(r benchResult) float64 { return r.E2EMaxMs }),
			{Name: "records received more than once", Format: fmtCount, NoRatio: true, Get: func(r benchResult) float64 { return float64(r.Redelivered) }},
			{Name: "broker CPU per 1M records consumed, s", Format: fmtMs, Lower: true, Get: func(r benchResult) float64 {
				if r.ConsumeBrokerCPUSeconds <= 0 || w.Records <= 0 {
					return math.NaN()
				}
				return r.ConsumeBrokerCPUSeconds / float64(w.Records) * 1e6
			}},
		}
	case w.TxnRecords > 0:
		return []metric{
			{Name: "committed transactions/s", Get: func(r benchResult) float64 { return r.TxnPerSec }, Format: fmtRate},
			{Name: "committed records/s", Get: func(r benchResult) float64 { return r.ProduceRecordsPerSec }, Format: fmtRate},
			lat("commit (EndTransaction) p50 ms", func(r benchResult) float64 { return r.CommitP50Ms }),
			lat("commit (EndTransaction) p99 ms", func(r benchResult) float64 { return r.CommitP99Ms }),
			lat("whole transaction p50 ms", func(r benchResult) float64 { return r.TxnP50Ms }),
			lat("whole transaction p99 ms", func(r benchResult) float64 { return r.TxnP99Ms }),
			{Name: "consume records/s (read_committed)", Get: func(r benchResult) float64 { return r.ConsumeRecordsPerSec }, Format: fmtRate},
			{Name: "broker CPU per transaction, ms", Format: fmtMs, Lower: true, Get: func(r benchResult) float64 {
				if r.BrokerCPUSeconds <= 0 || r.Transactions == 0 {
					return math.NaN()
				}
				return r.BrokerCPUSeconds / float64(r.Transactions) * 1e3
			}},
			clientCPU,
		}
	case w.Rate > 0:
		return []metric{
			{Name: "achieved records/s", Get: func(r benchResult) float64 { return r.AchievedRate }, Format: fmtRate},
			lat("end-to-end p50 ms", func(r benchResult) float64 { return r.E2EP50Ms }),
			lat("end-to-end p99 ms", func(r benchResult) float64 { return r.E2EP99Ms }),
			lat("end-to-end p99.9 ms", func(r benchResult) float64 { return r.E2EP999Ms }),
			{Name: "broker CPU, cores", Format: fmtCores, Lower: true, Get: func(r benchResult) float64 {
				if r.BrokerCPUSeconds <= 0 {
					return math.NaN()
				}
				return r.BrokerCPUSeconds / r.ProduceSeconds
			}},
		}
	case w.MaxBufferedRecords == 1:
		return []metric{
			{Name: "produce records/s", Get: func(r benchResult) float64 { return r.ProduceRecordsPerSec }, Format: fmtRate},
			lat("produce p50 ms", func(r benchResult) float64 { return r.ProduceP50Ms }),
			lat("produce p99 ms", func(r benchResult) float64 { return r.ProduceP99Ms }),
			lat("produce p99.9 ms", func(r benchResult) float64 { return r.ProduceP999Ms }),
			brokerCPU,
		}
	}
	return []metric{
		{Name: "produce records/s", Get: func(r benchResult) float64 { return r.ProduceRecordsPerSec }, Format: fmtRate},
		{Name: "produce MB/s (payload)", Get: func(r benchResult) float64 { return r.ProduceMBPerSec }, Format: fmtMB},
		{Name: "produce MB/s (batches on the wire)", Get: func(r benchResult) float64 { return r.ProduceWireMBPerSec }, Format: fmtMB},
		lat("produce p50 ms", func(r benchResult) float64 { return r.ProduceP50Ms }),
		lat("produce p99 ms", func(r benchResult) float64 { return r.ProduceP99Ms }),
		lat("produce p99.9 ms", func(r benchResult) float64 { return r.ProduceP999Ms }),
		{Name: "consume records/s", Get: func(r benchResult) float64 { return r.ConsumeRecordsPerSec }, Format: fmtRate},
		{Name: "consume MB/s (payload)", Get: func(r benchResult) float64 { return r.ConsumeMBPerSec }, Format: fmtMB},
		brokerCPU,
		clientCPU,
		{Name: "broker CPU per consumed GB (batches), s", Format: fmtMs, Lower: true, Get: func(r benchResult) float64 {
			if r.ConsumeBrokerCPUSeconds <= 0 || r.WireBytes <= 0 {
				return math.NaN()
			}
			return r.ConsumeBrokerCPUSeconds / float64(r.WireBytes) * 1e9
		}},
		{Name: "client CPU while consuming, cores", Format: fmtCores, NoRatio: true, Get: func(r benchResult) float64 {
			if r.ConsumeSeconds <= 0 {
				return math.NaN()
			}
			return r.ConsumeClientCPUSeconds / r.ConsumeSeconds
		}},
	}
}

func fmtCores(v float64) string { return fmt.Sprintf("%.2f", v) }

func fmtCount(v float64) string { return fmt.Sprintf("%.0f", v) }

// column is a broker column, or a ratio between two broker columns.
type column struct {
	Head       string
	Broker     string // a broker column
	Num, Denom string // a ratio column: Num's median ÷ Denom's
}

func reportColumns(rep *suiteReport) []column {
	have := map[string]bool{}
	for _, b := range rep.Brokers {
		have[b.Name] = true
	}
	var cols []column
	add := func(name string) {
		if have[name] {
			cols = append(cols, column{Head: brokerKinds[name].Label, Broker: name})
		}
	}
	add("strand")
	add("kafka-flush")
	if have["strand"] && have["kafka-flush"] {
		cols = append(cols, column{Head: "ratio, both fsync", Num: "strand", Denom: "kafka-flush"})
	}
	add("strand-nofsync")
	add("kafka")
	if have["strand-nofsync"] && have["kafka"] {
		cols = append(cols, column{Head: "ratio, both OS", Num: "strand-nofsync", Denom: "kafka"})
	}
	add("strand-tls")
	if have["strand"] && have["strand-tls"] {
		cols = append(cols, column{Head: "ratio, TLS to plain", Num: "strand-tls", Denom: "strand"})
	}
	add("kfake")
	return cols
}

func (rep *suiteReport) samples(workload, broker string, get func(benchResult) float64) stat {
	var xs []float64
	for _, r := range rep.Results {
		if r.Workload == workload && r.Broker == broker && r.Error == "" {
			if v := get(r); !math.IsNaN(v) {
				xs = append(xs, v)
			}
		}
	}
	return statOf(xs)
}

func (rep *suiteReport) runStat(broker string, get func(brokerRun) float64) stat {
	var xs []float64
	for _, r := range rep.BrokerRuns {
		if r.Broker == broker && r.Error == "" {
			if v := get(r); v >= 0 {
				xs = append(xs, v)
			}
		}
	}
	return statOf(xs)
}

func cell(s stat, format func(float64) string) string {
	switch {
	case s.N == 0:
		return "—"
	case s.N == 1 || s.Min == s.Max:
		return format(s.Med)
	}
	return fmt.Sprintf("%s (%s–%s)", format(s.Med), format(s.Min), format(s.Max))
}

func ratio(num, denom stat) (float64, string) {
	if num.N == 0 || denom.N == 0 || denom.Med == 0 {
		return math.NaN(), "—"
	}
	r := num.Med / denom.Med
	return r, fmt.Sprintf("%.2f×", r)
}

func markdownReport(rep *suiteReport) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	cols := reportColumns(rep)

	if rep.Cluster > 1 {
		p("## Strand vs Apache Kafka, clusters of %d brokers: %s mode, %d round(s)\n\n", rep.Cluster, rep.Mode, rep.Rounds)
	} else {
		p("## Strand vs Apache Kafka: %s mode, %d round(s)\n\n", rep.Mode, rep.Rounds)
	}
	p("%s · %v CPUs (%v) · %v · %v", rep.Started.Format("2006-01-02 15:04 MST"), rep.Host["cpus"], rep.Host["cpu"], rep.Host["memory"], rep.Host["go"])
	if rep.KafkaVersion != "" {
		p(" · Kafka %s on %v", rep.KafkaVersion, rep.Host["java"])
	}
	p(" · load average at start %v · %s in all\n\n", rep.Host["load_at_start"], (time.Duration(rep.Seconds) * time.Second).String())
	p("Each cell: median (min–max) over the rounds; brokers alternate within each round and start fresh each round. ")
	p("Ratios are Strand's median over Kafka's at equal durability: above 1 is better for rates, below 1 is better for latencies.\n\n")
	if rep.Cluster > 1 {
		p("Every topic has a replica on each of the %d brokers and min.insync.replicas 2; Kafka runs in KRaft combined mode (each broker a controller too), Strand with every broker a voter of its metadata quorum. CPU and RSS are the cluster's sums. ", rep.Cluster)
		p("Failover: an idempotent acks=all producer writes a record every 2 ms to one partition, led by a broker that is not the active controller; that leader is killed with SIGKILL; the time is from the kill to the first acknowledgement of a record sent after it, with both brokers' default session timeouts (9 s) and the same client. Every acknowledged record is then read back.\n\n")
	}
	p("Durability of each column:\n")
	for _, k := range rep.Brokers {
		p("- **%s**: %s\n", k.Label, k.Durability)
	}
	p("\n")

	p("### Workloads\n\n")
	head := "| workload | metric |"
	sep := "|---|---|"
	for _, c := range cols {
		head += " " + c.Head + " |"
		sep += "---|"
	}
	p("%s\n%s\n", head, sep)
	for _, w := range rep.Workloads {
		for i, m := range metricsFor(w) {
			label := ""
			if i == 0 {
				label = fmt.Sprintf("**%s**<br>%s", w.Title, w.describe())
			}
			row := fmt.Sprintf("| %s | %s |", label, m.Name)
			for _, c := range cols {
				if c.Broker != "" {
					row += " " + cell(rep.samples(w.Name, c.Broker, m.Get), m.Format) + " |"
				} else if m.NoRatio {
					row += " |"
				} else {
					_, s := ratio(rep.samples(w.Name, c.Num, m.Get), rep.samples(w.Name, c.Denom, m.Get))
					row += " " + s + " |"
				}
			}
			p("%s\n", row)
		}
	}
	p("\n")

	p("### Brokers\n\n")
	p("%s\n%s\n", head, sep)
	startup := func(r brokerRun) float64 { return r.StartupMs }
	rss := func(r brokerRun) float64 {
		if r.PeakRSSBytes < 0 {
			return -1
		}
		return float64(r.PeakRSSBytes) / (1 << 20)
	}
	for _, row := range []struct {
		name   string
		get    func(brokerRun) float64
		format func(float64) string
	}{
		{"start-up to first acknowledged produce, ms", startup, fmtMs},
		{"failover: kill -9 of a leader to the next acknowledged write, ms", func(r brokerRun) float64 {
			if r.Failover == nil || r.Failover.Ms <= 0 {
				return -1
			}
			return r.Failover.Ms
		}, fmtMs},
		{"peak RSS over the round, MiB", rss, func(v float64) string { return fmt.Sprintf("%.0f", v) }},
	} {
		line := fmt.Sprintf("| | %s |", row.name)
		for _, c := range cols {
			if c.Broker != "" {
				line += " " + cell(rep.runStat(c.Broker, row.get), row.format) + " |"
			} else {
				_, s := ratio(rep.runStat(c.Num, row.get), rep.runStat(c.Denom, row.get))
				line += " " + s + " |"
			}
		}
		p("%s\n", line)
	}
	p("\nKafka's start-up counts from launching `kafka.Kafka` on a formatted directory; `kafka-storage format` ran before it, outside the timing. kfake runs inside the bench process, so it has no RSS of its own.\n\n")

	if len(rep.Machine) > 0 {
		p("### The machine's limits, measured in the same run\n\n")
		var loop, wf, small, buf []float64
		for _, m := range rep.Machine {
			loop, wf = append(loop, m.LoopbackMBPerSec), append(wf, m.WriteFsyncMBPerSec)
			small, buf = append(small, m.SmallFsyncsPerSec), append(buf, m.BufferedWriteMBPerSec)
		}
		p("| limit | before–after the brokers |\n|---|---|\n")
		p("| single-stream loopback TCP, MB/s | %s |\n", cell(statOf(loop), fmtMB))
		p("| sequential 1 MiB write + fsync, MB/s (%s) | %s |\n", rep.Machine[0].FileSystem, cell(statOf(wf), fmtMB))
		p("| 4 KiB write + fsync, per second | %s |\n", cell(statOf(small), fmtRate))
		p("| sequential 1 MiB write, no fsync, MB/s | %s |\n\n", cell(statOf(buf), fmtMB))
		if m := rep.Machine[0]; m.WarmedGiB > 0 {
			p("Before the first broker, %.0f GiB of free memory were touched once, in %.1f s, so that no broker pays for a virtual machine's first use of its memory (`--warm-memory`).\n\n",
				m.WarmedGiB, m.WarmedSeconds)
		}
		lm, wm := statOf(loop).Med, statOf(wf).Med
		var lines []string
		for _, w := range rep.Workloads {
			if w.Rate > 0 || w.MaxBufferedRecords == 1 || w.TxnRecords > 0 {
				continue
			}
			for _, k := range []string{"strand", "strand-nofsync"} {
				s := rep.samples(w.Name, k, func(r benchResult) float64 { return r.ProduceWireMBPerSec })
				if s.N == 0 || lm == 0 || wm == 0 {
					continue
				}
				lines = append(lines, fmt.Sprintf("| %s | %s | %s | %.0f%% | %.0f%% |", w.Title, brokerKinds[k].Label,
					fmtMB(s.Med), 100*s.Med/lm, 100*s.Med/wm))
			}
		}
		if len(lines) > 0 {
			p("| workload | broker | produce MB/s on the wire | of loopback TCP | of write+fsync |\n|---|---|---|---|---|\n")
			p("%s\n\n", strings.Join(lines, "\n"))
		}
	}

	if tl := targetLines(rep); len(tl) > 0 {
		p("### Targets\n\n| target | measured | met |\n|---|---|---|\n%s\n\n", strings.Join(tl, "\n"))
	}
	if len(rep.Failures) > 0 {
		p("### Failures\n\n")
		for _, f := range rep.Failures {
			p("- %s\n", strings.ReplaceAll(f, "\n", " "))
		}
		p("\n")
	}
	return b.String()
}

func targetLines(rep *suiteReport) []string {
	var out []string
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	pairs := [][2]string{{"strand", "kafka-flush"}, {"strand-nofsync", "kafka"}}
	pairName := func(pr [2]string) string { return brokerKinds[pr[0]].Label + " vs " + brokerKinds[pr[1]].Label }
	has := func(w string) bool {
		return slices.ContainsFunc(rep.Workloads, func(x benchWorkload) bool { return x.Name == w })
	}
	rate := func(r benchResult) float64 { return r.ProduceRecordsPerSec }
	p99 := func(r benchResult) float64 { return r.ProduceP99Ms }
	for _, w := range []string{"a", "b"} {
		if !has(w) {
			continue
		}
		for _, pr := range pairs {
			r, s := ratio(rep.samples(w, pr[0], rate), rep.samples(w, pr[1], rate))
			if !math.IsNaN(r) {
				out = append(out, fmt.Sprintf("| (%s) throughput ≥ 1.5× Kafka's, %s | %s | %s |", w, pairName(pr), s, yes(r >= 1.5)))
			}
		}
	}
	if has("c") {
		for _, pr := range pairs {
			r, s := ratio(rep.samples("c", pr[0], p99), rep.samples("c", pr[1], p99))
			if !math.IsNaN(r) {
				out = append(out, fmt.Sprintf("| (c) p99 produce latency ≤ ½ Kafka's, %s | %s | %s |", pairName(pr), s, yes(r <= 0.5)))
			}
		}
	}
	// Issue 11's figure for 1000 partitions, one node: the full mode's
	// million records (quick mode's fifth is mostly the client's start).
	if has("e") && rep.Mode == "full" && rep.Cluster <= 1 {
		if s := rep.samples("e", "strand", p99); s.N > 0 {
			out = append(out, fmt.Sprintf("| (e) produce p99 ≤ 100 ms, %s | %s ms (max %s) | %s |",
				brokerKinds["strand"].Label, fmtMs(s.Med), fmtMs(s.Max), yes(s.Med <= 100)))
		}
	}
	if rep.Cluster > 1 {
		failover := func(r brokerRun) float64 {
			if r.Failover == nil || r.Failover.Ms <= 0 {
				return -1
			}
			return r.Failover.Ms
		}
		for _, pr := range pairs {
			r, s := ratio(rep.runStat(pr[0], failover), rep.runStat(pr[1], failover))
			if !math.IsNaN(r) {
				out = append(out, fmt.Sprintf("| kill -9 of a leader to the next acknowledged write ≤ Kafka's, %s | %s | %s |", pairName(pr), s, yes(r <= 1)))
			}
		}
		return out // the start-up and RSS targets are a single broker's
	}
	rss := func(r brokerRun) float64 { return float64(r.PeakRSSBytes) }
	for _, pr := range pairs {
		r, s := ratio(rep.runStat(pr[0], rss), rep.runStat(pr[1], rss))
		if !math.IsNaN(r) {
			out = append(out, fmt.Sprintf("| peak RSS ≤ ⅕ of Kafka's, %s | %s | %s |", pairName(pr), s, yes(r <= 0.2)))
		}
	}
	for _, k := range []string{"strand", "strand-nofsync"} {
		s := rep.runStat(k, func(r brokerRun) float64 { return r.StartupMs })
		if s.N > 0 {
			out = append(out, fmt.Sprintf("| start-up < 100 ms, %s | %s ms (max %s) | %s |", brokerKinds[k].Label, fmtMs(s.Med), fmtMs(s.Max), yes(s.Med < 100)))
		}
	}
	return out
}
