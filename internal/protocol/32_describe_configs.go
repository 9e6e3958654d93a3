package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
)

// DescribeConfigs: v1-4
//
// Behaviour:
//   - TOPIC: every topic config Strand serves (config.TopicDefs), or those of
//     ConfigNames (others named are left out). The value is the one in force:
//     the topic's override (source TOPIC_CONFIG), else its broker-level
//     default: this broker's dynamic value (DYNAMIC_BROKER_CONFIG), the
//     cluster-wide dynamic value (DYNAMIC_DEFAULT_BROKER_CONFIG), the static
//     setting where it differs from Strand's built-in default
//     (STATIC_BROKER_CONFIG), the built-in default (DEFAULT_CONFIG). With
//     IncludeSynonyms every level that is set is listed, the one in force
//     first, the broker levels under the broker config's name
//     (log.retention.ms for retention.ms). An illegal name is
//     INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
//   - BROKER named by this broker's id: its settings under Kafka's names
//     (config.BrokerDefs: node.id, num.partitions, log.dirs, ... and the
//     default of every topic config), read-only unless they can be changed
//     at runtime, and every other broker config of Kafka 4.4
//     (config.UnusedKafkaDefs) with Kafka's type, default and read-only
//     flag, or the value kept for it at run time, documented as not acted
//     on. BROKER "": as Kafka, only the cluster-wide dynamic configs that
//     are set. Another broker id, or one that is not a number,
//     is INVALID_REQUEST.
//   - v3+: config types, and documentation when IncludeDocumentation.
//   - GROUP (Kafka 4.0's group configs, config.GroupDefs): the group's
//     own value (GROUP_CONFIG), else the broker config it defaults to
//     (group.consumer.session.timeout.ms for consumer.session.timeout.ms),
//     as its DEFAULT_CONFIG synonym. The consumer protocol's session
//     timeout and heartbeat interval are applied by the coordinator; the
//     others (share and streams groups, dead-letter queues) are kept.
//   - CLIENT_METRICS (KIP-714's client metrics subscriptions): metrics,
//     interval.ms and match, those set as CLIENT_METRICS_CONFIG, the
//     others at Kafka's defaults.
//   - BROKER_LOGGER named by this broker's id: the root logger's level
//     (--log-level) and each component's (protocol, group, replica, ...),
//     its own or the root's, in Kafka's level names (TRACE to FATAL), as
//     DYNAMIC_BROKER_LOGGER_CONFIG of type UNKNOWN as Kafka describes its
//     loggers. An empty name, another broker's id or one that is not a
//     number is INVALID_REQUEST.
//
// Authorization: DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED),
// the group (GROUP_AUTHORIZATION_FAILED), or the cluster for brokers and
// loggers (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(32, 1, 4, handleDescribeConfigs) }

func handleDescribeConfigs(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	layers := b.configLayers()
	for _, rr := range req.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		var entries []configEntry
		err := b.configAccess(r, acl.DescribeConfigs, rr.ResourceType, rr.ResourceName)
		if err == nil {
			entries, err = b.describeResource(layers, rr.ResourceType, rr.ResourceName, rr.ConfigNames)
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
			res.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
			resp.Resources = append(resp.Resources, res)
			continue
		}
		for _, e := range entries {
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ReadOnly = e.name, kmsg.StringPtr(e.value), e.readOnly
			if e.null {
				c.Value = nil
			}
			// A secret is never shown, as Kafka hides passwords.
			sensitive := e.typ == config.TypePassword || e.sensitive
			if sensitive {
				c.Value, c.IsSensitive = nil, true
			}
			c.Source = kmsg.ConfigSource(e.source)
			c.ConfigType = kmsg.ConfigType(e.typ)
			if req.IncludeDocumentation {
				c.Documentation = kmsg.StringPtr(e.doc)
			}
			if req.IncludeSynonyms {
				for _, s := range e.synonyms {
					cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					cs.Name, cs.Value, cs.Source = s.Name, kmsg.StringPtr(s.Value), kmsg.ConfigSource(s.Source)
					if sensitive {
						cs.Value = nil
					}
					c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
				}
			}
			res.Configs = append(res.Configs, c)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return reply(resp)
}

func (b *Broker) describeResource(layers configLayers, typ kmsg.ConfigResourceType, name string, keys []string) ([]configEntry, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if err := cluster.ValidateTopicName(name); err != nil {
			return nil, err
		}
		t, ok := b.Cluster.Topic(name)
		if !ok {
			return nil, newAPIError(cluster.ErrUnknownTopic, "Topic '%s' does not exist.", name)
		}
		return layers.topicEntries(t.Configs, keys), nil
	case kmsg.ConfigResourceTypeBroker:
		perBroker, err := b.brokerResource(name)
		if err != nil {
			return nil, err
		}
		if !perBroker {
			return layers.clusterDefaultEntries(keys), nil
		}
		return layers.brokerEntries(keys), nil
	case kmsg.ConfigResourceTypeGroupConfig:
		return layers.groupEntries(b.Cluster.GroupConfigs(name), keys), nil
	case kmsg.ConfigResourceTypeClientMetrics:
		return clientMetricsEntries(b.Cluster.ClientMetrics(name), keys), nil
	case kmsg.ConfigResourceTypeBrokerLogger:
		if err := b.loggerResource(name); err != nil {
			return nil, err
		}
		return b.loggerEntries(keys), nil
	}
	return nil, unsupportedResource(typ)
}
