package compat

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/brokerproc"
)

// TestCLIAgainstKafka runs the tests of strand's Kafka-generic tools
// (topic, produce and consume, group) against a real Apache Kafka 4.x
// broker, since they claim to work with any Kafka.
func TestCLIAgainstKafka(t *testing.T) {
	t.Parallel()
	addr := realKafka(t)
	t.Run("topic", func(t *testing.T) { testTopicCLI(t, addr) })
	t.Run("records", func(t *testing.T) { testRecordCLI(t, addr) })
	t.Run("group", func(t *testing.T) { testGroupCLI(t, addr, nil) })
	t.Run("broker-configs", func(t *testing.T) { testBrokerConfigs(t, addr) })
	t.Run("group-configs", func(t *testing.T) { testGroupConfigs(t, addr) })
	t.Run("config-resources", func(t *testing.T) { testConfigResources(t, addr) })
	t.Run("features", func(t *testing.T) { testFeatures(t, addr) })
	t.Run("broker-loggers", func(t *testing.T) { testBrokerLoggers(t, addr) })
	t.Run("cluster-config", func(t *testing.T) { testClusterConfigCLI(t, addr, 1) })
	t.Run("cluster-info", func(t *testing.T) {
		wantCLI(t, strandCLI(t, addr, "cluster")("info"), true, "1 brokers", "metadata.version=", "transaction.version=")
	})
}

// realKafka starts Apache Kafka (KRaft, one node) from the jars in
// STRAND_KAFKA_LIB, or where bench/kafka/fetch.sh keeps them, and returns
// its address once it serves.
func realKafka(t *testing.T) string {
	t.Helper()
	java := needTool(t, "java", "apt-get install openjdk-17-jdk-headless")
	lib := os.Getenv("STRAND_KAFKA_LIB")
	if lib == "" {
		cache, _ := os.UserCacheDir()
		lib = filepath.Join(cache, "strand-bench", "kafka-4.4.0", "lib")
	}
	if _, err := os.Stat(filepath.Join(lib, "kafka_2.13-4.4.0.jar")); err != nil {
		missing(t, "Apache Kafka's broker jars in "+lib+" (fetch them with bench/kafka/fetch.sh, or set STRAND_KAFKA_LIB)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k := &brokerproc.Kafka{Java: java, Lib: lib, Heap: "512m", Dir: t.TempDir()}
	if _, err := k.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Stop(); err != nil {
			t.Error(err)
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		if bs, err := adm.ListBrokers(ctx); err == nil && len(bs) == 1 {
			return k.Addr()
		}
		if ctx.Err() != nil || k.Process().Exited() {
			log, _ := os.ReadFile(filepath.Join(k.Dir, "server.log"))
			t.Fatalf("Kafka did not serve at %s: %v\n%s", k.Addr(), ctx.Err(), brokerproc.LastLines(string(log), 40))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
