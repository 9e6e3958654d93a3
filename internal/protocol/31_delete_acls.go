package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/model"
)

// DeleteAcls: v0-3
//
// Behaviour:
//   - Each filter (as DescribeAcls') deletes the ACLs it matches and
//     answers them; an ACL matched by several filters is deleted once and
//     answered by each. The deletions are one cluster metadata record.
//     v0 filters match literal patterns.
//   - A filter with unknown codes is INVALID_REQUEST; without an
//     authorizer every filter is SECURITY_DISABLED.
//
// Authorization: ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for
// each filter).

func init() { register(31, 0, 3, handleDeleteAcls) }

func handleDeleteAcls(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	refused := b.aclRefusal(r, acl.Alter)
	current, _ := b.Cluster.ACLs()
	errs := make([]error, len(req.Filters))
	matched := make([][]model.ACLBinding, len(req.Filters))
	var deletions []model.ACLBinding
	for i, rf := range req.Filters {
		f := aclFilter(req.Version, rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host,
			rf.Operation, rf.PermissionType)
		if refused != nil {
			errs[i] = refused
			continue
		}
		if err := acl.ValidateFilter(f); err != nil {
			errs[i] = newAPIError(kerr.InvalidRequest, "%s", err)
			continue
		}
		for _, x := range current {
			if f.Matches(x) {
				matched[i] = append(matched[i], x)
				if !slices.Contains(deletions, x) {
					deletions = append(deletions, x)
				}
			}
		}
	}
	if len(deletions) > 0 {
		if err := b.Cluster.AlterACLs(nil, deletions); err != nil {
			for i := range errs {
				if errs[i] == nil {
					errs[i], matched[i] = err, nil
				}
			}
		}
	}
	for i, err := range errs {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
		for _, x := range matched[i] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(x.ResourceType), x.ResourceName
			m.ResourcePatternType = kmsg.ACLResourcePatternType(x.PatternType)
			m.Principal, m.Host = x.Principal, x.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(x.Operation), kmsg.ACLPermissionType(x.Permission)
			res.MatchingACLs = append(res.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, res)
	}
	return reply(resp)
}
