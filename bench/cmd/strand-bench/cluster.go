package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/brokerproc"
)

// clusterBroker is a bench broker made of several processes: the suite's
// cluster mode (--cluster N) runs every workload against N brokers, and
// then measures a failover by killing one.
type clusterBroker interface {
	benchBroker
	// Size is the number of brokers.
	Size() int
	// Kill ends broker node (as its cluster numbers it) with SIGKILL.
	Kill(node int32) error
	// MemberAddr is broker i's client address.
	MemberAddr(i int) string
}

// newStrandCluster makes N `strand serve` processes, each a voter of the
// metadata quorum.
func newStrandCluster(f brokerFactory, dir string, n int, extra []string) (*memberCluster, error) {
	ports := make([]int, 2*n)
	for i := range ports {
		p, err := brokerproc.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	var voters []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i, ports[n+i]))
	}
	c := &memberCluster{}
	for i := range n {
		args := append([]string{"--node-id", fmt.Sprint(i), "--listeners", fmt.Sprintf("CONTROLLER://127.0.0.1:%d", ports[n+i]),
			"--controller-quorum-voters", strings.Join(voters, ",")}, extra...)
		c.members = append(c.members, &strandBroker{bin: f.strandBin, dataDir: filepath.Join(dir, fmt.Sprintf("data-%d", i)),
			logPath: filepath.Join(dir, fmt.Sprintf("strand-%d.log", i)), extra: args, addr: fmt.Sprintf("127.0.0.1:%d", ports[i])})
	}
	return c, nil
}

// newKafkaCluster makes N Kafka KRaft brokers, each controller and broker
// in one JVM (combined mode), the controllers forming the quorum.
func newKafkaCluster(f brokerFactory, dir string, n int) (*memberCluster, error) {
	clusterID := brokerproc.NewClusterID()
	c := &memberCluster{parallelStop: true}
	var kafkas []*brokerproc.Kafka
	var voters []string
	for i := range n {
		port, err := brokerproc.FreePort()
		if err != nil {
			return nil, err
		}
		cport, err := brokerproc.FreePort()
		if err != nil {
			return nil, err
		}
		d := filepath.Join(dir, fmt.Sprintf("kafka-%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		m := &brokerproc.Kafka{Java: f.java, Lib: f.kafkaLib, Heap: f.kafkaHeap, Dir: d,
			Node: i, Port: port, ControllerPort: cport, ClusterID: clusterID}
		kafkas = append(kafkas, m)
		c.members = append(c.members, m)
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i, cport))
	}
	for _, m := range kafkas {
		m.Voters = strings.Join(voters, ",")
	}
	return c, nil
}

// clusterMember is one broker of a cluster: a bench broker with its own
// process.
type clusterMember interface {
	benchBroker
	Process() *brokerproc.Process
}

// Process is the broker's process, nil before Start.
func (b *strandBroker) Process() *brokerproc.Process { return b.proc }

// memberCluster is what both kinds of cluster share: members started in
// turn, CPU and RSS summed over the running ones, stops, kills.
type memberCluster struct {
	members []clusterMember
	// parallelStop stops the members at once (Kafka, whose controlled
	// shutdowns take long); else one after another, so that each hands its
	// leaderships to brokers still running.
	parallelStop bool
}

func (c *memberCluster) running(m clusterMember) bool {
	p := m.Process()
	return p != nil && !p.Exited()
}

// Start starts every member in turn (a Kafka member formats its storage
// first); the start-up time counts from the first member's start.
func (c *memberCluster) Start(ctx context.Context) (time.Time, error) {
	var first time.Time
	for i, m := range c.members {
		at, err := m.Start(ctx)
		if err != nil {
			return at, err
		}
		if i == 0 {
			first = at
		}
	}
	return first, nil
}

func (c *memberCluster) Size() int    { return len(c.members) }
func (c *memberCluster) Addr() string { return c.members[0].Addr() }

func (c *memberCluster) MemberAddr(i int) string { return c.members[i].Addr() }

func (c *memberCluster) CPU() time.Duration {
	var sum time.Duration
	for _, m := range c.members {
		if c.running(m) {
			sum += m.CPU()
		}
	}
	return sum
}

func (c *memberCluster) PeakRSS() int64 {
	var sum int64
	for _, m := range c.members {
		if c.running(m) {
			sum += max(m.PeakRSS(), 0)
		}
	}
	return sum
}

