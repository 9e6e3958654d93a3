package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/internal/inspect"
)

// topicCommand is the everyday tools for topics. Like the group tools they
// speak the Kafka protocol, so they work against any Kafka cluster.
func topicCommand() *cobra.Command {
	cmd, admin := adminCommand("topic", "Create, list, describe, configure, grow, trim and delete topics")
	cmd.AddCommand(topicCreateCommand(admin), topicListCommand(admin), topicDescribeCommand(admin), topicAlterConfigCommand(admin),
		topicAddPartitionsCommand(admin), topicTrimCommand(admin), topicDeleteCommand(admin))
	return cmd
}

func topicCreateCommand(admin adminFunc) *cobra.Command {
	var (
		partitions int32
		replicas   int16
		configs    []string
	)
	cmd := &cobra.Command{Use: "create TOPIC...", Short: "Create topics", Args: cobra.MinimumNArgs(1),
		Example: `  strand topic create orders --partitions 6
  strand topic create events --partitions 3 --replicas 3 --config retention.ms=86400000`,
		RunE: func(cmd *cobra.Command, topics []string) error {
			cfg := map[string]*string{}
			for _, c := range configs {
				k, v, ok := strings.Cut(c, "=")
				if !ok || k == "" {
					return fmt.Errorf("--config %q: name=value", c)
				}
				cfg[k] = &v
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				resp, err := adm.CreateTopics(ctx, partitions, replicas, cfg, topics...)
				if err != nil {
					return err
				}
				return eachTopic(resp.Sorted(), func(r kadm.CreateTopicResponse) (string, error) {
					return r.Topic, withMessage(r.Err, r.ErrMessage)
				}, func(r kadm.CreateTopicResponse) {
					fmt.Fprintf(cmd.OutOrStdout(), "created topic %s with %d partitions, replication factor %d\n", r.Topic,
						r.NumPartitions, r.ReplicationFactor)
				})
			})
		}}
	f := cmd.Flags()
	f.Int32VarP(&partitions, "partitions", "p", -1, "partitions (-1: the broker's num.partitions)")
	f.Int16VarP(&replicas, "replicas", "r", -1, "replication factor (-1: the broker's default.replication.factor)")
	f.StringArrayVarP(&configs, "config", "c", nil, "a topic config, name=value (repeatable)")
	return cmd
}

// eachTopic reports the answer for each topic of a request: done for
// those that succeeded, and one error naming those that failed.
func eachTopic[R any](rs []R, result func(R) (topic string, err error), done func(R)) error {
	var failed []string
	for _, r := range rs {
		if topic, err := result(r); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", topic, err))
		} else {
			done(r)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s", strings.Join(failed, "; "))
	}
	return nil
}

// withMessage is err with the broker's error message, when it gave one
// that says more than the code's own description: the code's name and the
// message (INVALID_CONFIG: Invalid value 1d for configuration
// retention.ms: Not a number of type LONG).
func withMessage(err error, message string) error {
	var ke *kerr.Error
	switch {
	case err == nil || message == "":
		return err
	case errors.As(err, &ke) && message == ke.Description:
		return err
	case errors.As(err, &ke):
		return &brokerError{code: ke, message: message}
	}
	return fmt.Errorf("%w (%s)", err, message)
}

// brokerError is a Kafka error code with the broker's message for it.
type brokerError struct {
	code    *kerr.Error
	message string
}

func (e *brokerError) Error() string { return e.code.Message + ": " + e.message }
func (e *brokerError) Unwrap() error { return e.code }

// topicNotFound is err, the cluster's answer for a topic it does not know,
// naming the topic and the topics it knows whose names are closest.
func topicNotFound(ctx context.Context, adm *kadm.Client, topic string, err error) error {
	hint := " (strand topic list lists the topics)"
	if listed, lerr := adm.ListTopics(ctx); lerr == nil {
		if near := didYouMean("%s", closest(topic, listed.Names())); near != "" {
			hint = near
		}
	}
	return fmt.Errorf("no topic %s%s: %w", topic, hint, err)
}

