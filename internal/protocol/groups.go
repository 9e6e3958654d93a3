package protocol

import (
	"context"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/acl"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/share"
	"github.com/strandlog/strand/internal/txn"
)

// What the group handlers (FindCoordinator, JoinGroup ... OffsetDelete)
// share.

// groupClient is the request's client as the coordinator records it.
func groupClient(r *Request) group.Client {
	return group.Client{ID: r.ClientID, Addr: r.Client, SoftwareName: r.Software.Name, SoftwareVersion: r.Software.Version}
}

// await answers with what ch delivers: at once if it is there, otherwise
// off the read path (the connection keeps reading while a JoinGroup is
// parked for a rebalance, or a commit waits for its fsync). If the
// connection closes or the server shuts down first, the answer is made of
// gone (Kafka answers NOT_COORDINATOR when it unloads a group).
func await[T any](ch <-chan T, answer func(T) kmsg.Response, gone T) (*Response, error) {
	select {
	case v := <-ch:
		return reply(answer(v))
	default:
	}
	return &Response{Defer: func(ctx context.Context) (*Response, error) {
		select {
		case v := <-ch:
			return reply(answer(v))
		case <-ctx.Done():
			return reply(answer(gone))
		}
	}}, nil
}

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

// internalTopic is Kafka's Topic.isInternal: the coordinators' topics
// (the share groups' state among them), the hand-off ledger's and the
// fetch positions', which only the broker writes.
func internalTopic(name string) bool {
	return name == group.OffsetsTopic || name == txn.StateTopic || name == ledger.Topic || name == model.FetchPositionsTopic ||
		name == share.StateTopic
}

// peerWritable is whether r may write topic although it is internal: the
// hand-off ledger's and the fetch positions' records are written on the
// partition's leader, which another broker reaches by Produce. A
// coordinator's state is written by its coordinator only.
func (b *Broker) peerWritable(r *Request, topic string) bool {
	return (topic == ledger.Topic || topic == model.FetchPositionsTopic) &&
		strings.HasPrefix(r.ClientID, peer.ClientIDPrefix) && b.allowedCluster(r, acl.ClusterAction)
}
