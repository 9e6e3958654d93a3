package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/scram"
)

// AlterUserScramCredentials: v0
//
// Behaviour:
//   - Deletes and sets users' SCRAM credentials (SCRAM-SHA-256 and
//     SCRAM-SHA-512) in the cluster metadata, so every broker has them. An
//     upsertion carries a salt and the salted password (KIP-554); the broker
//     keeps the salt and the stored and server keys derived from it, never a
//     password.
//   - Per user, as Kafka answers: an empty name or an iteration count
//     outside 4096-16384 is UNACCEPTABLE_CREDENTIAL, an unknown mechanism
//     UNSUPPORTED_SASL_MECHANISM, a user and mechanism altered twice
//     DUPLICATE_RESOURCE, the deletion of a credential that does not exist
//     RESOURCE_NOT_FOUND. The users without an error are changed together,
//     in one metadata record.
//
// Authorization: ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for
// every user).

func init() { register(51, 0, 0, handleAlterUserScramCredentials) }

func handleAlterUserScramCredentials(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	existing := b.Cluster.ScramCredentials()
	type key struct {
		user string
		mech int8
	}
	seen := map[key]int{}
	for _, d := range req.Deletions {
		seen[key{d.Name, d.Mechanism}]++
	}
	for _, u := range req.Upsertions {
		seen[key{u.Name, u.Mechanism}]++
	}
	var order []string
	failed := map[string]*kerr.Error{}
	messages := map[string]string{}
	fail := func(user string, err *kerr.Error, msg string) {
		if _, ok := failed[user]; !ok {
			failed[user], messages[user] = err, msg
		}
	}
	alterAllowed := b.allowedCluster(r, acl.Alter)
	check := func(user string, mech int8) {
		if _, ok := failed[user]; !ok && !slices.Contains(order, user) {
			order = append(order, user)
		}
		switch {
		case !alterAllowed:
			fail(user, kerr.ClusterAuthorizationFailed, kerr.ClusterAuthorizationFailed.Description)
		case user == "":
			fail(user, kerr.UnacceptableCredential, "Username must not be empty")
		case !scram.Mechanism(mech).Known():
			fail(user, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case seen[key{user, mech}] > 1:
			fail(user, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
		}
	}
	var deletions, upsertions []cluster.ScramCredentialChange
	for _, d := range req.Deletions {
		check(d.Name, d.Mechanism)
		if _, ok := existing[d.Name][d.Mechanism]; !ok {
			fail(d.Name, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
		}
		deletions = append(deletions, cluster.ScramCredentialChange{User: d.Name, Mechanism: d.Mechanism})
	}
	for _, u := range req.Upsertions {
		check(u.Name, u.Mechanism)
		switch {
		case u.Iterations < scram.MinIterations:
			fail(u.Name, kerr.UnacceptableCredential, "Too few iterations")
		case u.Iterations > scram.MaxIterations:
			fail(u.Name, kerr.UnacceptableCredential, "Too many iterations")
		case len(u.SaltedPassword) == 0 || len(u.Salt) == 0:
			fail(u.Name, kerr.UnacceptableCredential, "A salt and a salted password are needed")
		}
		c := scram.Mechanism(u.Mechanism).FromSaltedPassword(u.SaltedPassword, u.Salt, u.Iterations)
		upsertions = append(upsertions, cluster.ScramCredentialChange{User: u.Name, Mechanism: u.Mechanism,
			Credential: cluster.ScramCredential(c)})
	}
	keep := func(cs []cluster.ScramCredentialChange) []cluster.ScramCredentialChange {
		var out []cluster.ScramCredentialChange
		for _, c := range cs {
			if _, bad := failed[c.User]; !bad {
				out = append(out, c)
			}
		}
		return out
	}
	var proposeErr error
	if up, del := keep(upsertions), keep(deletions); len(up)+len(del) > 0 {
		proposeErr = b.Cluster.AlterScramCredentials(up, del)
	}
	for _, user := range order {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		if err, bad := failed[user]; bad {
			res.ErrorCode, res.ErrorMessage = err.Code, kmsg.StringPtr(messages[user])
		} else if proposeErr != nil {
			res.ErrorCode = errorCode(proposeErr)
		}
		resp.Results = append(resp.Results, res)
	}
	return &Response{Body: resp}, nil
}
