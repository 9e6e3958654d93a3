package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
	"github.com/strandlog/strand/test/librdkafkatest"
)

// clusterRecords is how many records each client produces in
// TestClusterClients.
const clusterRecords = 600

// TestClusterClients runs every client against three brokers, each client
// with its own topic of six partitions led by all three brokers (checked
// by every broker's metadata) and given one broker's address only, a
// different one for its producer and its consumer. Each produces keyed
// records (key-(i%7), which land on five of the six partitions and on
// every leader), and reads everything back; every acknowledged record must
// be read once, at the partition and offset it was acknowledged at, in
// offset order per partition:
//   - franz-go: an idempotent producer, a group consumer (grouptest's);
//   - the Java client: KafkaProducer at its defaults (idempotent,
//     acks=all), a KafkaConsumer in a group, and the AdminClient
//     (ClusterAdmin.java: describeCluster lists three nodes, createTopics,
//     describeTopics with leaders on every node, deleteTopics);
//   - librdkafka through kcat: produce (the delivery reports name the
//     partition's leader), consume each partition, -L listing three brokers
//     and the leaders the brokers list;
//   - librdkafka through confluent-kafka (test/python/cluster_librdkafka.py):
//     an idempotent Producer, a Consumer in a group that commits, and the
//     metadata;
//   - kafka-python: KafkaProducer (acks=all) with an assign-style consumer
//     (roundtrip.py), a group consumer (group_consume.py), and
//     KafkaAdminClient (cluster_admin.py: describe_cluster lists three
//     brokers, create, describe, delete).
//
// Group consumers close cleanly at the end, so their group's committed
// offsets must be the topic's end offsets.
func TestClusterClients(t *testing.T) {
	c := startCluster(t)
	t.Run("franz-go", func(t *testing.T) {
		const topic = "kgo-cluster"
		leaders := c.spreadTopic(t, 0, topic)
		t.Logf("%s leaders %v; produced through broker 0, consumed through broker 1", topic, leaders)
		ctx := groupCtx(t, 90*time.Second)
		cl := client(t, c.seed(0), kgo.DefaultProduceTopic(topic))
		rs := make([]*kgo.Record, clusterRecords)
		for i := range rs {
			rs[i] = &kgo.Record{Key: []byte(helperKey(i)), Value: []byte(helperValue(i))}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("producing through broker 0 alone: %v", err)
		}
		h := helperOutput{acked: map[int]rec{}}
		for i, r := range rs {
			h.acked[i] = rec{P: r.Partition, O: r.Offset, K: string(r.Key), V: string(r.Value)}
		}
		acked := checkAcked(t, h, clusterRecords)
		checkEveryLeader(t, acked, leaders)
		m := kgoMember(t, c.seed(1), topic, topic, topic+"-0")
		readByGroup(t, ctx, c, topic, topic, acked, m)
	})

	t.Run("java", func(t *testing.T) {
		javatest.Helper(t)
		const topic = "java-cluster"
		leaders := c.spreadTopic(t, 1, topic)
		t.Logf("%s leaders %v; produced through broker 1, consumed through broker 2", topic, leaders)
		ctx := groupCtx(t, 2*time.Minute)
		r := runJava(t, 2*time.Minute, "produce", c.seed(1), topic, fmt.Sprint(clusterRecords))
		if r.err != nil {
			t.Fatalf("Java producer failed: %v", r)
		}
		acked := checkAcked(t, parseHelper(t, r.stdout), clusterRecords)
		checkEveryLeader(t, acked, leaders)
		m := javaMember(t, c.seed(2), topic, topic, topic+"-0")
		readByGroup(t, ctx, c, topic, topic, acked, m)
		for _, rr := range readAll(t, c.seed(0), topic) {
			if rr.ProducerID < 0 {
				t.Fatalf("record %d/%d has no producer id: the default (idempotent) producer did not get one", rr.Partition, rr.Offset)
			}
		}
	})

	t.Run("java-admin", func(t *testing.T) {
		java, cp := javatest.Helper(t)
		r := run(2*time.Minute, "", "", java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp,
			"strandlog.compat.ClusterAdmin", c.seed(2), "java-admin-cluster", fmt.Sprint(clusterBrokers),
			fmt.Sprint(clusterPartitions))
		checkSteps(t, r, []string{"describeCluster", "createTopics", "describeTopics", "deleteTopics",
			"listTopicsAfterDelete", "describeTopicsAfterDelete"})
	})

	t.Run("kcat", func(t *testing.T) {
		kcat := needKcat(t)
		const topic = "kcat-cluster"
		leaders := c.spreadTopic(t, 2, topic)
		t.Logf("%s leaders %v; produced through broker 2, consumed through broker 0", topic, leaders)
		acked := kcatProduce(t, kcat, c.seed(2), topic, leaders)
		checkEveryLeader(t, acked, leaders)
		var got []rec
		for p := range int32(clusterPartitions) {
			got = append(got, kcatRecs(t, kcatConsume(t, kcat, c.seed(0), topic, int(p), "%p %o %k %s\n"))...)
		}
		checkReadBack(t, "kcat -C -p", acked, got)
		if d := sameRecs(asRecs(readAll(t, c.seed(1), topic)), acked); d != "" {
			t.Errorf("franz-go reads other records than kcat had acknowledged: %s", d)
		}
		kcatClusterMetadata(t, kcat, c, topic, leaders)
	})

	t.Run("confluent-kafka", func(t *testing.T) {
		python := librdkafkatest.Python(t)
		const topic = "librdkafka-cluster"
		leaders := c.spreadTopic(t, 0, topic)
		t.Logf("%s leaders %v; produced through broker 0, consumed through broker 1", topic, leaders)
		r := run(2*time.Minute, pythonDir, "", python, "cluster_librdkafka.py", "produce", c.seed(0), topic,
			fmt.Sprint(clusterRecords), "enable.idempotence=true")
		if r.err != nil {
			t.Fatalf("confluent-kafka producer failed: %v", r)
		}
		acked := checkAcked(t, parseHelper(t, r.stdout), clusterRecords)
		checkEveryLeader(t, acked, leaders)
		r = run(2*time.Minute, pythonDir, "", python, "cluster_librdkafka.py", "consume", c.seed(1), topic, topic,
			fmt.Sprint(clusterRecords), "compat.deadline.ms=60000")
		if r.err != nil {
			t.Fatalf("confluent-kafka consumer failed: %v", r)
		}
		h := parseHelper(t, r.stdout)
		checkReadBack(t, "confluent-kafka Consumer", acked, h.records)
		if want := checksum(acked); h.sum != want {
			t.Errorf("checksum %s, want %s", h.sum, want)
		}
		ctx := groupCtx(t, 30*time.Second)
		checkCommitted(t, ctx, grouptest.Admin(t, c.seed(2)), topic, topic, producedOf(acked).Ends())

		r = run(time.Minute, pythonDir, "", python, "cluster_librdkafka.py", "metadata", c.seed(2), topic)
		if r.err != nil {
			t.Fatalf("confluent-kafka metadata: %v", r)
		}
		brokers, got := map[int32]string{}, map[int32]int32{}
		for line := range strings.Lines(r.stdout) {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "broker":
				id, _ := strconv.Atoi(f[1])
				brokers[int32(id)] = f[2]
			case len(f) == 3 && f[0] == "partition":
				p, _ := strconv.Atoi(f[1])
				l, _ := strconv.Atoi(f[2])
				got[int32(p)] = int32(l)
			}
		}
		checkBrokerList(t, "confluent-kafka metadata", c, brokers)
		if !maps.Equal(got, leaders) {
			t.Errorf("confluent-kafka metadata lists leaders %v, the brokers %v", got, leaders)
		}
	})

	t.Run("kafka-python", func(t *testing.T) {
		needKafkaPython(t)
		const topic = "python-cluster"
		leaders := c.spreadTopic(t, 1, topic)
		t.Logf("%s leaders %v; produced and read assign-style through broker 1, by the group through broker 2", topic, leaders)
		ctx := groupCtx(t, 2*time.Minute)
		r := run(2*time.Minute, pythonDir, "", systemPython, "roundtrip.py", "--bootstrap", c.seed(1), "--topic", topic,
			"-n", fmt.Sprint(clusterRecords))
		if r.err != nil {
			t.Fatalf("roundtrip.py failed: %v", r)
		}
		h := parseHelper(t, r.stdout)
		acked := checkAcked(t, h, clusterRecords)
		checkEveryLeader(t, acked, leaders)
		if d := sameRecs(h.records, acked); d != "" {
			t.Errorf("kafka-python's assign-style consumer read other records than were acknowledged: %s", d)
		}
		m := pythonMember(t, c.seed(2), topic, topic, topic+"-0")
		readByGroup(t, ctx, c, topic, topic, acked, m)
	})

	t.Run("kafka-python-admin", func(t *testing.T) {
		needKafkaPython(t)
		r := run(2*time.Minute, pythonDir, "", systemPython, "cluster_admin.py", "--bootstrap", c.seed(0),
			"--topic", "python-admin-cluster", "--nodes", fmt.Sprint(clusterBrokers),
			"--partitions", fmt.Sprint(clusterPartitions))
		checkSteps(t, r, []string{"describe_cluster", "create_topics", "describe_topics", "delete_topics",
			"list_topics_after_delete"})
	})
}

