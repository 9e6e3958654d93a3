package compat

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/recordfmt"
	"github.com/strandlog/strand/internal/testutil"
)

// TestRecordCLI drives `strand produce` and `strand consume` against the
// real binary: keys, headers, a chosen partition, a transaction, every kind
// of start, a group that commits what it printed, JSON with binary values,
// and the exit status scripts rely on.
func TestRecordCLI(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	testRecordCLI(t, b.Addr)
}

func testRecordCLI(t *testing.T, addr string) {
	cli := func(stdin string, args ...string) result {
		t.Helper()
		return run(time.Minute, "", stdin, testutil.Binary(t), append(args, "--brokers", addr)...)
	}
	wantCLI(t, cli("", "topic", "create", "lines", "--partitions", "3"), true)
	wantCLI(t, cli("", "topic", "create", "txn", "--partitions", "1"), true)
	wantCLI(t, cli("a:1\nb:2\na:3\nnokey\n", "produce", "lines", "--key-separator", ":", "--header", "src=cli"), true,
		"wrote 4 records to lines")
	wantCLI(t, cli("p2\n", "produce", "lines", "--partition", "2", "--compression", "zstd"), true, "partition 2: 1")
	all := consumeJSON(t, cli("", "consume", "lines", "--exit-at-end", "--format", "json"))
	if len(all) != 5 {
		t.Fatalf("%d records read to the end, want 5: %+v", len(all), all)
	}
	var aParts []int32
	for _, r := range all {
		switch {
		case r.Value != nil && *r.Value == "p2":
			if r.Partition != 2 || r.Key != nil {
				t.Errorf("the record written to partition 2: %+v", r)
			}
		case r.Key == nil:
			if *r.Value != "nokey" {
				t.Errorf("a record without a key: %+v", r)
			}
		case *r.Key == "a":
			aParts = append(aParts, r.Partition)
		}
		if r.Value != nil && *r.Value != "p2" && (len(r.Headers) != 1 || r.Headers[0].Key != "src" || *r.Headers[0].Value != "cli") {
			t.Errorf("headers of %+v", r)
		}
	}
	if len(aParts) != 2 || aParts[0] != aParts[1] {
		t.Errorf("the records of key a went to partitions %v: one key, one partition", aParts)
	}

	first := cli("", "consume", "lines", "--from", "beginning", "--num", "3", "--format", `%k=%v\n`)
	wantCLI(t, first, true)
	if lines := strings.Split(strings.TrimSuffix(first.stdout, "\n"), "\n"); len(lines) != 3 {
		t.Fatalf("--num 3 printed %q", first.stdout)
	}
	last := cli("", "consume", "lines", "--from", "-1", "--exit-at-end", "--format", `%p:%o\n`)
	wantCLI(t, last, true)
	ends := map[int32]int64{}
	for _, r := range all {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	var wantLast []string
	for p, end := range ends {
		wantLast = append(wantLast, fmt.Sprintf("%d:%d", p, end-1))
	}
	if got := strings.Fields(last.stdout); !equalSets(got, wantLast) {
		t.Errorf("--from -1 printed %v, want the last record of each partition %v", got, wantLast)
	}
	p2 := strconv.FormatInt(ends[2]-1, 10) // the record written to partition 2 came last
	one := cli("", "consume", "lines", "--partitions", "2", "--from", p2, "--exit-at-end", "--format", `%v`)
	wantCLI(t, one, true)
	if one.stdout != "p2" {
		t.Errorf("partition 2 from offset %s: %q", p2, one.stdout)
	}
	time.Sleep(20 * time.Millisecond)
	since := time.Now()
	wantCLI(t, cli("later\n", "produce", "lines", "--partition", "0"), true)
	recent := cli("", "consume", "lines", "--from", "@"+strconv.FormatInt(since.UnixMilli(), 10), "--exit-at-end")
	wantCLI(t, recent, true)
	if recent.stdout != "later\n" {
		t.Errorf("records since %v: %q", since, recent.stdout)
	}

	// A group prints each record once and commits what it printed.
	g := cli("", "consume", "lines", "--group", "readers", "--exit-at-end", "--format", `%v\n`)
	wantCLI(t, g, true)
	if n := strings.Count(g.stdout, "\n"); n != 6 {
		t.Errorf("the group read %q, want the 6 records", g.stdout)
	}
	again := cli("", "consume", "lines", "--group", "readers", "--exit-at-end")
	wantCLI(t, again, true)
	if again.stdout != "" {
		t.Errorf("the group read again: %q", again.stdout)
	}
	wantCLI(t, cli("", "group", "lag", "--group", "readers"), true, "total lag 0")

	// A transaction, read committed; binary values in JSON.
	wantCLI(t, cli("t1\x00t2\x00\xff\xfe", "produce", "txn", "--transactional-id", "cli-tx", "--delimiter", `\0`),
		true, "wrote 3 records")
	tx := consumeJSON(t, cli("", "consume", "txn", "--read-committed", "--exit-at-end", "--format", "json"))
	values := []string{}
	for _, r := range tx {
		if r.Value != nil {
			values = append(values, *r.Value)
		} else {
			values = append(values, "base64:"+*r.ValueBase64)
		}
	}
	if !slices.Equal(values, []string{"t1", "t2", "base64://4="}) {
		t.Errorf("the transaction's records: %v", values)
	}

	// What scripts rely on.
	wantCLI(t, cli("", "consume", "nowhere", "--exit-at-end"), false, "UNKNOWN_TOPIC_OR_PARTITION")
	wantCLI(t, cli("", "consume", "lines", "--num", "100", "--timeout", "2s"), false, "timed out after")
	wantCLI(t, cli("", "consume", "lines", "--from", "yesterday"), false, "--from")
	wantCLI(t, cli("x\n", "produce", "lines", "--acks", "2"), false, "--acks")
	wantCLI(t, cli("x\n", "produce", "lines", "--partition", "9", "--timeout", "3s"), false, "records not written")

	// Each acks, and a consumer from the end that sees only what comes
	// after it started.
	wantCLI(t, cli("", "topic", "create", "acks", "--partitions", "1"), true)
	wantCLI(t, cli("old-all\n", "produce", "acks"), true, "wrote 1 records")
	wantCLI(t, cli("old-1\n", "produce", "acks", "--acks", "1"), true, "wrote 1 records")
	wantCLI(t, cli("old-0\n", "produce", "acks", "--acks", "0"), true, "wrote 1 records")
	// acks=0 is not answered: wait until the record is there.
	testutil.EventuallyEvery(t, 10*time.Second, 50*time.Millisecond, func() error {
		r := cli("", "consume", "acks", "--exit-at-end", "--format", `%v\n`)
		if r.err != nil || r.stdout != "old-all\nold-1\nold-0\n" {
			return fmt.Errorf("records written with acks all, 1 and 0: %v", r)
		}
		return nil
	})
	tailDone := make(chan result, 1)
	go func() {
		tailDone <- cli("", "consume", "acks", "--from", "end", "--num", "1", "--format", `%v\n`, "--timeout", "30s")
	}()
	var fromEnd result
	for i := 0; ; i++ {
		// Written until the consumer, which may not have looked up the end
		// yet, reads one.
		wantCLI(t, cli(fmt.Sprintf("new-%d\n", i), "produce", "acks"), true)
		select {
		case fromEnd = <-tailDone:
		case <-time.After(300 * time.Millisecond):
			continue
		}
		break
	}
	wantCLI(t, fromEnd, true)
	if !strings.HasPrefix(fromEnd.stdout, "new-") || strings.Count(fromEnd.stdout, "\n") != 1 {
		t.Errorf("consume --from end --num 1 printed %q, want one record written after it started", fromEnd.stdout)
	}
}

// equalSets says whether a and b hold the same strings.
func equalSets(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// consumeJSON parses consume's JSON lines.
func consumeJSON(t *testing.T, r result) []recordfmt.Record {
	t.Helper()
	wantCLI(t, r, true)
	var out []recordfmt.Record
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var rec recordfmt.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}
