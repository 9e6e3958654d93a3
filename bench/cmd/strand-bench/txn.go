package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The transaction workload (f): one transactional producer (franz-go with a
// TransactionalID) runs back-to-back transactions of w.TxnRecords records
// each, round-robin over the partitions, for w.Duration: BeginTransaction,
// Produce every record, Flush, EndTransaction(TryCommit). Transactions begun
// during w.Warmup (the first one finds the coordinator and initialises the
// producer id) are committed and verified but not counted.
//
// Measured, over the counted transactions: committed transactions/s and
// records/s (from the first counted BeginTransaction to the last counted
// commit), the commit latency (the EndTransaction call), the latency of a
// whole transaction (BeginTransaction to EndTransaction's return), and the
// broker's CPU per transaction. Then everything is read back with
// read_committed and verified like the other workloads; each partition's
// log end offset must be its records plus one commit marker per
// transaction that wrote to it.

// txnTransactionalID is the producer's transactional id: one per topic, so
// rounds and workloads never fence each other.
func txnTransactionalID(topic string) string { return topic + "-producer" }

// runTxnWorkload is runWorkload for w.TxnRecords > 0 (the topic exists).
func runTxnWorkload(ctx context.Context, addr, topic string, w benchWorkload, brokerCPU func() time.Duration, res *benchResult) error {
	cl, err := kgo.NewClient(append(producerOpts(addr, w), kgo.TransactionalID(txnTransactionalID(topic)))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// Find the transaction coordinator and get a producer id before the
	// clock starts. Kafka creates __transaction_state here, on first use,
	// and goes on creating its 50 partitions after the first is ready:
	// wait until all are online, so the warm-up does not have to cover it.
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("initialising the transactional producer: %w", err)
	}
	if err := waitTxnStateOnline(ctx, kadm.NewClient(cl)); err != nil {
		return err
	}
	if len(w.StateConfigs) > 0 {
		if err := alterTopicConfigs(ctx, cl, "__transaction_state", w.StateConfigs); err != nil {
			return err
		}
	}

	var (
		parts   = int64(w.Partitions)
		seqs    = make([]int64, w.Partitions)
		markers = make([]int64, w.Partitions)
		touched = make([]bool, w.Partitions)
		bufs    = sync.Pool{New: func() any { return make([]byte, w.RecordSize) }}
		failed  atomic.Int64
		first   atomic.Value

		produced, counted, txns int64
		commitLat, txnLat       []uint32
		countStart, countEnd    time.Time
		b0, c0                  time.Duration
	)
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			if failed.Add(1) == 1 {
				first.Store(err)
			}
			return
		}
		bufs.Put(r.Value)
	}
	us := func(d time.Duration) uint32 { return uint32(min(d.Microseconds(), 1<<32-1)) }

	start := time.Now()
	warmEnd, end := start.Add(w.Warmup), start.Add(w.Duration)
	for {
		t0 := time.Now()
		if ctx.Err() != nil || !t0.Before(end) && counted > 0 {
			break // at least one transaction is counted, however slow
		}
		count := !t0.Before(warmEnd)
		if count && countStart.IsZero() {
			countStart, b0, c0 = t0, readCPU(brokerCPU), selfCPU()
		}
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("transaction %d: BeginTransaction: %w", txns+1, err)
		}
		clear(touched)
		for range w.TxnRecords {
			p := int32(produced % parts)
			v := bufs.Get().([]byte)
			fillPayload(v, p, seqs[p], monoNow())
			seqs[p]++
			produced++
			touched[p] = true
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: v}, promise)
		}
		if err := cl.Flush(ctx); err != nil {
			return fmt.Errorf("transaction %d: Flush: %w", txns+1, err)
		}
		if n := failed.Load(); n > 0 {
			abortCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cl.EndTransaction(abortCtx, kgo.TryAbort)
			cancel()
			return fmt.Errorf("transaction %d: %d records failed; first: %v", txns+1, n, first.Load())
		}
		t1 := time.Now()
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("transaction %d: EndTransaction(TryCommit) after %s: %w", txns+1, time.Since(t1).Round(time.Millisecond), err)
		}
		t2 := time.Now()
		txns++
		for p, ok := range touched {
			if ok {
				markers[p]++
			}
		}
		if count {
			counted++
			commitLat = append(commitLat, us(t2.Sub(t1)))
			txnLat = append(txnLat, us(t2.Sub(t0)))
			countEnd = t2
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	b1, c1 := readCPU(brokerCPU), selfCPU()

	res.Records = produced
	res.PayloadBytes = produced * int64(w.RecordSize)
	res.Transactions = counted
	res.ProduceSeconds = countEnd.Sub(countStart).Seconds()
	res.TxnPerSec = float64(counted) / res.ProduceSeconds
	res.ProduceRecordsPerSec = float64(counted*int64(w.TxnRecords)) / res.ProduceSeconds
	res.ProduceMBPerSec = res.ProduceRecordsPerSec * float64(w.RecordSize) / 1e6
	res.CommitP50Ms, res.CommitP99Ms, _ = percentilesMs(commitLat)
	res.TxnP50Ms, res.TxnP99Ms, _ = percentilesMs(txnLat)
	res.ClientCPUSeconds = (c1 - c0).Seconds()
	if b0 >= 0 && b1 >= 0 {
		res.BrokerCPUSeconds = (b1 - b0).Seconds()
	}

	// Read back what was committed, and check the end offsets.
	counts := make([]int64, w.Partitions)
	for p := range counts {
		counts[p] = seqs[p]
	}
	cons, err := newConsumer(addr, topic, w, counts)
	if err != nil {
		return err
	}
	defer cons.close()
	cstart := time.Now()
	if err := cons.run(ctx); err != nil {
		return err
	}
	res.ConsumeSeconds = time.Since(cstart).Seconds()
	res.ConsumeRecordsPerSec = float64(produced) / res.ConsumeSeconds
	res.ConsumeMBPerSec = float64(res.PayloadBytes) / 1e6 / res.ConsumeSeconds
	res.WireBytes = cons.wireBytes.Load()
	return checkEndOffsets(ctx, addr, topic, counts, markers)
}

// alterTopicConfigs sets configs on an existing topic (incrementally).
func alterTopicConfigs(ctx context.Context, cl *kgo.Client, topic string, configs map[string]string) error {
	var alter []kadm.AlterConfig
	for k, v := range configs {
		alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	rs, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, alter, topic)
	if err == nil {
		for _, r := range rs {
			if r.Err != nil {
				err = errors.Join(err, r.Err)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("setting %v on %s: %w", configs, topic, err)
	}
	return nil
}

// waitTxnStateOnline waits (up to a minute) until every partition of
// __transaction_state is online, if the broker lists that topic at all
// (kfake keeps its transactions elsewhere).
func waitTxnStateOnline(ctx context.Context, adm *kadm.Client) error {
	const topic = "__transaction_state"
	td, err := adm.ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return fmt.Errorf("listing %s: %w", topic, err)
	}
	if t, ok := td[topic]; !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return waitTopicOnline(wctx, adm, topic, 0)
}
