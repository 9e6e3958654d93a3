package link

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/link"
	"github.com/strandlog/strand/internal/mirrorcheck"
	"github.com/strandlog/strand/internal/testutil"
)

// strand runs the strand command and returns its output; it fails the
// test when the command fails.
func strand(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(testutil.Binary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("strand %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// linkStatus reads a link's status through strand link status.
func linkStatus(t *testing.T, admin, name string) link.Status {
	t.Helper()
	var st link.Status
	out := strand(t, "link", "status", name, "--admin", admin, "--format", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("link status: %v\n%s", err, out)
	}
	return st
}

// waitCaughtUp waits until every partition of the named mirror topics
// holds its source's end.
func waitCaughtUp(t *testing.T, admin, name string, topics ...string) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		st := linkStatus(t, admin, name)
		for _, want := range topics {
			found := false
			for _, ts := range st.Topics {
				if ts.Topic != want {
					continue
				}
				found = true
				for _, p := range ts.Partitions {
					if p.SourceEnd < 0 || p.MirrorEnd != p.SourceEnd {
						return fmt.Errorf("%s/%d: mirror at %d of %d %s", want, p.Partition, p.MirrorEnd, p.SourceEnd, p.Error)
					}
				}
			}
			if !found {
				return fmt.Errorf("no mirror of %s yet (%s)", want, st.Error)
			}
		}
		return nil
	})
}