// topicSummary is a topic as list shows it.
type topicSummary struct {
	Topic             string `json:"topic"`
	ID                string `json:"id"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
}

func topicListCommand(admin adminFunc) *cobra.Command {
	var (
		format   string
		internal bool
	)
	cmd := &cobra.Command{Use: "list", Short: "Every topic, with its partitions and replication factor", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				var (
					tds kadm.TopicDetails
					err error
				)
				if internal {
					tds, err = adm.ListTopicsWithInternal(ctx)
				} else {
					tds, err = adm.ListTopics(ctx)
				}
				if err != nil {
					return err
				}
				out := []topicSummary{}
				for _, td := range tds.Sorted() {
					if td.Err != nil {
						return fmt.Errorf("topic %s: %w", td.Topic, td.Err)
					}
					out = append(out, topicSummary{Topic: td.Topic, ID: td.ID.String(), Partitions: len(td.Partitions),
						ReplicationFactor: td.Partitions.NumReplicas(), Internal: td.IsInternal})
				}
				w := cmd.OutOrStdout()
				if format != "table" {
					return writeData(w, format, map[string]any{"topics": out})
				}
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICAS\tINTERNAL")
				for _, t := range out {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%v\n", t.Topic, t.Partitions, t.ReplicationFactor, t.Internal)
				}
				return tw.Flush()
			})
		}}
	formatFlag(cmd, &format)
	cmd.Flags().BoolVar(&internal, "internal", false, "list internal topics too")
	return cmd
}

func topicDescribeCommand(admin adminFunc) *cobra.Command {
	var (
		format string
		all    bool
	)
	cmd := &cobra.Command{Use: "describe TOPIC...", Short: "Topics' partitions (leaders, replicas, in-sync sets, offsets) and configs",
		Args: cobra.MinimumNArgs(1),
		Example: `  strand topic describe orders
  strand topic describe orders --format json`,
		RunE: func(cmd *cobra.Command, topics []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				ds, err := inspect.DescribeTopics(ctx, adm, topics, all)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if format != "table" {
					return writeData(w, format, map[string]any{"topics": ds})
				}
				for i, d := range ds {
					if i > 0 {
						fmt.Fprintln(w)
					}
					printTopic(w, d)
				}
				return nil
			})
		}}
	formatFlag(cmd, &format)
	cmd.Flags().BoolVar(&all, "all-configs", false, "show every config, defaults included")
	return cmd
}

func printTopic(w io.Writer, d inspect.Topic) {
	internal := ""
	if d.Internal {
		internal = ", internal"
	}
	size := inspect.SizeLabel(d.SizeBytes)
	if d.SizeBytes < 0 {
		size = "size unknown"
	}
	fmt.Fprintf(w, "topic %s (id %s%s): %d partitions, %s\n\n", d.Topic, d.ID, internal, len(d.Partitions), size)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tIN-SYNC\tSTART\tEND\tSIZE\tERROR")
	for _, p := range d.Partitions {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Partition, p.Leader, p.LeaderEpoch, nodeList(p.Replicas), nodeList(p.ISR),
			offsetLabel(p.Start), offsetLabel(p.End), inspect.SizeLabel(p.SizeBytes), orDash(p.Error))
	}
	tw.Flush()
	if len(d.Configs) > 0 {
		fmt.Fprintln(w, "\nCONFIGS")
		for _, k := range slices.Sorted(maps.Keys(d.Configs)) {
			fmt.Fprintf(w, "  %s=%s\n", k, d.Configs[k])
		}
	}
}

func nodeList(ns []int32) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return orDash(strings.Join(s, ","))
}

func topicDeleteCommand(admin adminFunc) *cobra.Command {
	return &cobra.Command{Use: "delete TOPIC...", Short: "Delete topics and their records", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				resp, err := adm.DeleteTopics(ctx, topics...)
				if err != nil {
					return err
				}
				return eachTopic(resp.Sorted(), func(r kadm.DeleteTopicResponse) (string, error) {
					return r.Topic, withMessage(r.Err, r.ErrMessage)
				}, func(r kadm.DeleteTopicResponse) { fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %s\n", r.Topic) })
			})
		}}
}

func topicAlterConfigCommand(admin adminFunc) *cobra.Command {
	var set, del []string
	cmd := &cobra.Command{Use: "alter-config TOPIC...", Short: "Set or delete topic configs (incrementally)", Args: cobra.MinimumNArgs(1),
		Example: `  strand topic alter-config orders --set retention.ms=3600000 --delete cleanup.policy`,
		RunE: func(cmd *cobra.Command, topics []string) error {
			alters, err := configAlters(set, del)
			if err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				resp, err := adm.AlterTopicConfigs(ctx, alters, topics...)
				if err != nil {
					return err
				}
				return eachTopic(resp, func(r kadm.AlterConfigsResponse) (string, error) {
					return r.Name, withMessage(r.Err, r.ErrMessage)
				}, func(r kadm.AlterConfigsResponse) {
					fmt.Fprintf(cmd.OutOrStdout(), "altered %d configs of topic %s\n", len(alters), r.Name)
				})
			})
		}}
	cmd.Flags().StringArrayVar(&set, "set", nil, "a config to set, name=value (repeatable)")
	cmd.Flags().StringArrayVar(&del, "delete", nil, "a config to return to its default (repeatable)")
	return cmd
}

// configAlters is the incremental changes of --set name=value and
// --delete name.
func configAlters(set, del []string) ([]kadm.AlterConfig, error) {
	var alters []kadm.AlterConfig
	for _, c := range set {
		k, v, ok := strings.Cut(c, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: name=value", c)
		}
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	for _, k := range del {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if len(alters) == 0 {
		return nil, fmt.Errorf("nothing to change: give --set or --delete")
	}
	return alters, nil
}

func topicAddPartitionsCommand(admin adminFunc) *cobra.Command {
	var total int
	cmd := &cobra.Command{Use: "add-partitions TOPIC...", Short: "Grow topics to a number of partitions", Args: cobra.MinimumNArgs(1),
		Long: `Grow each topic to --total partitions. Records already written stay where they
are, so keys written from now on may go to another partition than before.`,
		Example: `  strand topic add-partitions orders --total 12`,
		RunE: func(cmd *cobra.Command, topics []string) error {
			if total <= 0 {
				return fmt.Errorf("--total %d: the number of partitions each topic is to have", total)
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				resp, err := adm.UpdatePartitions(ctx, total, topics...)
				if err != nil {
					return err
				}
				return eachTopic(resp.Sorted(), func(r kadm.CreatePartitionsResponse) (string, error) {
					return r.Topic, withMessage(r.Err, r.ErrMessage)
				}, func(r kadm.CreatePartitionsResponse) {
					fmt.Fprintf(cmd.OutOrStdout(), "topic %s has %d partitions\n", r.Topic, total)
				})
			})
		}}
	cmd.Flags().IntVar(&total, "total", 0, "the number of partitions (required)")
	_ = cmd.MarkFlagRequired("total")
	return cmd
}

func topicTrimCommand(admin adminFunc) *cobra.Command {
	var (
		before    int64
		partition int32
	)
	cmd := &cobra.Command{Use: "trim TOPIC", Short: "Delete a topic's records below an offset (DeleteRecords)", Args: cobra.ExactArgs(1),
		Long: `Move the start of the topic's partitions (or of --partition alone) up to
--before, deleting the records below it; --before -1 is the end, deleting every
record. A partition whose end is below --before is trimmed to its end.`,
		Example: `  strand topic trim orders --before 1000 --partition 0`,
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if before < -1 {
				return fmt.Errorf("--before %d: an offset, or -1 for the end", before)
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				ends, err := adm.ListEndOffsets(ctx, topic)
				if err != nil {
					return err
				}
				if err := ends.Error(); err != nil {
					return fmt.Errorf("topic %s: %w", topic, err)
				}
				to := kadm.Offsets{}
				ends.Each(func(o kadm.ListedOffset) {
					if partition >= 0 && o.Partition != partition {
						return
					}
					at := o.Offset
					if before >= 0 {
						at = min(before, o.Offset)
					}
					to.Add(kadm.Offset{Topic: topic, Partition: o.Partition, At: at})
				})
				if len(to) == 0 {
					return fmt.Errorf("topic %s has no partition %d", topic, partition)
				}
				resp, err := adm.DeleteRecords(ctx, to)
				if err != nil {
					return err
				}
				return eachTopic(resp.Sorted(), func(r kadm.DeleteRecordsResponse) (string, error) {
					return fmt.Sprintf("%s-%d", r.Topic, r.Partition), r.Err
				}, func(r kadm.DeleteRecordsResponse) {
					fmt.Fprintf(cmd.OutOrStdout(), "%s-%d starts at %d\n", r.Topic, r.Partition, r.LowWatermark)
				})
			})
		}}
	cmd.Flags().Int64Var(&before, "before", 0, "the new start offset; -1 for the end (required)")
	cmd.Flags().Int32Var(&partition, "partition", -1, "only this partition")
	_ = cmd.MarkFlagRequired("before")
	return cmd
}
