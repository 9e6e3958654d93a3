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
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/inspect"
)

// clusterCommand shows a cluster's brokers and health through the Kafka
// protocol, so it works against any Kafka cluster.
func clusterCommand() *cobra.Command {
	cmd, admin := adminCommand("cluster", "A cluster's brokers, controller and health")
	client := clientOf(cmd)
	cmd.AddCommand(clusterInfoCommand(client), clusterHealthCommand(client), clusterConfigCommand(admin),
		clusterDecommissionCommand(client), clusterElectLeadersCommand(client))
	return cmd
}

// clientFunc runs a command's work with a Kafka client of the cluster.
type clientFunc = func(cmd *cobra.Command, fn func(ctx context.Context, cl *kgo.Client) error) error

// clientOf is the clientFunc of an adminCommand: its --brokers and
// --timeout, as its admin client's.
func clientOf(parent *cobra.Command) clientFunc {
	return func(cmd *cobra.Command, fn func(ctx context.Context, cl *kgo.Client) error) error {
		brokers, err := parent.PersistentFlags().GetString("brokers")
		if err != nil {
			return err
		}
		timeout, err := parent.PersistentFlags().GetDuration("timeout")
		if err != nil {
			return err
		}
		return withClient(cmd, brokers, timeout, fn)
	}
}

func clusterInfoCommand(client clientFunc) *cobra.Command {
	var format string
	cmd := &cobra.Command{Use: "info", Short: "The cluster's id, active controller and brokers (up and down)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return client(cmd, func(ctx context.Context, cl *kgo.Client) error {
				info, err := inspect.ReadCluster(ctx, cl)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if format != "table" {
					return writeData(w, format, info)
				}
				down := len(info.Brokers) - info.Live()
				fmt.Fprintf(w, "cluster %s, controller %d, %d brokers", orDash(info.ClusterID), info.Controller, len(info.Brokers))
				if down > 0 {
					fmt.Fprintf(w, " (%d down)", down)
				}
				var fs []string
				for _, name := range slices.Sorted(maps.Keys(info.Features)) {
					fs = append(fs, fmt.Sprintf("%s=%d", name, info.Features[name]))
				}
				fmt.Fprintf(w, "\nfeatures: %s\n\n", orDash(strings.Join(fs, ", ")))
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "NODE\tHOST\tPORT\tRACK\tSTATUS\tPARTITIONS\tLEADS")
				for _, b := range info.Brokers {
					port := "-"
					if b.Port > 0 {
						port = fmt.Sprint(b.Port)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\n", b.NodeID, orDash(b.Host), port, orDash(b.Rack), b.Status,
						len(b.Partitions), b.Leads)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				printDown(w, info.Brokers)
				return nil
			})
		}}
	formatFlag(cmd, &format)
	return cmd
}

// printDown names the partitions each down broker holds a replica of.
func printDown(w io.Writer, brokers []inspect.Broker) {
	for _, b := range brokers {
		if b.Down() {
			fmt.Fprintf(w, "broker %d is down, holding %d partitions: %s\n", b.NodeID, len(b.Partitions),
				orDash(strings.Join(b.Partitions, ", ")))
		}
	}
}

// errUnhealthy is cluster health's failure, for scripts.
var errUnhealthy = errors.New("the cluster is not healthy")

func clusterHealthCommand(client clientFunc) *cobra.Command {
	var format string
	var wait bool
	cmd := &cobra.Command{Use: "health", Short: "Offline and under-replicated partitions; exits non-zero when there are any",
		Long: `Show the partitions without a leader, those with fewer in-sync replicas than
replicas, and the brokers that are down; exit non-zero when there are any.
--wait asks again every second until the cluster is healthy, for at most
--timeout: between the brokers of a rolling upgrade, it returns once the
broker just restarted has caught up.`,
		Example: "  strand cluster health --wait --timeout 10m",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return client(cmd, func(ctx context.Context, cl *kgo.Client) error {
				h, err := inspect.ReadHealth(ctx, cl)
				for wait && (err != nil || !h.Healthy) {
					select {
					case <-ctx.Done():
						if err == nil {
							err = fmt.Errorf("%w: still not, after waiting %v", errUnhealthy, ctx.Err())
							printHealth(cmd.OutOrStdout(), h)
						}
						return err
					case <-time.After(time.Second):
					}
					h, err = inspect.ReadHealth(ctx, cl)
				}
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if format != "table" {
					if err := writeData(w, format, h); err != nil {
						return err
					}
				} else {
					printHealth(w, h)
				}
				if !h.Healthy {
					return errUnhealthy
				}
				return nil
			})
		}}
	formatFlag(cmd, &format)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the cluster is healthy, for at most --timeout")
	return cmd
}

// clusterElectLeadersCommand gives every partition back to its preferred
// replica (the first of its replicas) where that replica is in sync, as
// kafka-leader-election.sh --election-type preferred does: after a
// rolling restart, before the controller's own rebalance
// (leader.imbalance.check.interval.seconds) would.
func clusterElectLeadersCommand(client clientFunc) *cobra.Command {
	return &cobra.Command{Use: "elect-leaders", Args: cobra.NoArgs,
		Short:   "Give every partition back to its preferred replica, where that replica is in sync",
		Example: "  strand cluster elect-leaders --brokers strand-1.example:9092   # after a rolling upgrade",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return client(cmd, func(ctx context.Context, cl *kgo.Client) error {
				res, err := kadm.NewClient(cl).ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
				if err != nil {
					return err
				}
				moved, already := 0, 0
				var errs []error
				for _, ps := range res {
					for _, r := range ps {
						switch {
						case r.Err == nil:
							moved++
						case errors.Is(r.Err, kerr.ElectionNotNeeded):
							already++
						default:
							errs = append(errs, fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, r.Err))
						}
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d partitions moved to their preferred leader, %d already there, %d not moved\n",
					moved, already, len(errs))
				return errors.Join(errs...)
			})
		}}
}

// printHealth shows the partitions without a leader, those whose in-sync
// set is smaller than their replica set, and the brokers that are down.
func printHealth(w io.Writer, h inspect.Health) {
	fmt.Fprintf(w, "healthy: %v\nbrokers: %d up, %d down, controller: %d\npartitions: %d, offline: %d, under-replicated: %d\n",
		h.Healthy, h.Brokers, len(h.DownBrokers), h.Controller, h.Partitions, len(h.OfflinePartitions),
		len(h.UnderReplicatedPartitions))
	for _, p := range h.OfflinePartitions {
		fmt.Fprintf(w, "  offline: %s\n", p)
	}
	for _, p := range h.UnderReplicatedPartitions {
		fmt.Fprintf(w, "  under-replicated: %s\n", p)
	}
	printDown(w, h.DownBrokers)
}
