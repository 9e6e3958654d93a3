package main

import (
	"bytes"
	"strings"
	"testing"

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
	tot := ledger.NewReport("g", es).Totals
	if tot.Handoffs != 3 || tot.DuplicateRisk != 14 || tot.Skipped != 30 || tot.SkippedHandoffs != 1 || tot.Rewound != 0 || tot.LongestUnowned != 1500 {
		t.Fatalf("totals %+v", tot)
	}
	var out bytes.Buffer
	printReport(&out, "g", es, tot)
	for _, want := range []string{"first assignment", "a [kgo 1.22]", "b (i-1)", "member-left", "?", "1.5s",
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
