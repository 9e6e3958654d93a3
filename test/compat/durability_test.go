package compat

import (
	"context"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// The real process under kill -9 and SIGTERM: every acknowledged record
// survives, in order and intact.

// recID names one produced record: production round and sequence number.
type recID struct{ round, seq int }

// durableValue is record id's value: a header, then filler derived from the
// id, so any damage to the bytes is detected.
func durableValue(id recID) []byte {
	n := 50 + (id.seq*37+id.round*11)%400
	filler := make([]byte, n)
	x := uint32(id.round*1_000_003 + id.seq)
	for i := range filler {
		x = x*1664525 + 1013904223
		filler[i] = 'a' + byte(x>>24)%26
	}
	return fmt.Appendf(nil, "r%d-s%07d-%08x-%s", id.round, id.seq, crc32.ChecksumIEEE(filler), filler)
}

// parseDurable returns the id of a value durableValue made, or false when
// the value is not one (damaged).
func parseDurable(v []byte) (recID, bool) {
	var id recID
	var sum uint32
	if _, err := fmt.Sscanf(string(v), "r%d-s%07d-%08x-", &id.round, &id.seq, &sum); err != nil {
		return id, false
	}
	return id, string(durableValue(id)) == string(v)
}

// ackLog records which records the broker acknowledged, and where.
type ackLog struct {
	mu    sync.Mutex
	acked map[recID][2]int64 // partition, offset
}

func newAckLog() *ackLog { return &ackLog{acked: map[recID][2]int64{}} }

func (a *ackLog) add(id recID, r *kgo.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acked[id] = [2]int64{int64(r.Partition), r.Offset}
}

func (a *ackLog) count(round int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for id := range a.acked {
		if id.round == round {
			n++
		}
	}
	return n
}

// producer produces round's records without pause (acks=all, franz-go's
// defaults otherwise) until stopped.
type producer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	sent   atomic.Int64
	errs   atomic.Int64
	first  atomic.Value // first error
	once   sync.Once
}

func startProducer(t *testing.T, addr, topic string, round int, acks *ackLog) *producer {
	return startKeyedProducer(t, addr, topic, round, 8, acks)
}

// startKeyedProducer produces with keys spread over that many values.
func startKeyedProducer(t *testing.T, addr, topic string, round, keys int, acks *ackLog) *producer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(2000), kgo.ProducerLinger(time.Millisecond),
		kgo.RetryTimeout(5*time.Second), kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &producer{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for seq := 0; ctx.Err() == nil; seq++ {
			id := recID{round, seq}
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", seq%keys), Value: durableValue(id)}
			p.sent.Add(1)
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err != nil {
					if p.errs.Add(1) == 1 {
						p.first.Store(err)
					}
					return
				}
				acks.add(id, r)
			})
		}
	}()
	return p
}

// stop ends production: records not acknowledged by now fail.
func (p *producer) stop() {
	p.once.Do(func() {
		p.cancel()
		<-p.done
		p.cl.Close()
	})
}

// waitAcked waits until round has n acknowledged records.
func waitAcked(t *testing.T, acks *ackLog, round, n int, p *producer) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		if got := acks.count(round); got < n {
			return fmt.Errorf("round %d: %d of %d records acknowledged (%d sent, %d failed, first error %v)",
				round, got, n, p.sent.Load(), p.errs.Load(), p.first.Load())
		}
		return nil
	})
}

// verifyDurable reads the whole topic and checks every record is intact,
// offsets are dense, nothing is duplicated and every acknowledged record is
// where it was acknowledged.
func verifyDurable(t *testing.T, addr, topic string, acks *ackLog) {
	t.Helper()
	recs := readAll(t, addr, topic)
	at := map[[2]int64]recID{}
	seen := map[recID][2]int64{}
	next := map[int32]int64{}
	bad := 0
	for _, r := range recs {
		if want, ok := next[r.Partition]; ok && r.Offset != want {
			t.Errorf("partition %d: offset %d follows %d", r.Partition, r.Offset, want-1)
		}
		next[r.Partition] = r.Offset + 1
		id, ok := parseDurable(r.Value)
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("corrupt record at %d/%d: %.80q", r.Partition, r.Offset, r.Value)
			}
			continue
		}
		pos := [2]int64{int64(r.Partition), r.Offset}
		if prev, dup := seen[id]; dup {
			t.Errorf("record %+v stored twice: at %v and %v", id, prev, pos)
		}
		seen[id] = pos
		at[pos] = id
	}
	acks.mu.Lock()
	defer acks.mu.Unlock()
	lost := 0
	ids := make([]recID, 0, len(acks.acked))
	for id := range acks.acked {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b recID) int {
		if a.round != b.round {
			return a.round - b.round
		}
		return a.seq - b.seq
	})
	lastOffset := map[[2]int64]int64{} // (round, partition) -> offset
	for _, id := range ids {
		pos := acks.acked[id]
		if got, ok := at[pos]; !ok || got != id {
			if lost++; lost <= 10 {
				t.Errorf("acknowledged record %+v at %d/%d: log holds %+v (present: %v)", id, pos[0], pos[1], got, ok)
			}
			continue
		}
		k := [2]int64{int64(id.round), pos[0]}
		if prev, ok := lastOffset[k]; ok && pos[1] <= prev {
			t.Errorf("record %+v at offset %d, before an earlier record of its partition (%d)", id, pos[1], prev)
		}
		lastOffset[k] = pos[1]
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged records missing or moved", lost, len(ids))
	}
	t.Logf("log holds %d records, %d acknowledged (%d stored without an acknowledgement)",
		len(recs), len(ids), len(seen)-(len(ids)-lost))
}

