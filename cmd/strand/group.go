package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/inspect"
)

// groupCommand is the everyday tools for consumer groups. They speak the
// Kafka protocol (franz-go's admin client), so they work against any Kafka
// cluster as well as Strand.
func groupCommand() *cobra.Command {
	cmd, admin := adminCommand("group", "List, describe, measure, move and delete consumer groups")
	cmd.AddCommand(
		groupListCommand(admin),
		groupLagCommand(admin, "describe", "A group's members, their partitions and lag"),
		groupLagCommand(admin, "lag", "A group's lag per partition, and in all"),
		groupResetCommand(admin),
		groupCopyCommand(admin),
		groupDeleteCommand(admin),
	)
	return cmd
}

type adminFunc = func(cmd *cobra.Command, fn func(ctx context.Context, adm *kadm.Client) error) error

// brokersUsage is the --brokers flag's help, shared by the tools.
const brokersUsage = "bootstrap brokers, comma-separated (default: STRAND_BROKERS, else the profile's, else " + localBroker + ")"

// adminCommand is a command whose subcommands talk to a cluster through
// an admin client: it holds the --brokers and --timeout flags they share,
// and the function that runs them.
func adminCommand(use, short string) (*cobra.Command, adminFunc) {
	var (
		brokers string
		timeout time.Duration
	)
	cmd := &cobra.Command{Use: use, Short: short}
	f := cmd.PersistentFlags()
	f.StringVar(&brokers, "brokers", "", brokersUsage)
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long the command may take")
	return cmd, func(cmd *cobra.Command, fn func(ctx context.Context, adm *kadm.Client) error) error {
		return withAdmin(cmd, brokers, timeout, fn)
	}
}

// withAdmin runs fn with an admin client of brokers (comma-separated),
// within timeout.
func withAdmin(cmd *cobra.Command, brokers string, timeout time.Duration, fn func(ctx context.Context, adm *kadm.Client) error) error {
	return withClient(cmd, brokers, timeout, func(ctx context.Context, cl *kgo.Client) error { return fn(ctx, kadm.NewClient(cl)) })
}

// withClient runs fn with a client of brokers (comma-separated), within
// timeout: for requests kadm does not make.
func withClient(cmd *cobra.Command, brokers string, timeout time.Duration, fn func(ctx context.Context, cl *kgo.Client) error) error {
	opts, _, err := clientOpts(brokers)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	return fn(ctx, cl)
}

func groupListCommand(admin adminFunc) *cobra.Command {
	var format string
	cmd := &cobra.Command{Use: "list", Short: "Every group, with its type and state", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				out, err := inspect.ListGroups(ctx, adm)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if format != "table" {
					return writeData(w, format, map[string]any{"groups": out})
				}
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "GROUP\tTYPE\tSTATE\tPROTOCOL TYPE")
				for _, g := range out {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Group, orDash(g.Type), orDash(g.State), orDash(g.ProtocolType))
				}
				return tw.Flush()
			})
		}}
	formatFlag(cmd, &format)
	return cmd
}

// groupLagCommand is describe (members first) or lag (partitions only).
func groupLagCommand(admin adminFunc, use, short string) *cobra.Command {
	var group, format string
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				g, err := inspect.ReadGroup(ctx, adm, group)
				if err != nil {
					return err
				}
				if !g.Exists() {
					return fmt.Errorf("group %s: not found", group)
				}
				if format != "table" {
					return writeData(cmd.OutOrStdout(), format, g)
				}
				printLag(cmd.OutOrStdout(), g, use == "describe")
				return nil
			})
		}}
	cmd.Flags().StringVar(&group, "group", "", "the group (required)")
	formatFlag(cmd, &format)
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

