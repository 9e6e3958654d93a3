package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/testutil"
)

// TestConnectionLimits: past max.connections.per.ip (or its override for
// the host) and max.connections a new connection is closed at once, the
// ones open keep being served, and a slot freed is taken again.
func TestConnectionLimits(t *testing.T) {
	for name, edit := range map[string]func(*config.Broker){
		"per ip":   func(c *config.Broker) { c.MaxConnectionsPerIP = 3 },
		"override": func(c *config.Broker) { c.MaxConnectionsPerIP, c.MaxConnectionsPerIPOverrides = 100, "127.0.0.1:3" },
		"in total": func(c *config.Broker) { c.MaxConnections = 3 },
	} {
		t.Run(name, func(t *testing.T) {
			b := testutil.StartBroker(t, edit)
			var open []*rawConn
			for range 3 {
				c := dialRaw(t, b.Addr)
				c.do(kmsg.NewPtrApiVersionsRequest())
				open = append(open, c)
			}
			dialRaw(t, b.Addr).expectClosed()
			for _, c := range open {
				c.do(kmsg.NewPtrMetadataRequest())
			}
			open[0].nc.Close()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				c := dialRaw(t, b.Addr)
				if _, err := c.readFrameAfter(kmsg.NewPtrApiVersionsRequest()); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the slot of a closed connection was not freed")
				}
			}
		})
	}
}

// TestIdleConnectionsClosed: a connection that sends nothing for
// connections.max.idle.ms is closed; one that keeps sending is not.
func TestIdleConnectionsClosed(t *testing.T) {
	// Slow: connections.max.idle.ms (1 s) is waited out: timing matters, so it runs alone.
	b := testutil.StartBroker(t, func(c *config.Broker) { c.ConnectionsMaxIdle = time.Second })
	busy, idle, broker := dialRaw(t, b.Addr), dialRaw(t, b.Addr), dialRaw(t, b.Addr)
	idle.do(kmsg.NewPtrApiVersionsRequest())
	// Another broker's connection is never idle.
	broker.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID(peer.ClientIDPrefix + "9"))
	broker.do(kmsg.NewPtrApiVersionsRequest())
	for range 20 {
		busy.do(kmsg.NewPtrApiVersionsRequest())
		time.Sleep(100 * time.Millisecond)
	}
	idle.expectClosed()
	busy.do(kmsg.NewPtrApiVersionsRequest())
	broker.do(kmsg.NewPtrApiVersionsRequest())
}

// TestQueuedRequestBytesBound: with queued.max.request.bytes far below
// what a pipelining producer sends at once, everything is written and
// acknowledged, in order: the reader waits for room instead of reading
// ahead.
func TestQueuedRequestBytesBound(t *testing.T) {
	b := testutil.StartBroker(t, func(c *config.Broker) { c.QueuedMaxRequestBytes = 300 << 10 })
	createTopic(t, b.Addr, "bounded", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic("bounded"), kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(200<<10), kgo.MaxBufferedBytes(8<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	value := make([]byte, 150<<10)
	for range 40 {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "bounded")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("bounded", 0); o.Offset != 40 {
		t.Fatalf("end offset %d, want 40", o.Offset)
	}
}
