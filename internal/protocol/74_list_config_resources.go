package protocol

import (
	"context"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// ListConfigResources: v0-1 (KIP-714's ListClientMetricsResources, renamed
// and widened by KIP-1142)
//
// Behaviour:
//   - v0 lists the client metrics subscriptions (kafka-client-metrics.sh
//     --list).
//   - v1 lists the config resources of the types asked, as Kafka 4.4
//     does: every topic (TOPIC), every broker (BROKER, and BROKER_LOGGER,
//     whose loggers Strand does not describe), the client metrics
//     subscriptions (CLIENT_METRICS) and the groups that have configs
//     (GROUP); no type asks for all of them. A type outside those is
//     UNSUPPORTED_VERSION, Kafka's answer.
//
// Authorization: DESCRIBE_CONFIGS on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(74, 0, 1, handleListConfigResources) }

func handleListConfigResources(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ListConfigResourcesRequest)
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if !b.allowedCluster(r, acl.DescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	types := req.ResourceTypes
	if req.Version == 0 {
		types = []int8{int8(kmsg.ConfigResourceTypeClientMetrics)}
	} else if len(types) == 0 {
		types = []int8{int8(kmsg.ConfigResourceTypeTopic), int8(kmsg.ConfigResourceTypeBroker),
			int8(kmsg.ConfigResourceTypeBrokerLogger), int8(kmsg.ConfigResourceTypeClientMetrics),
			int8(kmsg.ConfigResourceTypeGroupConfig)}
	}
	add := func(typ kmsg.ConfigResourceType, names ...string) {
		for _, name := range names {
			cr := kmsg.NewListConfigResourcesResponseConfigResource()
			cr.Name, cr.Type = name, int8(typ)
			resp.ConfigResources = append(resp.ConfigResources, cr)
		}
	}
	var brokers []string
	for _, br := range b.Cluster.Brokers() {
		brokers = append(brokers, strconv.Itoa(int(br.NodeID)))
	}
	for _, t := range slices.Compact(slices.Sorted(slices.Values(types))) {
		switch kmsg.ConfigResourceType(t) {
		case kmsg.ConfigResourceTypeTopic:
			for _, topic := range b.Cluster.Topics() {
				add(kmsg.ConfigResourceTypeTopic, topic.Name)
			}
		case kmsg.ConfigResourceTypeBroker:
			add(kmsg.ConfigResourceTypeBroker, brokers...)
		case kmsg.ConfigResourceTypeBrokerLogger:
			add(kmsg.ConfigResourceTypeBrokerLogger, brokers...)
		case kmsg.ConfigResourceTypeClientMetrics:
			add(kmsg.ConfigResourceTypeClientMetrics, b.Cluster.ClientMetricsNames()...)
		case kmsg.ConfigResourceTypeGroupConfig:
			add(kmsg.ConfigResourceTypeGroupConfig, b.Cluster.GroupsWithConfigs()...)
		default:
			resp.ErrorCode, resp.ConfigResources = kerr.UnsupportedVersion.Code, nil
			return reply(resp)
		}
	}
	return reply(resp)
}
