package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/link"
)

// A migration plan checks the rules that make moving a group to a new
// version of its code safe, before anything starts: the canary (and the
// new version's consumers) must get partitions, its protocol and assignor
// must be accepted by the group, static members must not fence each
// other, and the new version must use the group's id and not a
// near-identical one.

// planInput is what migrate plan is told of the new version.
type planInput struct {
	group    string
	planned  int    // consumers of the new version running at once beside the old ones
	protocol string // classic or consumer; "" for the group's own
	assignor string // the new version's (first) assignor; "" to not check
	static   bool   // the new version uses group.instance.id
}

// groupView is what migrate plan reads of the cluster.
type groupView struct {
	exists    bool
	groupType string   // classic or consumer
	protocol  string   // the classic group's chosen assignor, or the consumer group's
	members   int      // current members
	static    []string // instance ids of current static members
	topics    []string // topics it reads or has offsets for
	// partitions of each of those topics.
	partitions map[string]int
	// others: groups with offsets on those topics, by name.
	others map[string][]string
	// migrationPolicy is the broker's group.consumer.migration.policy.
	migrationPolicy string
	// closest: when the group does not exist, the existing groups whose
	// ids are closest to its id.
	closest []string
}

// finding is one rule's verdict.
type finding struct {
	level string // ok, warn or FAIL
	rule  string
	what  string
}

// plan applies the rules.
func plan(in planInput, v groupView) []finding {
	var fs []finding
	add := func(level, rule, format string, args ...any) {
		fs = append(fs, finding{level, rule, fmt.Sprintf(format, args...)})
	}
	switch {
	case !v.exists && len(v.closest) > 0:
		// A group that does not exist has no topics to compare with
		// other groups' (the group-id rule below), so a mistyped id is
		// found by its name alone.
		add("FAIL", "group-id", "no group %s%s A new version started under %s does not resume from %s's "+
			"committed offsets: it starts from its auto.offset.reset policy", in.group,
			didYouMean("%s", v.closest), in.group, strings.Join(v.closest, " or "))
	case !v.exists:
		add("warn", "group", "group %s does not exist yet: the new version starts from its auto.offset.reset policy", in.group)
	}
	// Capacity: every consumer, the canary included, must get a
	// partition of each topic (range assigns topic by topic), with one to
	// spare for the next consumer of a scale-over.
	if len(v.topics) > 0 {
		least, leastTopic := 0, ""
		for _, t := range v.topics {
			if n := v.partitions[t]; leastTopic == "" || n < least {
				least, leastTopic = n, t
			}
		}
		total := v.members + in.planned
		if total > least-1 {
			add("FAIL", "capacity", "%d consumers (%d now + %d planned) for %d partitions of %s: some would get none; "+
				"keep consumers at most partitions - 1 (%d), or add partitions first; or, when the records need no order "+
				"per partition, read them as a share group, where consumers may outnumber partitions (README: Share groups)",
				total, v.members, in.planned, least, leastTopic, max(least-1, 0))
		} else {
			add("ok", "capacity", "%d consumers (%d now + %d planned) for %d partitions of %s", total, v.members, in.planned, least, leastTopic)
		}
	}
	// Protocol: classic and consumer members may share a group only as the
	// broker's migration policy allows.
	want := in.protocol
	if want == "" {
		want = v.groupType
	}
	switch {
	case v.members == 0 || want == v.groupType || v.groupType == "":
		add("ok", "protocol", "the new version uses the %s protocol", orDash(want))
	case want == "consumer" && !policyAllows(v.migrationPolicy, "upgrade"):
		add("FAIL", "protocol", "the group is classic and group.consumer.migration.policy=%s refuses an online upgrade: "+
			"a consumer-protocol member gets GROUP_ID_NOT_FOUND", v.migrationPolicy)
	case want == "classic" && !policyAllows(v.migrationPolicy, "downgrade"):
		add("FAIL", "protocol", "the group is a consumer group and group.consumer.migration.policy=%s refuses classic members "+
			"joining it: they get INCONSISTENT_GROUP_PROTOCOL", v.migrationPolicy)
	default:
		add("ok", "protocol", "the group is %s, the new version %s: group.consumer.migration.policy=%s converts it live",
			v.groupType, want, v.migrationPolicy)
	}
	// Assignor: a classic group runs one assignor that every member
	// supports; a new member that does not offer it is refused, and eager
	// and cooperative members cannot be mixed in one step.
	if in.assignor != "" && v.groupType == "classic" && want == "classic" && v.members > 0 && v.protocol != "" {
		switch {
		case in.assignor == v.protocol:
			add("ok", "assignor", "the new version's assignor is the group's, %s", v.protocol)
		case cooperative(in.assignor) != cooperative(v.protocol):
			add("FAIL", "assignor", "the group runs %s (%s) and the new version %s (%s): eager and cooperative members cannot be mixed; "+
				"give the new version [%s, %s] first, and drop %s once every member runs it (Kafka's two-step upgrade)",
				v.protocol, rebalanceKind(v.protocol), in.assignor, rebalanceKind(in.assignor), in.assignor, v.protocol, v.protocol)
		default:
			add("FAIL", "assignor", "the group runs %s and the new version offers %s: a member that does not offer %s "+
				"is refused (INCONSISTENT_GROUP_PROTOCOL); list %s among its assignors", v.protocol, in.assignor, v.protocol, v.protocol)
		}
	}
	// Static membership: a new instance with an old instance's id fences it.
	if len(v.static) > 0 {
		add("warn", "static", "%d members are static (%s): give the new version other group.instance.id values, "+
			"or each new instance fences the old one with its id (FENCED_INSTANCE_ID); static members keep their "+
			"partitions for their whole session after a crash", len(v.static), strings.Join(v.static, ", "))
	} else if in.static {
		add("ok", "static", "the new version is static; the old one is not")
	}
	// A near-identical group id reading the same topics: a new version
	// started under it by mistake reads from its reset policy, not from
	// the group's committed offsets.
	var near []string
	for name, topics := range v.others {
		if name != in.group && nearName(name, in.group) {
			near = append(near, fmt.Sprintf("%s (on %s)", name, strings.Join(topics, ", ")))
		}
	}
	slices.Sort(near)
	switch {
	case !v.exists && len(v.closest) > 0:
		// Said above.
	case len(near) > 0:
		add("FAIL", "group-id", "groups with a name close to %s read the same topics: %s; a new version started under "+
			"one of them by mistake does not resume from %s's offsets. Use exactly %s, or copy its offsets first "+
			"(strand group copy-offsets)", in.group, strings.Join(near, "; "), in.group, in.group)
	default:
		add("ok", "group-id", "no other group with a name close to %s reads its topics", in.group)
	}
	return fs
}