func printLag(w io.Writer, g inspect.Group, members bool) {
	fmt.Fprintf(w, "group %s: %s, state %s, protocol %s %s, %d members\n\n", g.Group, g.Type, g.State, orDash(g.ProtocolType),
		orDash(g.Protocol), len(g.Members))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if members && len(g.Members) > 0 {
		fmt.Fprintln(tw, "MEMBER\tCLIENT ID\tHOST\tINSTANCE\tPARTITIONS")
		for _, m := range g.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, m.ClientID, m.Host, orDash(m.InstanceID), ownedLabel(m))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER")
	for _, pl := range g.Partitions {
		member := "-"
		if m, ok := g.Member(pl.MemberID); ok {
			member = m.ClientID
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", pl.Topic, pl.Partition, offsetLabel(pl.Committed), offsetLabel(pl.End),
			countLabel(pl.Lag), member)
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntotal lag %d\n", g.TotalLag)
}

// ownedLabel is a member's partitions as the tables show them.
func ownedLabel(m inspect.Member) string {
	parts := make([]string, len(m.Owned))
	for i, p := range m.Owned {
		parts[i] = p.String()
	}
	return orDash(strings.Join(parts, " "))
}

// emptyGroup checks that group has no members.
func emptyGroup(ctx context.Context, adm *kadm.Client, group string) error {
	return inspect.CheckEmpty(ctx, adm, group)
}

func groupResetCommand(admin adminFunc) *cobra.Command {
	var (
		group, topic, to string
		execute          bool
	)
	cmd := &cobra.Command{Use: "reset-offsets", Short: "Move a stopped group's committed offsets", Args: cobra.NoArgs,
		Long: `Set the committed offsets of a group with no members, for every topic it has
offsets for (or --topic): --to earliest, latest, or an offset. Without
--execute it prints what it would do.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				if err := emptyGroup(ctx, adm, group); err != nil {
					return err
				}
				os, err := inspect.ResetTargets(ctx, adm, group, topic, to)
				if err != nil {
					return err
				}
				return commitOffsets(ctx, cmd.OutOrStdout(), adm, group, os, execute)
			})
		}}
	f := cmd.Flags()
	f.StringVar(&group, "group", "", "the group (required)")
	f.StringVar(&topic, "topic", "", "only this topic")
	f.StringVar(&to, "to", "earliest", "earliest, latest or an offset")
	f.BoolVar(&execute, "execute", false, "commit the offsets (without it, only print them)")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

func groupCopyCommand(admin adminFunc) *cobra.Command {
	var from, to string
	cmd := &cobra.Command{Use: "copy-offsets", Short: "Clone a group's committed offsets to a new group id", Args: cobra.NoArgs,
		Long: `Commit --from's committed offsets as --to's, so that a new version of a
service started under a new group id resumes where the old one is, instead of
at its offset reset policy (blue/green with a new name). --to must have no
members.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				if from == to {
					return fmt.Errorf("--from and --to are the same group")
				}
				if err := emptyGroup(ctx, adm, to); err != nil {
					return err
				}
				cur, err := inspect.FetchOffsets(ctx, adm, from)
				if err != nil {
					return err
				}
				if err := cur.Error(); err != nil {
					return err
				}
				os := cur.Offsets()
				if len(os) == 0 {
					return fmt.Errorf("group %s has no committed offsets", from)
				}
				return commitOffsets(ctx, cmd.OutOrStdout(), adm, to, os, true)
			})
		}}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "the group to copy (required)")
	f.StringVar(&to, "to", "", "the group to commit them for (required)")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// commitOffsets prints os and, with execute, commits them for group.
func commitOffsets(ctx context.Context, w io.Writer, adm *kadm.Client, group string, os kadm.Offsets, execute bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tOFFSET")
	var rows []kadm.Offset
	os.Each(func(o kadm.Offset) { rows = append(rows, o) })
	slices.SortFunc(rows, func(a, b kadm.Offset) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	for _, o := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", o.Topic, o.Partition, o.At)
	}
	tw.Flush()
	if !execute {
		fmt.Fprintln(w, "\n(not committed: add --execute)")
		return nil
	}
	res, err := adm.CommitOffsets(ctx, group, os)
	if err != nil {
		return err
	}
	if err := res.Error(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ncommitted %d offsets for group %s\n", len(rows), group)
	return nil
}

func groupDeleteCommand(admin adminFunc) *cobra.Command {
	var group string
	cmd := &cobra.Command{Use: "delete", Short: "Delete a group with no members, and its offsets", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				res, err := adm.DeleteGroups(ctx, group)
				if err != nil {
					return err
				}
				if r, ok := res[group]; ok && r.Err != nil {
					return fmt.Errorf("group %s: %w", group, r.Err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted group %s\n", group)
				return nil
			})
		}}
	cmd.Flags().StringVar(&group, "group", "", "the group (required)")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
