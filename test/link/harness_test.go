package link

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/mirrorcheck"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/testutil"
)

// compareWithItself compares a topic of Kafka with itself (two clients,
// as a mirror check would use one per cluster), fails the test unless it
// is equal, and returns the report.
func compareWithItself(t *testing.T, kc *kafkaCluster, w *written) mirrorcheck.TopicReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A small fetch size, so that a partition takes many fetches.
	rep, err := mirrorcheck.CompareTopic(ctx, kc.client(), kc.client(), w.topic, mirrorcheck.Options{FetchBytes: 2048})
	if err != nil {
		t.Fatalf("compare %s: %v", w.topic, err)
	}
	t.Log(rep)
	if !rep.Equal() || rep.SourceID == ([16]byte{}) || int(rep.SourcePartitions) != len(w.partitions) {
		t.Fatalf("Kafka's %s compared with itself: %s", w.topic, rep)
	}
	for _, p := range rep.Partitions {
		pw := w.partitions[p.Partition]
		if p.Source.LogStart != pw.logStart || p.Source.HighWatermark != pw.end || p.From != pw.logStart || p.End != pw.end {
			t.Errorf("%s/%d: compared [%d, %d) of a log %d..%d; the workload left it %d..%d",
				w.topic, p.Partition, p.From, p.End, p.Source.LogStart, p.Source.HighWatermark, pw.logStart, pw.end)
		}
	}
	return rep
}

// TestHarnessAgainstKafka runs every workload on a one-node Kafka and
// checks, comparing Kafka with itself, that the checker reads what each
// wrote: every record, a control batch per transaction, every codec (the
// Java producer's lz4 too), the cleaner's gaps, and log starts moved by
// DeleteRecords and retention; and a group's commits.
func TestHarnessAgainstKafka(t *testing.T) {
	t.Parallel()
	kc := startKafka(t, 1)
	tg := kc.target()

	t.Run("codecs", func(t *testing.T) {
		const perCodec = 20
		w := writeCodecs(t, tg, "codecs", 2, perCodec)
		rep := compareWithItself(t, kc, w)
		for _, p := range rep.Partitions {
			pw := w.partitions[p.Partition]
			if p.Records != int64(pw.records()) || p.Records != int64(len(codecs)*perCodec) || p.ControlBatches != 0 ||
				p.Gaps != 0 || pw.end != p.Records {
				t.Errorf("partition %d: %d records (wrote %d, end %d), %d control batches, %d gaps",
					p.Partition, p.Records, pw.records(), pw.end, p.ControlBatches, p.Gaps)
			}
			for c := range model.CompressionZstd + 1 {
				if p.Codecs[c] != perCodec/10 {
					t.Errorf("partition %d: %d batches of %s, want %d", p.Partition, p.Codecs[c], c, perCodec/10)
				}
			}
		}
	})

	t.Run("transactions", func(t *testing.T) {
		const txns = 6
		w := writeTransactions(t, tg, "transactions", 2, txns)
		rep := compareWithItself(t, kc, w)
		for _, p := range rep.Partitions {
			pw := w.partitions[p.Partition]
			if len(pw.aborted) != 2*4 || pw.transactions != txns {
				t.Fatalf("partition %d: the workload wrote %d aborted records in %d transactions", p.Partition, len(pw.aborted), pw.transactions)
			}
			// Every record, aborted ones too, and one marker per
			// transaction: nothing else in the log.
			if p.Records != int64(pw.records()) || p.ControlBatches != int64(pw.transactions) || p.Gaps != 0 ||
				pw.end != int64(pw.records()+pw.transactions) {
				t.Errorf("partition %d: %d records (wrote %d), %d control batches (%d transactions), %d gaps, end %d",
					p.Partition, p.Records, pw.records(), p.ControlBatches, pw.transactions, p.Gaps, pw.end)
			}
		}
	})

	t.Run("compacted", func(t *testing.T) {
		w := writeCompacted(t, tg, "compacted", 20, 4)
		rep := compareWithItself(t, kc, w)
		p, pw := rep.Partitions[0], w.partitions[0]
		if p.Gaps == 0 || p.Records != w.compactedTo {
			t.Errorf("%d records in a log ending at %d, %d gaps of %d offsets; the workload wrote %d, %d left by the cleaner",
				p.Records, pw.end, p.Gaps, p.GapOffsets, pw.records(), w.compactedTo)
		}
	})

	t.Run("deleted-records", func(t *testing.T) {
		const batches, start = 4, 15
		w := writeDeletedRecords(t, tg, "deleted-records", batches, start)
		rep := compareWithItself(t, kc, w)
		// The log starts inside the batch 10..19, which is read whole.
		if p := rep.Partitions[0]; p.Source.LogStart != start || p.Records != (batches-1)*10 || p.Batches != batches-1 || p.Gaps != 0 {
			t.Errorf("log start %d, %d records in %d batches, %d gaps; want %d, %d in %d, none",
				p.Source.LogStart, p.Records, p.Batches, p.Gaps, start, (batches-1)*10, batches-1)
		}
	})

	t.Run("retained", func(t *testing.T) {
		const perRound = 10
		w := writeRetained(t, tg, "retained", perRound)
		rep := compareWithItself(t, kc, w)
		if p := rep.Partitions[0]; p.Source.LogStart != 2*perRound || p.Records != perRound || p.Gaps != 0 {
			t.Errorf("log start %d, %d records, %d gaps; want %d, %d, none", p.Source.LogStart, p.Records, p.Gaps, 2*perRound, perRound)
		}
	})

	t.Run("java", func(t *testing.T) {
		const n = 300
		w := writeJava(t, tg, "java", 2, n, "compression.type=lz4", "linger.ms=20")
		rep := compareWithItself(t, kc, w)
		var records int64
		for _, p := range rep.Partitions {
			pw := w.partitions[p.Partition]
			if p.Records != int64(pw.records()) || p.Codecs[model.CompressionLZ4] != p.Batches || p.ControlBatches != 0 {
				t.Errorf("partition %d: %d records (wrote %d), %d of %d batches lz4", p.Partition, p.Records, pw.records(),
					p.Codecs[model.CompressionLZ4], p.Batches)
			}
			records += p.Records
		}
		if records != n {
			t.Errorf("%d records, the Java producer wrote %d", records, n)
		}
	})

	t.Run("group-offsets", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm := kadm.NewClient(kc.client())
		os := kadm.Offsets{}
		for p := range int32(2) {
			os.Add(kadm.Offset{Topic: "codecs", Partition: p, At: int64(10 + p), LeaderEpoch: 0, Metadata: fmt.Sprint("m", p)})
		}
		if err := adm.CommitAllOffsets(ctx, "harness", os); err != nil {
			t.Fatal(err)
		}
		rep, err := mirrorcheck.CompareGroupOffsets(ctx, adm, kadm.NewClient(kc.client()), "harness")
		if err != nil || !rep.Equal() || rep.Committed["harness"] != 2 {
			t.Fatalf("Kafka's group offsets compared with themselves: %v %s", err, rep)
		}
	})
}

