package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/ledger/reader"
)

// groupCommand is the everyday tools for consumer groups. They speak the
// Kafka protocol (franz-go's admin client), so they work against any Kafka
// cluster as well as Strand.
func groupCommand() *cobra.Command {
	cmd, admin := adminCommand("group", "List, describe, measure, move and delete consumer and share groups")
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

// brokersFlag declares the --brokers flag every tool that reaches a
// cluster takes; the rest of how it connects (TLS, SASL) comes from the
// chosen profile.
func brokersFlag(f *pflag.FlagSet, brokers *string) {
	f.StringVar(brokers, "brokers", "", "bootstrap brokers, comma-separated (default: STRAND_BROKERS, else the profile's, else "+
		localBroker+")")
}

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
	brokersFlag(f, &brokers)
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
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	cl, err := connect(ctx, brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
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

// groupLagCommand is describe (members first, with their client
// software) or lag (partitions only).
func groupLagCommand(admin adminFunc, use, short string) *cobra.Command {
	var groupFlag, format string
	cmd := &cobra.Command{Use: use + " GROUP", Short: short, Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group, err := groupArg(cmd, groupFlag, args)
			if err != nil {
				return err
			}
			if err := checkFormat(format); err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				g, err := inspect.ReadGroup(ctx, adm, group)
				if err != nil {
					return err
				}
				if !g.Exists() {
					return noGroup(ctx, adm, group)
				}
				var softwareErr error
				if use == "describe" {
					softwareErr = addFromLedger(ctx, cmd, &g)
				}
				if format != "table" {
					return writeData(cmd.OutOrStdout(), format, g)
				}
				printLag(cmd.OutOrStdout(), g, use == "describe")
				if softwareErr != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "(client software unknown: %v)\n", softwareErr)
				}
				return nil
			})
		}}
	cmd.Flags().StringVar(&groupFlag, "group", "", "the group (or give it as the argument)")
	formatFlag(cmd, &format)
	return cmd
}

// groupArg is the group a command names, as its argument (as Kafka's and
// rpk's tools take it) or with --group.
func groupArg(cmd *cobra.Command, flag string, args []string) (string, error) {
	switch {
	case len(args) == 1 && flag != "" && flag != args[0]:
		return "", fmt.Errorf("--group %s and the argument %s name two groups", flag, args[0])
	case len(args) == 1:
		return args[0], nil
	case flag == "":
		return "", fmt.Errorf("name the group: %s GROUP", cmd.CommandPath())
	}
	return flag, nil
}

// addFromLedger gives g's members the client software the hand-off ledger
// recorded for them, and says which are held after their connection
// closed; a cluster without a ledger (another Kafka) leaves both unknown.
func addFromLedger(ctx context.Context, cmd *cobra.Command, g *inspect.Group) error {
	opts, seeds, err := clientOpts(cmd.Flag("brokers").Value.String())
	if err != nil {
		return err
	}
	es, err := reader.Read(ctx, seeds, g.Group, time.Time{}, opts[1:]...)
	if err != nil {
		return fmt.Errorf("reading the hand-off ledger: %w", err)
	}
	g.AddLedger(es, time.Now())
	return nil
}

func printLag(w io.Writer, g inspect.Group, members bool) {
	fmt.Fprintf(w, "group %s: %s, state %s, protocol %s %s, %d members\n\n", g.Group, g.Type, g.State, orDash(g.ProtocolType),
		orDash(g.Protocol), len(g.Members))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if members && len(g.Members) > 0 {
		fmt.Fprintln(tw, "MEMBER\tCLIENT ID\tSOFTWARE\tHOST\tINSTANCE\tPARTITIONS\tSTATUS")
		for _, m := range g.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.MemberID, m.ClientID, orDash(m.Software), m.Host, orDash(m.InstanceID),
				ownedLabel(m), orDash(m.Status))
		}
		fmt.Fprintln(tw)
	}
	from := "COMMITTED"
	if g.Type == "share" {
		from = "START" // a share-partition's start offset, not a commit
	}
	fmt.Fprintf(tw, "TOPIC\tPARTITION\t%s\tEND\tLAG\tMEMBER\n", from)
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

// errGroupExists is noGroup's answer for a group that exists: created
// since the command looked.
var errGroupExists = errors.New("the group was created meanwhile: run the command again")

// noGroupError is a group the cluster does not know, with the ids of
// those it knows that are closest.
type noGroupError struct {
	group string
	near  []string
}

func (e *noGroupError) Error() string {
	if len(e.near) == 0 {
		return fmt.Sprintf("no group %s (strand group list lists the groups)", e.group)
	}
	return "no group " + e.group + didYouMean("%s", e.near)
}

// noGroup is a *noGroupError for group, which the cluster does not know;
// errGroupExists if it knows it after all.
func noGroup(ctx context.Context, adm *kadm.Client, group string) error {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("no group %s? listing the groups: %w", group, err)
	}
	if _, ok := listed[group]; ok {
		return errGroupExists
	}
	return &noGroupError{group: group, near: closest(group, listed.Groups())}
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
					if err := noGroup(ctx, adm, from); !errors.Is(err, errGroupExists) {
						return err
					}
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
	var groupFlag string
	cmd := &cobra.Command{Use: "delete GROUP", Short: "Delete a group with no members, and its offsets", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group, err := groupArg(cmd, groupFlag, args)
			if err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				res, err := adm.DeleteGroups(ctx, group)
				if err != nil {
					return err
				}
				if r, ok := res[group]; ok && errors.Is(r.Err, kerr.GroupIDNotFound) {
					return noGroup(ctx, adm, group)
				} else if ok && r.Err != nil {
					return fmt.Errorf("group %s: %w", group, r.Err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted group %s\n", group)
				return nil
			})
		}}
	cmd.Flags().StringVar(&groupFlag, "group", "", "the group (or give it as the argument)")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
