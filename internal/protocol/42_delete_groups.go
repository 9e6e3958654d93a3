package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
)

// DeleteGroups: v0-2
//
// Behaviour: an Empty group (or one that only holds offsets) is deleted
// with its committed offsets: gone at once, answered once the tombstones
// are durable. A group with members is NON_EMPTY_GROUP, an unknown one
// GROUP_ID_NOT_FOUND, an empty id INVALID_GROUP_ID.
//
// Authorization: DELETE on the group (GROUP_AUTHORIZATION_FAILED).

func init() { register(42, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(_ context.Context, b *Broker, r *Request) (*Response, error) {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	waits := make([]<-chan error, len(req.Groups))
	for i, id := range req.Groups {
		if !b.allowed(r, acl.Delete, acl.Group, id) {
			refused := make(chan error, 1)
			refused <- kerr.GroupAuthorizationFailed
			waits[i] = refused
			continue
		}
		waits[i] = b.Groups.DeleteGroup(id)
	}
	answer := func(ctx context.Context) *Response {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for i, id := range req.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group = id
			select {
			case err := <-waits[i]:
				rg.ErrorCode = errorCode(err)
			case <-ctx.Done():
				rg.ErrorCode = errorCode(group.ErrNotCoordinator)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return &Response{Body: resp}
	}
	return &Response{Defer: func(ctx context.Context) (*Response, error) { return answer(ctx), nil }}, nil
}