func policyAllows(policy, step string) bool {
	switch strings.ToLower(policy) {
	case "bidirectional", "both", "":
		return true
	case "disabled":
		return false
	}
	return strings.EqualFold(policy, step)
}

// cooperative says whether a classic assignor rebalances incrementally.
func cooperative(assignor string) bool {
	return strings.Contains(strings.ToLower(assignor), "cooperative")
}

func rebalanceKind(assignor string) string {
	if cooperative(assignor) {
		return "cooperative"
	}
	return "eager"
}

// nearName says whether two group ids look like one name mistyped or
// versioned: equal once case, separators and a trailing version are
// dropped, or within two edits.
func nearName(a, b string) bool {
	na, nb := normalName(a), normalName(b)
	if na == nb {
		return true
	}
	// Short names are too easily two edits apart.
	return min(len(a), len(b)) >= 6 && editDistance(strings.ToLower(a), strings.ToLower(b)) <= 2
}

func normalName(s string) string {
	s = strings.ToLower(s)
	s = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' {
			return -1
		}
		return r
	}, s)
	// A trailing version: v2, 2.
	s = strings.TrimRight(s, "0123456789")
	return strings.TrimSuffix(s, "v")
}

// readGroupView reads what plan needs through the admin client.
func readGroupView(ctx context.Context, adm *kadm.Client, group string) (groupView, error) {
	v := groupView{partitions: map[string]int{}, others: map[string][]string{}, migrationPolicy: "bidirectional"}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return v, err
	}
	topics := map[string]bool{}
	if g, ok := listed[group]; ok {
		v.exists, v.groupType = true, g.GroupType
		if v.groupType == "" {
			v.groupType = "classic"
		}
	} else {
		v.closest = closest(group, listed.Groups())
	}
	if v.exists && v.groupType == "consumer" {
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return v, err
		}
		d := ds[group]
		v.protocol, v.members = d.AssignorName, len(d.Members)
		for _, m := range d.Members {
			if m.InstanceID != nil {
				v.static = append(v.static, *m.InstanceID)
			}
			for _, t := range m.SubscribedTopics {
				topics[t] = true
			}
		}
	} else if v.exists {
		ds, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return v, err
		}
		d := ds[group]
		v.protocol, v.members = d.Protocol, len(d.Members)
		for _, m := range d.Members {
			if m.InstanceID != nil {
				v.static = append(v.static, *m.InstanceID)
			}
			if md, ok := m.Join.AsConsumer(); ok {
				for _, t := range md.Topics {
					topics[t] = true
				}
			}
		}
	}
	if v.exists {
		offs, err := inspect.FetchOffsets(ctx, adm, group)
		if err != nil {
			return v, err
		}
		for _, t := range offs.Offsets().TopicsSet().Topics() {
			topics[t] = true
		}
	}
	v.topics = slices.Sorted(maps.Keys(topics))
	if len(v.topics) > 0 {
		td, err := adm.ListTopics(ctx, v.topics...)
		if err != nil {
			return v, err
		}
		for _, t := range td {
			if t.Err == nil {
				v.partitions[t.Topic] = len(t.Partitions)
			}
		}
	}
	// Other groups on the same topics.
	for name := range listed {
		if name == group || !nearName(name, group) {
			continue
		}
		offs, err := inspect.FetchOffsets(ctx, adm, name)
		if err != nil {
			continue
		}
		for _, t := range offs.Offsets().TopicsSet().Topics() {
			if topics[t] {
				v.others[name] = append(v.others[name], t)
			}
		}
	}
	if cfgs, err := adm.DescribeBrokerConfigs(ctx); err == nil {
		for _, rc := range cfgs {
			for _, c := range rc.Configs {
				if c.Key == "group.consumer.migration.policy" && c.Value != nil {
					v.migrationPolicy = *c.Value
				}
			}
		}
	}
	return v, nil
}