// TestRestartDurability kills the broker (SIGKILL) after production and
// then repeatedly during production, restarting it on the same data
// directory each time: everything acknowledged survives. With --fsync never
// acknowledged data is only in the page cache, which a process crash keeps:
// recovery must then rescan the unsynced tail and keep all of it. With 64
// partitions, produce requests make many partitions durable at once, so
// their rounds go through the journal, which each restart replays.
func TestRestartDurability(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fsync      string
		partitions int
	}{{"every-append", 2}, {"never", 2}, {"every-append", 64}} {
		t.Run(fmt.Sprintf("fsync=%s/partitions=%d", c.fsync, c.partitions), func(t *testing.T) {
			t.Parallel()
			testRestartDurability(t, c.fsync, c.partitions)
		})
	}
}

func testRestartDurability(t *testing.T, fsync string, partitions int) {
	b := startBroker(t, "--default-partitions", fmt.Sprint(partitions), "--fsync", fsync)
	keys := max(8, 4*partitions)
	journaled := false // a journal with records was found after a kill
	const topic = "durable"
	acks := newAckLog()

	// Round 0: produce and flush, then kill.
	const n = 5000
	cl := client(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var failed atomic.Int64
	for seq := range n {
		id := recID{0, seq}
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", seq%keys), Value: durableValue(id)},
			func(r *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					return
				}
				acks.add(id, r)
			})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if acks.count(0) != n || failed.Load() != 0 {
		t.Fatalf("%d of %d records acknowledged, %d failed", acks.count(0), n, failed.Load())
	}
	cl.Close()
	b.Kill()
	journaled = journaled || journalHolds(t, b.DataDir)
	b.Restart(t)
	verifyDurable(t, b.Addr, topic, acks)

	// Rounds 1-4: kill -9 while records are in flight.
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill timing seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := 1; round <= 4; round++ {
		p := startKeyedProducer(t, b.Addr, topic, round, keys, acks)
		waitAcked(t, acks, round, 200, p)
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		b.Kill()
		journaled = journaled || journalHolds(t, b.DataDir)
		sent := p.sent.Load()
		p.stop()
		t.Logf("round %d: killed with %d sent, %d acknowledged", round, sent, acks.count(round))
		if t.Failed() {
			return
		}
		b.Restart(t)
		verifyDurable(t, b.Addr, topic, acks)
	}
	if wantJournal := fsync == "every-append" && partitions >= 32; journaled != wantJournal {
		t.Errorf("journal records found after a kill: %v, want %v", journaled, wantJournal)
	}
}

// journalHolds reports whether the broker's log journal holds records.
func journalHolds(t *testing.T, dataDir string) bool {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dataDir, "journal", "*.journal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if st, err := os.Stat(name); err == nil && st.Size() > 0 {
			return true
		}
	}
	return false
}

// TestGracefulShutdown sends SIGTERM while a producer and a consumer are
// busy: the process exits 0 within seconds, every partition's checkpoint
// says it closed cleanly, and the restart recovers nothing and loses
// nothing.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--default-partitions", "2")
	const topic = "graceful"
	acks := newAckLog()
	p := startProducer(t, b.Addr, topic, 0, acks)
	defer p.stop()
	waitAcked(t, acks, 0, 1000, p)

	// A consumer parked in a long-poll fetch must not hold up shutdown.
	cons := client(t, b.Addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {
		0: kgo.NewOffset().AtEnd(), 1: kgo.NewOffset().AtEnd()}}), kgo.FetchMaxWait(5*time.Second))
	consCtx, consCancel := context.WithCancel(context.Background())
	consDone := make(chan struct{})
	go func() {
		defer close(consDone)
		for consCtx.Err() == nil {
			cons.PollFetches(consCtx)
		}
	}()
	defer func() { consCancel(); <-consDone }()
	time.Sleep(300 * time.Millisecond)

	before := len(b.Output.String())
	start := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- b.Stop() }()
	select {
	case err := <-exited:
		elapsed := time.Since(start)
		if err != nil {
			t.Errorf("strand exited with %v after SIGTERM, want status 0", err)
		}
		if elapsed > 5*time.Second {
			t.Errorf("strand took %v to exit after SIGTERM, want under 5s", elapsed)
		}
		t.Logf("exited %v after SIGTERM, %d records acknowledged", elapsed.Round(time.Millisecond), acks.count(0))
	case <-time.After(40 * time.Second):
		t.Fatalf("strand still running 40s after SIGTERM")
	}
	if out := b.Output.String()[before:]; !strings.Contains(out, `msg=stopped`) {
		t.Errorf("no \"stopped\" line after SIGTERM:\n%s", out)
	}
	p.stop()

	// Every partition closed cleanly.
	checkpoints, _ := filepath.Glob(filepath.Join(b.DataDir, "*", "partition.checkpoint"))
	if len(checkpoints) < 2 {
		t.Errorf("found %d partition checkpoints in %s, want 2", len(checkpoints), b.DataDir)
	}
	for _, f := range checkpoints {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "clean-shutdown 1\n") {
			t.Errorf("%s after SIGTERM does not say clean-shutdown 1:\n%s", f, data)
		}
	}

	before = len(b.Output.String())
	b.Restart(t)
	for _, line := range strings.Split(b.Output.String()[before:], "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("restart after a clean shutdown logged: %s", line)
		}
	}
	verifyDurable(t, b.Addr, topic, acks)
}
