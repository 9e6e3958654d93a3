package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/ledger"
)

// TestWatchView: members are grouped by the software the ledger names
// them with, a change of assignment is an event naming who joined and
// left, only hand-offs from since on are counted and listed, and a member
// whose connection was lost is shown held until its removal.
func TestWatchView(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	v1 := ledger.Member{MemberID: "m1", ClientID: "orders-v1", SoftwareName: "orders-app", SoftwareVersion: "1.0"}
	v2 := ledger.Member{MemberID: "m2", ClientID: "orders-v2", SoftwareName: "orders-app", SoftwareVersion: "2.0"}
	st := newWatchState()
	removeAt := t0.Add(3 * time.Second)
	st.learn([]ledger.Entry{
		// Before since: it names m1's software but is not counted.
		{Type: ledger.TypeHandoff, Time: t0.Add(-2 * time.Hour), Topic: "orders", Partition: 0, To: v1, DuplicateRisk: 99},
		{Type: ledger.TypeHandoff, Time: t0.Add(time.Second), Topic: "orders", Partition: 1, From: &v1, To: v2, Reason: "revoked",
			Committed: 10, FirstFetched: 10, LastSent: 14, DuplicateRisk: 4, UnownedMs: 300},
		{Type: ledger.TypePresence, Time: t0.Add(time.Second), To: ledger.Member{MemberID: "m3", ClientID: "orders-v2b"},
			State: ledger.PresenceLost, Connection: "10.0.0.3:7000", RemoveAt: &removeAt},
	}, t0)
	members := func(ms ...watchMember) []watchMember {
		for i := range ms {
			ms[i].software = st.software[ms[i].id]
			ms[i].status = st.holds.Status(ms[i].id, t0.Add(time.Second))
		}
		return ms
	}
	first := members(watchMember{id: "m1", clientID: "orders-v1", partitions: []string{"orders-0", "orders-1", "orders-2"}, lag: 7})
	st.observe(t0, first)
	st.observe(t0.Add(time.Second), first) // unchanged
	second := members(
		watchMember{id: "m1", clientID: "orders-v1", partitions: []string{"orders-0", "orders-2"}, lag: 5, lagSeconds: 12.5},
		watchMember{id: "m2", clientID: "orders-v2", partitions: []string{"orders-1"}, lag: 2, lagSeconds: 3},
		watchMember{id: "m3", clientID: "orders-v2b", lagSeconds: -1},
	)
	st.observe(t0.Add(2*time.Second), second)
	if st.changes != 1 {
		t.Fatalf("%d changes, want 1", st.changes)
	}
	f := watchFrame{at: t0, group: "orders-processor", groupType: "consumer", state: "Stable", assign: "uniform",
		members: second, partitions: 3, changes: st.changes, since: t0, recent: st.recent,
		totals: ledger.NewReport("orders-processor", st.handoffs).Totals}
	var out bytes.Buffer
	f.render(&out)
	text := out.String()
	t.Logf("\n%s", text)
	for _, want := range []string{
		"3 members, 3 partitions, total lag 7",
		"assignment changes seen: 1; hand-offs since",
		": 1, duplicate risk 4, skipped 0",
		"hand-off orders-1: orders-v1 [orders-app 1.0] -> orders-v2 [orders-app 2.0] (revoked), duplicate risk 4",
		"assignment changed; joined orders-v2 [orders-app 2.0], orders-v2b",
		"connection lost, removed in 2s",
		"member orders-v2b: connection 10.0.0.3:7000 lost without a LeaveGroup: removed at ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in the view", want)
		}
	}
	versions := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if fs := strings.Fields(line); len(fs) == 6 && fs[0] == "orders-app" {
			versions[fs[1]] = strings.Join(fs[2:], " ")
		} else if len(fs) == 5 && fs[0] == "unknown" {
			versions["unknown"] = strings.Join(fs[1:], " ")
		}
	}
	// members, partitions, lag, lag in seconds
	want := map[string]string{"1.0": "1 2 5 12.5", "2.0": "1 1 2 3.0", "unknown": "1 0 0 -"}
	for v, w := range want {
		if versions[v] != w {
			t.Errorf("version %s: %q, want %q (members partitions lag seconds)", v, versions[v], w)
		}
	}
	if strings.Contains(text, "99") {
		t.Error("a hand-off from before since is counted")
	}

	// The member that leaves is named as it was last seen.
	st.observe(t0.Add(3*time.Second), second[:2])
	if last := st.recent[len(st.recent)-1].what; last != "assignment changed; left orders-v2b" {
		t.Errorf("last event %q", last)
	}
}

// TestWatchAcrossClusters: for a group a link passes through, a member the
// ledger names as connected here through the link is shown on Strand, the
// others on the source, in the member table and the software summary.
func TestWatchAcrossClusters(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	canary := ledger.Member{MemberID: "m2", ClientID: "orders-v2", Host: "127.0.0.1"}
	st := newWatchState()
	st.learn([]ledger.Entry{{Type: ledger.TypeHandoff, Time: t0, Topic: "orders", Partition: 1, Link: "kafka-prod",
		Source: "kafka-1:9092", From: &ledger.Member{Host: "kafka-1:9092"}, To: canary, Reason: "passed-through",
		Committed: 10, FirstFetched: 10, DuplicateRisk: -1}}, t0)
	if !st.linked["m2"] || st.linked["m1"] {
		t.Fatalf("members known connected through a link: %v", st.linked)
	}
	f := watchFrame{at: t0, group: "orders-processor", groupType: "classic", state: "Stable", since: t0, across: true, recent: st.recent,
		members: []watchMember{
			{id: "m1", clientID: "orders-v1", partitions: []string{"orders-0"}, cluster: st.clusterOf("m1")},
			{id: "m2", clientID: "orders-v2", partitions: []string{"orders-1"}, cluster: st.clusterOf("m2")},
		}, partitions: 2}
	var out bytes.Buffer
	f.render(&out)
	text := out.String()
	t.Logf("\n%s", text)
	for _, want := range []string{"MEMBER  CLUSTER", "m1      source", "m2      strand", "source unknown", "strand unknown",
		"a member at kafka-1:9092 -> orders-v2 (passed-through)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the view does not show %q", want)
		}
	}
}
