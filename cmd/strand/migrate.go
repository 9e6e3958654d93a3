package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/ledger/reader"
)

// migrateCommand is the tools for moving a consumer group to a new
// version of its code.
func migrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Tools for moving a consumer group to a new version safely",
	}
	cmd.AddCommand(migratePlanCommand(), migrateWatchCommand(), migrateReportCommand())
	return cmd
}

// errSkipped is migrate report's failure when a hand-off skipped records.
var errSkipped = errors.New("records were skipped")

func migrateReportCommand() *cobra.Command {
	var (
		brokers, group, since, format, risk string
		timeout                             time.Duration
		all                                 bool
	)
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Every hand-off of a group's partitions, with what it risked",
		Long: `Report the hand-offs of a consumer group's partitions from the broker's hand-off
ledger (__strand_handoffs). First a summary by version (a member's client
software and version: set client.software.name and client.software.version to
name your own): for each pair of versions the partitions moved between them,
with the duplicate risk (records sent to the previous owner past the commit,
which the new owner is sent again), the records skipped, how far the new owners
rewound, and how long a partition went unread; a move back to a version the
group had left is marked as a rollback, and moves within one version are
reshuffles. The group's first start on a partition with nothing committed is
reported apart: where it starts is its auto.offset.reset, not a hand-off.

Then the hand-offs that risked something (--all for every one, --risk for one
kind: duplicate, skipped, rewound or any), each with its previous and new owner,
why the partition moved, the committed offset and where the new owner started;
and the totals. Times are printed in the local zone, and --since reads them
back. --format json (or yaml) prints an object with every hand-off, the
version summary, the commits members made of partitions they did not own, and
the totals. It exits non-zero when a hand-off skipped records.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if risk != "" && !slices.Contains(ledger.Risks, risk) {
				return fmt.Errorf("--risk %q: one of %s", risk, strings.Join(ledger.Risks, ", "))
			}
			from, err := ledger.ParseSince(since, time.Now())
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			cl, err := connect(ctx, brokers)
			if err != nil {
				return err
			}
			defer cl.Close()
			opts, seeds, err := clientOpts(brokers)
			if err != nil {
				return err
			}
			entries, err := reader.Read(ctx, seeds, group, from, opts[1:]...)
			if err != nil {
				return err
			}
			if len(entries) == 0 {
				// No hand-offs of a group the cluster does not know is
				// most likely a mistyped id; a deleted group's hand-offs
				// are still reported.
				if err := noGroup(ctx, kadm.NewClient(cl), group); !errors.Is(err, errGroupExists) {
					return err
				}
			}
			r := ledger.NewReport(group, entries)
			t := r.Totals
			if format == "table" {
				printReport(cmd.OutOrStdout(), r, from, reportFilter{all: all, risk: risk})
				printCommits(cmd.OutOrStdout(), r.CommitsNotOwned)
				printMoves(cmd.OutOrStdout(), r.Moves, t)
			} else if err := writeData(cmd.OutOrStdout(), format, r); err != nil {
				return err
			}
			if t.Skipped > 0 {
				return fmt.Errorf("%w: %d records in %d hand-offs of group %s", errSkipped, t.Skipped, t.SkippedHandoffs, group)
			}
			if t.MovesSkipped > 0 {
				return fmt.Errorf("%w: %d records in the moves of group %s from another cluster", errSkipped, t.MovesSkipped, group)
			}
			return nil
		},
	}
	f := cmd.Flags()
	brokersFlag(f, &brokers)
	f.StringVar(&group, "group", "", "the consumer group (required)")
	f.StringVar(&since, "since", "", "only hand-offs from then on: a time as the report prints it (2026-12-05 20:47:03.123, local) or RFC 3339, a date, a time of day, or a duration back from now (30m, 2h, 1d)")
	f.BoolVar(&all, "all", false, "list every hand-off, first starts and reshuffles included, not only those that risked something")
	f.StringVar(&risk, "risk", "", "list only the hand-offs of one risk: duplicate, skipped, rewound or any")
	formatFlag(cmd, &format)
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long reading the ledger may take")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

// reportFilter chooses the hand-offs the table lists: those that risked
// something (the default), every one, or those of one risk.
type reportFilter struct {
	all  bool
	risk string
}

func (f reportFilter) lists(e ledger.Entry) bool {
	switch {
	case f.all:
		return true
	case f.risk != "":
		return e.Risky(f.risk)
	}
	return !e.FirstStart() && e.Risky("any")
}

func printReport(w io.Writer, r ledger.Report, since time.Time, filter reportFilter) {
	zone, _ := time.Now().Zone()
	if since.IsZero() {
		fmt.Fprintf(w, "Hand-offs of group %s (times in %s)\n", r.Group, zone)
	} else {
		fmt.Fprintf(w, "Hand-offs of group %s since %s (times in %s)\n", r.Group, since.Local().Format(ledger.TimeLayout), zone)
	}
	if len(r.Versions) > 0 {
		fmt.Fprintf(w, "\nBy version (client software and version):\n")
		tw := newFitTable(0)
		tw.add("VERSIONS", "PARTITIONS", "HAND-OFFS", "DUP RISK", "SKIPPED", "REWOUND", "LONGEST UNOWNED")
		for _, p := range r.Versions {
			tw.add(pairLabel(p), fmt.Sprint(p.Partitions), fmt.Sprint(p.Handoffs), fmt.Sprint(p.DuplicateRisk),
				fmt.Sprint(p.Skipped), fmt.Sprint(p.Rewound), msLabel(p.LongestUnowned))
		}
		tw.write(w, terminalWidth)
	}
	t := r.Totals
	if t.FirstStarts > 0 {
		fmt.Fprintf(w, "\nFirst starts: %d, with nothing committed, so each consumer started where its auto.offset.reset put it:\n"+
			"past %d records of what the log held (a reset, not counted as skipped; --all lists them).\n", t.FirstStarts, t.FirstStartsPast)
	}
	var listed []ledger.Entry
	for _, e := range r.Handoffs {
		if filter.lists(e) {
			listed = append(listed, e)
		}
	}
	switch {
	case filter.all:
		fmt.Fprintf(w, "\nEvery hand-off (%d):\n", len(listed))
	case filter.risk != "":
		fmt.Fprintf(w, "\n%d hand-offs with a %s risk (--all for all %d):\n", len(listed), filter.risk, len(r.Handoffs))
	default:
		fmt.Fprintf(w, "\n%d hand-offs that risked something (--all for all %d):\n", len(listed), len(r.Handoffs))
	}
	if len(listed) > 0 {
		// Each owner is named by its client id and version, so that a
		// canary sharing its client id with the members it joins is told
		// apart.
		tw := newFitTable(1, 2, 3, 4)
		tw.add("TIME", "PARTITION", "FROM", "TO", "REASON", "COMMIT", "START", "DUPS", "SKIP", "REWIND", "UNOWNED")
		for _, e := range listed {
			from, reason := "-", e.Reason
			if e.From != nil {
				from = ownerLabel(*e.From)
			}
			switch {
			case e.FirstStart():
				reason = "first start"
			case reason == "":
				reason = "first assignment"
			}
			tw.add(e.Time.Local().Format(ledger.TimeLayout), fmt.Sprintf("%s-%d", e.Topic, e.Partition), from, ownerLabel(e.To), reason,
				offsetLabel(e.Committed), offsetLabel(e.FirstFetched), countLabel(e.DuplicateRisk), countLabel(e.Skipped),
				countLabel(e.Rewound), msLabel(e.UnownedMs))
		}
		tw.write(w, terminalWidth)
	}
	fmt.Fprintf(w, "\n%d hand-offs: duplicate risk %d, skipped %d (in %d hand-offs), rewound %d, longest unowned %v",
		t.Handoffs, t.DuplicateRisk, t.Skipped, t.SkippedHandoffs, t.Rewound, msLabel(t.LongestUnowned))
	if t.FirstStarts > 0 {
		fmt.Fprintf(w, "; %d first starts", t.FirstStarts)
	}
	fmt.Fprintln(w)
}

// pairLabel names a version pair: "v1 → v2", "rollback v2 → v1", "within
// v1" for a reshuffle.
func pairLabel(p ledger.VersionPair) string {
	switch {
	case p.Reshuffle():
		return "within " + p.From
	case p.Rollback:
		return "rollback " + p.From + " → " + p.To
	}
	return p.From + " → " + p.To
}

func msLabel(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

// printMoves lists the partitions the group moved from a link's source
// cluster: the source's last commit against where the group started here.
func printMoves(w io.Writer, ms []ledger.Move, t ledger.Totals) {
	if len(ms) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d partitions moved from another cluster\n\n", len(ms))
	tw := newFitTable(2)
	tw.add("STARTED AT", "PARTITION", "LINK", "SOURCE COMMIT", "COPIED AT", "STARTED", "SKIPPED", "REWOUND", "DUP RISK")
	for _, m := range ms {
		dup := "unknown (members at the source)"
		if m.DuplicateRisk >= 0 {
			dup = fmt.Sprint(m.DuplicateRisk)
		}
		tw.add(m.FirstFetchedAt.Local().Format(ledger.TimeLayout), fmt.Sprintf("%s-%d", m.Topic, m.Partition), m.Link,
			fmt.Sprint(m.SourceCommitted), m.CopiedAt.Local().Format(ledger.TimeLayout), fmt.Sprint(m.FirstFetched),
			fmt.Sprint(m.Skipped), fmt.Sprint(m.Rewound), dup)
	}
	tw.write(w, terminalWidth)
	fmt.Fprintf(w, "\n%d moves: skipped %d, rewound %d\n", t.Moves, t.MovesSkipped, t.MovesRewound)
}

// printCommits lists the commits of partitions their member did not own.
func printCommits(w io.Writer, es []ledger.Entry) {
	if len(es) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d commits of partitions their member did not own\n\n", len(es))
	tw := newFitTable(2, 4)
	tw.add("TIME", "PARTITION", "COMMITTER", "OFFSET", "OWNER")
	for _, e := range es {
		committer, owner, offset := "-", "nobody", "-"
		if e.Committer != nil {
			committer = memberLabel(*e.Committer)
		}
		if e.Owner != nil {
			owner = memberLabel(*e.Owner)
		}
		if e.Offset != nil {
			offset = fmt.Sprint(*e.Offset)
		}
		tw.add(e.Time.Local().Format(ledger.TimeLayout), fmt.Sprintf("%s-%d", e.Topic, e.Partition), committer, offset, owner)
	}
	tw.write(w, terminalWidth)
}

// ownerLabel is a member as a hand-off's row names it: its client id
// (and instance id) with its software's version.
func ownerLabel(m ledger.Member) string {
	return labelWith(m, m.SoftwareVersion)
}

// memberLabel is a member as the other tables show it: its client id,
// with its software when known.
func memberLabel(m ledger.Member) string {
	if sw := m.Software(); sw != "" {
		return labelWith(m, "["+sw+"]")
	}
	return labelWith(m, "")
}

// labelWith names a member by its client id and instance id, then what
// follows; the other cluster's side of a hand-off across a link by its
// host.
func labelWith(m ledger.Member, follows string) string {
	if m.MemberID == "" && m.ClientID == "" && m.Host != "" {
		return "a member at " + m.Host
	}
	s := m.ClientID
	if m.InstanceID != "" {
		s += " (" + m.InstanceID + ")"
	}
	return strings.TrimSpace(s + " " + follows)
}

func offsetLabel(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}

func countLabel(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}
