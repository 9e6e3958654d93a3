package inspect

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic is a topic with its partitions and configs.
type Topic struct {
	Topic      string           `json:"topic"`
	ID         string           `json:"id"`
	Internal   bool             `json:"internal"`
	Partitions []TopicPartition `json:"partitions"`
	// SizeBytes is the partitions' leader replicas' sizes summed, -1 when
	// no broker told.
	SizeBytes int64 `json:"size_bytes"`
	// Configs are the topic's configs set on the topic itself (not
	// defaults), or every config when asked; Sources says where each
	// value comes from (the topic, a broker, the default).
	Configs map[string]string            `json:"configs"`
	Sources map[string]kmsg.ConfigSource `json:"-"`
}

// TopicPartition is one partition of a topic: where it is and what it
// holds. -1 is an offset or size that could not be read.
type TopicPartition struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Offline     []int32 `json:"offline_replicas,omitempty"`
	Start       int64   `json:"start_offset"` // -1 when it could not be listed
	End         int64   `json:"end_offset"`
	SizeBytes   int64   `json:"size_bytes"` // the leader's replica, -1 when unknown
	Error       string  `json:"error,omitempty"`
}

// DescribeTopics reads topics' partitions, offsets and configs; a topic
// the cluster does not have is an error.
func DescribeTopics(ctx context.Context, adm *kadm.Client, topics []string, allConfigs bool) ([]Topic, error) {
	tds, err := adm.ListTopicsWithInternal(ctx, topics...)
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		td, ok := tds[t]
		if !ok {
			td.Err = kerr.UnknownTopicOrPartition
		}
		if td.Err != nil {
			return nil, fmt.Errorf("topic %s: %w", t, td.Err)
		}
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("describing configs: %w", err)
	}
	sizes := map[Partition]int64{}
	set := kadm.TopicsSet{}
	for _, t := range topics {
		for p := range tds[t].Partitions {
			set.Add(t, p)
		}
	}
	// Sizes are extra: a cluster that does not answer DescribeLogDirs
	// still has its topics described.
	if dirs, err := adm.DescribeAllLogDirs(ctx, set); err == nil {
		dirs.Each(func(d kadm.DescribedLogDir) {
			for t, ps := range d.Topics {
				for p, dp := range ps {
					if td, ok := tds[t]; ok && td.Partitions[p].Leader == d.Broker && !dp.IsFuture {
						sizes[Partition{t, p}] = dp.Size
					}
				}
			}
		})
	}
	configs, sources := map[string]map[string]string{}, map[string]map[string]kmsg.ConfigSource{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, fmt.Errorf("configs of %s: %w", rc.Name, rc.Err)
		}
		m, src := map[string]string{}, map[string]kmsg.ConfigSource{}
		for _, c := range rc.Configs {
			if c.Value != nil && (allConfigs || c.Source == kmsg.ConfigSourceDynamicTopicConfig) {
				m[c.Key], src[c.Key] = *c.Value, c.Source
			}
		}
		configs[rc.Name], sources[rc.Name] = m, src
	}
	out := make([]Topic, 0, len(topics))
	for _, t := range topics {
		td := tds[t]
		d := Topic{Topic: t, ID: td.ID.String(), Internal: td.IsInternal, Configs: configs[t], Sources: sources[t], SizeBytes: -1}
		for _, p := range td.Partitions.Sorted() {
			pd := TopicPartition{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas,
				ISR: p.ISR, Offline: p.OfflineReplicas, Start: -1, End: -1, SizeBytes: -1}
			if size, ok := sizes[Partition{t, p.Partition}]; ok {
				pd.SizeBytes = size
				d.SizeBytes = max(d.SizeBytes, 0) + size
			}
			if p.Err != nil {
				pd.Error = p.Err.Error()
			}
			if o, ok := starts.Lookup(t, p.Partition); ok && o.Err == nil {
				pd.Start = o.Offset
			}
			if o, ok := ends.Lookup(t, p.Partition); ok && o.Err == nil {
				pd.End = o.Offset
			}
			d.Partitions = append(d.Partitions, pd)
		}
		out = append(out, d)
	}
	return out, nil
}

// SizeLabel is a size in bytes as people read it; "-" for -1 (unknown).
func SizeLabel(n int64) string {
	switch {
	case n < 0:
		return "-"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// ListedError is the first error of listed offsets, as a *PartitionError
// naming its topic: UNKNOWN_TOPIC_OR_PARTITION alone does not say which of
// the topics asked for is missing.
func ListedError(l kadm.ListedOffsets) error {
	for _, t := range slices.Sorted(maps.Keys(l)) {
		for _, p := range slices.Sorted(maps.Keys(l[t])) {
			if o := l[t][p]; o.Err != nil {
				return &PartitionError{Topic: t, Partition: p, Err: o.Err}
			}
		}
	}
	return nil
}

// PartitionError is a topic's or a partition's error in an answer.
type PartitionError struct {
	Topic     string
	Partition int32 // -1: the whole topic's
	Err       error
}

func (e *PartitionError) Error() string {
	if e.Partition < 0 {
		return fmt.Sprintf("topic %s: %v", e.Topic, e.Err)
	}
	return fmt.Sprintf("topic %s partition %d: %v", e.Topic, e.Partition, e.Err)
}

func (e *PartitionError) Unwrap() error { return e.Err }
