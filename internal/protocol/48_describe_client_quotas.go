package protocol

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
)

// DescribeClientQuotas: v0-1
//
// Behaviour:
//   - The quotas set (AlterClientQuotas) of the entities the filter
//     matches: each component names a type the entity has, exactly by
//     name, as the type's default, or any; with Strict the entity has no
//     other type. An empty filter without Strict matches every entity.
//   - A filter is checked as Kafka checks it: entity types user, client-id
//     and ip, each at most once; an exact match with a name, a default or
//     any match without one. Else INVALID_REQUEST.
//
// Authorization: DESCRIBE_CONFIGS on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(48, 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !b.allowedCluster(r, acl.DescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	seen := map[string]bool{}
	for _, c := range req.Components {
		msg := ""
		switch {
		case c.EntityType != "user" && c.EntityType != "client-id" && c.EntityType != "ip":
			msg = "Custom entity type '" + c.EntityType + "' not supported"
		case seen[c.EntityType]:
			msg = "Duplicate " + c.EntityType + " filter component entity type"
		case c.MatchType == kmsg.QuotasMatchTypeExact && c.Match == nil:
			msg = "Exact match requested for null entity name"
		case c.MatchType != kmsg.QuotasMatchTypeExact && c.Match != nil:
			msg = "A match name is only given with an exact match"
		case c.MatchType > kmsg.QuotasMatchTypeAny:
			msg = "Unknown match type"
		}
		seen[c.EntityType] = true
		if msg != "" {
			resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, &msg
			return &Response{Body: resp}, nil
		}
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	quotas, _ := b.Cluster.ClientQuotas()
	for _, q := range quotas {
		if !quotaMatches(req, q.Entity) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range q.Entity {
			ep := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ep.Type = p.Type
			if !p.Default {
				ep.Name = kmsg.StringPtr(p.Name)
			}
			e.Entity = append(e.Entity, ep)
		}
		for _, k := range slices.Sorted(maps.Keys(q.Values)) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return &Response{Body: resp}, nil
}

// quotaMatches reports whether the filter selects the entity.
func quotaMatches(req *kmsg.DescribeClientQuotasRequest, entity []cluster.QuotaEntityPart) bool {
	if req.Strict && len(entity) != len(req.Components) {
		return false
	}
	for _, c := range req.Components {
		i := slices.IndexFunc(entity, func(p cluster.QuotaEntityPart) bool { return p.Type == c.EntityType })
		if i < 0 {
			return false
		}
		switch p := entity[i]; c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if p.Default || p.Name != *c.Match {
				return false
			}
		case kmsg.QuotasMatchTypeDefault:
			if !p.Default {
				return false
			}
		}
	}
	return true
}
