package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// ListGroups: v0-5
//
// Behaviour:
//   - Every group this broker coordinates (all of them), with its protocol
//     type ("" for a group that only commits offsets), sorted by id.
//   - v4+: the state, and the states filter (case does not matter).
//   - v5+: the type, always "classic", and the types filter.
//
// Authorization: DESCRIBE on the cluster lists every group; without it, only
// the groups the principal may DESCRIBE.

func init() { register(16, 0, 5, handleListGroups) }

func handleListGroups(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	all := b.allowedCluster(r, acl.Describe)
	for _, g := range b.Groups.List(req.StatesFilter, req.TypesFilter) {
		if !all && !b.allowed(r, acl.Describe, acl.Group, g.Group) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Group, g.ProtocolType, g.State, g.Type
		resp.Groups = append(resp.Groups, lg)
	}
	return reply(resp)
}
