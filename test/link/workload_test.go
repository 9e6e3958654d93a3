package link

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/mirrorcheck"
	"github.com/strandlog/strand/internal/testutil"
)

// target is where a workload writes: a bootstrap list, and the
// replication factor of the topics it creates.
type target struct {
	bootstrap string
	replicas  int16
}

// written is what a workload wrote to a topic.
type written struct {
	topic      string
	partitions map[int32]*partitionWritten
	// compactedTo is, for a compacted topic, the records left once the
	// cleaner is done: the latest of each key not deleted.
	compactedTo int64
}

// partitionWritten is what a workload wrote to one partition.
type partitionWritten struct {
	// committed are the offsets of records a read_committed consumer
	// sees: plain records and those of committed transactions, in the
	// order written. Compaction and retention may since have removed some.
	committed []int64
	// aborted are the offsets of records of aborted transactions.
	aborted []int64
	// transactions is the number of transactions that wrote here: each
	// left one control batch (its commit or abort marker).
	transactions int
	// logStart and end are the partition's log start and high watermark
	// once the workload was done.
	logStart, end int64
}

// records is how many records the workload wrote to the partition.
func (p *partitionWritten) records() int { return len(p.committed) + len(p.aborted) }

func (w *written) partition(p int32) *partitionWritten {
	if w.partitions == nil {
		w.partitions = map[int32]*partitionWritten{}
	}
	if w.partitions[p] == nil {
		w.partitions[p] = &partitionWritten{}
	}
	return w.partitions[p]
}

// workloadTimeout bounds each workload, waits for the cleaner included.
const workloadTimeout = 60 * time.Second

func (tg target) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(tg.bootstrap, ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic makes topic with its configs.
func (tg target) createTopic(t *testing.T, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kmsg.StringPtr(v)
	}
	resp, err := kadm.NewClient(tg.client(t)).CreateTopic(ctx, partitions, tg.replicas, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// finish records each partition's log start and high watermark.
func (tg target) finish(t *testing.T, w *written, partitions int32) *written {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(tg.client(t))
	starts, err := adm.ListStartOffsets(ctx, w.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("log starts of %s: %v", w.topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, w.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("ends of %s: %v", w.topic, err)
	}
	for p := range partitions {
		s, _ := starts.Lookup(w.topic, p)
		e, _ := ends.Lookup(w.topic, p)
		pw := w.partition(p)
		pw.logStart, pw.end = s.Offset, e.Offset
	}
	return w
}

// value is a record's value: text that compresses well, since franz-go
// sends a batch uncompressed when compressing does not make it smaller.
func value(prefix string, i int) []byte {
	return fmt.Appendf(nil, "%s-%d %s", prefix, i, bytes.Repeat([]byte("mirrored byte for byte "), 8))
}

// produce sends recs in one go and records their offsets as committed.
func produce(t *testing.T, ctx context.Context, cl *kgo.Client, w *written, recs []*kgo.Record) []*kgo.Record {
	t.Helper()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", w.topic, err)
	}
	for _, r := range res {
		pw := w.partition(r.Record.Partition)
		pw.committed = append(pw.committed, r.Record.Offset)
	}
	return recs
}

// codecs are franz-go's codecs, each written by a producer of its own.
var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

// writeCodecs writes with franz-go's idempotent producer, once with each
// codec (a producer id each): per partition and codec, batches of 10
// records.
func writeCodecs(t *testing.T, tg target, topic string, partitions int32, perCodec int) *written {
	t.Helper()
	tg.createTopic(t, topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
	defer cancel()
	w := &written{topic: topic}
	for _, c := range codecs {
		cl := tg.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(c.codec))
		for p := range partitions {
			for i := 0; i < perCodec; i += 10 {
				var recs []*kgo.Record
				for j := i; j < min(perCodec, i+10); j++ {
					recs = append(recs, &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "k%d", j), Value: value(c.name, j)})
				}
				produce(t, ctx, cl, w, recs)
			}
		}
		cl.Close()
	}
	return tg.finish(t, w, partitions)
}

// writeTransactions runs transactions with franz-go's transactional
// producer, each writing records to every partition, every third one
// aborted, with plain idempotent records between them.
func writeTransactions(t *testing.T, tg target, topic string, partitions int32, txns int) *written {
	t.Helper()
	tg.createTopic(t, topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
	defer cancel()
	w := &written{topic: topic}
	txn := tg.client(t, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(fmt.Sprintf("%s-%d", topic, time.Now().UnixNano())),
		kgo.TransactionTimeout(30*time.Second))
	plain := tg.client(t, kgo.DefaultProduceTopic(topic))
	for i := range txns {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for p := range partitions {
			for j := range 4 {
				recs = append(recs, &kgo.Record{Partition: p, Value: value(fmt.Sprintf("txn%d", i), j)})
			}
		}
		res := txn.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce in transaction %d: %v", i, err)
		}
		commit := i%3 != 1
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d (commit %v): %v", i, commit, err)
		}
		for _, r := range res {
			pw := w.partition(r.Record.Partition)
			if commit {
				pw.committed = append(pw.committed, r.Record.Offset)
			} else {
				pw.aborted = append(pw.aborted, r.Record.Offset)
			}
		}
		for p := range partitions {
			w.partition(p).transactions++
		}
		var between []*kgo.Record
		for p := range partitions {
			between = append(between, &kgo.Record{Partition: p, Value: value(fmt.Sprintf("plain%d", i), 0)})
		}
		produce(t, ctx, plain, w, between)
	}
	return tg.finish(t, w, partitions)
}

