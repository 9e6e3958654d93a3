package peer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/testutil"
)

func metadataRequest() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12) // flexible: the response header has tags
	return req
}

// The client asks a peer, keeps the connection, survives the peer's
// restart, and gives up on a dead peer when its context ends.
func TestClientRequests(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	addr := b.Addr
	cl := peer.New(7, func(node int32) (string, bool) { return addr, node == 0 })
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		resp, err := cl.Request(ctx, 0, metadataRequest())
		if err != nil {
			t.Fatal(err)
		}
		if md := resp.(*kmsg.MetadataResponse); len(md.Brokers) != 1 || md.Brokers[0].NodeID != 0 {
			t.Fatalf("metadata %+v", md.Brokers)
		}
	}
	// ApiVersions keeps the old response header even when flexible.
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "strand", "1"
	resp, err := cl.Request(ctx, 0, av)
	if err != nil {
		t.Fatal(err)
	}
	if a := resp.(*kmsg.ApiVersionsResponse); a.ErrorCode != 0 || len(a.ApiKeys) == 0 {
		t.Fatalf("api versions %+v", a)
	}
	if _, err := cl.Request(ctx, 3, metadataRequest()); !errors.Is(err, peer.ErrUnknownPeer) {
		t.Fatalf("unknown peer: %v", err)
	}

	b.Restart(t)
	var lastErr error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if _, lastErr = cl.Request(ctx, 0, metadataRequest()); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("after the peer restarted: %v", lastErr)
	}

	b.Stop(t)
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	if _, err := cl.Request(short, 0, metadataRequest()); err == nil {
		t.Fatal("a stopped peer answered")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a dead peer held the request %v", took)
	}
}
