package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/ledger"
)

// TestReportTotals: the totals count only what is known, and the table
// shows unknown figures as such.
func TestReportTotals(t *testing.T) {
	es := []ledger.Entry{
		{Type: ledger.TypeHandoff, Topic: "t", Partition: 0, To: ledger.Member{ClientID: "a"}, Committed: -1, FirstFetched: 0, LastSent: -1},
		{Type: ledger.TypeHandoff, Topic: "t", Partition: 0, From: &ledger.Member{ClientID: "a", SoftwareName: "kgo", SoftwareVersion: "1.22"},
			To: ledger.Member{ClientID: "b", InstanceID: "i-1"}, Reason: "member-left", Committed: 10, FirstFetched: 40,
			LastSent: 20, DuplicateRisk: 10, Skipped: 30, UnownedMs: 1500},
		{Type: ledger.TypeHandoff, Topic: "t", Partition: 1, From: &ledger.Member{ClientID: "a"}, To: ledger.Member{ClientID: "b"}, Reason: "revoked",
			Committed: 5, FirstFetched: -1, LastSent: 9, DuplicateRisk: 4, Skipped: -1, Rewound: -1},
	}
	r := ledger.NewReport("g", es)
	tot := r.Totals
	if tot.Handoffs != 3 || tot.DuplicateRisk != 14 || tot.Skipped != 30 || tot.SkippedHandoffs != 1 || tot.Rewound != 0 || tot.LongestUnowned != 1500 {
		t.Fatalf("totals %+v", tot)
	}
	var out bytes.Buffer
	printReport(&out, r, time.Time{}, reportFilter{all: true})
	for _, want := range []string{"first start", "a 1.22", "b (i-1)", "member-left", "?", "1.5s",
		"3 hand-offs: duplicate risk 14, skipped 30 (in 1 hand-offs), rewound 0, longest unowned 1.5s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table has no %q:\n%s", want, out.String())
		}
	}
}

func TestPrintCommits(t *testing.T) {
	off := int64(42)
	var out bytes.Buffer
	printCommits(&out, []ledger.Entry{{Type: ledger.TypeCommitNotOwned, Topic: "t", Partition: 3, Offset: &off,
		Committer: &ledger.Member{ClientID: "old"}, Owner: &ledger.Member{ClientID: "new"}}})
	for _, want := range []string{"1 commits of partitions their member did not own", "t-3", "old", "42", "new"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	out.Reset()
	printCommits(&out, nil)
	if out.Len() != 0 {
		t.Errorf("printed %q for no commits", out.String())
	}
}

// TestReportByVersion: a canary's life as the report tells it. v1 starts
// the group (first starts, at the end of the log: a reset, not a skip),
// reshuffles among its members, hands two partitions to the v2 canary,
// which is rolled back with duplicates. The report sums each version pair
// (the way back marked as a rollback), gives the first starts apart,
// lists only the hand-offs that risked something unless asked for all,
// fits 120 columns, and counts nothing as skipped.
func TestReportByVersion(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.Local)
	v1 := func(i int) *ledger.Member {
		return &ledger.Member{MemberID: fmt.Sprint("m", i), ClientID: fmt.Sprintf("orders-processor-with-a-long-client-id-%d", i),
			SoftwareName: "orders-app", SoftwareVersion: "1.0.0"}
	}
	v2 := &ledger.Member{MemberID: "c", ClientID: "orders-processor-canary-with-a-long-client-id", SoftwareName: "orders-app", SoftwareVersion: "2.0.0"}
	var es []ledger.Entry
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for p := range int32(4) {
		es = append(es, ledger.Entry{Type: ledger.TypeHandoff, Time: at(0), Topic: "orders", Partition: p, To: *v1(0),
			Committed: -1, LogStart: 0, FirstFetched: 42, LastSent: -1, Skipped: 42})
	}
	for p := range int32(4) {
		es = append(es, ledger.Entry{Type: ledger.TypeHandoff, Time: at(5), Topic: "orders", Partition: p, From: v1(0), To: *v1(1),
			Reason: "revoked", Committed: 50, FirstFetched: 50, LastSent: 50, UnownedMs: 20})
	}
	for p := range int32(2) {
		es = append(es, ledger.Entry{Type: ledger.TypeHandoff, Time: at(10), Topic: "orders", Partition: p, From: v1(1), To: *v2,
			Reason: "revoked", Committed: 60, FirstFetched: 60, LastSent: 60, UnownedMs: 300})
		es = append(es, ledger.Entry{Type: ledger.TypeHandoff, Time: at(20), Topic: "orders", Partition: p, From: v2, To: *v1(1),
			Reason: "member-lost", Committed: 70, FirstFetched: 70, LastSent: 95, DuplicateRisk: 25, UnownedMs: 2100})
	}
	r := ledger.NewReport("orders", es)
	if r.Totals.Skipped != 0 || r.Totals.FirstStarts != 4 || r.Totals.FirstStartsPast != 168 || r.Totals.Handoffs != 12 {
		t.Errorf("totals %+v: want 4 first starts past 168 records, nothing skipped, 12 hand-offs", r.Totals)
	}
	want := []struct {
		label                string
		partitions, handoffs int
		dup                  int64
	}{
		{"within orders-app 1.0.0", 4, 4, 0},
		{"orders-app 1.0.0 → orders-app 2.0.0", 2, 2, 0},
		{"rollback orders-app 2.0.0 → orders-app 1.0.0", 2, 2, 50},
	}
	if len(r.Versions) != len(want) {
		t.Fatalf("version pairs %+v", r.Versions)
	}
	for i, w := range want {
		p := r.Versions[i]
		if pairLabel(p) != w.label || p.Partitions != w.partitions || p.Handoffs != w.handoffs || p.DuplicateRisk != w.dup {
			t.Errorf("pair %d: %s %+v; want %s, %d partitions, %d hand-offs, duplicate risk %d", i, pairLabel(p), p,
				w.label, w.partitions, w.handoffs, w.dup)
		}
	}
	var out bytes.Buffer
	printReport(&out, r, at(-60), reportFilter{})
	table := out.String()
	for _, want := range []string{"since " + at(-60).Format(ledger.TimeLayout), "First starts: 4", "past 168 records",
		"2 hand-offs that risked something (--all for all 12)", "member-lost", at(20).Format(ledger.TimeLayout),
		"12 hand-offs: duplicate risk 50, skipped 0 (in 0 hand-offs)"} {
		if !strings.Contains(table, want) {
			t.Errorf("no %q in the report:\n%s", want, table)
		}
	}
	if strings.Contains(table, "first start ") || strings.Count(table, "revoked") != 0 {
		t.Errorf("the default report lists hand-offs that risked nothing:\n%s", table)
	}
	out.Reset()
	printReport(&out, r, time.Time{}, reportFilter{all: true})
	if n := strings.Count(out.String(), "first start "); n != 4 {
		t.Errorf("--all lists %d first starts, want 4:\n%s", n, out.String())
	}
	out.Reset()
	printReport(&out, r, time.Time{}, reportFilter{risk: "duplicate"})
	if !strings.Contains(out.String(), "2 hand-offs with a duplicate risk") {
		t.Errorf("--risk duplicate:\n%s", out.String())
	}
	for _, report := range []string{table, out.String()} {
		for _, line := range strings.Split(report, "\n") {
			if n := len([]rune(line)); n > terminalWidth {
				t.Errorf("a line of %d columns: %q", n, line)
			}
		}
	}
}