// readByGroup waits until group member m (alone in group) processed every
// acknowledged record, stops it, and checks it read each once, in order,
// and committed the end offsets on closing.
func readByGroup(t *testing.T, ctx context.Context, c *cluster, group, topic string, acked []rec, m grouptest.Member) {
	t.Helper()
	grouptest.WaitProcessed(t, ctx, producedOf(acked), m)
	if err := m.Stop(); err != nil {
		t.Error(err)
	}
	checkReadBack(t, m.Name(), acked, processedRecs(m.Log()))
	checkCommitted(t, ctx, grouptest.Admin(t, c.seed(0)), group, topic, producedOf(acked).Ends())
}

var kcatDeliveredRE = regexp.MustCompile(`^% Message delivered to partition (\d+) \(offset (\d+)\) on broker (\d+)`)

// kcatProduce sends clusterRecords keyed records with kcat -P (helperKey
// and helperValue) and returns them as acknowledged: kcat reports each
// delivery (-v -v) with partition, offset and broker but not which record
// it was. librdkafka reports a partition's deliveries in the order it sent
// them, and its default partitioner (consistent_random) puts a key on
// CRC-32(key) mod partitions, so the k-th report for partition p is the
// k-th record sent there. Each delivery must come from the partition's
// leader.
func kcatProduce(t *testing.T, kcat, addr, topic string, leaders map[int32]int32) []rec {
	t.Helper()
	var in strings.Builder
	for i := range clusterRecords {
		fmt.Fprintf(&in, "%s:%s\n", helperKey(i), helperValue(i))
	}
	r := mustRun(t, kcatTimeout, "", in.String(), kcat, "-P", "-b", addr, "-t", topic, "-K:", "-v", "-v")
	delivered := map[int32][]int64{}
	n := 0
	for line := range strings.Lines(r.stderr) {
		m := kcatDeliveredRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		p, _ := strconv.Atoi(m[1])
		o, _ := strconv.ParseInt(m[2], 10, 64)
		b, _ := strconv.Atoi(m[3])
		if leaders[int32(p)] != int32(b) {
			t.Errorf("kcat: delivered to partition %d by broker %d, whose leader is %d", p, b, leaders[int32(p)])
		}
		delivered[int32(p)] = append(delivered[int32(p)], o)
		n++
	}
	if n != clusterRecords {
		t.Fatalf("kcat reported %d deliveries, want %d: %v", n, clusterRecords, r)
	}
	h := helperOutput{acked: map[int]rec{}}
	next := map[int32]int{}
	for i := range clusterRecords {
		p := int32(crc32.ChecksumIEEE([]byte(helperKey(i))) % clusterPartitions)
		k := next[p]
		next[p]++
		if k >= len(delivered[p]) {
			t.Fatalf("kcat: record %d (%s) belongs on partition %d, which had only %d deliveries: %v",
				i, helperKey(i), p, len(delivered[p]), delivered)
		}
		h.acked[i] = rec{P: p, O: delivered[p][k], K: helperKey(i), V: helperValue(i)}
	}
	return checkAcked(t, h, clusterRecords)
}

