package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/model"
)

// Links is what the protocol asks of the cluster links (package link):
// the groups they pass through to their sources, and how far the sources
// of the mirrors led here have written.
type Links interface {
	// PassesThrough reports whether a group lives on a link's source
	// while its consumers move: the requests of a client of that id go
	// there.
	PassesThrough(group, clientID string) bool
	// ForwardGroup answers a passed-through group's request by the
	// source's coordinator.
	ForwardGroup(ctx context.Context, gr GroupRequest) (kmsg.Response, error)
	// SourceHighWatermark is, for a mirror partition led here, the
	// source's high watermark as the link last saw it.
	SourceHighWatermark(tp model.TopicPartition) (int64, bool)
}

// GroupRequest is a request of a passed-through group.
type GroupRequest struct {
	Group    string
	MemberID string // the member it is of: "" for a first join or none
	ClientID string
	// SoftwareName and SoftwareVersion are the client's library (KIP-511).
	SoftwareName, SoftwareVersion string
	Conn                          string // the client connection's address
	Req                           kmsg.Request
}

// passesThrough reports whether a group's requests go to a link's source.
func (b *Broker) passesThrough(r *Request, group string) bool {
	return b.Links != nil && b.Links.PassesThrough(group, r.ClientID)
}

// forwardGroup answers a passed-through group's request, off the read path
// (a JoinGroup waits for the source's rebalance), with the source's answer;
// fail makes the answer of a failure to reach the source's coordinator,
// which the client retries. done, if set, sees the source's answer first.
func (b *Broker) forwardGroup(r *Request, req kmsg.Request, group, member string, fail func(code int16) kmsg.Response,
	done func(kmsg.Response)) (*Response, error) {
	gr := groupRequest(r, group, member, req)
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		resp, err := b.Links.ForwardGroup(ctx, gr)
		if err != nil {
			return reply(fail(forwardErrorCode(err)))
		}
		if done != nil {
			done(resp)
		}
		return reply(resp)
	}}, nil
}

// groupRequest is a request of the client r, of a member of a group.
func groupRequest(r *Request, group, member string, req kmsg.Request) GroupRequest {
	return GroupRequest{Group: group, MemberID: member, ClientID: r.ClientID, SoftwareName: r.Software.Name,
		SoftwareVersion: r.Software.Version, Conn: r.Client, Req: req}
}

// forwardErrorCode is what a member is told when its request did not reach
// the source's coordinator: the source's own error when it answered one,
// else COORDINATOR_NOT_AVAILABLE, so that it finds the coordinator (this
// cluster's) again and retries.
func forwardErrorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}
