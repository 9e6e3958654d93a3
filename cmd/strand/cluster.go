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

	"github.com/strandlog/strand/internal/inspect"
)

// clusterCommand shows a cluster's brokers and health through the Kafka
// protocol, so it works against any Kafka cluster.
func clusterCommand() *cobra.Command {
	cmd, admin := adminCommand("cluster", "A cluster's brokers, controller and health")
	cmd.AddCommand(clusterInfoCommand(admin), clusterHealthCommand(admin), clusterConfigCommand(admin))
	return cmd
}

func clusterInfoCommand(admin adminFunc) *cobra.Command {
	var format string
	cmd := &cobra.Command{Use: "info", Short: "The cluster's id, controller and brokers", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				info, err := inspect.ReadCluster(ctx, adm)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if format != "table" {
					return writeData(w, format, info)
				}
				fmt.Fprintf(w, "cluster %s, controller %d, %d brokers\n", orDash(info.ClusterID), info.Controller, len(info.Brokers))
				var fs []string
				for _, name := range slices.Sorted(maps.Keys(info.Features)) {
					fs = append(fs, fmt.Sprintf("%s=%d", name, info.Features[name]))
				}
				fmt.Fprintf(w, "features: %s\n\n", orDash(strings.Join(fs, ", ")))
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "NODE\tHOST\tPORT\tRACK")
				for _, b := range info.Brokers {
					fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", b.NodeID, b.Host, b.Port, orDash(b.Rack))
				}
				return tw.Flush()
			})
		}}
	formatFlag(cmd, &format)
	return cmd
}

// errUnhealthy is cluster health's failure, for scripts.
var errUnhealthy = errors.New("the cluster is not healthy")

func clusterHealthCommand(admin adminFunc) *cobra.Command {
	var format string
	cmd := &cobra.Command{Use: "health", Short: "Offline and under-replicated partitions; exits non-zero when there are any",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				h, err := inspect.ReadHealth(ctx, adm)
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
	return cmd
}

// healthOf counts the partitions without a leader and those whose
// in-sync set is smaller than their replica set.
func printHealth(w io.Writer, h inspect.Health) {
	fmt.Fprintf(w, "healthy: %v\nbrokers: %d, controller: %d\npartitions: %d, offline: %d, under-replicated: %d\n", h.Healthy,
		h.Brokers, h.Controller, h.Partitions, len(h.OfflinePartitions), len(h.UnderReplicatedPartitions))
	for _, p := range h.OfflinePartitions {
		fmt.Fprintf(w, "  offline: %s\n", p)
	}
	for _, p := range h.UnderReplicatedPartitions {
		fmt.Fprintf(w, "  under-replicated: %s\n", p)
	}
}
