package link

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/brokerproc"
	"github.com/strandlog/strand/internal/testutil"
)

// kafkaTools returns the java executable and the directory of Kafka's
// jars: STRAND_KAFKA_LIB, or where bench/kafka/fetch.sh keeps them.
func kafkaTools(t *testing.T) (java, lib string) {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		testutil.Missing(t, "java not found (install: apt-get install openjdk-17-jdk-headless)")
	}
	lib = os.Getenv("STRAND_KAFKA_LIB")
	if lib == "" {
		cache, _ := os.UserCacheDir()
		lib = filepath.Join(cache, "strand-bench", "kafka-4.4.0", "lib")
	}
	if _, err := os.Stat(filepath.Join(lib, "kafka_2.13-4.4.0.jar")); err != nil {
		testutil.Missing(t, "Apache Kafka's broker jars in "+lib+" (fetch them with bench/kafka/fetch.sh, or set STRAND_KAFKA_LIB)")
	}
	return java, lib
}

// kafkaCluster is Apache Kafka, one node or three, each a KRaft
// controller and broker in one JVM, numbered from 0 (a single node is
// node 1, as brokerproc numbers it).
type kafkaCluster struct {
	t     *testing.T
	java  string
	lib   string
	nodes []*kafkaNode
}

type kafkaNode struct {
	id    int32
	kafka *brokerproc.Kafka
	mu    sync.Mutex
	proc  *brokerproc.Process // the JVM: the first one, or a restart's; guarded by mu
}

// kafkaHeap is each node's heap: enough for the tests' small topics,
// small enough for three nodes beside the tests on this machine.
const kafkaHeap = "384m"

// Each start has this long to serve: Kafka takes 10 to 20 s to start
// here, longer when three nodes start at once on two cores.
const kafkaStartTimeout = 2 * time.Minute

// startKafka starts Apache Kafka with n nodes (1 or 3) and returns once
// every node is registered and serves; they stop when the test ends.
// props are more server.properties, over kafkaGroupProps. kafkaGroupProps make consumer groups (KIP-848) heartbeat every 500 ms,
// as the classic members of the tests do, instead of Kafka's 5 s.
var kafkaGroupProps = map[string]string{
	"group.consumer.min.heartbeat.interval.ms": "100",
	"group.consumer.heartbeat.interval.ms":     "500",
	"group.consumer.min.session.timeout.ms":    "1000",
	"group.consumer.session.timeout.ms":        "10000",
}

func startKafka(t *testing.T, n int, props map[string]string) *kafkaCluster {
	t.Helper()
	merged := maps.Clone(kafkaGroupProps)
	maps.Copy(merged, props)
	if n != 1 && n != 3 {
		t.Fatalf("a Kafka cluster of %d nodes: 1 or 3", n)
	}
	java, lib := kafkaTools(t)
	c := &kafkaCluster{t: t, java: java, lib: lib}
	port := func() int {
		_, p, _ := net.SplitHostPort(testutil.FreePort(t))
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	dir := t.TempDir()
	var voters []string
	for i := range n {
		k := &brokerproc.Kafka{Java: java, Lib: lib, Heap: kafkaHeap, Dir: filepath.Join(dir, fmt.Sprintf("kafka-%d", i)),
			Node: i, Port: port(), ControllerPort: port(), Props: merged}
		if n == 1 {
			// A single node is node 1 with no cluster id given: brokerproc
			// then keeps the internal topics at one replica, one in sync.
			k.Node = 1
		}
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", k.Node, k.ControllerPort))
		c.nodes = append(c.nodes, &kafkaNode{id: int32(k.Node), kafka: k})
	}
	clusterID := ""
	if n > 1 {
		clusterID = brokerproc.NewClusterID()
	}
	for _, nd := range c.nodes {
		nd.kafka.Voters = strings.Join(voters, ",")
		nd.kafka.ClusterID = clusterID
	}
	t.Cleanup(c.stop)

	ctx, cancel := context.WithTimeout(context.Background(), kafkaStartTimeout)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range c.nodes {
		wg.Go(func() {
			if _, err := nd.kafka.Start(ctx); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", nd.id, err)
				return
			}
			nd.mu.Lock()
			nd.proc = nd.kafka.Process()
			nd.mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	c.waitBrokers(n)
	// The cleaner looks for work every 100 ms instead of every 15 s.
	adm := kadm.NewClient(c.client())
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: kmsg.StringPtr("100")}})
	if err == nil && len(resps) == 1 {
		err = resps[0].Err
	}
	if err != nil {
		t.Fatalf("setting log.cleaner.backoff.ms: %v", err)
	}
	return c
}

// Addrs are the nodes' client addresses, in node order.
func (c *kafkaCluster) Addrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.kafka.Addr())
	}
	return out
}

// Bootstrap is every node's address, as a bootstrap.servers list.
func (c *kafkaCluster) Bootstrap() string { return strings.Join(c.Addrs(), ",") }

// target is where workloads write on this cluster: topics replicated on
// up to three nodes.
func (c *kafkaCluster) target() target {
	return target{bootstrap: c.Bootstrap(), replicas: int16(min(3, len(c.nodes)))}
}

