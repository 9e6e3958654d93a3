package server_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/testutil"
)

// storedLog opens a stopped broker's log of topic-0 and returns its start,
// end, first segment and its batches from the start on.
func storedLog(t *testing.T, dataDir, topic string) (start, end, firstSegment int64, data []byte) {
	t.Helper()
	l, err := log.Open(filepath.Join(dataDir, topic+"-0"), log.Defaults(), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start, end = l.StartOffset(), l.EndOffset()
	for next := start; next < end; {
		sec, err := l.Read(next, 1<<20, end)
		if err != nil {
			t.Fatal(err)
		}
		if sec.Size == 0 {
			break
		}
		b, err := sec.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		data, next = append(data, b...), sec.Next
	}
	return start, end, l.Segments()[0], data
}

// A follower away while its leader deleted records past its log end comes
// back, restarts its log at the leader's log start (which falls inside a
// batch), catches up and rejoins the in-sync set, holding the leader's
// log from the same start to the same end, byte for byte.
func TestFollowerRestartsAtLeaderLogStart(t *testing.T) {
	// Slow: a follower of three stops, comes back and is waited for to rejoin the in-sync set.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	c := testutil.StartCluster(t, 3, 0, func(_ int, cfg *config.Broker) {
		cfg.ReplicaLagTime = time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Brokers[0].Addr))
	const topic = "restart"
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	var leader, away int32
	state := func(from int32) (isr []int32) {
		t.Helper()
		st, ok := c.Brokers[from].Server().Metadata().Partition(topic, 0)
		if !ok {
			return nil
		}
		leader = st.Leader
		return st.ISR
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if isr := state(0); len(isr) != 3 || leader < 0 {
			return fmt.Errorf("in-sync set %v, leader %d", isr, leader)
		}
		return nil
	})
	away = (leader + 1) % 3
	conn := dialRaw(t, c.Brokers[leader].Addr)
	// Broker 0's metadata names the leader before the leader itself has
	// applied it and opened the partition as its leader.
	testutil.Eventually(t, 10*time.Second, func() error {
		if p := listOffset(t, conn, 1, topic, 0, -1); p.ErrorCode != 0 {
			return fmt.Errorf("the leader %d answers ListOffsets with %v", leader, kerr.ErrorForCode(p.ErrorCode))
		}
		return nil
	})
	produceBatches := func(first, n int) {
		t.Helper()
		for b := first; b < first+n; b++ {
			values := make([]string, 10)
			for i := range values {
				values[i] = fmt.Sprintf("v%d", 10*b+i)
			}
			if base := produceRaw(t, conn, topic, 0, values...); base != int64(10*b) {
				t.Fatalf("batch %d at offset %d", b, base)
			}
		}
	}
	produceBatches(0, 5) // offsets 0-49, on every replica

	c.Brokers[away].Stop(t)
	testutil.Eventually(t, 30*time.Second, func() error {
		if isr := state(leader); slices.Contains(isr, away) {
			return fmt.Errorf("broker %d still in the in-sync set %v", away, isr)
		}
		return nil
	})
	produceBatches(5, 5) // 50-99, without it
	offsets := make(kadm.Offsets)
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 75}) // inside batch 70-79
	deleted, err := adm.DeleteRecords(ctx, offsets)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := deleted.Lookup(topic, 0); !ok || r.Err != nil || r.LowWatermark != 75 {
		t.Fatalf("DeleteRecords: %+v", r)
	}
	produceBatches(10, 2) // 100-119

	c.Brokers[away].Restart(t)
	testutil.Eventually(t, 45*time.Second, func() error {
		if isr := state(leader); !slices.Contains(isr, away) {
			return fmt.Errorf("broker %d not back in the in-sync set %v", away, isr)
		}
		return nil
	})

	c.Brokers[away].Stop(t)
	start, end, first, data := storedLog(t, c.Brokers[away].DataDir, topic)
	if start != 75 || end != 120 || first != 70 {
		t.Fatalf("the follower's log: start %d, end %d, first segment at %d; want 75, 120, 70", start, end, first)
	}
	c.Brokers[leader].Stop(t)
	lstart, lend, _, ldata := storedLog(t, c.Brokers[leader].DataDir, topic)
	if lstart != start || lend != end || !bytes.Equal(ldata, data) {
		t.Fatalf("the leader's log: start %d, end %d, %d bytes; the follower's: start %d, end %d, %d bytes",
			lstart, lend, len(ldata), start, end, len(data))
	}
}
