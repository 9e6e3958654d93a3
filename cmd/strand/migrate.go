package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
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
		brokers, group, since, format string
		timeout                       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Every hand-off of a group's partitions, with what it risked",
		Long: `Print the hand-offs of a consumer group's partitions from the broker's hand-off
ledger (__strand_handoffs): for each, the previous and the new owner with their
client software, why the partition moved, the committed offset, where the new
owner started, and the duplicate risk (records sent to the previous owner past
the commit, which the new owner is sent again), the records skipped, how far it
rewound, and how long the partition went unread; then the totals. --format json (or yaml)
prints an object with the hand-offs, the commits members made of partitions
they did not own, and the totals. It exits non-zero when a hand-off skipped
records.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
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
				printReport(cmd.OutOrStdout(), group, r.Handoffs, t)
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
	f.StringVar(&brokers, "brokers", "", brokersUsage)
	f.StringVar(&group, "group", "", "the consumer group (required)")
	f.StringVar(&since, "since", "", "only hand-offs from then on: a time (RFC 3339) or a duration back from now (30m)")
	formatFlag(cmd, &format)
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long reading the ledger may take")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

func printReport(w io.Writer, group string, es []ledger.Entry, t ledger.Totals) {
	fmt.Fprintf(w, "Hand-offs of group %s\n\n", group)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tPARTITION\tFROM\tTO\tREASON\tCOMMITTED\tSTARTED\tLAST SENT\tDUP RISK\tSKIPPED\tREWOUND\tUNOWNED")
	for _, e := range es {
		from, reason := "-", e.Reason
		if e.From != nil {
			from = memberLabel(*e.From)
		}
		if reason == "" {
			reason = "first assignment"
		}
		fmt.Fprintf(tw, "%s\t%s-%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			e.Time.Local().Format("15:04:05.000"), e.Topic, e.Partition, from, memberLabel(e.To), reason,
			offsetLabel(e.Committed), offsetLabel(e.FirstFetched), offsetLabel(e.LastSent),
			countLabel(e.DuplicateRisk), countLabel(e.Skipped), countLabel(e.Rewound), time.Duration(e.UnownedMs)*time.Millisecond)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d hand-offs: duplicate risk %d, skipped %d (in %d hand-offs), rewound %d, longest unowned %v\n",
		t.Handoffs, t.DuplicateRisk, t.Skipped, t.SkippedHandoffs, t.Rewound, time.Duration(t.LongestUnowned)*time.Millisecond)
}

// printMoves lists the partitions the group moved from a link's source
// cluster: the source's last commit against where the group started here.
func printMoves(w io.Writer, ms []ledger.Move, t ledger.Totals) {
	if len(ms) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d partitions moved from another cluster\n\n", len(ms))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED AT\tPARTITION\tLINK\tSOURCE COMMIT\tCOPIED AT\tSTARTED\tSKIPPED\tREWOUND\tDUP RISK")
	for _, m := range ms {
		dup := "unknown (members at the source)"
		if m.DuplicateRisk >= 0 {
			dup = fmt.Sprint(m.DuplicateRisk)
		}
		fmt.Fprintf(tw, "%s\t%s-%d\t%s\t%d\t%s\t%d\t%d\t%d\t%s\n", m.FirstFetchedAt.Local().Format("15:04:05.000"), m.Topic, m.Partition,
			m.Link, m.SourceCommitted, m.CopiedAt.Local().Format("15:04:05.000"), m.FirstFetched, m.Skipped, m.Rewound, dup)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d moves: skipped %d, rewound %d\n", t.Moves, t.MovesSkipped, t.MovesRewound)
}

// printCommits lists the commits of partitions their member did not own.
func printCommits(w io.Writer, es []ledger.Entry) {
	if len(es) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d commits of partitions their member did not own\n\n", len(es))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tPARTITION\tCOMMITTER\tOFFSET\tOWNER")
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
		fmt.Fprintf(tw, "%s\t%s-%d\t%s\t%s\t%s\n", e.Time.Local().Format("15:04:05.000"), e.Topic, e.Partition, committer, offset, owner)
	}
	tw.Flush()
}

// memberLabel is a member as the table shows it: its client id, with its
// software when known.
func memberLabel(m ledger.Member) string {
	if m.MemberID == "" && m.ClientID == "" && m.Host != "" {
		// The other cluster's side of a hand-off across a link.
		return "a member at " + m.Host
	}
	s := m.ClientID
	if m.InstanceID != "" {
		s += " (" + m.InstanceID + ")"
	}
	if sw := m.Software(); sw != "" {
		s += " [" + sw + "]"
	}
	return s
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
