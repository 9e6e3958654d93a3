package console

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/inspect"
)

// What a topic's page shows beside its partitions: the groups that read
// it, and every config with where its value comes from.

// topicGroup is a group that committed offsets of the topic.
type topicGroup struct {
	Group      string
	State      string
	Partitions int   // committed
	Lag        int64 // over the committed partitions
}

// topicConfig is one config of the topic with its source. A secret has
// no value in DescribeConfigs' answer, so it is never listed.
type topicConfig struct{ Name, Value, Source string }

// topicGroups are the groups with offsets committed for the topic, with
// their lag against ends (by partition).
func (c *Console) topicGroups(ctx context.Context, topic string, ends map[int32]int64) []topicGroup {
	listed, err := inspect.ListGroups(ctx, c.adm)
	if err != nil {
		return nil
	}
	names := make([]string, len(listed))
	state := map[string]string{}
	for i, g := range listed {
		names[i], state[g.Group] = g.Group, g.State
	}
	var out []topicGroup
	fetched := c.adm.FetchManyOffsets(ctx, names...)
	for _, name := range names {
		r, ok := fetched[name]
		if !ok || r.Err != nil {
			continue
		}
		committed := r.Fetched[topic]
		if len(committed) == 0 {
			continue
		}
		g := topicGroup{Group: name, State: state[name]}
		for p, o := range committed {
			if o.Err != nil || o.At < 0 {
				continue
			}
			g.Partitions++
			if end, ok := ends[p]; ok {
				g.Lag += max(0, end-o.At)
			}
		}
		out = append(out, g)
	}
	return out
}

// topicConfigs are every config of the topic (as described with all
// its configs), sorted, each with its source: the topic's own, a
// broker's default (set for one broker or the cluster, or in its config),
// or the built-in default.
func topicConfigs(t inspect.Topic) []topicConfig {
	out := make([]topicConfig, 0, len(t.Configs))
	for _, name := range slices.Sorted(maps.Keys(t.Configs)) {
		out = append(out, topicConfig{Name: name, Value: t.Configs[name], Source: sourceLabel(t.Sources[name])})
	}
	return out
}

// sourceLabel names where a config's value comes from, in the words of
// kafka-configs.sh --describe --all.
func sourceLabel(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "broker (this broker, set at run time)"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "broker (cluster-wide, set at run time)"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "broker (its config)"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	}
	return strings.ToLower(s.String())
}
