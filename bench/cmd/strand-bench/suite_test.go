package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlog/strand/internal/testutil"
)

// TestBenchSmoke runs `strand-bench suite --mode smoke` as bench/run.sh
// smoke would: the real strand binary as a child process, every workload
// at a tiny size, every record verified, and the report written. It keeps
// the benchmark tool from rotting; the numbers are not checked.
func TestBenchSmoke(t *testing.T) {
	out := t.TempDir()
	cmd := suiteCommand()
	cmd.SetArgs([]string{"--mode", "smoke", "--strand-bin", testutil.Binary(t), "--out", out, "--work-dir", t.TempDir()})
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("strand-bench suite --mode smoke: %v\nstdout:\n%s", err, stdout.String())
	}

	var rep suiteReport
	js, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	if len(rep.Failures) > 0 {
		t.Errorf("failures: %v", rep.Failures)
	}
	want := map[string]bool{"a": true, "b": true, "c": true, "d": true, "e": true, "f-10": true, "f-1000": true, "g": true}
	for _, r := range rep.Results {
		if r.Broker != "strand" || !r.Verified || r.Error != "" {
			t.Errorf("workload %s on %s: verified %v, error %q", r.Workload, r.Broker, r.Verified, r.Error)
		}
		if r.Workload == "g" {
			if r.Records != 6_000 || r.ConsumeRecordsPerSec <= 0 || r.ConsumeMBPerSec <= 0 || r.AchievedRate <= 0 ||
				r.E2EP50Ms <= 0 || r.E2EP99Ms < r.E2EP50Ms || r.E2EMaxMs < r.E2EP99Ms || r.AckErrors != 0 {
				t.Errorf("share groups: empty or inconsistent measurements %+v", r)
			}
		} else if strings.HasPrefix(r.Workload, "f-") {
			if r.Transactions <= 0 || r.TxnPerSec <= 0 || r.ProduceRecordsPerSec <= 0 || r.WireBytes <= 0 ||
				r.CommitP50Ms <= 0 || r.CommitP99Ms < r.CommitP50Ms || r.TxnP50Ms < r.CommitP50Ms || r.TxnP99Ms < r.TxnP50Ms {
				t.Errorf("workload %s: empty or inconsistent measurements %+v", r.Workload, r)
			}
		} else if r.ProduceRecordsPerSec <= 0 || r.ProduceP99Ms <= 0 || r.WireBytes <= 0 {
			t.Errorf("workload %s: empty measurements %+v", r.Workload, r)
		}
		if r.Workload == "d" && (r.E2EP50Ms <= 0 || r.E2EP99Ms < r.E2EP50Ms) {
			t.Errorf("end-to-end latency p50 %v, p99 %v", r.E2EP50Ms, r.E2EP99Ms)
		}
		delete(want, r.Workload)
	}
	if len(want) > 0 {
		t.Errorf("workloads without a result: %v", want)
	}
	if len(rep.BrokerRuns) != 1 || rep.BrokerRuns[0].StartupMs <= 0 || rep.BrokerRuns[0].PeakRSSBytes <= 0 {
		t.Errorf("broker runs: %+v", rep.BrokerRuns)
	}
	if len(rep.Machine) != 2 || rep.Machine[0].LoopbackMBPerSec <= 0 || rep.Machine[0].WriteFsyncMBPerSec <= 0 {
		t.Errorf("machine limits: %+v", rep.Machine)
	}
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"(a) throughput", "(e) many partitions", "(f) transactions of 1000 records", "committed transactions/s",
		"(g) share groups", "share consume records/s", "end-to-end max ms", "start-up to first acknowledged produce", "loopback TCP",
		"broker CPU per consumed GB", "client CPU while consuming"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("results.md lacks %q", s)
		}
	}
}

