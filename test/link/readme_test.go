package link

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// TestREADMEMoveFromKafka runs the README's "Moving from Kafka to Strand"
// as written, against a real Kafka in place of kafka-1:9092 and a Strand
// broker with its default settings (its admin listener in STRAND_ADMIN):
// the link is created and watched, the group orders-processor moves from
// Kafka to Strand and resumes exactly where it committed, then the topics
// are promoted and the link deleted, and Strand takes the producers.
func TestREADMEMoveFromKafka(t *testing.T) {
	t.Parallel()
	blocks := readmeBlocks(t, "## Moving from Kafka to Strand", 2)
	kc := startKafka(t, 1, nil)
	tg := kc.target()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tg.createTopic(t, "orders", 3, nil)
	tg.createTopic(t, "orders-eu", 1, nil)
	producer := tg.client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for _, topic := range []string{"orders", "orders-eu"} {
		var recs []*kgo.Record
		for i := range 90 {
			recs = append(recs, &kgo.Record{Topic: topic, Value: value(topic, i)})
		}
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// orders-processor consumes part of orders on Kafka, commits, stops.
	consumer := tg.client(t, kgo.ConsumerGroup("orders-processor"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(),
		kgo.FetchMaxPartitionBytes(2048))
	read := 0
	for read < 40 {
		fs := consumer.PollRecords(ctx, 40-read)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		read += fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	committed, err := kadm.NewClient(kc.client()).FetchOffsets(ctx, "orders-processor")
	if err != nil {
		t.Fatal(err)
	}
	consumer.Close()
	// More is written after the group stopped: every partition has
	// records past its commit.
	var more []*kgo.Record
	for i := range 30 {
		more = append(more, &kgo.Record{Topic: "orders", Value: value("more", i)})
	}
	if err := producer.ProduceSync(ctx, more...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	st := testutil.StartProcess(t, "")
	run := func(block string) {
		for _, line := range testutil.CommandLines(block) {
			runREADMELine(t, kc, st, line)
		}
	}
	run(blocks[0])
	waitCaughtUp(t, st.Admin, "kafka-prod", "orders", "orders-eu")

	// Consumers first: after one offset sync, the group starts on Strand
	// where it stopped.
	strandCl, err := kgo.NewClient(kgo.SeedBrokers(st.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer strandCl.Close()
	testutil.Eventually(t, 30*time.Second, func() error {
		here, err := kadm.NewClient(strandCl).FetchOffsets(ctx, "orders-processor")
		if err != nil {
			return err
		}
		for p := range int32(3) {
			want, _ := committed.Lookup("orders", p)
			if got, _ := here.Lookup("orders", p); got.At != want.At {
				return fmt.Errorf("orders/%d: committed %d on Strand, %d on Kafka", p, got.At, want.At)
			}
		}
		return nil
	})
	moved, err := kgo.NewClient(kgo.SeedBrokers(st.Addr), kgo.ConsumerGroup("orders-processor"), kgo.ConsumeTopics("orders"))
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
		if len(first) < 3 {
			return fmt.Errorf("first offsets read %v", first)
		}
		return nil
	})
	for p := range int32(3) {
		want := int64(0)
		if o, ok := committed.Lookup("orders", p); ok {
			want = o.At
		}
		if first[p] != want {
			t.Errorf("orders/%d: the group started on Strand at %d, it committed %d on Kafka", p, first[p], want)
		}
	}

	// Then producers: promote, delete the link, write to Strand.
	run(blocks[1])
	if err := moved.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("written on Strand")}).FirstErr(); err != nil {
		t.Fatalf("producing to the promoted topic: %v", err)
	}
}

// readmeBlocks returns the sh blocks of a README section, which must have
// n of them.
func readmeBlocks(t *testing.T, heading string, n int) []string {
	t.Helper()
	s := readmeSection(t, heading)
	if len(s.Blocks) != n {
		t.Fatalf("the README's section %q has %d sh blocks, the test runs %d", heading, len(s.Blocks), n)
	}
	return s.Blocks
}

// readmeSection returns a section of the README.
func readmeSection(t *testing.T, heading string) testutil.Section {
	t.Helper()
	for _, s := range testutil.Sections(testutil.README(t)) {
		if s.Heading == heading {
			return s
		}
	}
	t.Fatalf("the README has no section %q", heading)
	return testutil.Section{}
}

// runREADMELine runs a command line of the README with strand on the
// path, Kafka at kafka-1:9092 and the Strand broker st as its admin
// listener (STRAND_ADMIN), and returns its output.
func runREADMELine(t *testing.T, kc *kafkaCluster, st *testutil.Process, line string) string {
	t.Helper()
	bin := filepath.Dir(readmeBin(t))
	line = strings.ReplaceAll(line, "kafka-1:9092", kc.Bootstrap())
	cmd := exec.Command("bash", "-c", line)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STRAND_ADMIN="+st.Admin, "STRAND_BROKERS="+st.Addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	t.Logf("%s\n%s", line, out)
	return string(out)
}

// readmeBin is the strand binary under the name the README uses, in a
// directory of the test's.
func readmeBin(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "strand")
	if err := os.Symlink(testutil.Binary(t), path); err != nil {
		t.Fatal(err)
	}
	return path
}
