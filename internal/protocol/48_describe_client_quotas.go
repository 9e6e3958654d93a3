package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// DescribeClientQuotas: v0-1
//
// Behaviour:
//   - Strand enforces no client quotas yet and AlterClientQuotas is not
//     served, so no quota is ever set: every valid filter matches no
//     entity, and the answer lists none (what kafka-configs.sh --describe
//     --entity-type users reads beside the users' SCRAM credentials).
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
	return &Response{Body: resp}, nil
}
