package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
)

// produceAll produces n records "<prefix>-<i>" to topic, record i to
// partition i%partitions, and fails the test on any produce error. It
// returns the producer id the records were written with.
func produceAll(ctx context.Context, t *testing.T, cl *kgo.Client, topic, prefix string, n, partitions int) int64 {
	t.Helper()
	var failed atomic.Int64
	var pid atomic.Int64
	pid.Store(-1)
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				if failed.Add(1) < 5 {
					t.Errorf("producing %s: %v", r.Value, err)
				}
				return
			}
			pid.Store(r.ProducerID)
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if failed.Load() > 0 {
		t.Fatalf("%d records failed", failed.Load())
	}
	return pid.Load()
}

// consumeAll reads topic from the start until it has want records (or the
// context ends) and returns them.
func consumeAll(ctx context.Context, t *testing.T, addr, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for len(recs) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(recs), want, ctx.Err())
		}
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, fs.Records()...)
	}
	// Anything beyond want would be a duplicate: give it a moment to show.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	recs = append(recs, cl.PollFetches(short).Records()...)
	return recs
}

// checkExactlyOnce checks that recs hold "<prefix>-<i>" for every i < n of
// each prefix exactly once, that offsets are contiguous from 0, and that
// within a partition the records of a prefix are in production order.
func checkExactlyOnce(t *testing.T, recs []*kgo.Record, prefixes []string, n int) {
	t.Helper()
	seen := map[string]int{}
	next := map[int32]int64{}
	last := map[string]int{} // partition/prefix -> last index
	for _, r := range recs {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		v := string(r.Value)
		seen[v]++
		if seen[v] > 1 {
			t.Fatalf("record %q stored twice (partition %d offset %d)", v, r.Partition, r.Offset)
		}
		prefix, idx, ok := strings.Cut(v, "-")
		i, err := strconv.Atoi(idx)
		if !ok || err != nil {
			t.Fatalf("unexpected record %q", v)
		}
		key := fmt.Sprint(r.Partition, "/", prefix)
		if l, ok := last[key]; ok && i <= l {
			t.Fatalf("partition %d: %q after %s-%d: out of order", r.Partition, v, prefix, l)
		}
		last[key] = i
		if r.ProducerID < 0 {
			t.Fatalf("record %q was not produced idempotently", v)
		}
	}
	for _, p := range prefixes {
		for i := range n {
			if v := fmt.Sprintf("%s-%d", p, i); seen[v] != 1 {
				t.Fatalf("record %q stored %d times", v, seen[v])
			}
		}
	}
	if len(recs) != len(prefixes)*n {
		t.Fatalf("%d records, want %d", len(recs), len(prefixes)*n)
	}
}

func TestIdempotentProduceManyInFlight(t *testing.T) {
	// Slow: producers with many requests in flight each write for a few seconds.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	b := testutil.StartBroker(t, func(c *config.Broker) { c.DefaultPartitions = 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.AllowAutoTopicCreation(), testMetadataAge,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(500), kgo.ProducerBatchMaxBytes(2048), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 10000
	if pid := produceAll(ctx, t, cl, "idem", "a", n, 3); pid < 0 {
		t.Fatalf("producer id %d: not idempotent", pid)
	}
	checkExactlyOnce(t, consumeAll(ctx, t, b.Addr, "idem", n), []string{"a"}, n)
}

// cutProxy forwards Kafka connections to a broker and, for a random share
// of produce requests, cuts the connection once the request has been
// forwarded: either right away, or when the broker's answer arrives (which
// is then dropped), so the client never learns that the batch was written.
type cutProxy struct {
	ln      net.Listener
	target  string
	maxCuts int64
	cuts    atomic.Int64

	mu    sync.Mutex
	rng   *rand.Rand
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startCutProxy(t *testing.T, maxCuts int64) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("proxy seed %d", seed)
	p := &cutProxy{ln: ln, maxCuts: maxCuts, rng: rand.New(rand.NewPCG(seed, 1)), conns: map[net.Conn]struct{}{}}
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) serve(target string) {
	p.target = target
	p.wg.Go(func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.handle(c) })
		}
	})
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *cutProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

// decide says how to treat one produce request: 0 forward, 1 cut after
// forwarding, 2 cut when the answer comes.
func (p *cutProxy) decide() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cuts.Load() >= p.maxCuts || p.rng.IntN(5) != 0 {
		return 0
	}
	return 1 + p.rng.IntN(2)
}