// kcatRecs parses "%p %o %k %s" lines.
func kcatRecs(t *testing.T, out string) []rec {
	t.Helper()
	var recs []rec
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("kcat printed %q, want partition offset key value", line)
		}
		p, _ := strconv.Atoi(f[0])
		o, _ := strconv.ParseInt(f[1], 10, 64)
		recs = append(recs, rec{P: int32(p), O: o, K: f[2], V: f[3]})
	}
	return recs
}

// kcatMetadata is what kcat -L -J prints, in part.
type kcatMetadata struct {
	Brokers []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []kcatTopic `json:"topics"`
}

type kcatTopic struct {
	Topic      string `json:"topic"`
	Partitions []struct {
		Partition int32 `json:"partition"`
		Leader    int32 `json:"leader"`
	} `json:"partitions"`
}

// kcatClusterMetadata checks kcat -L lists the three brokers at their
// addresses and topic with the leaders the brokers list.
func kcatClusterMetadata(t *testing.T, kcat string, c *cluster, topic string, leaders map[int32]int32) {
	t.Helper()
	r := mustRun(t, kcatTimeout, "", "", kcat, "-L", "-J", "-b", c.seed(1))
	var md kcatMetadata
	if err := json.Unmarshal([]byte(r.stdout), &md); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, r.stdout)
	}
	brokers := map[int32]string{}
	for _, b := range md.Brokers {
		brokers[b.ID] = b.Name
	}
	checkBrokerList(t, "kcat -L", c, brokers)
	i := slices.IndexFunc(md.Topics, func(tp kcatTopic) bool { return tp.Topic == topic })
	if i < 0 {
		t.Fatalf("kcat -L does not list %s: %s", topic, r.stdout)
	}
	got := map[int32]int32{}
	for _, p := range md.Topics[i].Partitions {
		got[p.Partition] = p.Leader
	}
	if !maps.Equal(got, leaders) {
		t.Errorf("kcat -L lists leaders %v, the brokers %v", got, leaders)
	}
	// The human-readable listing too.
	r = mustRun(t, kcatTimeout, "", "", kcat, "-L", "-b", c.seed(0), "-t", topic)
	if !strings.Contains(r.stdout, fmt.Sprintf(" %d brokers:", clusterBrokers)) {
		t.Errorf("kcat -L does not list %d brokers:\n%s", clusterBrokers, r.stdout)
	}
}

// checkBrokerList checks a client's metadata names every broker at its
// address.
func checkBrokerList(t *testing.T, who string, c *cluster, brokers map[int32]string) {
	t.Helper()
	want := map[int32]string{}
	for i, p := range c.Procs {
		want[int32(i)] = p.Addr
	}
	if !maps.Equal(brokers, want) {
		t.Errorf("%s lists brokers %v, want %v", who, brokers, want)
	}
}
