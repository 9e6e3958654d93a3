package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// TestHealthMetrics: /metrics gives what Kafka operators alert on, with
// Kafka's meanings. Three brokers, a topic of three replicas and
// min.insync.replicas 3, and one of a single replica on broker 2. With
// broker 2 stopped, the live brokers' under-replicated and under-min-ISR
// partitions sum to the first topic's partitions, the active controller
// alone says so and counts the second topic's partition offline and one
// broker down, and exactly one broker is the active controller.
func TestHealthMetrics(t *testing.T) {
	// Slow: a broker of three stops, and the followers' lag (1 s) must pass before the metrics can say so.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	c := testutil.StartCluster(t, 3, 0, func(_ int, cfg *config.Broker) {
		cfg.AdminListen = "127.0.0.1:0"
		cfg.ReplicaLagTime = time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.Brokers[0].Addr))
	if _, err := adm.CreateTopic(ctx, 4, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("3")}, "wide"); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "narrow", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{2}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, newClient(t, c.Brokers[0].Addr)); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("creating narrow on broker 2: %v %+v", err, resp)
	}
	sample := func(i int, name string) (float64, bool) {
		return grouptest.Sample(grouptest.Scrape(t, c.Brokers[i].Server().AdminAddr().String()), name, nil)
	}
	sum := func(name string, brokers ...int) (total float64) {
		for _, i := range brokers {
			v, _ := sample(i, name)
			total += v
		}
		return total
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := sum("strand_leader_partitions", 0, 1, 2); n != 5 {
			return fmt.Errorf("%v partitions led, want 5", n)
		}
		if n := sum("strand_under_replicated_partitions", 0, 1, 2); n != 0 {
			return fmt.Errorf("%v under-replicated with every broker up", n)
		}
		return nil
	})
	c.Brokers[2].Stop(t)
	testutil.Eventually(t, 45*time.Second, func() error {
		if n := sum("strand_active_controller", 0, 1); n != 1 {
			return fmt.Errorf("%v active controllers", n)
		}
		if n := sum("strand_under_replicated_partitions", 0, 1); n != 4 {
			return fmt.Errorf("%v under-replicated partitions, want 4", n)
		}
		if n := sum("strand_under_min_isr_partitions", 0, 1); n != 4 {
			return fmt.Errorf("%v under min ISR, want 4", n)
		}
		if n := sum("strand_offline_partitions", 0, 1); n != 1 {
			return fmt.Errorf("%v offline partitions, want 1", n)
		}
		if n := sum("strand_fenced_brokers", 0, 1); n != 1 {
			return fmt.Errorf("%v brokers down, want 1", n)
		}
		return nil
	})
	for i := range 2 {
		_, offline := sample(i, "strand_offline_partitions")
		active, _ := sample(i, "strand_active_controller")
		if offline != (active == 1) {
			t.Errorf("broker %d: active controller %v, exports offline partitions %v", i, active, offline)
		}
	}
}

// TestConnectionMetrics: /metrics counts the open client connections by
// listener, down to none once the clients close, and the consumers'
// fetch sessions; it gives each replica's offsets and size.
func TestConnectionMetrics(t *testing.T) {
	// Without the console, whose sampler is a client of the broker too.
	b := testutil.StartBroker(t, func(c *config.Broker) { c.AdminListen, c.AdminConsole = "127.0.0.1:0", false })
	admin := b.Server().AdminAddr().String()
	value := func(name string, labels map[string]string) float64 {
		v, _ := grouptest.Sample(grouptest.Scrape(t, admin), name, labels)
		return v
	}
	plaintext := map[string]string{"listener": "PLAINTEXT"}
	if n := value("strand_connections", plaintext); n != 0 {
		t.Fatalf("%v connections before any client", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.AllowAutoTopicCreation(), testMetadataAge, kgo.DefaultProduceTopic("counted"),
		kgo.ConsumeTopics("counted"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if fs := cl.PollFetches(ctx); fs.NumRecords() != 1 {
		t.Fatalf("fetched %d records: %v", fs.NumRecords(), fs.Errors())
	}
	if n := value("strand_connections", plaintext); n < 1 {
		t.Errorf("%v connections with a client connected", n)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := value("strand_fetch_sessions", map[string]string{"kind": "consumer"}); n != 1 {
			return fmt.Errorf("%v consumer fetch sessions", n)
		}
		return nil
	})
	// The replica's log, as Kafka's log metrics give it.
	counted := map[string]string{"topic": "counted", "partition": "0", "role": "leader"}
	for name, want := range map[string]float64{"strand_log_start_offset": 0, "strand_log_end_offset": 1, "strand_high_watermark": 1} {
		if v, ok := grouptest.Sample(grouptest.Scrape(t, admin), name, counted); !ok || v != want {
			t.Errorf("%s %v: %v (present %v), want %v", name, counted, v, ok, want)
		}
	}
	if v, _ := grouptest.Sample(grouptest.Scrape(t, admin), "strand_log_size_bytes", counted); v < 62 { // a batch of one record
		t.Errorf("strand_log_size_bytes %v: %v, want the batch's size", counted, v)
	}
	cl.Close()
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := value("strand_connections", plaintext); n != 0 {
			return fmt.Errorf("%v connections after the client closed", n)
		}
		return nil
	})
}
