package protocol

import (
	"cmp"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/model"
)

// DescribeAcls: v0-3
//
// Behaviour:
//   - Every ACL the filter matches (internal/acl's Filter: ANY codes and
//     null strings match all; the MATCH pattern type the entries that
//     apply to the named resource), grouped by resource pattern. v0 knows
//     only literal patterns.
//   - Without an authorizer, SECURITY_DISABLED; a filter with unknown
//     codes is INVALID_REQUEST.
//
// Authorization: DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(29, 0, 3, handleDescribeAcls) }

// errSecurityDisabled is the answer of the ACL APIs without an authorizer.
var errSecurityDisabled = newAPIError(kerr.SecurityDisabled, "No Authorizer is configured.")

// aclRefusal is why an ACL API refuses the request: no authorizer, or a
// principal that may not do op on the cluster; nil when it may go on.
func (b *Broker) aclRefusal(r *Request, op kmsg.ACLOperation) error {
	switch {
	case b.authorizer() == nil:
		return errSecurityDisabled
	case !b.allowedCluster(r, op):
		return kerr.ClusterAuthorizationFailed
	}
	return nil
}

// aclFilter is a DescribeAcls or DeleteAcls filter; v0 filters name
// literal patterns.
func aclFilter(version int16, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Filter {
	if version == 0 {
		pt = kmsg.ACLResourcePatternTypeLiteral
	}
	return acl.Filter{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host,
		Operation: op, Permission: perm}
}

func handleDescribeAcls(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := aclFilter(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host,
		req.Operation, req.PermissionType)
	err := b.aclRefusal(r, acl.Describe)
	if err == nil {
		err = acl.ValidateFilter(f)
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return reply(resp)
	}
	bindings, _ := b.Cluster.ACLs()
	bindings = slices.DeleteFunc(bindings, func(x model.ACLBinding) bool { return !f.Matches(x) })
	slices.SortStableFunc(bindings, func(x, y model.ACLBinding) int {
		return cmp.Or(cmp.Compare(x.ResourceType, y.ResourceType), cmp.Compare(x.ResourceName, y.ResourceName),
			cmp.Compare(x.PatternType, y.PatternType))
	})
	for _, x := range bindings {
		if n := len(resp.Resources); n == 0 || !samePattern(resp.Resources[n-1], x) {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(x.ResourceType), x.ResourceName
			res.ResourcePatternType = kmsg.ACLResourcePatternType(x.PatternType)
			resp.Resources = append(resp.Resources, res)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = x.Principal, x.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(x.Operation), kmsg.ACLPermissionType(x.Permission)
		res := &resp.Resources[len(resp.Resources)-1]
		res.ACLs = append(res.ACLs, e)
	}
	return reply(resp)
}

func samePattern(res kmsg.DescribeACLsResponseResource, x model.ACLBinding) bool {
	return int8(res.ResourceType) == x.ResourceType && res.ResourceName == x.ResourceName &&
		int8(res.ResourcePatternType) == x.PatternType
}
