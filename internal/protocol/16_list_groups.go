package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-5
//
// Behaviour:
//   - Every group this broker coordinates (all of them), with its protocol
//     type ("" for a group that only commits offsets), sorted by id.
//   - v4+: the state, and the states filter (case does not matter).
//   - v5+: the type, always "classic", and the types filter.

func init() { register(16, 0, 5, handleListGroups) }

func handleListGroups(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	for _, g := range b.Groups.List(req.StatesFilter, req.TypesFilter) {
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Group, g.ProtocolType, g.State, g.Type
		resp.Groups = append(resp.Groups, lg)
	}
	return reply(resp)
}