// maxLinkLag is how many records behind its source a mirror may be when
// consumers start moving onto it: they wait for what it lacks.
const maxLinkLag = 1000

// linkFindings are the rules of a move across clusters through a cluster
// link (st, as the target's admin API reports it): the link passes the
// group through and runs, and it mirrors, caught up, every topic the group
// reads at the source.
func linkFindings(group string, topics []string, st link.Status) []finding {
	var fs []finding
	add := func(level, rule, format string, args ...any) {
		fs = append(fs, finding{level, rule, fmt.Sprintf(format, args...)})
	}
	l := st.Link
	match, err := l.Groups.Compile()
	switch {
	case err != nil || !match(group):
		add("FAIL", "link", "link %s does not cover group %s: strand link alter %s --groups %s --group-pass-through",
			st.Name, group, st.Name, group)
	case l.Promoted(group):
		add("warn", "link", "group %s already moved home from link %s: it lives on Strand", group, st.Name)
	case !l.GroupPassThrough:
		add("FAIL", "link", "link %s copies group %s's offsets but does not pass it through: a consumer started on Strand "+
			"would form a second group beside Kafka's (stop them all first, or strand link alter %s --group-pass-through)",
			st.Name, group, st.Name)
	case st.State != "active":
		add("FAIL", "link", "link %s is %s%s: strand link resume %s", st.Name, st.State, errSuffix(st.Error), st.Name)
	default:
		add("ok", "link", "link %s passes group %s through to its source", st.Name, group)
	}
	mirrored := map[string]mirrorView{}
	for _, t := range st.Topics {
		mirrored[t.Topic] = mirrorView{t}
	}
	for _, topic := range topics {
		t, ok := mirrored[topic]
		switch {
		case !ok:
			add("FAIL", "mirror", "topic %s, which the group reads, is not mirrored by link %s: strand link alter %s --topics ...",
				topic, st.Name, st.Name)
		case t.State != cluster.MirrorActive:
			add("FAIL", "mirror", "the mirror of %s is %s%s", topic, t.State, errSuffix(t.Reason))
		case t.lag() > maxLinkLag:
			add("warn", "mirror", "the mirror of %s is %d records behind its source: consumers moved onto it wait for them",
				topic, t.lag())
		default:
			add("ok", "mirror", "topic %s is mirrored, %d records behind", topic, t.lag())
		}
	}
	return fs
}