// TestBenchOneWorkload runs `strand bench` (one workload, end-to-end mode
// included) in this process against an in-process broker.
func TestBenchOneWorkload(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	for _, args := range [][]string{
		{"--records", "3000", "--partitions", "3", "--compression", "zstd", "--topic-config", "retention.ms=3600000"},
		{"--records", "50", "--partitions", "1", "--acks", "1", "--linger", "0", "--max-inflight", "1", "--max-buffered-records", "1"},
		{"--rate", "1000", "--duration", "500ms", "--warmup", "100ms", "--linger", "0"},
		{"--txn-records", "7", "--partitions", "3", "--duration", "300ms", "--warmup", "100ms"},
	} {
		cmd := runCommand()
		cmd.SetArgs(append([]string{"--brokers", b.Addr, "--json"}, args...))
		var out bytes.Buffer
		cmd.SetOut(&out)
		if err := cmd.Execute(); err != nil {
			t.Errorf("strand-bench run %s: %v", strings.Join(args, " "), err)
		}
	}
	cmd := runCommand()
	cmd.SetArgs([]string{"--brokers", b.Addr, "--acks", "1", "--idempotent", "true"})
	if err := cmd.Execute(); err == nil {
		t.Error("an idempotent producer with acks=1 was accepted")
	}
}

// TestCheckPayload: the consumer's check finds duplicates, gaps and
// corrupted bytes.
func TestCheckPayload(t *testing.T) {
	const size = 100
	rec := func(p int32, seq int64) []byte {
		v := make([]byte, size)
		fillPayload(v, p, seq, monoNow())
		return v
	}
	if msg := checkPayload(rec(2, 7), 2, 7, size); msg != "" {
		t.Errorf("good record: %s", msg)
	}
	if msg := checkPayload(rec(2, 6), 2, 7, size); !strings.Contains(msg, "again") {
		t.Errorf("duplicate: %q", msg)
	}
	if msg := checkPayload(rec(2, 8), 2, 7, size); !strings.Contains(msg, "missing") {
		t.Errorf("gap: %q", msg)
	}
	if msg := checkPayload(rec(3, 7), 2, 7, size); !strings.Contains(msg, "differ") {
		t.Errorf("another partition's payload: %q", msg)
	}
	bad := rec(2, 7)
	bad[size-1] ^= 1
	if msg := checkPayload(bad, 2, 7, size); !strings.Contains(msg, "differ") {
		t.Errorf("flipped bit: %q", msg)
	}
	if msg := checkPayload(bad[:size-1], 2, 7, size); !strings.Contains(msg, "bytes") {
		t.Errorf("short value: %q", msg)
	}
}

func TestStatOf(t *testing.T) {
	s := statOf([]float64{5, 1, 3, 4})
	if s.Med != 3.5 || s.Min != 1 || s.Max != 5 || s.N != 4 {
		t.Errorf("statOf = %+v", s)
	}
	if s := statOf([]float64{2, 9, 4}); s.Med != 4 {
		t.Errorf("median of 3 = %v", s.Med)
	}
}

// TestTargetForManyPartitions: a full single-node run reports (e)'s p99
// against 100 ms, by the median of its rounds; quick mode and clusters do
// not.
func TestTargetForManyPartitions(t *testing.T) {
	rep := &suiteReport{Mode: "full", Workloads: []benchWorkload{{Name: "e"}}}
	for _, p99 := range []float64{90, 120, 99} {
		rep.Results = append(rep.Results, benchResult{Workload: "e", Broker: "strand", ProduceP99Ms: p99})
	}
	line := func(rep *suiteReport) string {
		for _, l := range targetLines(rep) {
			if strings.Contains(l, "(e) produce p99") {
				return l
			}
		}
		return ""
	}
	if l := line(rep); !strings.Contains(l, "99.0 ms (max 120)") || !strings.HasSuffix(l, "| yes |") {
		t.Errorf("median 99 ms of 90, 120, 99: %q", l)
	}
	rep.Results[2].ProduceP99Ms = 101
	if l := line(rep); !strings.HasSuffix(l, "| **no** |") {
		t.Errorf("median 101 ms: %q", l)
	}
	rep.Mode = "quick"
	if l := line(rep); l != "" {
		t.Errorf("quick mode reports %q", l)
	}
}
