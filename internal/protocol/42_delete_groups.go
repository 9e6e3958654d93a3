package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/share"
)

// DeleteGroups: v0-3
//
// Behaviour: an Empty group (or one that only holds offsets) is deleted
// with its committed offsets: gone at once, answered once the tombstones
// are durable. A group with members is NON_EMPTY_GROUP, an unknown one
// GROUP_ID_NOT_FOUND, an empty id INVALID_GROUP_ID.
//   - A share group (kafka-share-groups.sh --delete) is deleted with the
//     state of its share-partitions, removed where it is kept before the
//     answer, then its records in __consumer_offsets; one with members is
//     NON_EMPTY_GROUP. A group whose state cannot all be removed is kept,
//     and answered COORDINATOR_NOT_AVAILABLE.
//   - v3 (KIP-1331): each refusal carries its message.
//
// Authorization: DELETE on the group (GROUP_AUTHORIZATION_FAILED).

func init() { register(42, 0, 3, handleDeleteGroups) }

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
		if b.sharesServed() && b.Shares.Groups.Exists(id) {
			done := make(chan error, 1)
			done <- b.deleteShareGroup(r, id)
			waits[i] = done
			continue
		}
		waits[i] = b.Groups.DeleteGroup(id)
	}
	answer := func(ctx context.Context) *Response {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for i, id := range req.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group = id
			var err error
			select {
			case err = <-waits[i]:
			case <-ctx.Done():
				err = group.ErrNotCoordinator
			}
			rg.ErrorCode, rg.ErrorMessage = errorCode(err), errorMessage(err)
			resp.Groups = append(resp.Groups, rg)
		}
		return &Response{Body: resp}
	}
	return &Response{Defer: func(ctx context.Context) (*Response, error) { return answer(ctx), nil }}, nil
}

// deleteShareGroup deletes an empty share group and the state of its
// share-partitions: of every partition of the topics it has offsets of.
func (b *Broker) deleteShareGroup(r *Request, id string) error {
	if err := b.checkShareGroupAdmin(r, id, acl.Delete, true); err != nil {
		return err
	}
	for _, name := range b.Shares.Groups.Topics(id) {
		if t, ok := b.Cluster.Topic(name); ok {
			if err := b.deleteShareState(id, [16]byte(t.ID), int32(len(t.States))); err != nil {
				return err
			}
		}
	}
	if !b.Shares.Groups.Delete(id) {
		return newAPIError(kerr.NonEmptyGroup, "A member joined the group %s while it was deleted.", id)
	}
	b.Shares.Leader.Drop(func(k share.Key) bool { return k.Group != id })
	if b.Shares.Persist != nil {
		return b.Shares.Persist(id, share.Tombstones(id))
	}
	return nil
}
