package protocol

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// DescribeUserScramCredentials: v0
//
// Behaviour:
//   - Each user named (every user with a credential when none is named)
//     with the mechanisms it has a credential for and their iteration
//     counts; never a salt or a key.
//   - A user without a credential is RESOURCE_NOT_FOUND, a user named twice
//     DUPLICATE_RESOURCE, as Kafka answers.
//
// Authorization: DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED).

func init() { register(50, 0, 0, handleDescribeUserScramCredentials) }

func handleDescribeUserScramCredentials(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !b.allowedCluster(r, acl.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	creds := b.Cluster.ScramCredentials()
	var users []string
	if req.Users == nil {
		users = slices.Sorted(maps.Keys(creds))
	}
	count := map[string]int{}
	for _, u := range req.Users {
		users = append(users, u.Name)
		count[u.Name]++
	}
	for _, u := range users {
		if count[u] == -1 {
			continue // answered once
		}
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u
		switch c, ok := creds[u]; {
		case count[u] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u)
			count[u] = -1
		case !ok:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + u)
		default:
			for _, m := range slices.Sorted(maps.Keys(c)) {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = m, c[m].Iterations
				res.CredentialInfos = append(res.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return &Response{Body: resp}, nil
}