// compareMirror checks a Strand mirror against its Kafka source, batch by
// batch, and returns the report.
func compareMirror(t *testing.T, kc *kafkaCluster, strandAddr, topic string) mirrorcheck.TopicReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mirror, err := kgo.NewClient(kgo.SeedBrokers(strandAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer mirror.Close()
	rep, err := mirrorcheck.CompareTopic(ctx, kc.client(), mirror, topic, mirrorcheck.Options{})
	if err != nil {
		t.Fatalf("comparing %s: %v", topic, err)
	}
	if !rep.Equal() {
		t.Fatalf("the mirror of %s differs from Kafka's: %s", topic, rep)
	}
	return rep
}

// TestLinkFromKafka mirrors a real Apache Kafka into Strand: every codec,
// transactions with commits and aborts (before the link and while it
// runs), a compacted topic read after Kafka's cleaner, a log start moved
// by DeleteRecords and by retention, the Java producer (idempotent, and
// transactions committed and aborted); every batch at every offset equal,
// group offsets copied, a consumer group moved with nothing skipped, and
// the topics promoted.
func TestLinkFromKafka(t *testing.T) {
	t.Parallel()
	kc := startKafka(t, 1, nil)
	tg := kc.target()
	workloads := []*written{
		writeCodecs(t, tg, "codecs", 2, 20),
		writeTransactions(t, tg, "transactions", 2, 6),
		writeCompacted(t, tg, "compacted", 20, 4),
		writeDeletedRecords(t, tg, "deleted-records", 4, 15),
		writeRetained(t, tg, "retained", 10),
		writeJava(t, tg, "java", 2, 300, "compression.type=lz4", "linger.ms=20"),
		writeJavaTransactions(t, tg, "java-transactions", 2, 20, 5, 2),
	}
	var topics []string
	for _, w := range workloads {
		topics = append(topics, w.topic)
	}
	// A group reads part of codecs at the source.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := kadm.NewClient(kc.client())
	committed := kadm.Offsets{}
	committed.Add(kadm.Offset{Topic: "codecs", Partition: 0, At: 37, LeaderEpoch: -1, Metadata: "billing-v1"})
	committed.Add(kadm.Offset{Topic: "codecs", Partition: 1, At: 52, LeaderEpoch: -1, Metadata: "billing-v1"})
	if err := src.CommitAllOffsets(ctx, "billing", committed); err != nil {
		t.Fatal(err)
	}

	st := testutil.StartProcess(t, "", "--link-metadata-interval", "200ms")
	out := strand(t, "link", "create", "kafka", "--admin", st.Admin, "--source-brokers", kc.Bootstrap(),
		"--topics", strings.Join(topics, "|")+"|live-.*", "--groups", "billing", "--offset-sync-interval", "200ms")
	if !strings.Contains(out, "created link kafka") {
		t.Fatalf("link create said: %s", out)
	}
	// While the link runs: transactions on a new topic, and a topic the
	// link's filter takes once altered.
	live := writeTransactions(t, tg, "live-transactions", 2, 4)
	out = strand(t, "link", "alter", "kafka", "--admin", st.Admin, "--topics", strings.Join(topics, "|")+"|live-.*|late-.*")
	if !strings.Contains(out, "altered link kafka") {
		t.Fatalf("link alter said: %s", out)
	}
	late := writeCodecs(t, tg, "late-codecs", 1, 10)
	waitCaughtUp(t, st.Admin, "kafka", append(topics, live.topic, late.topic)...)
	compareMirror(t, kc, st.Addr, late.topic)
	for _, w := range append(workloads, live) {
		rep := compareMirror(t, kc, st.Addr, w.topic)
		for _, p := range rep.Partitions {
			if pw := w.partitions[p.Partition]; p.Mirror.LogStart != pw.logStart || p.Mirror.HighWatermark != pw.end {
				t.Errorf("%s/%d: the mirror holds [%d, %d), the source [%d, %d)", w.topic, p.Partition,
					p.Mirror.LogStart, p.Mirror.HighWatermark, pw.logStart, pw.end)
			}
		}
		// What the comparison covered is what the workload wrote.
		if check := workloadChecks[w.topic]; check != nil {
			check(t, w, rep)
		} else if w != live {
			t.Errorf("no check of what %s wrote", w.topic)
		}
	}

	// The group's offsets, identical here (the commit's leader epoch is
	// the source's and is not copied).
	dst, err := kgo.NewClient(kgo.SeedBrokers(st.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	testutil.Eventually(t, 30*time.Second, func() error {
		rep, err := mirrorcheck.CompareGroupOffsets(ctx, src, kadm.NewClient(dst), "billing")
		if err != nil {
			return err
		}
		if rep.Committed["billing"] != 2 {
			return fmt.Errorf("the source's billing has %d commits", rep.Committed["billing"])
		}
		for _, m := range rep.Mismatches {
			if len(m.Fields) != 1 || m.Fields[0] != "LeaderEpoch" {
				return fmt.Errorf("%s", m)
			}
		}
		return nil
	})
	// billing moves to Strand: it starts exactly where it stopped.
	moved, err := kgo.NewClient(kgo.SeedBrokers(st.Addr), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("codecs"))
	if err != nil {
		t.Fatal(err)
	}
	defer moved.Close()
	first := map[int32]int64{}
	testutil.Eventually(t, 30*time.Second, func() error {
		fctx, fcancel := context.WithTimeout(ctx, time.Second)
		defer fcancel()
		moved.PollFetches(fctx).EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
		})
		if len(first) < 2 {
			return fmt.Errorf("first offsets read %v", first)
		}
		return nil
	})
	if first[0] != 37 || first[1] != 52 {
		t.Fatalf("billing started on Strand at %v, want 37 and 52", first)
	}

	// strand migrate report shows the move: Kafka's commits against where
	// the group started on Strand, nothing skipped.
	testutil.Eventually(t, 30*time.Second, func() error {
		out, err := exec.Command(testutil.Binary(t), "migrate", "report", "--brokers", st.Addr, "--group", "billing").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for _, want := range []string{"2 partitions moved from another cluster", "2 moves: skipped 0, rewound 0"} {
			if !strings.Contains(string(out), want) {
				return fmt.Errorf("no %q in\n%s", want, out)
			}
		}
		return nil
	})

	// Promote: writable here.
	out = strand(t, "link", "promote", "kafka", "--admin", st.Admin, "--topic", "codecs")
	if !strings.Contains(out, "1 topics promoted") {
		t.Fatalf("promote said: %s", out)
	}
	if err := dst.ProduceSync(ctx, &kgo.Record{Topic: "codecs", Value: []byte("written on Strand")}).FirstErr(); err != nil {
		t.Fatalf("producing to the promoted topic: %v", err)
	}
}

// TestLinkFromKafkaThreeBrokers mirrors a three-node Kafka whose
// partition leader is killed while it is written: the link follows the
// new leader, and the mirror is exact.
func TestLinkFromKafkaThreeBrokers(t *testing.T) {
	t.Parallel()
	kc := startKafka(t, 3, nil)
	tg := kc.target()
	tg.createTopic(t, "failover", 3, nil)
	st := testutil.StartProcess(t, "", "--link-metadata-interval", "200ms")
	strand(t, "link", "create", "kafka", "--admin", st.Admin, "--source-brokers", kc.Bootstrap(), "--topics", "failover")
	w := &written{topic: "failover"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := tg.client(t, kgo.DefaultProduceTopic("failover"))
	write := func(round int) {
		for p := range int32(3) {
			var recs []*kgo.Record
			for j := range 10 {
				recs = append(recs, &kgo.Record{Partition: p, Value: value(fmt.Sprint("r", round), j)})
			}
			produce(t, ctx, cl, w, recs)
		}
	}
	write(0)
	waitCaughtUp(t, st.Admin, "kafka", "failover")

	var killed int32
	testutil.Eventually(t, 30*time.Second, func() (err error) {
		killed, err = kc.Leader("failover", 0)
		if err == nil && killed < 0 {
			err = fmt.Errorf("failover/0 has no leader")
		}
		return err
	})
	kc.Kill(killed)
	for round := 1; round <= 3; round++ {
		write(round)
	}
	tg.finish(t, w, 3)
	waitCaughtUp(t, st.Admin, "kafka", "failover")
	rep := compareMirror(t, kc, st.Addr, "failover")
	for _, p := range rep.Partitions {
		if p.Records != 40 {
			t.Errorf("partition %d: the mirror holds %d records, the source was written 40", p.Partition, p.Records)
		}
	}
}