// compactedTopicConfigs make Kafka's cleaner compact a topic within
// seconds: a segment rolls 100 ms after its first record (at the next
// append), any dirt makes the log worth cleaning, and records and
// tombstones may go at once. The cleaner's own pause between looks at the
// logs (log.cleaner.backoff.ms) is the broker's, set by startKafka.
var compactedTopicConfigs = map[string]string{
	"cleanup.policy":            "compact",
	"segment.ms":                "100",
	"min.cleanable.dirty.ratio": "0.01",
	"min.compaction.lag.ms":     "0",
	"delete.retention.ms":       "0",
}

// writeCompacted writes rounds of values for the same keys, the last
// round deleting every third key (tombstones), then keeps appending a
// record of a key of its own every 200 ms, which rolls the segment,
// until the cleaner has done all it will: the latest value of each key
// left, the tombstones gone too (a second cleaning removes them, the
// first marks them with their delete horizon), and the log has offset
// gaps. From then on the cleaner copies every batch as it is, so the log
// no longer changes under a reader.
func writeCompacted(t *testing.T, tg target, topic string, keys, rounds int) *written {
	t.Helper()
	tg.createTopic(t, topic, 1, compactedTopicConfigs)
	ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
	defer cancel()
	w := &written{topic: topic}
	cl := tg.client(t, kgo.DefaultProduceTopic(topic))
	deleted := 0
	for r := range rounds {
		var recs []*kgo.Record
		for k := range keys {
			rec := &kgo.Record{Key: fmt.Appendf(nil, "key-%d", k), Value: value(fmt.Sprintf("round%d", r), k)}
			if r == rounds-1 && k%3 == 0 {
				rec.Value = nil // a tombstone
				deleted++
			}
			recs = append(recs, rec)
		}
		produce(t, ctx, cl, w, recs)
	}
	reader := mirrorcheck.NewReader(cl)
	rolls := 0
	var rolled time.Time
	testutil.Eventually(t, workloadTimeout, func() error {
		if time.Since(rolled) >= 200*time.Millisecond {
			rolls++
			rolled = time.Now()
			produce(t, ctx, cl, w, []*kgo.Record{{Key: fmt.Appendf(nil, "roll-%d", rolls), Value: value("roll", rolls)}})
		}
		rep, err := mirrorcheck.CompareLogs(ctx, reader, reader, topic, mirrorcheck.Options{})
		if err != nil {
			return err
		}
		p := rep.Partitions[0]
		if want := int64(keys - deleted + rolls); p.Gaps == 0 || p.Records != want {
			return fmt.Errorf("after %d rolls: %d records in %d batches with %d gaps; want %d records with gaps",
				rolls, p.Records, p.Batches, p.Gaps, want)
		}
		return nil
	})
	w.compactedTo = int64(keys - deleted + rolls)
	return tg.finish(t, w, 1)
}

// writeDeletedRecords writes batches of 10 records and then moves the
// log start into the middle of one with DeleteRecords.
func writeDeletedRecords(t *testing.T, tg target, topic string, batches int, start int64) *written {
	t.Helper()
	tg.createTopic(t, topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
	defer cancel()
	w := &written{topic: topic}
	cl := tg.client(t, kgo.DefaultProduceTopic(topic))
	for b := range batches {
		var recs []*kgo.Record
		for i := range 10 {
			recs = append(recs, &kgo.Record{Value: value(fmt.Sprintf("batch%d", b), i)})
		}
		produce(t, ctx, cl, w, recs)
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: start, LeaderEpoch: -1})
	resps, err := kadm.NewClient(cl).DeleteRecords(ctx, os)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("delete records of %s below %d: %v", topic, start, err)
	}
	return tg.finish(t, w, 1)
}

// writeRetained writes three rounds of records with keys of their own,
// each round in a segment of its own: two stamped hours ago, past the
// topic's retention.ms of one hour, and one stamped now. Kafka's cleaner
// applies time retention to a topic that is compacted too
// (cleanup.policy=compact,delete) each time it looks (the broker's own
// retention check runs every 5 minutes, log.retention.check.interval.ms,
// which no topic setting changes). It waits until the log starts at the
// third round.
func writeRetained(t *testing.T, tg target, topic string, perRound int) *written {
	t.Helper()
	configs := map[string]string{"retention.ms": "3600000"}
	for k, v := range compactedTopicConfigs {
		configs[k] = v
	}
	configs["cleanup.policy"] = "compact,delete"
	tg.createTopic(t, topic, 1, configs)
	ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
	defer cancel()
	w := &written{topic: topic}
	cl := tg.client(t, kgo.DefaultProduceTopic(topic))
	// A segment rolls when a batch's timestamp is segment.ms past its
	// first batch's: each round starts a segment.
	now := time.Now()
	stamps := []time.Time{now.Add(-3 * time.Hour), now.Add(-2 * time.Hour), now}
	var third int64
	for r, ts := range stamps {
		var recs []*kgo.Record
		for i := range perRound {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "r%d-%d", r, i), Value: value("retained", i), Timestamp: ts})
		}
		produce(t, ctx, cl, w, recs)
		if r == 2 {
			third = recs[0].Offset
		}
	}
	adm := kadm.NewClient(cl)
	testutil.Eventually(t, workloadTimeout, func() error {
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return err
		}
		s, _ := starts.Lookup(topic, 0)
		if s.Err != nil || s.Offset != third {
			return fmt.Errorf("log of %s starts at %d (%v), want %d", topic, s.Offset, s.Err, third)
		}
		return nil
	})
	return tg.finish(t, w, 1)
}
