package protocol

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/config"
)

// IncrementalAlterConfigs: v0-1
//
// Behaviour:
//   - Changes the named configs of each resource and keeps the others: SET
//     overrides a config, DELETE returns it to its default, APPEND and
//     SUBTRACT add or remove comma-separated items of a LIST config
//     (cleanup.policy, log.cleanup.policy) starting from the value in force
//     when it is not set at that level. ValidateOnly checks without changing
//     anything.
//   - Resources as in AlterConfigs: TOPIC (validated as a whole with
//     config.TopicConfig, applied at once to its partitions), BROKER ""
//     and BROKER <this broker's id> for the topic defaults, which apply at
//     once to the topics that do not override them.
//   - INVALID_REQUEST: a resource named twice (every entry of it), a config
//     named twice in one resource, a null value for SET, APPEND or SUBTRACT,
//     an unknown operation, another broker's id, resource types other than
//     those served. INVALID_CONFIG: APPEND or SUBTRACT on a config that is
//     not a LIST, unknown configs and invalid values.
//   - GROUP and CLIENT_METRICS resources as AlterConfigs' rules for them
//     (admin.go); BROKER_LOGGER sets and removes this broker's loggers'
//     levels, every change checked first as Kafka does: SET a known logger
//     to TRACE, DEBUG, INFO, WARN, ERROR or FATAL (else INVALID_CONFIG),
//     DELETE a component's own level but not the root's
//     (INVALID_REQUEST), no APPEND or SUBTRACT (INVALID_REQUEST).
//
// Not supported: AlterConfigPolicy.
//
// Authorization: ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED),
// the group (GROUP_AUTHORIZATION_FAILED), or the cluster for brokers and
// loggers (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	type key struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	count := map[key]int{}
	for _, rr := range req.Resources {
		count[key{rr.ResourceType, rr.ResourceName}]++
	}
	for _, rr := range req.Resources {
		err := b.configAccess(r, acl.AlterConfigs, rr.ResourceType, rr.ResourceName)
		if count[key{rr.ResourceType, rr.ResourceName}] > 1 {
			err = newAPIError(errInvalidRequest, "Each resource must appear at most once.")
		} else if err == nil {
			err = checkIncremental(rr.Configs)
		}
		if err == nil && rr.ResourceType == kmsg.ConfigResourceTypeBrokerLogger {
			err = b.alterLoggers(rr.ResourceName, req.ValidateOnly, rr.Configs)
		} else if err == nil {
			err = b.alterConfigs(rr.ResourceType, rr.ResourceName, req.ValidateOnly,
				func(current map[string]string, inForce func(string) string) (map[string]string, error) {
					return applyIncremental(rr.ResourceType, current, inForce, rr.Configs)
				})
		}
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, res)
	}
	return reply(resp)
}

// checkIncremental applies Kafka's checks of a resource's changes before
// looking at the resource.
func checkIncremental(changes []kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	seen := map[string]bool{}
	var nulls []string
	for _, c := range changes {
		if seen[c.Name] {
			return newAPIError(errInvalidRequest, "Error due to duplicate config keys")
		}
		seen[c.Name] = true
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if c.Value == nil {
				nulls = append(nulls, c.Name)
			}
		case kmsg.IncrementalAlterConfigOpDelete:
		default:
			return newAPIError(errInvalidRequest, "Unknown config operation %d for %s", c.Op, c.Name)
		}
	}
	if len(nulls) > 0 {
		return newAPIError(errInvalidRequest, "Null value not supported for : %s", strings.Join(nulls, ", "))
	}
	return nil
}

// applyIncremental returns current (a copy the caller owns) with changes
// applied.
func applyIncremental(typ kmsg.ConfigResourceType, current map[string]string, inForce func(string) string,
	changes []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	for _, c := range changes {
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			current[c.Name] = *c.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(current, c.Name)
		default: // APPEND, SUBTRACT
			if !isList(typ, c.Name) {
				return nil, newAPIError(config.ErrInvalidConfig, "Can't %s to key %s because its type is not LIST.", opName(c.Op), c.Name)
			}
			base, ok := current[c.Name]
			if !ok {
				base = inForce(c.Name)
			}
			items := config.SplitList(base)
			for _, v := range config.SplitList(*c.Value) {
				if c.Op == kmsg.IncrementalAlterConfigOpAppend {
					if !slices.Contains(items, v) {
						items = append(items, v)
					}
				} else {
					items = slices.DeleteFunc(items, func(x string) bool { return x == v })
				}
			}
			current[c.Name] = strings.Join(items, ",")
		}
	}
	return current, nil
}

func isList(typ kmsg.ConfigResourceType, name string) bool {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		d, ok := config.LookupTopicDef(name)
		return ok && d.Type == config.TypeList
	case kmsg.ConfigResourceTypeBroker:
		if d, ok := config.LookupBrokerDef(name); ok {
			return d.Type == config.TypeList
		}
		d, ok := config.LookupUnusedKafkaDef(name)
		return ok && d.Type == config.TypeList
	case kmsg.ConfigResourceTypeGroupConfig:
		d, ok := config.LookupGroupDef(name)
		return ok && d.Type == config.TypeList
	case kmsg.ConfigResourceTypeClientMetrics:
		return name == config.ClientMetricsMatch || name == config.ClientMetricsMetrics
	}
	return false
}

func opName(op kmsg.IncrementalAlterConfigOp) string {
	if op == kmsg.IncrementalAlterConfigOpAppend {
		return "APPEND"
	}
	return "SUBTRACT"
}