// client is a franz-go client seeded with every node, closed when the
// test ends.
func (c *kafkaCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

func (c *kafkaCluster) node(id int32) *kafkaNode {
	c.t.Helper()
	for _, nd := range c.nodes {
		if nd.id == id {
			return nd
		}
	}
	c.t.Fatalf("no Kafka node %d", id)
	return nil
}

func (nd *kafkaNode) running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.proc != nil && !nd.proc.Exited()
}

// Kill ends node id with SIGKILL, as a crash would.
func (c *kafkaCluster) Kill(id int32) {
	c.t.Helper()
	nd := c.node(id)
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if err := nd.proc.Kill(); err != nil {
		c.t.Fatalf("kill Kafka node %d: %v", id, err)
	}
}

// Restart starts a killed node again on its data and returns once the
// cluster lists it. brokerproc's Start formats the storage, which Kafka
// refuses for a formatted directory, so this runs the JVM itself with the
// files that Start wrote.
func (c *kafkaCluster) Restart(id int32) {
	c.t.Helper()
	nd := c.node(id)
	if nd.running() {
		c.t.Fatalf("restart of Kafka node %d, which runs", id)
	}
	dir := nd.kafka.Dir
	args := []string{"-Xmx" + kafkaHeap, "-Xms" + kafkaHeap, "-XX:+UseG1GC", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(dir, "log4j2.properties"),
		"-cp", filepath.Join(c.lib, "*"), "kafka.Kafka", filepath.Join(dir, "server.properties")}
	proc, err := brokerproc.Start(c.java, args, dir, filepath.Join(dir, "stdout-restart.log"), nil)
	if err != nil {
		c.t.Fatalf("restart Kafka node %d: %v", id, err)
	}
	nd.mu.Lock()
	nd.proc = proc
	nd.mu.Unlock()
	c.waitBrokers(len(c.nodes))
}

// waitBrokers waits until a live node's metadata lists n brokers, each
// live node answering.
func (c *kafkaCluster) waitBrokers(n int) {
	c.t.Helper()
	testutil.Eventually(c.t, kafkaStartTimeout, func() error {
		for _, nd := range c.nodes {
			nd.mu.Lock()
			exited := nd.proc != nil && nd.proc.Exited()
			nd.mu.Unlock()
			if exited {
				log, _ := os.ReadFile(filepath.Join(nd.kafka.Dir, "server.log"))
				c.t.Fatalf("Kafka node %d exited:\n%s", nd.id, brokerproc.LastLines(string(log), 40))
			}
		}
		for _, nd := range c.nodes {
			md, err := metadata(nd.kafka.Addr(), nil)
			if err != nil {
				return fmt.Errorf("node %d: %w", nd.id, err)
			}
			if len(md.Brokers) != n {
				return fmt.Errorf("node %d lists %d brokers, want %d", nd.id, len(md.Brokers), n)
			}
		}
		return nil
	})
}

// metadata asks the broker at addr itself (a client would answer from
// its cache), for topics, or for none.
func metadata(addr string, topics []string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, cl.SeedBrokers()[0])
}

// Leader is the partition's leader as a running node's metadata names
// it, -1 when it names none.
func (c *kafkaCluster) Leader(topic string, partition int32) (int32, error) {
	var last error
	for _, nd := range c.nodes {
		if !nd.running() {
			continue
		}
		md, err := metadata(nd.kafka.Addr(), []string{topic})
		if err != nil {
			last = err
			continue
		}
		for _, mt := range md.Topics {
			for _, p := range mt.Partitions {
				if p.Partition == partition {
					return p.Leader, nil
				}
			}
		}
		return -1, fmt.Errorf("node %d has no partition %s/%d", nd.id, topic, partition)
	}
	return -1, fmt.Errorf("no running node answered: %v", last)
}

// coordinator is the node coordinating group as a running node answers
// FindCoordinator, -1 when none answers with one.
func (c *kafkaCluster) coordinator(group string) int32 {
	c.t.Helper()
	for _, nd := range c.nodes {
		if !nd.running() {
			continue
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(nd.kafka.Addr()))
		if err != nil {
			c.t.Fatal(err)
		}
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		cl.Close()
		if err != nil {
			continue
		}
		if len(resp.Coordinators) == 1 { // v4+
			resp.ErrorCode, resp.NodeID = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID
		}
		if resp.ErrorCode == 0 {
			return resp.NodeID
		}
	}
	return -1
}

// stop kills every node still running, at once: the test has no use for
// a clean shutdown, which takes seconds (longer for a node whose quorum
// is gone).
func (c *kafkaCluster) stop() {
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		nd.mu.Lock()
		proc := nd.proc
		nd.mu.Unlock()
		if proc == nil || proc.Exited() {
			continue
		}
		wg.Go(func() {
			if err := proc.Kill(); err != nil {
				c.t.Errorf("stop Kafka node %d: %v", nd.id, err)
			}
		})
	}
	wg.Wait()
	if c.t.Failed() {
		for _, nd := range c.nodes {
			log, _ := os.ReadFile(filepath.Join(nd.kafka.Dir, "server.log"))
			c.t.Logf("Kafka node %d, last lines of server.log:\n%s", nd.id, brokerproc.LastLines(string(log), 15))
		}
	}
}