// TestHarnessThreeBrokers starts a three-node Kafka, writes to a topic
// replicated on all three, kills the leader of a partition, sees another
// named, and restarts the killed node. The checker reads every partition
// from its new leader meanwhile.
//
// Kafka names the new leader once its controller has fenced the killed
// node, after broker.session.timeout.ms (9 s, a broker setting brokerproc
// does not set). The first transaction on three nodes waits some 20 s for
// __transaction_state (50 partitions, transaction.state.log.num.partitions,
// another), so this test writes without transactions.
func TestHarnessThreeBrokers(t *testing.T) {
	t.Parallel()
	began := time.Now()
	kc := startKafka(t, 3)
	t.Logf("three nodes serve after %v", time.Since(began).Round(time.Millisecond))
	tg := kc.target()
	w := writeCodecs(t, tg, "failover", 3, 10)

	var killed int32
	testutil.Eventually(t, 30*time.Second, func() (err error) {
		killed, err = kc.Leader(w.topic, 0)
		if err == nil && killed < 0 {
			err = fmt.Errorf("%s/0 has no leader", w.topic)
		}
		return err
	})
	kc.Kill(killed)
	killedAt := time.Now()
	var leader int32
	testutil.Eventually(t, 60*time.Second, func() (err error) {
		leader, err = kc.Leader(w.topic, 0)
		if err == nil && (leader < 0 || leader == killed) {
			err = fmt.Errorf("%s/0 led by %d, which was killed", w.topic, leader)
		}
		return err
	})
	t.Logf("%s/0: led by %d %v after %d was killed", w.topic, leader, time.Since(killedAt).Round(time.Millisecond), killed)

	rep := compareWithItself(t, kc, w)
	for _, p := range rep.Partitions {
		if pw := w.partitions[p.Partition]; p.Records != int64(pw.records()) {
			t.Errorf("partition %d: %d records, wrote %d", p.Partition, p.Records, pw.records())
		}
	}

	restarted := time.Now()
	kc.Restart(killed)
	t.Logf("node %d back after %v", killed, time.Since(restarted).Round(time.Millisecond))
}