func (c *memberCluster) Stop() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.members))
	for i, m := range c.members {
		if !c.running(m) {
			continue
		}
		if c.parallelStop {
			wg.Go(func() { errs[i] = m.Stop() })
		} else {
			errs[i] = m.Stop()
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *memberCluster) Kill(node int32) error { return c.members[node].Process().Kill() }

// waitBrokers waits until the cluster's metadata lists n brokers, asking
// the broker at addr itself each time (a client would answer from its
// cache).
func waitBrokers(ctx context.Context, addr string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), dialer)
	if err != nil {
		return err
	}
	defer cl.Close()
	seen := -1
	for {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.SeedBrokers()[0])
		if err == nil {
			if seen = len(resp.Brokers); seen == n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d brokers not live (%d listed): %w (last error: %v)", n, seen, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// failoverResult is the cluster's answer to a kill -9 of a partition's
// leader under a steady acks=all stream.
type failoverResult struct {
	// Ms is from the kill to the first acknowledgement of a record sent
	// after it, on the killed leader's partition.
	Ms     float64 `json:"ms"`
	Killed int32   `json:"killed"`
	Acked  int     `json:"acked"`
	Lost   int     `json:"lost"` // acknowledged records not read back
}

// measureFailover streams records (an idempotent acks=all producer, one
// every 2 ms) to one partition of a topic with a replica on every broker
// and min.insync.replicas 2, kills the partition's leader with SIGKILL, and
// times the first acknowledgement after the kill. The partition is one led
// by a broker that is not the active controller, in either system, so
// that the time is the data plane's: a controller's death adds an
// election of the metadata quorum first. Every acknowledged record must
// then be readable.
func measureFailover(ctx context.Context, b clusterBroker, configs map[string]string) (failoverResult, error) {
	var res failoverResult
	topic := "bench-failover"
	if err := createTopicRF(ctx, b.Addr(), topic, int32(b.Size()), int16(b.Size()), configs); err != nil {
		return res, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), dialer, kgo.DefaultProduceTopic(topic), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RecordDeliveryTimeout(2*time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	controller, err := quorumLeader(ctx, cl)
	if err != nil {
		return res, err
	}
	md, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return res, err
	}
	partition, leader := int32(-1), int32(-1)
	for _, p := range md[topic].Partitions.Sorted() {
		if p.Leader >= 0 && p.Leader != controller {
			partition, leader = p.Partition, p.Leader
			break
		}
	}
	if partition < 0 {
		return res, fmt.Errorf("every partition of %s is led by the controller %d", topic, controller)
	}
	res.Killed = leader

	var mu sync.Mutex
	acked := map[string]bool{}
	var killedAt, firstAfter time.Time
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			sent := time.Now()
			v := fmt.Sprintf("f%d", n)
			cl.Produce(ctx, &kgo.Record{Value: []byte(v), Partition: partition}, func(_ *kgo.Record, err error) {
				if err != nil {
					return
				}
				now := time.Now()
				mu.Lock()
				defer mu.Unlock()
				acked[v] = true
				if !killedAt.IsZero() && sent.After(killedAt) && firstAfter.IsZero() {
					firstAfter = now
				}
			})
		}
	})
	time.Sleep(2 * time.Second)
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	if err := b.Kill(leader); err != nil {
		close(stop)
		wg.Wait()
		return res, err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		mu.Lock()
		done := !firstAfter.IsZero()
		mu.Unlock()
		if done || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if err := cl.Flush(ctx); err != nil {
		return res, err
	}
	mu.Lock()
	if firstAfter.IsZero() {
		mu.Unlock()
		return res, errors.New("no acknowledgement within 90 s of the kill")
	}
	res.Ms = float64(firstAfter.Sub(killedAt).Microseconds()) / 1000
	res.Acked = len(acked)
	mu.Unlock()

	// Read everything back through a live broker.
	var seed string
	for i := range b.Size() {
		if int32(i) != leader {
			seed = b.MemberAddr(i)
			break
		}
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(seed), dialer, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return res, err
	}
	defer rd.Close()
	seen := map[string]bool{}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for len(seen) < len(acked) && rctx.Err() == nil {
		rd.PollFetches(rctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	for v := range acked {
		if !seen[v] {
			res.Lost++
		}
	}
	if res.Lost > 0 {
		return res, fmt.Errorf("%d of %d acknowledged records lost", res.Lost, len(acked))
	}
	return res, nil
}

// quorumLeader is the metadata quorum's leader, the active controller, as
// DescribeQuorum (KIP-595) names it.
func quorumLeader(ctx context.Context, cl *kgo.Client) (int32, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		return -1, fmt.Errorf("describe quorum: %+v", resp)
	}
	return resp.Topics[0].Partitions[0].LeaderID, nil
}

// clusterTopicConfigs adds min.insync.replicas 2 to a kind's topic configs:
// with a replica on every broker, an acks=all write is on two at least.
func clusterTopicConfigs(configs map[string]string) map[string]string {
	out := map[string]string{"min.insync.replicas": "2"}
	for k, v := range configs {
		out[k] = v
	}
	return out
}

// makeCluster makes a cluster of n brokers of kind.
func (f brokerFactory) makeCluster(kind, dir string, n int) (benchBroker, error) {
	switch kind {
	case "strand", "strand-nofsync":
		var extra []string
		if kind == "strand-nofsync" {
			extra = append(extra, "--fsync", "never")
		}
		return newStrandCluster(f, dir, n, extra)
	case "kafka", "kafka-flush":
		if f.kafkaLib == "" {
			return nil, errors.New("no Kafka jars: give --kafka-lib (bench/run.sh fetches them)")
		}
		return newKafkaCluster(f, dir, n)
	}
	return nil, fmt.Errorf("broker %q has no cluster mode (want strand, strand-nofsync, kafka or kafka-flush)", kind)
}
