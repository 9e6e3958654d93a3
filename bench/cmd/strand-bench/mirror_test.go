package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ids makes records known by n, at the offsets given.
func ids(offsets ...int64) []idRecord {
	out := make([]idRecord, len(offsets))
	for i, o := range offsets {
		out[i].Offset = o
		binary.BigEndian.PutUint64(out[i].ID[:8], uint64(1000+i))
	}
	return out
}

// at returns recs with the offsets moved to start at base, one apart, as a
// target that stores them without markers or aborted records would.
func at(recs []idRecord, base int64) []idRecord {
	out := make([]idRecord, len(recs))
	for i, r := range recs {
		out[i] = idRecord{Offset: base + int64(i), ID: r.ID}
	}
	return out
}

// TestJudgePartition: a target's committed offset is judged by what a
// consumer starting there reads, against what the group reads next at
// the source.
func TestJudgePartition(t *testing.T) {
	// The source's committed records of the phase, from offset 100: gaps
	// are commit markers and aborted transactions. The group committed 106,
	// after the fourth record; three are due.
	src := ids(100, 101, 103, 105, 107, 108, 110)
	const srcAt = 106
	abortedID := idRecord{Offset: 104}
	binary.BigEndian.PutUint64(abortedID.ID[:8], 9999)

	for _, tc := range []struct {
		name                string
		tgt                 []idRecord
		tgtStart, tgtAt     int64
		verdict             string
		skipped, duplicated int64
	}{
		{"same offsets, same log", src, 100, 106, "exact", 0, 0},
		{"translated exactly", at(src, 50), 50, 54, "exact", 0, 0},
		{"one record back", at(src, 50), 50, 53, "behind", 0, 1},
		{"three records back", at(src, 50), 50, 51, "behind", 0, 3},
		{"one record ahead", at(src, 50), 50, 55, "ahead", 1, 0},
		{"past the end", at(src, 50), 50, 57, "ahead", 3, 0},
		{"before the phase: all of it again, and the records before", at(src, 50), 50, 40, "behind", 0, 10 + 4},
		{"no offset", at(src, 50), 50, -1, "missing", 0, 0},
		// An aborted record stored as an ordinary one is neither processed
		// nor due: it is counted apart, not as a duplicate.
		{"aborted record readable, exact otherwise",
			at([]idRecord{src[0], src[1], src[2], src[3], abortedID, src[4], src[5], src[6]}, 0), 0, 4, "exact", 0, 0},
		{"mixed", []idRecord{{Offset: 0, ID: src[3].ID}, {Offset: 1, ID: src[5].ID}, {Offset: 2, ID: src[6].ID}}, 0, 0, "mixed", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			po := judgePartition(src, srcAt, tc.tgt, tc.tgtStart, tc.tgtAt)
			if po.Verdict != tc.verdict || po.Skipped != tc.skipped || po.Duplicated != tc.duplicated {
				t.Errorf("got %s, %d skipped, %d again; want %s, %d skipped, %d again", po.Verdict, po.Skipped, po.Duplicated,
					tc.verdict, tc.skipped, tc.duplicated)
			}
		})
	}
}

// TestJudgeOffsets: the partitions' verdicts add up, offsets equal to the
// source's are counted, and aborted records readable on the target are
// counted over the whole phase.
func TestJudgeOffsets(t *testing.T) {
	src0, src1 := ids(10, 11, 13, 14), ids(20, 22, 23)
	aborted := idRecord{Offset: 12}
	binary.BigEndian.PutUint64(aborted.ID[:8], 7777)
	src := map[int32][]idRecord{0: src0, 1: src1, 2: ids(5)}
	srcAt := map[int32]int64{0: 13, 1: 23, 2: 6}
	// Partition 0 identical, 1 one behind, 2 without an offset.
	tgt := map[int32][]idRecord{0: src0, 1: append(at(src1, 0), idRecord{Offset: 3, ID: aborted.ID}), 2: at(ids(5), 0)}
	tgtStart := map[int32]int64{0: 10, 1: 0, 2: 0}
	tgtAt := map[int32]int64{0: 13, 1: 1}
	res := judgeOffsets(src, srcAt, tgt, tgtStart, tgtAt, map[recordID]bool{aborted.ID: true}, 3)
	if res.Partitions != 3 || res.Exact != 1 || res.Behind != 1 || res.Missing != 1 || res.Ahead != 0 || res.Mixed != 0 {
		t.Errorf("verdicts: %+v", res)
	}
	if res.Identical != 1 || res.Duplicated != 1 || res.Skipped != 0 || res.AbortedReadable != 1 {
		t.Errorf("counts: identical %d, again %d, skipped %d, aborted %d", res.Identical, res.Duplicated, res.Skipped, res.AbortedReadable)
	}
	if len(res.PerPartition) != 3 || res.PerPartition[2].Target != -1 || res.PerPartition[1].Partition != 1 {
		t.Errorf("per partition: %+v", res.PerPartition)
	}
}

