package compat

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// underCI and missing are testutil's, by their short names here.
func underCI() bool                    { return testutil.UnderCI() }
func missing(t *testing.T, msg string) { t.Helper(); testutil.Missing(t, msg) }

// needTool returns the path of an executable, or skips/fails via missing.
func needTool(t *testing.T, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		missing(t, fmt.Sprintf("%s not found (install: %s)", name, install))
	}
	return path
}

// startBroker runs the real strand binary with extra flags and shows its
// output when the test fails.
func startBroker(t *testing.T, extra ...string) *testutil.Process {
	t.Helper()
	p := testutil.StartProcess(t, "", extra...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("strand output (last 8 KiB):\n%s", tail(p.Output.String(), 8<<10))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// result is a finished command.
type result struct {
	cmdline        string
	stdout, stderr string
	err            error
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("%s: %v after %v\nstderr:\n%s\nstdout:\n%s", r.cmdline, r.err,
		r.elapsed.Round(time.Millisecond), grouptest.HeadLines(r.stderr, 12), tail(r.stdout, 1<<10))
}

// run runs a command with stdin, in dir (the package's directory when
// empty), killing it after timeout.
func run(timeout time.Duration, dir, stdin, name string, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := result{cmdline: name + " " + strings.Join(args, " "), stdout: stdout.String(), stderr: stderr.String(),
		elapsed: time.Since(start)}
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after the %v time limit (%v)", timeout, err)
	}
	r.err = err
	return r
}

// mustRun is run that fails the test when the command fails.
func mustRun(t *testing.T, timeout time.Duration, dir, stdin, name string, args ...string) result {
	t.Helper()
	r := run(timeout, dir, stdin, name, args...)
	if r.err != nil {
		t.Fatalf("%v", r)
	}
	return r
}

// The records the Java and Python helpers produce: record i has key
// key-(i%7) and value value-i.
func helperKey(i int) string   { return fmt.Sprintf("key-%d", i%7) }
func helperValue(i int) string { return fmt.Sprintf("value-%d", i) }

// rec is one record as the helpers print it.
type rec struct {
	P    int32
	O    int64
	K, V string
}

// checksum is the helpers' checksum: SHA-256 over "p:o:k:v\n" by
// (partition, offset).
func checksum(recs []rec) string {
	recs = slices.Clone(recs)
	sortRecs(recs)
	h := sha256.New()
	for _, r := range recs {
		fmt.Fprintf(h, "%d:%d:%s:%s\n", r.P, r.O, r.K, r.V)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sortRecs(recs []rec) {
	slices.SortFunc(recs, func(a, b rec) int {
		if a.P != b.P {
			return int(a.P - b.P)
		}
		return int(a.O - b.O)
	})
}

// helperOutput is what a Java or Python helper printed.
type helperOutput struct {
	acked    map[int]rec // by record index
	failed   []string
	records  []rec
	consumed int
	sum      string
}

func parseHelper(t *testing.T, out string) helperOutput {
	t.Helper()
	h := helperOutput{acked: map[int]rec{}, consumed: -1}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "acked" && len(f) == 4:
			i, _ := strconv.Atoi(f[1])
			p, _ := strconv.ParseInt(f[2], 10, 32)
			o, _ := strconv.ParseInt(f[3], 10, 64)
			h.acked[i] = rec{P: int32(p), O: o, K: helperKey(i), V: helperValue(i)}
		case f[0] == "failed":
			h.failed = append(h.failed, sc.Text())
		case f[0] == "record" && len(f) == 5:
			p, _ := strconv.ParseInt(f[1], 10, 32)
			o, _ := strconv.ParseInt(f[2], 10, 64)
			h.records = append(h.records, rec{P: int32(p), O: o, K: f[3], V: f[4]})
		case f[0] == "consumed" && len(f) == 3:
			h.consumed, _ = strconv.Atoi(f[1])
			h.sum = strings.TrimPrefix(f[2], "sha256=")
		}
	}
	return h
}

// checkAcked checks records acknowledged to a helper producer: each of n
// acknowledged once, offsets 0.. dense per partition in send order, and one
// partition per key. It returns them.
func checkAcked(t *testing.T, h helperOutput, n int) []rec {
	t.Helper()
	if len(h.failed) > 0 {
		t.Errorf("%d sends failed, first: %s", len(h.failed), h.failed[0])
	}
	if len(h.acked) != n {
		t.Fatalf("%d of %d records acknowledged", len(h.acked), n)
	}
	var out []rec
	next := map[int32]int64{}
	keyPart := map[string]int32{}
	for i := range n {
		r := h.acked[i]
		if p, ok := keyPart[r.K]; ok && p != r.P {
			t.Errorf("key %s went to partitions %d and %d", r.K, p, r.P)
		}
		keyPart[r.K] = r.P
		if r.O != next[r.P] {
			t.Errorf("record %d acknowledged at %d/%d, want offset %d", i, r.P, r.O, next[r.P])
		}
		next[r.P] = r.O + 1
		out = append(out, r)
	}
	return out
}

// client is a franz-go client closed at the end of the test.
func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// readAll reads every partition of topic from its start offset to its end
// offset (as listed when called), assign-style (no group).
func readAll(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, addr))
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("listing start offsets of %s: %v", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("listing end offsets of %s: %v", topic, err)
	}
	from := map[int32]kgo.Offset{}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		if o.Offset > s.Offset {
			from[o.Partition] = kgo.NewOffset().At(s.Offset)
			want[o.Partition] = o.Offset
		}
	})
	if len(from) == 0 {
		return nil
	}
	cl := client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxWait(500*time.Millisecond))
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %d records read, partitions still short of their end: %v", topic, len(out), want)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("reading %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

// asRecs converts franz-go records.
func asRecs(rs []*kgo.Record) []rec {
	out := make([]rec, len(rs))
	for i, r := range rs {
		out[i] = rec{P: r.Partition, O: r.Offset, K: string(r.Key), V: string(r.Value)}
	}
	return out
}

// sameRecs reports the first difference between two record lists, sorted
// by (partition, offset), or "".
func sameRecs(got, want []rec) string {
	got, want = slices.Clone(got), slices.Clone(want)
	sortRecs(got)
	sortRecs(want)
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("record %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("got %d records, want %d", len(got), len(want))
	}
	return ""
}

// createTopic creates a topic with kadm; when the broker cannot (CreateTopics
// missing), it reports that and leaves the topic to auto-creation, so the
// tests that only need a topic go on.
func createTopic(t *testing.T, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, addr))
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err != nil {
		t.Errorf("kadm CreateTopic %s: %v (falling back to auto-creation)", topic, err)
		return
	}
	if resp.NumPartitions != partitions {
		t.Errorf("created %s with %d partitions, want %d", topic, resp.NumPartitions, partitions)
	}
}

// strandCLI runs the real binary's `strand SUB ARGS... --brokers addr`,
// and wantCLI checks how a run ended and what it printed.
func strandCLI(t *testing.T, addr, sub string) func(args ...string) result {
	return func(args ...string) result {
		t.Helper()
		return run(time.Minute, "", "", testutil.Binary(t), append([]string{sub}, append(args, "--brokers", addr)...)...)
	}
}

func wantCLI(t *testing.T, r result, ok bool, parts ...string) {
	t.Helper()
	if (r.err == nil) != ok {
		t.Fatalf("want success %v: %v", ok, r)
	}
	for _, p := range parts {
		if !strings.Contains(r.stdout+r.stderr, p) {
			t.Fatalf("no %q in: %v", p, r)
		}
	}
}
