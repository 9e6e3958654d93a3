package link

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/testutil"
)

// The official Java producer (org.apache.kafka:kafka-clients) through the
// Maven project in test/java (Compat.java's produce), built once per test
// binary: offline when .ci/run resolved its dependencies, else online.

var javaBuild struct {
	once sync.Once
	cp   string
	err  error
}

// javaHelper returns the java binary and the helper's class path.
func javaHelper(t *testing.T) (java, classpath string) {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		testutil.Missing(t, "java not found (install: apt-get install openjdk-17-jdk-headless)")
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		testutil.Missing(t, "mvn not found (install: apt-get install maven)")
	}
	javaBuild.once.Do(func() {
		dir, err := filepath.Abs(filepath.Join("..", "java"))
		if err != nil {
			javaBuild.err = err
			return
		}
		build := func(offline bool, timeout time.Duration) error {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			args := []string{"-q", "-B", "package", "-DskipTests"}
			if offline {
				args = append(args, "-o")
			}
			cmd := exec.CommandContext(ctx, mvn, args...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("mvn %v: %v\n%s", args, err, out)
			}
			return nil
		}
		if err := build(true, 5*time.Minute); err != nil {
			// Not resolved yet on this machine: fetch from Maven Central.
			t.Logf("offline Maven build failed (dependencies not in the local repository?), building online: %v", err)
			if err := build(false, 10*time.Minute); err != nil {
				javaBuild.err = fmt.Errorf("building test/java: %v", err)
				return
			}
		}
		jar := filepath.Join(dir, "target", "strand-compat.jar")
		if _, err := os.Stat(jar); err != nil {
			javaBuild.err = fmt.Errorf("building test/java: %v", err)
			return
		}
		javaBuild.cp = jar + string(os.PathListSeparator) + filepath.Join(dir, "target", "lib", "*")
	})
	if javaBuild.err != nil {
		t.Fatal(javaBuild.err)
	}
	return java, javaBuild.cp
}

// writeJava sends n records with a KafkaProducer at its defaults (so
// idempotent, acks=all) plus props, keyed key-(i%7), and records the
// offsets it acknowledged.
func writeJava(t *testing.T, tg target, topic string, partitions int32, n int, props ...string) *written {
	t.Helper()
	java, cp := javaHelper(t)
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
	java, cp := javaHelper(t)
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
