package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/link"
)

func levels(fs []finding) map[string]string {
	out := map[string]string{}
	for _, f := range fs {
		out[f.rule] = f.level
	}
	return out
}

// TestPlanRules: each rule flags what it is for, and a sound plan passes.
func TestPlanRules(t *testing.T) {
	sound := groupView{exists: true, groupType: "classic", protocol: "cooperative-sticky", members: 3,
		topics: []string{"orders"}, partitions: map[string]int{"orders": 10}, others: map[string][]string{},
		migrationPolicy: "bidirectional"}
	in := planInput{group: "orders-processor", planned: 1, assignor: "cooperative-sticky"}
	for rule, level := range levels(plan(in, sound)) {
		if level == "FAIL" {
			t.Fatalf("a sound plan fails %s: %+v", rule, plan(in, sound))
		}
	}

	for _, tc := range []struct {
		name  string
		edit  func(*planInput, *groupView)
		rule  string
		level string
		says  string
	}{
		{"10 consumers for 10 partitions", func(_ *planInput, v *groupView) { v.members = 10 }, "capacity", "FAIL", "11 consumers"},
		{"more consumers than partitions: a share group", func(_ *planInput, v *groupView) { v.members = 12 }, "capacity", "FAIL",
			"read them as a share group, where consumers may outnumber partitions"},
		{"canary fills the last partition", func(_ *planInput, v *groupView) { v.members = 9 }, "capacity", "FAIL", "at most partitions - 1 (9)"},
		{"the smallest topic counts", func(_ *planInput, v *groupView) {
			v.topics = []string{"orders", "refunds"}
			v.partitions["refunds"] = 3
		}, "capacity", "FAIL", "3 partitions of refunds"},
		{"eager group, cooperative new version", func(in *planInput, v *groupView) { v.protocol = "range" }, "assignor", "FAIL", "two-step"},
		{"another assignor", func(in *planInput, v *groupView) { in.assignor = "range"; v.protocol = "roundrobin" }, "assignor", "FAIL", "INCONSISTENT_GROUP_PROTOCOL"},
		{"upgrade refused by policy", func(in *planInput, v *groupView) { in.protocol = "consumer"; v.migrationPolicy = "downgrade" }, "protocol", "FAIL", "GROUP_ID_NOT_FOUND"},
		{"upgrade allowed", func(in *planInput, v *groupView) { in.protocol = "consumer" }, "protocol", "ok", "converts it live"},
		{"static members", func(_ *planInput, v *groupView) { v.static = []string{"a-1", "a-2"} }, "static", "warn", "FENCED_INSTANCE_ID"},
		{"a versioned group id on the same topic", func(_ *planInput, v *groupView) {
			v.others["orders-processor-v2"] = []string{"orders"}
		}, "group-id", "FAIL", "orders-processor-v2 (on orders)"},
		{"a mistyped group id", func(_ *planInput, v *groupView) { v.others["orders-procesor"] = []string{"orders"} }, "group-id", "FAIL", "orders-procesor"},
		{"a mistyped id of a group that does not exist", func(in *planInput, v *groupView) {
			in.group = "orders-procesor"
			*v = groupView{closest: []string{"orders-processor"}}
		}, "group-id", "FAIL", "no group orders-procesor; did you mean orders-processor?"},
		{"a new group", func(in *planInput, v *groupView) { in.group = "reports"; *v = groupView{} }, "group", "warn", "does not exist yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in2, v := in, sound
			v.partitions = map[string]int{"orders": 10}
			v.others = map[string][]string{}
			tc.edit(&in2, &v)
			for _, f := range plan(in2, v) {
				if f.rule != tc.rule {
					continue
				}
				if f.level != tc.level || !strings.Contains(f.what, tc.says) {
					t.Fatalf("%s: %s %q; want %s saying %q", f.rule, f.level, f.what, tc.level, tc.says)
				}
				return
			}
			t.Fatalf("no %s finding: %+v", tc.rule, plan(in2, v))
		})
	}
}

func TestNearName(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		near bool
	}{
		{"orders-processor", "orders-processor-v2", true},
		{"orders-processor", "Orders_Processor", true},
		{"orders-processor", "orders-procesor", true},
		{"orders-processor", "payments-processor", false},
		{"g1", "g2", true}, // a trailing version
		{"ab", "cd", false},
	} {
		if got := nearName(tc.a, tc.b); got != tc.near {
			t.Errorf("nearName(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

// TestPlanLinkRules: a move across clusters needs a running link that
// passes the group through and mirrors, caught up, what it reads.
func TestPlanLinkRules(t *testing.T) {
	sound := link.Status{Name: "kafka-prod", State: "active",
		Link:   cluster.Link{Groups: cluster.Filter{Include: []string{"orders-.*"}}, GroupPassThrough: true},
		Topics: []link.TopicStatus{{Topic: "orders", State: cluster.MirrorActive, Partitions: []link.PartitionStatus{{LagRecords: 3}}}}}
	for rule, level := range levels(linkFindings("orders-processor", []string{"orders"}, sound)) {
		if level != "ok" {
			t.Fatalf("a sound link is %s on %s", level, rule)
		}
	}
	for _, tc := range []struct {
		name   string
		edit   func(*link.Status)
		topics []string
		rule   string
		level  string
		says   string
	}{
		{"not covered", func(s *link.Status) { s.Link.Groups.Include = []string{"billing"} }, nil, "link", "FAIL", "--groups orders-processor"},
		{"offsets only", func(s *link.Status) { s.Link.GroupPassThrough = false }, nil, "link", "FAIL", "second group"},
		{"paused", func(s *link.Status) { s.State = "paused" }, nil, "link", "FAIL", "strand link resume kafka-prod"},
		{"moved home", func(s *link.Status) { s.Link.PromotedGroups = []string{"orders-processor"} }, nil, "link", "warn", "lives on Strand"},
		{"a topic not mirrored", func(*link.Status) {}, []string{"orders", "refunds"}, "mirror", "FAIL", "refunds"},
		{"far behind", func(s *link.Status) { s.Topics[0].Partitions[0].LagRecords = 5000 }, nil, "mirror", "warn", "5000 records behind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sound
			st.Link.Groups.Include = slices.Clone(sound.Link.Groups.Include)
			st.Topics = []link.TopicStatus{{Topic: "orders", State: cluster.MirrorActive, Partitions: []link.PartitionStatus{{LagRecords: 3}}}}
			tc.edit(&st)
			topics := tc.topics
			if topics == nil {
				topics = []string{"orders"}
			}
			var found bool
			for _, f := range linkFindings("orders-processor", topics, st) {
				if f.rule == tc.rule && f.level == tc.level && strings.Contains(f.what, tc.says) {
					found = true
				}
			}
			if !found {
				t.Errorf("want %s %s saying %q: %+v", tc.level, tc.rule, tc.says, linkFindings("orders-processor", topics, st))
			}
		})
	}
}
