package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/ledger/reader"
)

// migrate watch is the live view of a migration: the group's members by
// client software, the partitions and lag each version has, and, as they
// happen, the group's assignment changes and the ledger's hand-offs. The
// members and lag come through the Kafka protocol; the client software
// of a member is the one the ledger recorded when it took a partition.

// watchRecent is how many of the latest events a frame lists.
const watchRecent = 12

// watchMember is one member in a frame.
type watchMember struct {
	id, clientID, host, instance string
	software                     string // "" until the ledger names it
	// cluster is, for a group passed through a cluster link, where the
	// member is connected: "strand" or "source"; "" otherwise.
	cluster    string
	status     string // why it is held ("connection lost, removed in 2s"); "" if it is not
	partitions []string
	lag        int64
	lagSeconds float64 // the most of its partitions'; -1 when unknown
}

// watchEvent is an assignment change or a hand-off, as a frame lists it.
type watchEvent struct {
	at   time.Time
	what string
}

// watchFrame is one refresh of the view.
type watchFrame struct {
	at                              time.Time
	group, groupType, state, assign string
	err                             error // the group could not be read this time
	members                         []watchMember
	partitions                      int
	unassignedLag                   int64 // lag of partitions nobody owns
	changes                         int   // assignment changes seen
	since                           time.Time
	totals                          ledger.Totals
	// across: the group lives on a link's source (--source-brokers), and
	// its members are shown by cluster.
	across bool
	recent []watchEvent // oldest first
}

// watchState is what the view remembers between refreshes.
type watchState struct {
	software map[string]string      // member id -> software
	holds    ledger.Holds           // members held after their connection closed
	last     map[string]watchMember // the members as last seen
	seen     bool                   // last holds a first reading
	changes  int
	handoffs []ledger.Entry
	recent   []watchEvent
	// linked are the members the ledger names as connected here to a
	// group a cluster link passes through.
	linked map[string]bool
}

func newWatchState() *watchState {
	return &watchState{software: map[string]string{}, holds: ledger.Holds{}, linked: map[string]bool{}}
}

// learn takes in the ledger's new entries: members' software from all of
// them, and the hand-offs from since on to count and list.
func (s *watchState) learn(es []ledger.Entry, since time.Time) {
	maps.Copy(s.software, ledger.SoftwareByMember(es))
	for _, e := range es {
		s.holds.Learn(e)
		if e.Type == ledger.TypeHandoff && e.Link != "" {
			// A member connected here to a group a link passes
			// through: the entry's side that is not the source's.
			for _, m := range []*ledger.Member{&e.To, e.From} {
				if m != nil && m.MemberID != "" {
					s.linked[m.MemberID] = true
				}
			}
		}
		if e.Time.Before(since) {
			continue
		}
		switch e.Type {
		case ledger.TypeHandoff:
			s.handoffs = append(s.handoffs, e)
			s.event(e.Time, handoffLine(e))
		case ledger.TypeCommitNotOwned:
			s.event(e.Time, fmt.Sprintf("commit not owned: %s-%d committed by %s", e.Topic, e.Partition, memberOrDash(e.Committer)))
		case ledger.TypePresence:
			s.event(e.Time, fmt.Sprintf("member %s: %s", memberLabel(e.To), ledger.PresenceLine(e)))
		}
	}
}

func (s *watchState) event(at time.Time, what string) {
	s.recent = append(s.recent, watchEvent{at, what})
	slices.SortStableFunc(s.recent, func(a, b watchEvent) int { return a.at.Compare(b.at) })
	if n := len(s.recent) - watchRecent; n > 0 {
		s.recent = slices.Delete(s.recent, 0, n)
	}
}

// observe compares the group's members and partitions with the last
// reading, and records a change.
func (s *watchState) observe(at time.Time, members []watchMember) {
	now := map[string]watchMember{}
	for _, m := range members {
		now[m.id] = m
	}
	same := func(a, b watchMember) bool { return slices.Equal(a.partitions, b.partitions) }
	if s.seen && !maps.EqualFunc(now, s.last, same) {
		s.changes++
		var joined, left []string
		for id, m := range now {
			if _, ok := s.last[id]; !ok {
				joined = append(joined, s.name(m))
			}
		}
		for id, m := range s.last {
			if _, ok := now[id]; !ok {
				left = append(left, s.name(m))
			}
		}
		slices.Sort(joined)
		slices.Sort(left)
		what := "assignment changed"
		if len(joined) > 0 {
			what += "; joined " + strings.Join(joined, ", ")
		}
		if len(left) > 0 {
			what += "; left " + strings.Join(left, ", ")
		}
		s.event(at, what)
	}
	s.last, s.seen = now, true
}

// clusterOf says where a member of a group passed through a link is
// connected: to Strand when the ledger names it, else to the source.
func (s *watchState) clusterOf(id string) string {
	if s.linked[id] {
		return "strand"
	}
	return "source"
}

// name is a member as an event names it: its client id and software.
func (s *watchState) name(m watchMember) string {
	return strings.TrimSpace(m.clientID + " " + bracketed(s.software[m.id]))
}

