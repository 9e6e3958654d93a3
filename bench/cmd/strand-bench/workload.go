package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchWorkload is one produce-then-consume run (or, with Rate set, one
// end-to-end latency run) against one broker.
type benchWorkload struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Records     int64  `json:"records"`     // throughput mode: how many
	RecordSize  int    `json:"record_size"` // value bytes (no key), at least 16
	Partitions  int32  `json:"partitions"`
	Acks        string `json:"acks"` // all, 1 or 0
	Linger      time.Duration
	BatchBytes  int32  `json:"batch_bytes"`
	Compression string `json:"compression"` // none, gzip, snappy, lz4, zstd
	// MaxInflight is produce requests in flight per broker; 0 leaves it to the
	// client (5 with idempotence, which franz-go does not let one change).
	MaxInflight int  `json:"max_inflight"`
	Idempotent  bool `json:"idempotent"`
	// MaxBufferedRecords and MaxBufferedBytes bound what the producer holds
	// unacknowledged; Produce blocks beyond them (1 record: one at a time).
	MaxBufferedRecords int `json:"max_buffered_records"`
	MaxBufferedBytes   int `json:"max_buffered_bytes"`
	// Rate > 0 selects end-to-end mode: produce at Rate records/s for
	// Duration while a consumer reads along; records produced during Warmup
	// are delivered and verified but not counted in the latency figures.
	Rate     int `json:"rate"`
	Duration time.Duration
	Warmup   time.Duration
	// TxnRecords > 0 selects transaction mode (bench_txn.go): one
	// transactional producer runs back-to-back transactions of TxnRecords
	// records for Duration; those begun during Warmup are not counted.
	TxnRecords int `json:"txn_records,omitempty"`
	// ShareConsumers > 0 selects the share group workload (share.go): that
	// many members of one share group drain a backlog of Records, then
	// read along while records are produced at Rate for Duration.
	ShareConsumers int `json:"share_consumers,omitempty"`
	// Topic configs for the topic the workload creates.
	TopicConfigs map[string]string `json:"topic_configs,omitempty"`
	// ReplicationFactor of that topic (cluster mode); 0 is 1.
	ReplicationFactor int16 `json:"replication_factor,omitempty"`
	// StateConfigs are set on the coordinator state topic before a
	// transaction or share group workload starts (__transaction_state,
	// __share_group_state; Kafka with flush.messages=1: the coordinator's
	// writes are fsynced too, as Strand's are).
	StateConfigs map[string]string `json:"state_configs,omitempty"`
}

// group is the name --workloads selects a workload by besides its own: the
// part before a dash ("f" for f-10 and f-1000).
func (w benchWorkload) group() string {
	g, _, _ := strings.Cut(w.Name, "-")
	return g
}

func (w benchWorkload) total() int64 {
	if w.Rate > 0 {
		return int64(float64(w.Rate) * w.Duration.Seconds())
	}
	return w.Records
}

func (w benchWorkload) describe() string {
	if w.ShareConsumers > 0 {
		return w.describeShare()
	}
	var b strings.Builder
	if w.TxnRecords > 0 {
		fmt.Fprintf(&b, "transactions of %d × %s for %s", w.TxnRecords, bytesStr(w.RecordSize), w.Duration)
	} else if w.Rate > 0 {
		fmt.Fprintf(&b, "%d rec/s for %s × %d B", w.Rate, w.Duration, w.RecordSize)
	} else {
		fmt.Fprintf(&b, "%s × %s", countStr(w.Records), bytesStr(w.RecordSize))
	}
	parts := "partitions"
	if w.Partitions == 1 {
		parts = "partition"
	}
	linger := w.Linger.String()
	if w.Linger == 0 {
		linger = "0"
	}
	fmt.Fprintf(&b, ", %d %s, acks=%s, %s, linger %s", w.Partitions, parts, w.Acks, w.Compression, linger)
	switch {
	case w.TxnRecords > 0:
		b.WriteString(", transactional")
	case w.Idempotent:
		b.WriteString(", idempotent")
	}
	if w.MaxInflight > 0 {
		fmt.Fprintf(&b, ", %d in flight", w.MaxInflight)
	}
	if w.MaxBufferedRecords == 1 {
		b.WriteString(", one record at a time")
	}
	return b.String()
}

