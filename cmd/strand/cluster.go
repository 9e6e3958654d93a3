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
)

// clusterCommand shows a cluster's brokers and health through the Kafka
// protocol, so it works against any Kafka cluster.
func clusterCommand() *cobra.Command {
	cmd, admin := adminCommand("cluster", "A cluster's brokers, controller and health")
	cmd.AddCommand(clusterInfoCommand(admin), clusterHealthCommand(admin), clusterConfigCommand(admin))
	return cmd
}

// clusterInfo is what cluster info shows.
type clusterInfo struct {
	ClusterID  string         `json:"cluster_id"`
	Controller int32          `json:"controller"`
	Brokers    []brokerDetail `json:"brokers"`
	// Features are the cluster's finalized feature levels (ApiVersions).
	Features map[string]int16 `json:"features"`
}

type brokerDetail struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
}

func clusterInfoCommand(admin adminFunc) *cobra.Command {
	var format string
	cmd := &cobra.Command{Use: "info", Short: "The cluster's id, controller and brokers", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return admin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				md, err := adm.BrokerMetadata(ctx)
				if err != nil {
					return err
				}
				info := clusterInfo{ClusterID: md.Cluster, Controller: md.Controller, Brokers: []brokerDetail{}, Features: map[string]int16{}}
				for _, b := range md.Brokers {
					info.Brokers = append(info.Brokers, brokerDetail{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: deref(b.Rack)})
				}
				info.Features = finalizedFeatures(ctx, adm)
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

// finalizedFeatures is the feature levels the brokers finalized (the
// highest epoch's, should brokers differ a moment); none when no broker
// answers with them.
func finalizedFeatures(ctx context.Context, adm *kadm.Client) map[string]int16 {
	out := map[string]int16{}
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		return out
	}
	epoch := int64(-1)
	for _, v := range vs {
		raw := v.Raw()
		if v.Err != nil || raw == nil || raw.FinalizedFeaturesEpoch < epoch {
			continue
		}
		epoch = raw.FinalizedFeaturesEpoch
		clear(out)
		for _, f := range raw.FinalizedFeatures {
			out[f.Name] = f.MaxVersionLevel
		}
	}
	return out
}

// clusterHealth is what cluster health shows.
type clusterHealth struct {
	Healthy                   bool     `json:"healthy"`
	Brokers                   int      `json:"brokers"`
	Controller                int32    `json:"controller"`
	Partitions                int      `json:"partitions"`
	OfflinePartitions         []string `json:"offline_partitions"`
	UnderReplicatedPartitions []string `json:"under_replicated_partitions"`
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
				md, err := adm.Metadata(ctx) // every topic, internal ones too
				if err != nil {
					return err
				}
				h := healthOf(md)
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
func healthOf(md kadm.Metadata) clusterHealth {
	h := clusterHealth{Brokers: len(md.Brokers), Controller: md.Controller, OfflinePartitions: []string{},
		UnderReplicatedPartitions: []string{}}
	for _, td := range md.Topics.Sorted() {
		for _, p := range td.Partitions.Sorted() {
			h.Partitions++
			name := fmt.Sprintf("%s-%d", td.Topic, p.Partition)
			switch {
			case p.Leader < 0 || p.Err != nil:
				h.OfflinePartitions = append(h.OfflinePartitions, name)
			case len(p.ISR) < len(p.Replicas):
				h.UnderReplicatedPartitions = append(h.UnderReplicatedPartitions, name)
			}
		}
	}
	h.Healthy = len(h.OfflinePartitions) == 0 && len(h.UnderReplicatedPartitions) == 0 && md.Controller >= 0
	return h
}

func printHealth(w io.Writer, h clusterHealth) {
	fmt.Fprintf(w, "healthy: %v\nbrokers: %d, controller: %d\npartitions: %d, offline: %d, under-replicated: %d\n", h.Healthy,
		h.Brokers, h.Controller, h.Partitions, len(h.OfflinePartitions), len(h.UnderReplicatedPartitions))
	for _, p := range h.OfflinePartitions {
		fmt.Fprintf(w, "  offline: %s\n", p)
	}
	for _, p := range h.UnderReplicatedPartitions {
		fmt.Fprintf(w, "  under-replicated: %s\n", p)
	}
}
