package protocol

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/config"
)

// AlterConfigs: v0-2
//
// Behaviour:
//   - Replaces the whole override set of each resource with the configs
//     given (configs not named return to their defaults); ValidateOnly
//     checks without changing anything.
//   - TOPIC: the new set must be valid topic configs (config.TopicConfig);
//     it applies at once to the topic's partitions. An illegal name is
//     INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
//   - BROKER "" (cluster-wide) or this broker's id (its own level, which
//     wins): only the topic defaults (log.retention.ms, log.segment.bytes,
//     message.max.bytes, ...) can be set at runtime; they apply at once to
//     the topics that do not override them and to topics created later.
//     Anything else is INVALID_CONFIG, another broker id INVALID_REQUEST.
//   - A null value is INVALID_CONFIG; a resource named twice is
//     INVALID_REQUEST "Duplicate resource." (one answer for it); other
//     resource types (BROKER_LOGGER, ...) are INVALID_REQUEST.
//
// Not supported: AlterConfigPolicy.
//
// Authorization: ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED),
// the group (GROUP_AUTHORIZATION_FAILED), or the cluster for brokers and
// loggers (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	answer := func(typ kmsg.ConfigResourceType, name string, err error) {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = typ, name
		res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, res)
	}
	type key struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	count := map[key]int{}
	for _, rr := range req.Resources {
		count[key{rr.ResourceType, rr.ResourceName}]++
	}
	for _, rr := range req.Resources {
		k := key{rr.ResourceType, rr.ResourceName}
		switch n := count[k]; {
		case n > 1:
			answer(rr.ResourceType, rr.ResourceName, newAPIError(errInvalidRequest, "Duplicate resource."))
			count[k] = -1 // answered
			continue
		case n < 0:
			continue
		}
		configs := map[string]string{}
		var nulls []string
		for _, c := range rr.Configs {
			if c.Value == nil {
				nulls = append(nulls, c.Name)
				continue
			}
			configs[c.Name] = *c.Value
		}
		err := b.configAccess(r, acl.AlterConfigs, rr.ResourceType, rr.ResourceName)
		switch {
		case err != nil:
		case len(nulls) > 0:
			what := "topic"
			if rr.ResourceType == kmsg.ConfigResourceTypeBroker {
				what = "broker"
			}
			err = newAPIError(config.ErrInvalidConfig, "Null value not supported for %s configs: %s", what, strings.Join(nulls, ","))
		default:
			err = b.alterConfigs(rr.ResourceType, rr.ResourceName, req.ValidateOnly,
				func(map[string]string, func(string) string) (map[string]string, error) { return configs, nil })
		}
		answer(rr.ResourceType, rr.ResourceName, err)
	}
	return reply(resp)
}
