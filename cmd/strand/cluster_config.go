package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// clusterConfigCommand reads and changes broker configs, as
// kafka-configs.sh --entity-type brokers does.
func clusterConfigCommand(admin adminFunc) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Read and change broker configs"}
	cmd.AddCommand(clusterConfigGetCommand(admin), clusterConfigSetCommand(admin))
	return cmd
}

// brokerConfig is one config as get prints it.
type brokerConfig struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive,omitempty"`
}

// configResource names the broker resource the flags chose: one broker, or
// the cluster-wide defaults ("").
func configResource(broker int32, defaults bool) []int32 {
	if defaults {
		return nil
	}
	return []int32{broker}
}

func clusterConfigGetCommand(admin adminFunc) *cobra.Command {
	var (
		format   string
		broker   int32
		defaults bool
	)
	cmd := &cobra.Command{Use: "get [NAME...]", Short: "A broker's configs (all, or those named), with where each value comes from",
		Example: `  strand cluster config get
  strand cluster config get log.retention.ms min.insync.replicas --broker 1
  strand cluster config get --cluster-default --format json`,
		RunE: func(cmd *cobra.Command, names []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				if broker < 0 && !defaults {
					md, err := adm.BrokerMetadata(ctx)
					if err != nil {
						return err
					}
					if len(md.Brokers) == 0 {
						return fmt.Errorf("the cluster lists no brokers")
					}
					broker = slices.MinFunc(md.Brokers, func(a, b kadm.BrokerDetail) int { return int(a.NodeID - b.NodeID) }).NodeID
				}
				rcs, err := adm.DescribeBrokerConfigs(ctx, configResource(broker, defaults)...)
				if err != nil {
					return err
				}
				if len(rcs) != 1 {
					return fmt.Errorf("%d resources in the answer, want 1", len(rcs))
				}
				rc := rcs[0]
				if err := withMessage(rc.Err, rc.ErrMessage); err != nil {
					return err
				}
				out := []brokerConfig{}
				for _, c := range rc.Configs {
					if len(names) > 0 && !slices.Contains(names, c.Key) {
						continue
					}
					out = append(out, brokerConfig{Name: c.Key, Value: c.Value, Source: c.Source.String(), Sensitive: c.Sensitive})
				}
				slices.SortFunc(out, func(a, b brokerConfig) int { return strings.Compare(a.Name, b.Name) })
				var missing []string
				for _, n := range names {
					if !slices.ContainsFunc(out, func(c brokerConfig) bool { return c.Name == n }) {
						missing = append(missing, n)
					}
				}
				w := cmd.OutOrStdout()
				if format != "table" {
					if err := writeData(w, format, map[string]any{"broker": resourceLabel(broker, defaults), "configs": out}); err != nil {
						return err
					}
				} else {
					tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tVALUE\tSOURCE")
					for _, c := range out {
						v := "-"
						if c.Value != nil {
							v = *c.Value
						} else if c.Sensitive {
							v = "(sensitive)"
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, v, c.Source)
					}
					if err := tw.Flush(); err != nil {
						return err
					}
				}
				if len(missing) > 0 {
					return fmt.Errorf("no such broker configs: %s", strings.Join(missing, ", "))
				}
				return nil
			})
		}}
	formatFlag(cmd, &format)
	cmd.Flags().Int32Var(&broker, "broker", -1, "the broker's node id (default: the lowest)")
	cmd.Flags().BoolVar(&defaults, "cluster-default", false, "the cluster-wide defaults set at run time, instead of one broker's configs")
	return cmd
}

// resourceLabel names the resource in messages and data.
func resourceLabel(broker int32, defaults bool) string {
	if defaults {
		return "cluster-default"
	}
	return strconv.Itoa(int(broker))
}

func clusterConfigSetCommand(admin adminFunc) *cobra.Command {
	var (
		set, del []string
		broker   int32
	)
	cmd := &cobra.Command{Use: "set", Short: "Change broker configs at run time, for every broker or one (incrementally)", Args: cobra.NoArgs,
		Example: `  strand cluster config set --set log.retention.ms=86400000
  strand cluster config set --broker 1 --delete min.insync.replicas`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			alters, err := configAlters(set, del)
			if err != nil {
				return err
			}
			defaults := broker < 0
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				resp, err := adm.AlterBrokerConfigs(ctx, alters, configResource(broker, defaults)...)
				if err != nil {
					return err
				}
				for _, r := range resp {
					if err := withMessage(r.Err, r.ErrMessage); err != nil {
						return fmt.Errorf("broker %s: %w", resourceLabel(broker, defaults), err)
					}
				}
				target := "every broker"
				if !defaults {
					target = fmt.Sprintf("broker %d", broker)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "altered %d configs of %s\n", len(alters), target)
				return nil
			})
		}}
	cmd.Flags().StringArrayVar(&set, "set", nil, "a config to set, name=value (repeatable)")
	cmd.Flags().StringArrayVar(&del, "delete", nil, "a config to return to its default (repeatable)")
	cmd.Flags().Int32Var(&broker, "broker", -1, "one broker's node id (default: the cluster-wide default, for every broker)")
	return cmd
}
