package protocol

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
)

// ListGroups: v0-5
//
// Behaviour:
//   - Every group this broker coordinates (all of them), with its protocol
//     type ("" for a group that only commits offsets), sorted by id.
//   - v4+: the state, and the states filter (case does not matter).
//   - v5+: the type (classic, consumer, or share), and the types filter.
//   - The share groups this broker coordinates while share.version is 1:
//     protocol type and type "share", state Empty or Stable.
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
	if b.sharesServed() {
		for _, name := range b.Shares.Groups.Groups() {
			info, ok := b.Shares.Groups.Describe(name)
			state := "Stable"
			if len(info.Members) == 0 {
				state = "Empty"
			}
			if !ok || !matchesFilter(req.StatesFilter, state) || !matchesFilter(req.TypesFilter, "share") ||
				(!all && !b.allowed(r, acl.Describe, acl.Group, name)) {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = name, "share", state, "share"
			resp.Groups = append(resp.Groups, lg)
		}
		slices.SortFunc(resp.Groups, func(x, y kmsg.ListGroupsResponseGroup) int { return strings.Compare(x.Group, y.Group) })
	}
	return reply(resp)
}

// matchesFilter reports whether v passes a ListGroups filter: empty, or
// naming v in any case.
func matchesFilter(filter []string, v string) bool {
	return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
}
