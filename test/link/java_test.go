package link

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"testing"

	"github.com/strandlog/strand/test/javatest"
)

// The official Java producer (org.apache.kafka:kafka-clients) through the
// Maven project in test/java (Compat.java's produce and Txn.java's
// produce-txn), built by test/javatest.

// writeJava sends n records with a KafkaProducer at its defaults (so
// idempotent, acks=all) plus props, keyed key-(i%7), and records the
// offsets it acknowledged.
func writeJava(t *testing.T, tg target, topic string, partitions int32, n int, props ...string) *written {
	t.Helper()
	java, cp := javatest.Helper(t)
	tg.createTopic(t, topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
	defer cancel()
	// C1 only and the serial collector: the run is short.
	args := append([]string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp, "strandlog.compat.Compat",
		"produce", tg.bootstrap, topic, strconv.Itoa(n)}, props...)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, java, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Java producer: %v\n%s\n%s", err, out, stderr.String())
	}
	w := &written{topic: topic}
	acked := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var i, p int
		var o int64
		if _, err := fmt.Sscanf(sc.Text(), "acked %d %d %d", &i, &p, &o); err != nil {
			continue
		}
		pw := w.partition(int32(p))
		pw.committed = append(pw.committed, o)
		acked++
	}
	if acked != n {
		t.Fatalf("Java producer acknowledged %d of %d records:\n%s\n%s", acked, n, out, stderr.String())
	}
	return tg.finish(t, w, partitions)
}

// writeJavaTransactions runs txns transactions of n records "jt-i" each
// with a transactional KafkaProducer (Txn produce-txn), aborting every
// abortEvery-th (0: none) after flushing it, so that its records and its
// abort marker are in the log.
func writeJavaTransactions(t *testing.T, tg target, topic string, partitions int32, n, txns, abortEvery int) *written {
	t.Helper()
	java, cp := javatest.Helper(t)
	tg.createTopic(t, topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
	defer cancel()
	args := []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp, "strandlog.compat.Txn",
		"produce-txn", tg.bootstrap, topic, topic + "-txn", "jt", strconv.Itoa(n),
		"compat.transactions=" + strconv.Itoa(txns), "compat.abort.every=" + strconv.Itoa(abortEvery)}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, java, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Java transactional producer: %v\n%s\n%s", err, out, stderr.String())
	}
	w := &written{topic: topic}
	// Each transaction prints its n records, in order: the i-th record
	// line belongs to transaction i/n.
	lines := 0
	touched := map[int]map[int32]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var state, prefix, k, v string
		var p int
		var o int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %s %d %d %s %s", &state, &prefix, &p, &o, &k, &v); err != nil ||
			state != "out" && state != "aborted" {
			continue
		}
		pw := w.partition(int32(p))
		if state == "out" {
			pw.committed = append(pw.committed, o)
		} else {
			pw.aborted = append(pw.aborted, o)
		}
		txn := lines / n
		if touched[txn] == nil {
			touched[txn] = map[int32]bool{}
		}
		touched[txn][int32(p)] = true
		lines++
	}
	if lines != n*txns {
		t.Fatalf("the Java transactional producer wrote %d of %d records:\n%s\n%s", lines, n*txns, out, stderr.String())
	}
	for _, parts := range touched {
		for p := range parts {
			w.partition(p).transactions++
		}
	}
	return tg.finish(t, w, partitions)
}