func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

func (p *cutProxy) handle(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.track(client)
	p.track(server)
	cutNow := sync.OnceFunc(func() { client.Close(); server.Close() })
	var mu sync.Mutex
	dropAnswer := map[int32]bool{}
	p.wg.Go(func() { // client to broker
		defer cutNow()
		for {
			frame, err := readFrame(client)
			if err != nil || len(frame) < 12 {
				return
			}
			key := int16(binary.BigEndian.Uint16(frame[4:]))
			corr := int32(binary.BigEndian.Uint32(frame[8:]))
			how := 0
			if key == 0 {
				how = p.decide()
			}
			if how == 2 {
				mu.Lock()
				dropAnswer[corr] = true
				mu.Unlock()
			}
			if _, err := server.Write(frame); err != nil {
				return
			}
			if how == 1 {
				p.cuts.Add(1)
				return
			}
		}
	})
	defer cutNow()
	for { // broker to client
		frame, err := readFrame(server)
		if err != nil || len(frame) < 8 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame[4:]))
		mu.Lock()
		drop := dropAnswer[corr]
		mu.Unlock()
		if drop {
			p.cuts.Add(1)
			return
		}
		if _, err := client.Write(frame); err != nil {
			return
		}
	}
}

func TestIdempotentProduceThroughConnectionCuts(t *testing.T) {
	// Slow: a proxy cuts the connections a hundred times while producers retry through it.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	proxy := startCutProxy(t, 100)
	b := testutil.StartBroker(t, func(c *config.Broker) {
		c.DefaultPartitions = 3
		c.Advertise = proxy.ln.Addr().String() // clients reach the broker only through the proxy
	})
	proxy.serve(b.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(proxy.ln.Addr().String()), kgo.AllowAutoTopicCreation(), testMetadataAge,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(200), kgo.ProducerBatchMaxBytes(1024), kgo.ProducerLinger(0),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Rounds of records until the proxy has cut enough connections (how
	// many requests carry the records depends on timing).
	const n, wantCuts = 2500, 60
	var prefixes []string
	for round := 0; proxy.cuts.Load() < wantCuts; round++ {
		if round == 40 {
			t.Fatalf("only %d connections cut in %d rounds", proxy.cuts.Load(), round)
		}
		prefixes = append(prefixes, fmt.Sprint("r", round))
		produceAll(ctx, t, cl, "cuts", prefixes[round], n, 3)
	}
	t.Logf("%d connections cut while producing %d records", proxy.cuts.Load(), len(prefixes)*n)
	checkExactlyOnce(t, consumeAll(ctx, t, b.Addr, "cuts", len(prefixes)*n), prefixes, n)
}

// rawBatch is a record batch of producer pid with n records "raw-<seq>".
func rawBatch(pid int64, epoch int16, seq int32, n int) []byte {
	now := time.Now().UnixMilli()
	var recs []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: fmt.Appendf(nil, "raw-%d", int(seq)+i)}
		body := r.AppendTo(nil)[1:] // drop the placeholder length
		r.Length = int32(len(body))
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{
		Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: int32(n), Records: recs,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// request sends req to broker 0 directly (no coordinator lookup), retrying
// while the connection fails (the broker may have restarted).
func request(ctx context.Context, t *testing.T, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	for try := 0; ; try++ {
		resp, err := cl.Broker(0).Request(ctx, req)
		if err == nil {
			return resp
		}
		if try == 50 {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func rawProduce(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, batch []byte) (int64, error) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := request(ctx, t, cl, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	return p.BaseOffset, kerr.ErrorForCode(p.ErrorCode)
}

func endOffset(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := request(ctx, t, cl, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatal(err)
	}
	return p.Offset
}

func TestIdempotentStateSurvivesRestart(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "restart"
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.AllowAutoTopicCreation(), testMetadataAge,
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1024),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 1000
	pid1 := produceAll(ctx, t, cl, topic, "before", n, 1)

	// A producer of our own, with batches we can send again.
	ipResp := request(ctx, t, cl, kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if ipResp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ipResp.ErrorCode))
	}
	pid, epoch := ipResp.ProducerID, ipResp.ProducerEpoch
	if pid == pid1 || epoch != 0 {
		t.Fatalf("InitProducerId gave %d/%d (kgo's producer has %d)", pid, epoch, pid1)
	}
	var batches [][]byte
	var offsets []int64
	seq := int32(0)
	for i := range 7 {
		batch := rawBatch(pid, epoch, seq, 1+i%3)
		seq += int32(1 + i%3)
		off, err := rawProduce(ctx, t, cl, topic, append([]byte(nil), batch...))
		if err != nil {
			t.Fatal(err)
		}
		batches, offsets = append(batches, batch), append(offsets, off)
	}
	end := endOffset(ctx, t, cl, topic)

	b.Restart(t)

	for i := 2; i < 7; i++ { // the last five: answered with the original offsets
		off, err := rawProduce(ctx, t, cl, topic, append([]byte(nil), batches[i]...))
		if err != nil || off != offsets[i] {
			t.Fatalf("retry of batch %d after restart: offset %d %v, want %d", i, off, err, offsets[i])
		}
	}
	if got := endOffset(ctx, t, cl, topic); got != end {
		t.Fatalf("retries were written: log end %d, want %d", got, end)
	}
	if _, err := rawProduce(ctx, t, cl, topic, batches[1]); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("retry of batch 1, older than the last five: %v", err)
	}
	if _, err := rawProduce(ctx, t, cl, topic, rawBatch(pid, epoch, seq+1, 1)); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("gap: %v", err)
	}
	if _, err := rawProduce(ctx, t, cl, topic, rawBatch(pid, epoch-1, 0, 1)); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	if off, err := rawProduce(ctx, t, cl, topic, rawBatch(pid, epoch, seq, 1)); err != nil || off != end {
		t.Fatalf("next batch: offset %d %v, want %d", off, err, end)
	}

	// kgo's producer goes on with its id and sequences.
	if pid2 := produceAll(ctx, t, cl, topic, "after", n, 1); pid2 != pid1 {
		t.Fatalf("kgo changed producer id %d -> %d (it was refused?)", pid1, pid2)
	}
	recs := consumeAll(ctx, t, b.Addr, topic, 2*n+8)
	var kgoRecs []*kgo.Record
	raw := 0
	for _, r := range recs {
		if strings.HasPrefix(string(r.Value), "raw-") {
			raw++
		} else {
			kgoRecs = append(kgoRecs, r)
		}
	}
	if raw != int(seq)+1 || len(recs) != 2*n+int(seq)+1 {
		t.Fatalf("%d raw records of %d, %d in all", raw, seq+1, len(recs))
	}
	seen := map[string]bool{}
	for _, r := range kgoRecs {
		if seen[string(r.Value)] {
			t.Fatalf("%q stored twice", r.Value)
		}
		seen[string(r.Value)] = true
	}
	if len(seen) != 2*n {
		t.Fatalf("%d kgo records, want %d", len(seen), 2*n)
	}
}

func TestInitProducerID(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ids := map[int64]bool{}
	initPID := func(txn *string, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = txn, pid, epoch
		req.TransactionTimeoutMillis = 60000
		return request(ctx, t, cl, req).(*kmsg.InitProducerIDResponse)
	}
	for range 5 {
		r := initPID(nil, -1, -1)
		if r.ErrorCode != 0 || r.ProducerEpoch != 0 || r.ProducerID < 0 || ids[r.ProducerID] {
			t.Fatalf("%+v", r)
		}
		ids[r.ProducerID] = true
	}
	// KIP-360 fields of an idempotent producer: a new id, as Kafka.
	if r := initPID(nil, 3, 7); r.ErrorCode != 0 || ids[r.ProducerID] || r.ProducerEpoch != 0 {
		t.Fatalf("%+v", r)
	}
	if r := initPID(nil, 3, -1); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("mismatched id and epoch: %+v", r)
	}
	txn, empty := "tx", ""
	if r := initPID(&txn, -1, -1); r.ErrorCode != 0 || ids[r.ProducerID] || r.ProducerEpoch != 0 {
		t.Fatalf("transactional: %+v", r)
	}
	if r := initPID(&empty, -1, -1); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty transactional id: %+v", r)
	}
	// Unique across restarts, even though the rest of the block is skipped.
	b.Restart(t)
	for range 3 {
		r := initPID(nil, -1, -1)
		if r.ErrorCode != 0 || ids[r.ProducerID] {
			t.Fatalf("after restart: %+v (seen %v)", r, ids)
		}
		ids[r.ProducerID] = true
	}
}