func bracketed(s string) string {
	if s == "" {
		return ""
	}
	return "[" + s + "]"
}

// readWatchFrame reads the group through the Kafka protocol, and, with
// lagOpts (a client's of the group's cluster), how far behind in time
// each member is.
func readWatchFrame(ctx context.Context, adm *kadm.Client, group string, st *watchState, across bool, lagOpts []kgo.Opt) watchFrame {
	f := watchFrame{at: time.Now(), group: group}
	g, err := inspect.ReadGroup(ctx, adm, group)
	switch {
	case err != nil:
		f.err = err
		return f
	case !g.Exists():
		f.err = fmt.Errorf("no group %s (yet)", group)
		return f
	}
	f.groupType, f.state, f.assign = g.Type, g.State, g.Protocol
	byID := map[string]*watchMember{}
	for _, m := range g.Members {
		f.members = append(f.members, watchMember{id: m.MemberID, clientID: m.ClientID, host: m.Host, instance: orDash(m.InstanceID),
			software: st.software[m.MemberID], status: st.holds.Status(m.MemberID, f.at), lagSeconds: -1})
	}
	for i := range f.members {
		m := &f.members[i]
		byID[m.id] = m
		if across {
			m.cluster = st.clusterOf(m.id)
		}
	}
	f.partitions = len(g.Partitions)
	var seconds map[inspect.Partition]float64
	if lagOpts != nil {
		seconds = inspect.LagSeconds(ctx, g, lagOpts...)
	}
	for _, pl := range g.Partitions {
		lag := max(pl.Lag, 0)
		m := byID[pl.MemberID]
		if m == nil {
			f.unassignedLag += lag
			continue
		}
		tp := inspect.Partition{Topic: pl.Topic, Partition: pl.Partition}
		m.partitions = append(m.partitions, tp.String())
		m.lag += lag
		if s, ok := seconds[tp]; ok {
			m.lagSeconds = max(m.lagSeconds, s)
		}
	}
	st.observe(f.at, f.members)
	return f
}