func countStr(n int64) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

func bytesStr(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func (w benchWorkload) validate() error {
	if w.RecordSize < payloadHeader {
		return fmt.Errorf("record size %d: at least %d bytes (sequence number and timestamp)", w.RecordSize, payloadHeader)
	}
	if w.Partitions < 1 {
		return fmt.Errorf("partitions %d: at least 1", w.Partitions)
	}
	if w.TxnRecords > 0 {
		if w.Rate > 0 {
			return errors.New("a transaction run (--txn-records) has no --rate")
		}
		if !w.Idempotent {
			return errors.New("a transactional producer is idempotent: --idempotent false does not go with --txn-records")
		}
		if w.Duration <= w.Warmup {
			return fmt.Errorf("duration %s: longer than the %s warm-up", w.Duration, w.Warmup)
		}
	} else if w.total() < 1 {
		return errors.New("no records to produce")
	}
	if _, err := parseAcks(w.Acks); err != nil {
		return err
	}
	if _, err := parseCodec(w.Compression); err != nil {
		return err
	}
	if w.Idempotent && w.Acks != "all" {
		return errors.New("an idempotent producer needs acks=all")
	}
	if w.Idempotent && w.MaxInflight > 0 {
		return errors.New("franz-go fixes in-flight requests at 5 with idempotence: disable it to set --max-inflight")
	}
	return nil
}

func parseAcks(s string) (kgo.Acks, error) {
	switch s {
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	case "1":
		return kgo.LeaderAck(), nil
	case "0":
		return kgo.NoAck(), nil
	}
	return kgo.Acks{}, fmt.Errorf("acks %q: want all, 1 or 0", s)
}

func parseCodec(s string) (kgo.CompressionCodec, error) {
	switch s {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q: want none, gzip, snappy, lz4 or zstd", s)
}

// benchResult is what one workload run measured.
type benchResult struct {
	Workload string `json:"workload"`
	Broker   string `json:"broker"`
	Round    int    `json:"round"`
	Topic    string `json:"topic"`

	Records      int64 `json:"records"`
	PayloadBytes int64 `json:"payload_bytes"` // records × record size
	// WireBytes is the record batches as fetched back: what crossed the
	// network and sits in the log (compressed where the workload compresses).
	WireBytes int64 `json:"wire_bytes"`

	ProduceSeconds       float64 `json:"produce_seconds"`
	ProduceRecordsPerSec float64 `json:"produce_records_per_sec"`
	ProduceMBPerSec      float64 `json:"produce_mb_per_sec"`      // payload, 10^6 bytes
	ProduceWireMBPerSec  float64 `json:"produce_wire_mb_per_sec"` // batches, 10^6 bytes
	// Produce latency: from just before Produce is called (so time blocked on
	// a full buffer counts) to the acknowledgement's callback.
	ProduceP50Ms  float64 `json:"produce_p50_ms"`
	ProduceP99Ms  float64 `json:"produce_p99_ms"`
	ProduceP999Ms float64 `json:"produce_p999_ms"`

	// Transaction mode, over the transactions counted (after warm-up):
	// commit latency is the EndTransaction call, transaction latency from
	// BeginTransaction to EndTransaction's return. Records and
	// PayloadBytes count every transaction (warm-up too: all are verified).
	Transactions int64   `json:"transactions,omitempty"`
	TxnPerSec    float64 `json:"txn_per_sec,omitempty"`
	CommitP50Ms  float64 `json:"commit_p50_ms,omitempty"`
	CommitP99Ms  float64 `json:"commit_p99_ms,omitempty"`
	TxnP50Ms     float64 `json:"txn_p50_ms,omitempty"`
	TxnP99Ms     float64 `json:"txn_p99_ms,omitempty"`

	ConsumeSeconds       float64 `json:"consume_seconds,omitempty"`
	ConsumeRecordsPerSec float64 `json:"consume_records_per_sec,omitempty"`
	ConsumeMBPerSec      float64 `json:"consume_mb_per_sec,omitempty"`
	// CPU time over the consume phase (after producing), as over the
	// produce phase below: on two shared cores the consumer can be the
	// limit, and the broker's CPU per byte read shows its own cost then.
	ConsumeBrokerCPUSeconds float64 `json:"consume_broker_cpu_seconds,omitempty"`
	ConsumeClientCPUSeconds float64 `json:"consume_client_cpu_seconds,omitempty"`

	// End-to-end mode: from just before Produce to the consumer's poll.
	AchievedRate float64 `json:"achieved_rate,omitempty"`
	E2EP50Ms     float64 `json:"e2e_p50_ms,omitempty"`
	E2EP99Ms     float64 `json:"e2e_p99_ms,omitempty"`
	E2EP999Ms    float64 `json:"e2e_p999_ms,omitempty"`
	E2EMaxMs     float64 `json:"e2e_max_ms,omitempty"` // share groups

	// Share groups: records received more than once, and partitions'
	// acknowledgements the broker refused.
	Redelivered int64 `json:"redelivered,omitempty"`
	AckErrors   int64 `json:"ack_errors,omitempty"`

	// CPU time over the produce phase: the broker process's (0 when not
	// known, as for kfake, which runs in the client's process) and this
	// process's (the producer, the consumer in end-to-end mode, and kfake).
	BrokerCPUSeconds float64 `json:"broker_cpu_seconds,omitempty"`
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`

	Verified bool   `json:"verified"`
	Error    string `json:"error,omitempty"`
}

// The payload of every record: the record's sequence number within its
// partition, the producer's clock when Produce was called (nanoseconds on a
// monotonic clock shared by producer and consumer, which run in this
// process), then bytes from a fixed text-like pool chosen by partition and
// sequence, so the consumer can check every byte without remembering them.
const payloadHeader = 16

var (
	monoBase   = time.Now()
	pool       []byte
	poolOnce   sync.Once
	poolLength = 4 << 20
)

func monoNow() int64 { return int64(time.Since(monoBase)) }

// payloadPool is 4 MiB of space-separated words from a 512-word vocabulary
// drawn with a fixed seed: compressible about like log lines or JSON (lz4
// roughly halves it), identical for every broker and every run.
func payloadPool() []byte {
	poolOnce.Do(func() {
		r := rand.New(rand.NewPCG(1, 2))
		words := make([][]byte, 512)
		for i := range words {
			w := make([]byte, 3+r.IntN(8))
			for j := range w {
				w[j] = byte('a' + r.IntN(26))
			}
			words[i] = w
		}
		pool = make([]byte, 0, poolLength+16)
		for len(pool) < poolLength {
			pool = append(pool, words[r.IntN(len(words))]...)
			pool = append(pool, ' ')
		}
		pool = pool[:poolLength]
	})
	return pool
}

func payloadOffset(partition int32, seq int64, size int) int {
	span := uint64(poolLength - size)
	return int((uint64(seq)*2654435761 + uint64(partition)*40503) % span)
}

func fillPayload(buf []byte, partition int32, seq int64, ts int64) {
	binary.BigEndian.PutUint64(buf[0:8], uint64(seq))
	binary.BigEndian.PutUint64(buf[8:16], uint64(ts))
	off := payloadOffset(partition, seq, len(buf))
	copy(buf[payloadHeader:], payloadPool()[off:off+len(buf)-payloadHeader])
}

// checkPayload reports what is wrong with a consumed value, or "".
func checkPayload(v []byte, partition int32, wantSeq int64, size int) string {
	if len(v) != size {
		return fmt.Sprintf("value of %d bytes, want %d", len(v), size)
	}
	seq := int64(binary.BigEndian.Uint64(v[0:8]))
	if seq != wantSeq {
		if seq < wantSeq {
			return fmt.Sprintf("record %d again (duplicate or reordered) where %d was due", seq, wantSeq)
		}
		return fmt.Sprintf("record %d where %d was due (records missing or reordered)", seq, wantSeq)
	}
	off := payloadOffset(partition, seq, size)
	if string(v[payloadHeader:]) != string(payloadPool()[off:off+size-payloadHeader]) {
		return fmt.Sprintf("record %d: payload bytes differ from what was produced", seq)
	}
	return ""
}

func producerOpts(addr string, w benchWorkload) []kgo.Opt {
	acks, _ := parseAcks(w.Acks)
	codec, _ := parseCodec(w.Compression)
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr), dialer,
		kgo.RequiredAcks(acks),
		kgo.ProducerLinger(w.Linger),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProduceRequestTimeout(30 * time.Second),
	}
	if w.BatchBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(w.BatchBytes))
	}
	opts = append(opts, clientLogger()...)
	if !w.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
		if w.MaxInflight > 0 {
			opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(w.MaxInflight))
		}
	}
	if w.MaxBufferedRecords > 0 {
		opts = append(opts, kgo.MaxBufferedRecords(w.MaxBufferedRecords))
	}
	if w.MaxBufferedBytes > 0 {
		opts = append(opts, kgo.MaxBufferedBytes(w.MaxBufferedBytes))
	}
	return opts
}

// clientLogger logs the producer's client at STRAND_BENCH_CLIENT_LOG
// (debug, info, warn or error) to stderr, for finding out why a run is slow.
func clientLogger() []kgo.Opt {
	var level kgo.LogLevel
	switch os.Getenv("STRAND_BENCH_CLIENT_LOG") {
	case "debug":
		level = kgo.LogLevelDebug
	case "info":
		level = kgo.LogLevelInfo
	case "warn":
		level = kgo.LogLevelWarn
	case "error":
		level = kgo.LogLevelError
	default:
		return nil
	}
	return []kgo.Opt{kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil))}
}

// createTopicRF creates the workload's topic and waits until every partition
// is online at its leader, so the run does not time topic creation.
func createTopicRF(ctx context.Context, addr, topic string, partitions int32, rf int16, configs map[string]string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), dialer)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	if _, err := adm.CreateTopic(ctx, partitions, max(rf, 1), cfg, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	return waitTopicOnline(ctx, adm, topic, partitions)
}

// waitTopicOnline waits until every partition of topic (partitions of them;
// 0: as many as the metadata lists) is online at its leader.
func waitTopicOnline(ctx context.Context, adm *kadm.Client, topic string, partitions int32) error {
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil {
			t := td[topic]
			want := partitions
			if want <= 0 {
				want = int32(len(t.Partitions))
			}
			ready := t.Err == nil && want > 0 && int32(len(t.Partitions)) == want
			for _, p := range t.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				// Metadata can name a leader before the partition is online
				// there (Kafka answers NOT_LEADER_OR_FOLLOWER for a while
				// after CreateTopics, and a producer would back off for
				// seconds): wait until the leader answers ListOffsets for
				// every partition.
				ends, err := adm.ListEndOffsets(ctx, topic)
				online := err == nil
				n := 0
				ends.Each(func(o kadm.ListedOffset) {
					n++
					online = online && o.Err == nil
				})
				if online && int32(n) == want {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s: partitions without a leader: %w", topic, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// runWorkload creates topic, runs w against the broker at addr, reads
// everything back and verifies it. A verification failure is returned as an
// error (and recorded in the result).
//
// brokerCPU, when not nil, reads the broker process's CPU time, so the
// produce phase's broker and client CPU can be reported.
func runWorkload(ctx context.Context, addr, topic string, w benchWorkload, brokerCPU func() time.Duration) (benchResult, error) {
	res := benchResult{Workload: w.Name, Topic: topic}
	fail := func(err error) (benchResult, error) {
		res.Error = err.Error()
		return res, err
	}
	if err := w.validate(); err != nil {
		return fail(err)
	}
	payloadPool()
	if err := createTopicRF(ctx, addr, topic, w.Partitions, w.ReplicationFactor, w.TopicConfigs); err != nil {
		return fail(err)
	}
	if w.TxnRecords > 0 {
		if err := runTxnWorkload(ctx, addr, topic, w, brokerCPU, &res); err != nil {
			return fail(err)
		}
		res.Verified = true
		return res, nil
	}
	if w.ShareConsumers > 0 {
		if err := runShareWorkload(ctx, addr, topic, w, brokerCPU, &res); err != nil {
			return fail(err)
		}
		res.Verified = true
		return res, nil
	}
	total := w.total()
	counts := make([]int64, w.Partitions)
	for i := range w.Partitions {
		counts[i] = total / int64(w.Partitions)
		if int64(i) < total%int64(w.Partitions) {
			counts[i]++
		}
	}
	res.Records = total
	res.PayloadBytes = total * int64(w.RecordSize)

	var (
		cons    *consumer
		consErr = make(chan error, 1)
	)
	if w.Rate > 0 {
		// The consumer reads along from before the first record.
		var err error
		cons, err = newConsumer(addr, topic, w, counts)
		if err != nil {
			return fail(err)
		}
		defer cons.close()
		if err := cons.waitReady(ctx); err != nil {
			return fail(err)
		}
		go func() { consErr <- cons.run(ctx) }()
	}

	b0, c0 := readCPU(brokerCPU), selfCPU()
	prodStart, prodEnd, lat, err := produce(ctx, addr, topic, w, total)
	if err != nil {
		return fail(err)
	}
	b1, c1 := readCPU(brokerCPU), selfCPU()
	res.ClientCPUSeconds = (c1 - c0).Seconds()
	if b0 >= 0 && b1 >= 0 {
		res.BrokerCPUSeconds = (b1 - b0).Seconds()
	}
	res.ProduceSeconds = prodEnd.Sub(prodStart).Seconds()
	res.ProduceRecordsPerSec = float64(total) / res.ProduceSeconds
	res.ProduceMBPerSec = float64(res.PayloadBytes) / 1e6 / res.ProduceSeconds
	res.ProduceP50Ms, res.ProduceP99Ms, res.ProduceP999Ms = percentilesMs(lat)

	if w.Rate > 0 {
		if err := <-consErr; err != nil {
			return fail(err)
		}
		res.AchievedRate = res.ProduceRecordsPerSec
		res.E2EP50Ms, res.E2EP99Ms, res.E2EP999Ms = percentilesMs(cons.e2e)
	} else {
		var err error
		cons, err = newConsumer(addr, topic, w, counts)
		if err != nil {
			return fail(err)
		}
		defer cons.close()
		start := time.Now()
		b0, c0 := readCPU(brokerCPU), selfCPU()
		if err := cons.run(ctx); err != nil {
			return fail(err)
		}
		res.ConsumeSeconds = time.Since(start).Seconds()
		b1, c1 := readCPU(brokerCPU), selfCPU()
		res.ConsumeClientCPUSeconds = (c1 - c0).Seconds()
		if b0 >= 0 && b1 >= 0 {
			res.ConsumeBrokerCPUSeconds = (b1 - b0).Seconds()
		}
		res.ConsumeRecordsPerSec = float64(total) / res.ConsumeSeconds
		res.ConsumeMBPerSec = float64(res.PayloadBytes) / 1e6 / res.ConsumeSeconds
	}
	res.WireBytes = cons.wireBytes.Load()
	res.ProduceWireMBPerSec = float64(res.WireBytes) / 1e6 / res.ProduceSeconds
	if err := checkEndOffsets(ctx, addr, topic, counts, nil); err != nil {
		return fail(err)
	}
	res.Verified = true
	return res, nil
}

// produce sends total records (at w.Rate when set) and returns when all are
// acknowledged, with each record's latency in microseconds.
func produce(ctx context.Context, addr, topic string, w benchWorkload, total int64) (start, end time.Time, lat []uint32, err error) {
	cl, err := kgo.NewClient(producerOpts(addr, w)...)
	if err != nil {
		return start, end, nil, err
	}
	defer cl.Close()
	// Connect and load the topic's metadata before the clock starts.
	if err := cl.Ping(ctx); err != nil {
		return start, end, nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}

	lat = make([]uint32, total)
	var (
		failed   atomic.Int64
		firstErr atomic.Value
		bufs     = sync.Pool{New: func() any { return make([]byte, w.RecordSize) }}
		seqs     = make([]int64, w.Partitions)
		warmupN  = int64(0)
	)
	if w.Rate > 0 {
		warmupN = int64(float64(w.Rate) * w.Warmup.Seconds())
	}
	promise := func(r *kgo.Record, err error) {
		now := monoNow()
		if err != nil {
			if failed.Add(1) == 1 {
				firstErr.Store(err)
			}
			return
		}
		// Records go round-robin, so the sequence number in the
		// partition gives the record's place in the run.
		i := int64(binary.BigEndian.Uint64(r.Value[0:8]))*int64(w.Partitions) + int64(r.Partition)
		lat[i] = uint32(min((now-int64(binary.BigEndian.Uint64(r.Value[8:16])))/1000, 1<<32-1))
		bufs.Put(r.Value)
	}

	start = time.Now()
	var i int64
	for i < total && ctx.Err() == nil {
		due := total
		if w.Rate > 0 {
			due = min(total, int64(time.Since(start).Seconds()*float64(w.Rate))+1)
			if i >= due {
				time.Sleep(200 * time.Microsecond)
				continue
			}
		}
		for ; i < due; i++ {
			p := int32(i % int64(w.Partitions))
			v := bufs.Get().([]byte)
			fillPayload(v, p, seqs[p], monoNow())
			seqs[p]++
			r := &kgo.Record{Topic: topic, Partition: p, Value: v}
			cl.Produce(ctx, r, promise)
			if failed.Load() > 0 {
				break
			}
		}
		if failed.Load() > 0 {
			break
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return start, end, nil, err
	}
	end = time.Now()
	if n := failed.Load(); n > 0 {
		return start, end, nil, fmt.Errorf("%d records failed; first: %v", n, firstErr.Load())
	}
	if ctx.Err() != nil {
		return start, end, nil, ctx.Err()
	}
	return start, end, lat[warmupN:], nil
}

// consumer reads the workload's partitions from the start, assigned
// directly (no group), and checks that each partition's records arrive once,
// in order, with the payload that was produced.
type consumer struct {
	cl        *kgo.Client
	w         benchWorkload
	topic     string
	counts    []int64
	next      []int64
	wireBytes atomic.Int64
	e2e       []uint32 // end-to-end mode: microseconds per record after warm-up
	warmupTS  int64
}

type fetchBytesHook struct{ n *atomic.Int64 }

func (h fetchBytesHook) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.n.Add(int64(m.CompressedBytes))
}

func newConsumer(addr, topic string, w benchWorkload, counts []int64) (*consumer, error) {
	return newConsumerFrom(addr, topic, w, counts, nil)
}

// newConsumerFrom is newConsumer starting each partition at the offset in
// start (those it lacks, and all when start is nil, at the log start).
func newConsumerFrom(addr, topic string, w benchWorkload, counts []int64, start map[int32]int64) (*consumer, error) {
	c := &consumer{w: w, topic: topic, counts: counts, next: make([]int64, len(counts))}
	offsets := map[int32]kgo.Offset{}
	for p := range int32(len(counts)) {
		offsets[p] = kgo.NewOffset().AtStart()
		if at, ok := start[p]; ok {
			offsets[p] = kgo.NewOffset().At(at)
		}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr), dialer,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.FetchMaxBytes(64 << 20),
		kgo.FetchMaxPartitionBytes(8 << 20),
		kgo.WithHooks(fetchBytesHook{&c.wireBytes}),
	}
	if w.TxnRecords > 0 {
		// Only committed records, up to the last stable offset; the
		// commit markers are skipped by the client.
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	c.cl = cl
	if w.Rate > 0 {
		c.e2e = make([]uint32, 0, w.total())
	}
	return c, nil
}

func (c *consumer) close() { c.cl.Close() }

// waitReady connects and loads metadata so the first records produced are
// not timed against the consumer's own start-up.
func (c *consumer) waitReady(ctx context.Context) error {
	if err := c.cl.Ping(ctx); err != nil {
		return err
	}
	c.warmupTS = monoNow() + int64(c.w.Warmup)
	return nil
}

func (c *consumer) run(ctx context.Context) error {
	var total, done int64
	for _, n := range c.counts {
		total += n
	}
	const stall = 60 * time.Second
	last := time.Now()
	for done < total {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := c.cl.PollFetches(pctx)
		cancel()
		now := monoNow()
		var problem error
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			if problem == nil {
				problem = fmt.Errorf("fetching %s/%d: %w", t, p, err)
			}
		})
		if problem != nil {
			return problem
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n := int64(0)
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			for _, r := range ftp.Records {
				if problem != nil {
					return
				}
				p := r.Partition
				if p < 0 || int(p) >= len(c.next) {
					problem = fmt.Errorf("record from partition %d", p)
					return
				}
				if c.next[p] >= c.counts[p] {
					problem = fmt.Errorf("partition %d: more than the %d records produced (offset %d)", p, c.counts[p], r.Offset)
					return
				}
				if msg := checkPayload(r.Value, p, c.next[p], c.w.RecordSize); msg != "" {
					problem = fmt.Errorf("partition %d offset %d: %s", p, r.Offset, msg)
					return
				}
				if c.e2e != nil {
					ts := int64(binary.BigEndian.Uint64(r.Value[8:16]))
					if ts >= c.warmupTS {
						c.e2e = append(c.e2e, uint32(min((now-ts)/1000, 1<<32-1)))
					}
				}
				c.next[p]++
				n++
			}
		})
		if problem != nil {
			return problem
		}
		if n > 0 {
			done += n
			last = time.Now()
		} else if time.Since(last) > stall {
			var missing []string
			for p, got := range c.next {
				if got < c.counts[p] {
					missing = append(missing, fmt.Sprintf("%d (%d of %d)", p, got, c.counts[p]))
				}
			}
			return fmt.Errorf("no records for %s; incomplete partitions: %s", stall, strings.Join(missing[:min(len(missing), 10)], ", "))
		}
	}
	return nil
}

// checkEndOffsets asks the broker for each partition's log end offset:
// exactly the records produced (plus, in a transaction run, one commit
// marker per transaction that wrote to the partition), so nothing was stored
// twice.
func checkEndOffsets(ctx context.Context, addr, topic string, counts, markers []int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), dialer)
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("listing end offsets: %w", err)
	}
	var bad []string
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			bad = append(bad, fmt.Sprintf("%d: %v", o.Partition, o.Err))
		} else if p := int(o.Partition); p < len(counts) {
			switch {
			case markers == nil && o.Offset != counts[p]:
				bad = append(bad, fmt.Sprintf("%d: end offset %d, %d records produced", p, o.Offset, counts[p]))
			case markers != nil && o.Offset != counts[p]+markers[p]:
				bad = append(bad, fmt.Sprintf("%d: end offset %d, %d records and %d commit markers written", p, o.Offset, counts[p], markers[p]))
			}
		}
	})
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("log end offsets: %s", strings.Join(bad[:min(len(bad), 10)], "; "))
	}
	return nil
}

// percentilesMs returns p50, p99 and p99.9 of microsecond samples, in ms.
func percentilesMs(us []uint32) (p50, p99, p999 float64) {
	if len(us) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(us)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q * float64(len(s)-1))
		return float64(s[i]) / 1000
	}
	return at(0.50), at(0.99), at(0.999)
}

// firstProduce retries an acks=all produce of one record to an
// auto-created topic until it succeeds, and returns when it did.
func firstProduce(ctx context.Context, addr string) (time.Time, error) {
	// Wait for the listener first, polling every millisecond: the client's
	// own retries back off further than that.
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("no listener on %s: %w (last error: %v)", addr, ctx.Err(), err)
		}
		time.Sleep(time.Millisecond)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr), dialer,
		kgo.AllowAutoTopicCreation(),
		kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond }),
		kgo.MetadataMinAge(10*time.Millisecond),
		kgo.UnknownTopicRetries(-1),
		kgo.DialTimeout(time.Second),
	)
	if err != nil {
		return time.Time{}, err
	}
	defer cl.Close()
	for {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "bench-startup", Value: []byte("first")}).FirstErr()
		if err == nil {
			return time.Now(), nil
		}
		if ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("no successful produce: %w (last error: %v)", ctx.Err(), err)
		}
		time.Sleep(time.Millisecond)
	}
}

func readCPU(f func() time.Duration) time.Duration {
	if f == nil {
		return -1
	}
	return f()
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