// TestGroupPositions: every partition stops inside what it holds, at
// least one record in, at a different share of it.
func TestGroupPositions(t *testing.T) {
	k := groupPositions([]int64{40, 40, 40, 1, 0})
	want := []int64{6, 13, 20, 1, 0}
	for p := range want {
		if k[p] != want[p] {
			t.Fatalf("positions %v, want %v", k, want)
		}
	}
}

// TestMM2Properties: the flow's settings, whole seconds of at least one,
// and --mm2-property overriding or adding.
func TestMM2Properties(t *testing.T) {
	props, err := mm2Properties("127.0.0.1:1", "127.0.0.1:2", "t", "g", 2, 300*time.Millisecond, 2500*time.Millisecond,
		[]string{"tasks.max=4", " target.producer.linger.ms = 5 "})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range props {
		if _, dup := got[p[0]]; dup {
			t.Errorf("%s twice", p[0])
		}
		got[p[0]] = p[1]
	}
	for k, v := range map[string]string{
		"source.bootstrap.servers": "127.0.0.1:1", "target.bootstrap.servers": "127.0.0.1:2",
		"source->target.topics": "^t$", "source->target.groups": "^g$", "sync.group.offsets.enabled": "true",
		"replication.policy.class":            "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
		"sync.group.offsets.interval.seconds": "1", "emit.checkpoints.interval.seconds": "1",
		"refresh.topics.interval.seconds": "3", "tasks.max": "4", "target.producer.linger.ms": "5",
	} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, err := mm2Properties("a", "b", "t", "g", 1, time.Second, time.Second, []string{"no-equals"}); err == nil {
		t.Error("a property without = was accepted")
	}
}

// TestMirrorReport: `strand-bench mirror --from-json` renders a run's
// results with the ratios Strand ÷ MirrorMaker 2.
func TestMirrorReport(t *testing.T) {
	rep := mirrorReport{Started: time.Now(), Host: map[string]any{"cpus": 2}, Seconds: 200,
		Settings: mirrorSettings{Partitions: 6, RecordSize: 1024, Rate: 20000, LagSeconds: 20, Transactions: 30, TxnRecords: 60,
			OffsetWaitSecs: 10, SyncIntervalSecs: 1, MM2Tasks: 1, BacklogVerified: true},
		Backlog: backlogResult{Records: 976_562, PayloadBytes: 1_000_000_000},
		Mirrors: []mirrorResult{
			{Mirror: "strand-link", Label: "Strand cluster link", Copy: copyResult{AllSeconds: 5, MBPerSec: 200, CopyMBPerSec: 250, Verified: true},
				Lag: lagResult{P50Ms: 50, P99Ms: 100, MaxMs: 150}, Offset: offsetResult{Partitions: 6, Exact: 6, Identical: 6, SettledSeconds: 0.9}},
			{Mirror: "mirrormaker2", Label: "MirrorMaker 2", Copy: copyResult{AllSeconds: 100, MBPerSec: 10, CopyMBPerSec: 12.5, Verified: true},
				Lag: lagResult{P50Ms: 1000, P99Ms: 2000, MaxMs: 3000}, Offset: offsetResult{Partitions: 6, Behind: 6, Duplicated: 159, AbortedReadable: 600, SettledSeconds: -1}},
		}}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "results.json")
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := mirrorCommand()
	cmd.SetArgs([]string{"--from-json", path})
	var out bytes.Buffer
	cmd.SetOut(&out)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	for _, want := range []string{
		"| mirror start to the whole backlog on the target, s | 5.0 | 100.0 | 0.05× |",
		"| MB/s, from the mirror's start | 200 | 10.0 | 20.00× |",
		"| lag p99, ms | 100 | 2000 | 0.05× |",
		"| partitions exact | 6 of 6 | 0 of 6 | |",
		"| records a consumer starting there would skip / process again | 0 / 0 | 0 / 159 | |",
		"| records of aborted transactions a read_committed consumer reads on the target | 0 | 600 | |",
		"| 0.9 | never changed |",
		"backlog** of 1000 MB",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}
