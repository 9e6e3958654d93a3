package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/test/javatest"

	"github.com/strandlog/strand/test/librdkafkatest"
)

// failoverRecords is how many records each producer sends in
// TestClusterClientsFailover, one per request, so that the kill lands
// mid-stream.
const failoverRecords = 3000

// TestClusterClientsFailover kills (SIGKILL) a partition leader while a real
// client produces to a topic of three replicas (min.insync.replicas=2), for
// each client in turn: the Java producer at its defaults (idempotent,
// acks=all), librdkafka through confluent-kafka (idempotent), franz-go
// (idempotent) and kafka-python (acks=all, retries, not idempotent). Each
// follows the new leaders; afterwards every acknowledged record is read
// back at the partition and offset it was acknowledged at. The idempotent
// clients must have every record acknowledged once, densely and in order
// per partition; kafka-python may give up on some, but none it was told
// were written may be missing. The killed broker is restarted before the
// next client and rejoins the in-sync sets.
func TestClusterClientsFailover(t *testing.T) {
	c := startCluster(t, "--broker-session-timeout", "3s")
	for i, tc := range []struct {
		name    string
		ready   func(t *testing.T)
		produce func(t *testing.T, seed, topic string) helperOutput
		strict  bool // idempotent: every record acknowledged exactly once
	}{
		{"java", func(t *testing.T) { javatest.Helper(t) }, func(t *testing.T, seed, topic string) helperOutput {
			r := runJava(t, 3*time.Minute, "produce", seed, topic, fmt.Sprint(failoverRecords), "batch.size=1", "linger.ms=0")
			if r.err != nil {
				t.Errorf("Java producer: %v", r)
			}
			return parseHelper(t, r.stdout)
		}, true},
		{"confluent-kafka", func(t *testing.T) { librdkafkatest.Python(t) }, func(t *testing.T, seed, topic string) helperOutput {
			r := run(3*time.Minute, pythonDir, "", librdkafkatest.Python(t), "cluster_librdkafka.py", "produce", seed, topic,
				fmt.Sprint(failoverRecords), "enable.idempotence=true", "batch.num.messages=1", "linger.ms=0")
			if r.err != nil {
				t.Errorf("confluent-kafka producer: %v", r)
			}
			return parseHelper(t, r.stdout)
		}, true},
		{"franz-go", func(*testing.T) {}, func(t *testing.T, seed, topic string) helperOutput {
			cl := client(t, seed, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(5),
				kgo.MetadataMinAge(250*time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			h := helperOutput{acked: map[int]rec{}}
			for i := range failoverRecords {
				r := &kgo.Record{Key: []byte(helperKey(i)), Value: []byte(helperValue(i))}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Errorf("franz-go record %d: %v", i, err) // the producer runs off the test's goroutine
					return h
				}
				h.acked[i] = rec{P: r.Partition, O: r.Offset, K: helperKey(i), V: helperValue(i)}
			}
			return h
		}, true},
		{"kafka-python", needKafkaPython, func(t *testing.T, seed, topic string) helperOutput {
			r := run(3*time.Minute, pythonDir, "", systemPython, "roundtrip.py", "--bootstrap", seed, "--topic", topic,
				"-n", fmt.Sprint(failoverRecords), "--batch-size", "0", "--retries", "10", "--compression", "none")
			return parseHelper(t, r.stdout)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.ready(t)
			topic := tc.name + "-failover"
			via := int32(i % clusterBrokers)
			minISR := "2"
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			adm := kadm.NewClient(client(t, c.seed(via)))
			if _, err := adm.CreateTopic(ctx, clusterPartitions, 3, map[string]*string{"min.insync.replicas": &minISR}, topic); err != nil {
				t.Fatal(err)
			}
			leaders := c.waitLeaders(t, topic, c.others(-1), 20*time.Second, allLed(clusterPartitions))
			victim := leaders[0]
			if victim == via {
				victim = leaders[1]
			}
			seed := c.seed(via) // never the broker killed
			done := make(chan helperOutput, 1)
			go func() { done <- tc.produce(t, seed, topic) }()
			// Kill a leader once the stream is going.
			watch := client(t, seed)
			for {
				ends, err := kadm.NewClient(watch).ListEndOffsets(ctx, topic)
				total := int64(0)
				ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
				if err == nil && total >= failoverRecords/10 {
					break
				}
				select {
				case h := <-done:
					t.Fatalf("the producer finished before the kill (%d acknowledged)", len(h.acked))
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
					t.Fatal("the producer wrote nothing")
				}
			}
			killed := time.Now()
			c.Procs[victim].Kill()
			t.Logf("broker %d, leader of %s-0, killed after %d records were stored", victim, topic, failoverRecords/10)
			var h helperOutput
			select {
			case h = <-done:
			case <-ctx.Done():
				t.Fatal("the producer did not finish")
			}
			t.Logf("%d records acknowledged, %d failed; the producer finished %v after the kill", len(h.acked), len(h.failed),
				time.Since(killed).Round(time.Millisecond))
			after := c.waitLeaders(t, topic, c.others(victim), 20*time.Second, allLed(clusterPartitions))
			for p, l := range after {
				if l == victim {
					t.Fatalf("partition %d still led by the killed broker %d", p, victim)
				}
			}
			var acked []rec
			if tc.strict {
				acked = checkAcked(t, h, failoverRecords)
			} else {
				for _, r := range h.acked {
					acked = append(acked, r)
				}
				if len(acked) == 0 {
					t.Fatal("nothing acknowledged")
				}
			}
			stored := map[[2]int64]rec{}
			for _, r := range asRecs(readAll(t, seed, topic)) {
				stored[[2]int64{int64(r.P), r.O}] = r
			}
			for _, r := range acked {
				if got, ok := stored[[2]int64{int64(r.P), r.O}]; !ok || got.K != r.K || got.V != r.V {
					t.Errorf("acknowledged %s=%s at %d/%d; the log holds %+v (%v)", r.K, r.V, r.P, r.O, got, ok)
				}
			}
			c.Procs[victim].Restart(t)
			c.WaitLive(t, clusterBrokers, 30*time.Second) // the next topic needs three live brokers
			c.waitLeaders(t, topic, c.others(-1), 30*time.Second, allLed(clusterPartitions))
		})
	}
}

// TestClusterJavaTransformFailover runs the Java client's exactly-once
// transform (a read_committed consumer in a group and a transactional
// producer that aborts every fifth transaction) against three brokers,
// with topics of three replicas, and kills (SIGKILL) the broker that
// coordinates its transactional id once a third of the input is committed.
// The coordinator moves to a survivor with the transaction's state, the
// transform finishes, and every input record is in the committed output
// exactly once, as read by franz-go and by the Java client (see
// testJavaTransformUnderFault).
func TestClusterJavaTransformFailover(t *testing.T) {
	javatest.Helper(t)
	c := startCluster(t, "--broker-session-timeout", "3s", "--transaction-version=2")
	minISR := "2"
	testJavaTransformUnderFault(t, transformTarget{
		seed: c.seed(0),
		create: func(t *testing.T, topic string, partitions int32) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			adm := kadm.NewClient(client(t, c.seed(0)))
			if _, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &minISR}, topic); err != nil {
				t.Fatal(err)
			}
			c.waitLeaders(t, topic, c.others(-1), 20*time.Second, allLed(int(partitions)))
		},
		fault: func(t *testing.T, txnID string) (string, func()) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			found := kadm.NewClient(client(t, c.seed(1))).FindTxnCoordinators(ctx, txnID)
			coord := found[txnID].NodeID
			if found[txnID].Err != nil || coord < 0 {
				t.Fatalf("finding the coordinator of %s: %+v", txnID, found)
			}
			c.Procs[coord].Kill()
			return fmt.Sprintf("broker %d, the coordinator of %s, killed", coord, txnID), func() {
				c.Procs[coord].Restart(t)
				c.WaitLive(t, clusterBrokers, 30*time.Second)
			}
		},
	})
}
