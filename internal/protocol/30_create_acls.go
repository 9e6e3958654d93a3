package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/model"
)

// CreateAcls: v0-3
//
// Behaviour:
//   - Each creation is validated as Kafka's controller does (acl.Validate:
//     a concrete resource type, a literal or prefixed pattern, a concrete
//     operation and permission, a non-empty name, the cluster named
//     kafka-cluster, a principal Type:name); a bad one is INVALID_REQUEST
//     with Kafka's message, and the others are created. v0 creates literal
//     patterns.
//   - The valid ones are stored together in one cluster metadata record,
//     so they apply on every broker; creating an ACL that exists changes
//     nothing and succeeds.
//   - Without an authorizer, SECURITY_DISABLED.
//
// Authorization: ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for
// each creation).

func init() { register(30, 0, 3, handleCreateAcls) }

func handleCreateAcls(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	refused := b.aclRefusal(r, acl.Alter)
	errs := make([]error, len(req.Creations))
	var valid []model.ACLBinding
	var validAt []int
	for i, c := range req.Creations {
		x := model.ACLBinding{ResourceType: int8(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: int8(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: int8(c.Operation), Permission: int8(c.PermissionType)}
		if req.Version == 0 {
			x.PatternType = int8(kmsg.ACLResourcePatternTypeLiteral)
		}
		if refused != nil {
			errs[i] = refused
			continue
		}
		if err := acl.Validate(x); err != nil {
			errs[i] = newAPIError(kerr.InvalidRequest, "%s", err)
			continue
		}
		valid = append(valid, x)
		validAt = append(validAt, i)
	}
	if len(valid) > 0 {
		if err := b.Cluster.AlterACLs(valid, nil); err != nil {
			for _, i := range validAt {
				errs[i] = err
			}
		}
	}
	for _, err := range errs {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Results = append(resp.Results, res)
	}
	return reply(resp)
}