// render writes one frame.
func (f watchFrame) render(w io.Writer) {
	fmt.Fprintf(w, "migrate watch %s at %s\n", f.group, f.at.Local().Format(ledger.TimeLayout))
	if f.err != nil {
		fmt.Fprintf(w, "%v\n", f.err)
	} else {
		lag := f.unassignedLag
		for _, m := range f.members {
			lag += m.lag
		}
		fmt.Fprintf(w, "%s group, %s, assignor %s: %d members, %d partitions, total lag %d\n", f.groupType, f.state,
			orDash(f.assign), len(f.members), f.partitions, lag)
	}
	fmt.Fprintf(w, "assignment changes seen: %d; hand-offs since %s: %d, duplicate risk %d, skipped %d, rewound %d, longest unowned %s\n\n",
		f.changes, f.since.Local().Format(ledger.TimeLayout), f.totals.Handoffs, f.totals.DuplicateRisk, f.totals.Skipped, f.totals.Rewound,
		time.Duration(f.totals.LongestUnowned)*time.Millisecond)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(f.members) > 0 {
		type version struct {
			members, partitions int
			lag                 int64
			lagSeconds          float64
		}
		versions := map[string]*version{}
		for _, m := range f.members {
			label := cmp.Or(m.software, "unknown")
			if m.cluster != "" {
				label = m.cluster + " " + label
			}
			v := versions[label]
			if v == nil {
				v = &version{lagSeconds: -1}
				versions[label] = v
			}
			v.members++
			v.partitions += len(m.partitions)
			v.lag += m.lag
			v.lagSeconds = max(v.lagSeconds, m.lagSeconds)
		}
		fmt.Fprintln(tw, "SOFTWARE\tMEMBERS\tPARTITIONS\tLAG\tLAG (S)")
		for _, label := range slices.Sorted(maps.Keys(versions)) {
			v := versions[label]
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", label, v.members, v.partitions, v.lag, secondsLabel(v.lagSeconds))
		}
		fmt.Fprintln(tw)
		if f.across {
			fmt.Fprintln(tw, "MEMBER\tCLUSTER\tCLIENT ID\tHOST\tINSTANCE\tSOFTWARE\tLAG\tPARTITIONS\tSTATUS")
		} else {
			fmt.Fprintln(tw, "MEMBER\tCLIENT ID\tHOST\tINSTANCE\tSOFTWARE\tLAG\tPARTITIONS\tSTATUS")
		}
		for _, m := range f.members {
			id := m.id
			if f.across {
				id += "\t" + m.cluster
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", id, m.clientID, m.host, m.instance, cmp.Or(m.software, "unknown"), m.lag,
				orDash(strings.Join(m.partitions, " ")), orDash(m.status))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if len(f.recent) > 0 {
		fmt.Fprintln(w, "RECENT")
		for _, e := range f.recent {
			fmt.Fprintf(w, "%s  %s\n", e.at.Local().Format(ledger.TimeLayout), e.what)
		}
	}
}

// secondsLabel is a lag in seconds, "-" when unknown.
func secondsLabel(s float64) string {
	if s < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", s)
}

// handoffLine is a hand-off as the recent list shows it.
func handoffLine(e ledger.Entry) string {
	from := "nobody"
	if e.From != nil {
		from = memberLabel(*e.From)
	}
	if e.FirstStart() {
		// Not a hand-off: where it started is the offset reset's choice.
		return fmt.Sprintf("first start %s-%d: %s, nothing committed: started at %s (past %s records, its auto.offset.reset)",
			e.Topic, e.Partition, memberLabel(e.To), offsetLabel(e.FirstFetched), countLabel(e.Skipped))
	}
	s := fmt.Sprintf("hand-off %s-%d: %s -> %s", e.Topic, e.Partition, from, memberLabel(e.To))
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s + fmt.Sprintf(", duplicate risk %s, skipped %s, unowned %s", countLabel(e.DuplicateRisk), countLabel(e.Skipped),
		time.Duration(e.UnownedMs)*time.Millisecond)
}

func memberOrDash(m *ledger.Member) string {
	if m == nil {
		return "-"
	}
	return memberLabel(*m)
}

// isTerminal says whether w is a terminal, where frames redraw in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func migrateWatchCommand() *cobra.Command {
	var (
		brokers, group, since, source string
		interval, timeout             time.Duration
		iterations                    int
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "A live view of a group's members by client version, their partitions and lag, and its hand-offs",
		Long: `Refresh, every --interval, a view of a consumer group: its members grouped by
client software (name and version, as the hand-off ledger recorded them when
each took a partition), how many partitions and how much lag each version has,
each member with its partitions, and the latest assignment changes and
hand-offs (with their duplicate risk and skipped records) as they happen, with
the totals of the hand-offs since --since. Set client.software.name and
client.software.version (librdkafka, franz-go) to tell versions of your own
code apart. --iterations stops after that many refreshes; otherwise it runs
until interrupted.

A group a cluster link passes through lives on the link's source: with
--source-brokers its members are read there, each shown as connected to the
source or to Strand (named by Strand's ledger once it took a partition), and
the hand-offs are Strand's ledger's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			from, err := ledger.ParseSince(since, time.Now())
			if err != nil {
				return err
			}
			if interval <= 0 {
				return fmt.Errorf("--interval %v: must be positive", interval)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts, seeds, err := clientOpts(brokers)
			if err != nil {
				return err
			}
			// A cluster that cannot be reached is an error, not a view
			// of nothing; one lost later is shown in the frames.
			cl, err := connect(ctx, brokers)
			if err != nil {
				return err
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			if source != "" {
				// The group lives on the link's source; the ledger
				// here.
				scl, err := connect(ctx, source)
				if err != nil {
					return err
				}
				defer scl.Close()
				adm = kadm.NewClient(scl)
			}
			// A group that does not exist yet is watched until it does,
			// unless its id is a near miss of one that does.
			var missing *noGroupError
			if err := noGroup(ctx, adm, group); errors.As(err, &missing) && len(missing.near) > 0 {
				return err
			}
			// The whole ledger is read for the members' software; only
			// hand-offs from since on are counted.
			tail, err := reader.NewTail(seeds, group, time.Time{}, opts[1:]...)
			if err != nil {
				return err
			}
			defer tail.Close()
			out := cmd.OutOrStdout()
			redraw := isTerminal(out)
			st := newWatchState()
			for i := 0; iterations <= 0 || i < iterations; i++ {
				next := time.Now().Add(interval)
				readCtx, cancel := context.WithTimeout(ctx, timeout)
				es, err := tail.Next(readCtx, 100*time.Millisecond)
				st.learn(es, from)
				var lagOpts []kgo.Opt
				if source == "" {
					lagOpts = opts
				}
				f := readWatchFrame(readCtx, adm, group, st, source != "", lagOpts)
				cancel()
				if ctx.Err() != nil {
					return nil // interrupted
				}
				if f.err == nil && err != nil {
					f.err = fmt.Errorf("reading the hand-off ledger: %w", err)
				}
				f.changes, f.since, f.recent, f.across = st.changes, from, st.recent, source != ""
				f.totals = ledger.NewReport(group, st.handoffs).Totals
				if redraw {
					fmt.Fprint(out, "\x1b[H\x1b[2J")
				} else if i > 0 {
					fmt.Fprintln(out)
				}
				f.render(out)
				if iterations > 0 && i == iterations-1 {
					break
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Until(next)):
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	brokersFlag(fl, &brokers)
	fl.StringVar(&group, "group", "", "the consumer group (required)")
	fl.StringVar(&since, "since", "1h", "hand-offs counted from then on: a time (RFC 3339) or a duration back from now")
	fl.DurationVar(&interval, "interval", time.Second, "how often the view refreshes")
	fl.DurationVar(&timeout, "timeout", 10*time.Second, "how long one refresh may take")
	fl.IntVar(&iterations, "iterations", 0, "stop after this many refreshes (0: run until interrupted)")
	fl.StringVar(&source, "source-brokers", "", "a group a cluster link passes through: the source cluster it lives on, "+
		"whose members are shown by cluster (those on Strand once they took a partition)")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}
