package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/inspect"
)

// clusterDecommissionCommand moves every replica off a broker, so that it
// can be stopped for good with nothing under-replicated.
func clusterDecommissionCommand(client clientFunc) *cobra.Command {
	var noWait bool
	cmd := &cobra.Command{Use: "decommission NODE", Args: cobra.ExactArgs(1),
		Short: "Move every partition replica off a broker (to the least loaded others, racks kept apart), then wait until it holds none",
		Example: "  strand cluster decommission 3 --timeout 10m\n" +
			"  strand cluster decommission 3 --no-wait && strand cluster info   # PARTITIONS of node 3 falls to 0",
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil {
				return fmt.Errorf("node %q: not a broker id", args[0])
			}
			node := int32(n)
			return client(cmd, func(ctx context.Context, cl *kgo.Client) error {
				info, err := inspect.ReadCluster(ctx, cl)
				if err != nil {
					return err
				}
				adm := kadm.NewClient(cl)
				topics, err := adm.ListTopicsWithInternal(ctx)
				if err != nil {
					return err
				}
				plan, err := planDecommission(node, info.Brokers, topics)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if len(plan) == 0 {
					fmt.Fprintf(w, "broker %d holds no replica: it can be stopped\n", node)
					return nil
				}
				resps, err := adm.AlterPartitionAssignments(ctx, plan)
				if err != nil {
					return err
				}
				moving := 0
				var errs []error
				resps.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
					if r.Err != nil {
						errs = append(errs, fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, r.Err))
						return
					}
					moving++
				})
				if err := errors.Join(errs...); err != nil {
					return err
				}
				fmt.Fprintf(w, "moving %d partition replicas off broker %d\n", moving, node)
				if noWait {
					return nil
				}
				if err := waitDecommissioned(ctx, adm, node, plan); err != nil {
					return err
				}
				fmt.Fprintf(w, "broker %d holds no replica: it can be stopped\n", node)
				return nil
			})
		}}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "start the moves and return; strand cluster info shows the broker's partitions go")
	return cmd
}

// planDecommission gives each partition with a replica on node a new
// replica set without it: node's place goes to a live broker the
// partition does not have, in a rack it does not have yet where there is
// one, the least loaded first.
func planDecommission(node int32, brokers []inspect.Broker, topics kadm.TopicDetails) (kadm.AlterPartitionAssignmentsReq, error) {
	racks, load := map[int32]string{}, map[int32]int{}
	var live []int32
	known := false
	for _, b := range brokers {
		racks[b.NodeID] = b.Rack
		if b.NodeID == node {
			known = true
		}
		if b.Status == inspect.BrokerUp && b.NodeID != node {
			live = append(live, b.NodeID)
			load[b.NodeID] = len(b.Partitions)
		}
	}
	if !known {
		return nil, fmt.Errorf("the cluster has no broker %d", node)
	}
	plan := kadm.AlterPartitionAssignmentsReq{}
	for _, t := range topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			at := slices.Index(p.Replicas, node)
			if at < 0 {
				continue
			}
			usedRacks := map[string]bool{}
			for _, r := range p.Replicas {
				if r != node {
					usedRacks[racks[r]] = true
				}
			}
			var candidates []int32
			for _, b := range live {
				if !slices.Contains(p.Replicas, b) {
					candidates = append(candidates, b)
				}
			}
			if len(candidates) == 0 {
				return nil, fmt.Errorf("%s-%d has a replica on every other live broker: add a broker, or lower its replication factor, first",
					t.Topic, p.Partition)
			}
			best := slices.MinFunc(candidates, func(a, b int32) int {
				return cmp.Or(cmp.Compare(boolInt(usedRacks[racks[a]]), boolInt(usedRacks[racks[b]])),
					cmp.Compare(load[a], load[b]), cmp.Compare(a, b))
			})
			replicas := slices.Clone(p.Replicas)
			replicas[at] = best
			load[best]++
			plan.Assign(t.Topic, p.Partition, replicas)
		}
	}
	return plan, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitDecommissioned waits until the moves are done and node holds no
// replica of the partitions planned.
func waitDecommissioned(ctx context.Context, adm *kadm.Client, node int32, plan kadm.AlterPartitionAssignmentsReq) error {
	set := kadm.TopicsSet{}
	for topic, parts := range plan {
		for p := range parts {
			set.Add(topic, p)
		}
	}
	for {
		ongoing, err := adm.ListPartitionReassignments(ctx, set)
		if err == nil && len(ongoing.Sorted()) == 0 {
			topics, err := adm.ListTopicsWithInternal(ctx, set.Topics()...)
			if err == nil {
				left := 0
				topics.EachPartition(func(p kadm.PartitionDetail) {
					if slices.Contains(p.Replicas, node) {
						left++
					}
				})
				if left == 0 {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker %d still holds replicas (--timeout to wait longer): %w", node, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
