package fault

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// TestHostileClientsStayBounded: 40 clients each send all but the last
// byte of a 16 MiB request and stall, more open connections and send
// garbage, while a producer and a consumer go on. With
// queued.max.request.bytes at 32 MiB the broker reads only that much of
// the stalled requests, so its peak resident memory stays far below the
// 640 MiB they claim, and the others are served all along.
func TestHostileClientsStayBounded(t *testing.T) {
	const (
		frame     = 16 << 20
		attackers = 40
	)
	p := testutil.StartProcess(t, "", "--max-request-size", "16777216", "--queued-max-request-bytes", "33554432",
		"--admin-listen", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	body := make([]byte, frame-1)
	for range attackers {
		nc, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		conns = append(conns, nc)
		mu.Unlock()
		wg.Go(func() {
			// The size, then all of the frame but its last byte; the
			// write blocks where the broker stops reading.
			nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
			nc.Write(binary.BigEndian.AppendUint32(nil, frame))
			nc.Write(body)
		})
	}
	for range 40 {
		if nc, err := net.Dial("tcp", p.Addr); err == nil {
			nc.Write([]byte{0, 0, 0, 12, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8})
			nc.Close()
		}
	}

	// A producer and a consumer are served meanwhile.
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr), kgo.DefaultProduceTopic("calm"), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("calm"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for range 50 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 1000)}).FirstErr(); err != nil {
			t.Fatalf("producing beside the hostile clients: %v", err)
		}
	}
	for got := 0; got < 50; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consuming beside the hostile clients: %v", err)
		}
		got += fs.NumRecords()
	}
	time.Sleep(time.Second) // what the stalled writers could push, pushed
	peak := p.PeakRSS()
	t.Logf("peak RSS %d MiB with %d clients claiming %d MiB", peak>>20, attackers, attackers*frame>>20)
	if peak <= 0 || peak > 200<<20 {
		t.Errorf("peak RSS %d MiB, want at most 200 MiB", peak>>20)
	}
	mu.Lock()
	for _, nc := range conns {
		nc.Close()
	}
	mu.Unlock()
	wg.Wait()
}
