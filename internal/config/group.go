package config

import (
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The group configs Strand acts on: a consumer group's own session timeout
// and heartbeat interval (KIP-848), over the broker's
// group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms.
const (
	GroupConsumerSessionTimeout    = "consumer.session.timeout.ms"
	GroupConsumerHeartbeatInterval = "consumer.heartbeat.interval.ms"
)

// kafkaGroupConfigs is every group config (the GROUP config resource,
// Kafka 4.0+) of the Kafka release Strand answers as, written with
// kafka_broker_configs.tsv from that release's DescribeConfigs.
//
//go:embed kafka_group_configs.tsv
var kafkaGroupConfigs string

// GroupDefs are Kafka's group configs, sorted by name.
var GroupDefs = parseKafkaDefs(kafkaGroupConfigs)

// LookupGroupDef finds one of Kafka's group configs.
func LookupGroupDef(name string) (*KafkaDef, bool) {
	i, ok := slices.BinarySearchFunc(GroupDefs, name, func(d KafkaDef, n string) int { return strings.Compare(d.Name, n) })
	if !ok {
		return nil, false
	}
	return &GroupDefs[i], true
}

// GroupBrokerDefault is the broker config whose value a group config takes
// where the group sets none (group.consumer.session.timeout.ms for
// consumer.session.timeout.ms), "" for one without.
func GroupBrokerDefault(name string) string {
	if _, ok := LookupKafkaDef("group." + name); ok {
		return "group." + name
	}
	return ""
}

// CheckGroupConfigs checks a group's configs as Kafka's GroupConfig does:
// known names, values of their type, and each timing of the consumer
// protocol within the broker's bounds, the heartbeat below the session
// timeout.
func CheckGroupConfigs(configs map[string]string, b Broker) error {
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		d, ok := LookupGroupDef(name)
		if !ok {
			return refused(ErrUnknownConfig, "Unknown group config name: %s", name)
		}
		if err := checkType(d.Type, configs[name]); err != nil {
			return &ValueError{Name: name, Value: configs[name], Err: err}
		}
	}
	ms := func(name string, def int64) int64 {
		if v, ok := configs[name]; ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
		return def
	}
	session := ms(GroupConsumerSessionTimeout, b.GroupConsumerSessionTimeout.Milliseconds())
	heartbeat := ms(GroupConsumerHeartbeatInterval, b.GroupConsumerHeartbeatInterval.Milliseconds())
	for _, c := range []struct {
		name     string
		v        int64
		min, max int64
	}{
		{GroupConsumerSessionTimeout, session, b.GroupConsumerMinSessionTimeout.Milliseconds(), b.GroupConsumerMaxSessionTimeout.Milliseconds()},
		{GroupConsumerHeartbeatInterval, heartbeat, b.GroupConsumerMinHeartbeatInterval.Milliseconds(), b.GroupConsumerMaxHeartbeatInterval.Milliseconds()},
	} {
		if _, set := configs[c.name]; !set {
			continue
		}
		if c.v < c.min {
			return &ValueError{Name: c.name, Value: configs[c.name], Err: fmt.Errorf("%w: Value must be at least %d", ErrInvalidConfig, c.min)}
		}
		if c.v > c.max {
			return &ValueError{Name: c.name, Value: configs[c.name], Err: fmt.Errorf("%w: Value must be no more than %d", ErrInvalidConfig, c.max)}
		}
	}
	if heartbeat >= session {
		return refused(ErrInvalidConfig, "%s must be less than %s", GroupConsumerHeartbeatInterval, GroupConsumerSessionTimeout)
	}
	return nil
}
