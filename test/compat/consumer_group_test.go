package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
	"github.com/strandlog/strand/test/librdkafkatest"
)

// Consumer groups (KIP-848) with real clients against the real binary:
// the broker assigns partitions, members join, leave and are killed, and
// the group-of-three checks hold (every partition owned once, every record
// processed, a dead member's partitions moved after the disconnect grace).

// consumerSession is the brokers' group.consumer.session.timeout.ms here,
// short so that the tests that wait out a session do not wait long.
const consumerSession = 6 * time.Second

var consumerGroupBrokerArgs = []string{"--group-consumer-session-timeout", consumerSession.String(),
	"--group-consumer-min-session-timeout", consumerSession.String(),
	"--group-consumer-heartbeat-interval", "500ms", "--group-consumer-min-heartbeat-interval", "500ms"}

func TestConsumerGroupKgo(t *testing.T) {
	t.Parallel()
	b := startBroker(t, consumerGroupBrokerArgs...)
	group := "kgo-consumer"
	runGroupOfThree(t, b, groupScenario{group: group, topic: "orders", session: consumerSession,
		start: func(name string) grouptest.Member {
			return kgoMemberOf(t, grouptest.ConsumerConfig{Name: name, Addr: b.Addr, Group: group, Topic: "orders",
				SessionTimeout: consumerSession, ServerSide: true})
		}})
}

func TestConsumerGroupJava(t *testing.T) {
	t.Parallel()
	javatest.Helper(t) // build (or skip) before starting a broker
	b := startBroker(t, consumerGroupBrokerArgs...)
	group := "java-consumer"
	runGroupOfThree(t, b, groupScenario{group: group, topic: "orders", session: consumerSession,
		start: func(name string) grouptest.Member {
			return javaMember(t, b.Addr, "orders", group, name, "group.protocol=consumer")
		}})
}

func TestConsumerGroupLibrdkafka(t *testing.T) {
	t.Parallel()
	librdkafkatest.Python(t)
	b := startBroker(t, consumerGroupBrokerArgs...)
	group := "librdkafka-consumer"
	runGroupOfThree(t, b, groupScenario{group: group, topic: "orders", session: consumerSession,
		start: func(name string) grouptest.Member {
			return librdkafkatest.GroupMember(t, b.Addr, "orders", group, name, "consumer")
		}, produce: []kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression())}})
}

// TestConsumerGroupRegexKgo: a franz-go member subscribed by pattern gets
// a topic created after it joined.
func TestConsumerGroupRegexKgo(t *testing.T) {
	t.Parallel()
	b := startBroker(t, consumerGroupBrokerArgs...)
	ctx := groupCtx(t, time.Minute)
	createTopic(t, b.Addr, "regex-a", 2, nil)
	createTopic(t, b.Addr, "other", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("regex"), kgo.ConsumeTopics("regex-.*"),
		kgo.ConsumeRegex(), kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	seen := map[string]bool{}
	waitFor := func(topic string) time.Duration {
		t.Helper()
		start := time.Now()
		for !seen[topic] {
			if ctx.Err() != nil {
				t.Fatalf("no record of %s consumed in a minute (seen %v)", topic, seen)
			}
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { seen[r.Topic] = true })
		}
		return time.Since(start)
	}
	for _, topic := range []string{"regex-a", "other"} {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("regex-a")
	createTopic(t, b.Addr, "regex-b", 3, nil)
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "regex-b", Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	took := waitFor("regex-b")
	t.Logf("a topic created after the member joined was consumed after %v", took.Round(time.Millisecond))
	if seen["other"] {
		t.Errorf("consumed a topic the pattern does not match")
	}
	ds, err := kadm.NewClient(prod).DescribeConsumerGroups(ctx, "regex")
	if err != nil {
		t.Fatal(err)
	}
	d := ds["regex"]
	// franz-go sends its patterns as one, matched anywhere in a name.
	const want = ".*(?:(?:regex-.*)).*"
	if d.Err != nil || len(d.Members) != 1 || d.Members[0].SubscribedTopicRegex == nil || *d.Members[0].SubscribedTopicRegex != want {
		t.Fatalf("described %+v (err %v), want one member subscribed to %s", d.Members, d.Err, want)
	}
	if got := len(d.Members[0].Assignment["regex-a"]) + len(d.Members[0].Assignment["regex-b"]); got != 5 {
		t.Errorf("member assigned %d partitions, want regex-a's 2 and regex-b's 3", got)
	}

	// A pattern matches internal topics too, as Kafka's coordinator
	// matches them: a member of another group gets __consumer_offsets.
	// (franz-go's own matching leaves internal topics out, and it joins
	// once a topic matches: regex-a.)
	topics, err := kadm.NewClient(prod).ListTopicsWithInternal(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	offsetsPartitions := len(topics["__consumer_offsets"].Partitions)
	internal, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("internal-regex"), kgo.ConsumeTopics("regex-a", "__consumer_off.*"),
		kgo.ConsumeRegex(), kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	if err != nil {
		t.Fatal(err)
	}
	defer internal.Close()
	testutil.Eventually(t, 30*time.Second, func() error {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		internal.PollFetches(pctx)
		cancel()
		ds, err := kadm.NewClient(prod).DescribeConsumerGroups(ctx, "internal-regex")
		if err != nil {
			return err
		}
		d := ds["internal-regex"]
		if len(d.Members) != 1 || len(d.Members[0].Assignment["__consumer_offsets"]) != offsetsPartitions {
			return fmt.Errorf("members %+v, want one assigned the %d partitions of __consumer_offsets", d.Members, offsetsPartitions)
		}
		return nil
	})
}