// mirrorView is a mirror topic's status, for the plan.
type mirrorView struct{ link.TopicStatus }

// lag is the records the mirror lacks, over its partitions.
func (t mirrorView) lag() int64 {
	var n int64
	for _, p := range t.Partitions {
		n += max(p.LagRecords, 0)
	}
	return n
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func migratePlanCommand() *cobra.Command {
	var (
		brokers  string
		in       planInput
		timeout  time.Duration
		linkName string
		admin    string
	)
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Check that moving a group to a new version is safe, before starting",
		Long: `Check the rules of a safe migration of --group to a new version: enough
partitions for the current consumers plus --planned new ones (at most
partitions - 1); the new version's --protocol and --assignor accepted by the
group (eager and cooperative assignors cannot be mixed in one step; classic and
consumer members only as group.consumer.migration.policy allows); static
members; and other groups with a near-identical id reading the same topics. It
prints what to do and exits non-zero when a rule is broken.

With --link, the move is across clusters: the group lives at the link's source
(--brokers), and the link must pass it through, run, and mirror every topic the
group reads, caught up.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if in.protocol != "" && in.protocol != "classic" && in.protocol != "consumer" {
				return fmt.Errorf("--protocol %q: classic or consumer", in.protocol)
			}
			var v groupView
			err := withAdmin(cmd, brokers, timeout, func(ctx context.Context, adm *kadm.Client) error {
				var err error
				v, err = readGroupView(ctx, adm, in.group)
				return err
			})
			if err != nil {
				return err
			}
			fs := plan(in, v)
			if linkName != "" {
				var st link.Status
				ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
				defer cancel()
				api := &adminAPI{base: "http://" + admin}
				if err := api.do(ctx, "GET", "/api/links/"+url.PathEscape(linkName), nil, &st); err != nil {
					return fmt.Errorf("reading link %s: %w", linkName, err)
				}
				fs = append(fs, linkFindings(in.group, v.topics, st)...)
			}
			printPlan(cmd.OutOrStdout(), in.group, fs)
			var broken []string
			for _, f := range fs {
				if f.level == "FAIL" {
					broken = append(broken, f.rule)
				}
			}
			if len(broken) > 0 {
				return fmt.Errorf("migration plan for %s breaks %s", in.group, strings.Join(broken, ", "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	brokersFlag(f, &brokers)
	f.StringVar(&in.group, "group", "", "the consumer group to migrate (required)")
	f.IntVar(&in.planned, "planned", 1, "consumers of the new version running beside the old ones at once (the canary: 1)")
	f.StringVar(&in.protocol, "protocol", "", "the new version's group protocol: classic or consumer (default: the group's)")
	f.StringVar(&in.assignor, "assignor", "", "the new version's first assignor (classic: range, cooperative-sticky, ...)")
	f.BoolVar(&in.static, "static", false, "the new version uses group.instance.id")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long the checks may take")
	f.StringVar(&linkName, "link", "", "a move across clusters: the Strand cluster link the group's consumers move "+
		"through (--brokers then names the source, where the group lives)")
	f.StringVar(&admin, "admin", envOr("STRAND_ADMIN", "127.0.0.1:9644"), "with --link: a Strand broker's admin listener, host:port (or STRAND_ADMIN)")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

func printPlan(w io.Writer, group string, fs []finding) {
	fmt.Fprintf(w, "Migration plan for group %s\n\n", group)
	for _, f := range fs {
		fmt.Fprintf(w, "%-4s  %-9s %s\n", f.level, f.rule, f.what)
	}
}
