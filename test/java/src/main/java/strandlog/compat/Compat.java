package strandlog.compat;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client half of Strand's compatibility suite (driven by test/compat).
 *
 * <pre>
 * produce BOOTSTRAP TOPIC N [PROP=VALUE...]  KafkaProducer with default settings (plus PROPs);
 *                                            sends key-(i%7)/value-i, prints "acked i partition offset"
 * consume BOOTSTRAP TOPIC N                  KafkaConsumer, assign + seekToBeginning on every partition;
 *                                            prints "record p o key value" in (partition, offset) order
 *                                            and "consumed N sha256=HEX"
 * admin BOOTSTRAP TOPIC                      AdminClient calls, one "STEP name OK|FAIL detail" line each
 * group-consume BOOTSTRAP TOPIC GROUP [PROP=VALUE...]
 *                                            KafkaConsumer subscribed to TOPIC in GROUP, committing like a
 *                                            service (see groupConsume); prints test/grouptest's log format
 * </pre>
 *
 * The checksum is SHA-256 over "partition:offset:key:value\n" for each record in that order.
 */
public final class Compat {
    private Compat() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            usage();
        }
        String mode = args[0], bootstrap = args[1], topic = args[2];
        switch (mode) {
            case "produce" -> {
                List<String> props = args.length > 4 ? List.of(args).subList(4, args.length) : List.of();
                produce(bootstrap, topic, Integer.parseInt(args[3]), props);
            }
            case "consume" -> consume(bootstrap, topic, Integer.parseInt(args[3]));
            case "admin" -> admin(bootstrap, topic);
            case "group-consume" -> {
                if (args.length < 4) {
                    usage();
                }
                groupConsume(bootstrap, topic, args[3], List.of(args).subList(4, args.length));
            }
            default -> usage();
        }
    }

    private static void usage() {
        System.err.println("usage: Compat produce|consume|admin|group-consume BOOTSTRAP TOPIC [N|GROUP] [PROP=VALUE...]");
        System.exit(2);
    }

    static String key(int i) {
        return "key-" + (i % 7);
    }

    static String value(int i) {
        return "value-" + i;
    }

    /** Default producer settings but for the bootstrap servers, the serializers and extra PROP=VALUE pairs. */
    static void produce(String bootstrap, String topic, int n, List<String> extra) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        for (String kv : extra) {
            int eq = kv.indexOf('=');
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, key(i), value(i))));
            }
            producer.flush();
            int failed = 0;
            for (int i = 0; i < n; i++) {
                try {
                    RecordMetadata md = acks.get(i).get();
                    System.out.printf("acked %d %d %d%n", i, md.partition(), md.offset());
                } catch (ExecutionException e) {
                    failed++;
                    System.out.printf("failed %d %s%n", i, e.getCause());
                }
            }
            System.out.printf("produced %d failed %d%n", n - failed, failed);
            System.out.flush();
            if (failed > 0) {
                System.exit(1);
            }
        }
    }

    static void consume(String bootstrap, String topic, int n) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(30));
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : infos) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (got.size() < n && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    got.add(r);
                }
            }
        }
        got.sort(Comparator.<ConsumerRecord<String, String>>comparingInt(ConsumerRecord::partition)
                .thenComparingLong(ConsumerRecord::offset));
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        for (ConsumerRecord<String, String> r : got) {
            String line = r.partition() + ":" + r.offset() + ":" + r.key() + ":" + r.value() + "\n";
            sha.update(line.getBytes(StandardCharsets.UTF_8));
            System.out.printf("record %d %d %s %s%n", r.partition(), r.offset(), r.key(), r.value());
        }
        System.out.printf("consumed %d sha256=%s%n", got.size(), HexFormat.of().formatHex(sha.digest()));
        System.out.flush();
        if (got.size() < n) {
            System.exit(1);
        }
    }

    /** Assignor names as Kafka's protocol names them, to the Java client's classes. */
    static final Map<String, String> ASSIGNORS = Map.of(
            "range", RangeAssignor.class.getName(),
            "roundrobin", RoundRobinAssignor.class.getName(),
            "sticky", StickyAssignor.class.getName(),
            "cooperative-sticky", CooperativeStickyAssignor.class.getName());

    /**
     * A group member that behaves like a service: it processes what it polls (prints it), commits what it
     * processed synchronously every compat.commit.every records (100) or compat.commit.ms (200), and when
     * partitions are revoked; it never commits a partition it no longer owns. Output is test/grouptest's log
     * format (see test/grouptest/log.go): assigned/revoked/lost/processed/committed/commitfailed/closed lines,
     * the processed lines flushed before the commit that covers them.
     *
     * <p>Settings, as PROP=VALUE arguments: compat.assignor (range, roundrobin, sticky, cooperative-sticky, a
     * comma list of those, or default for the client's default list), compat.deadline.ms (180000: then it closes
     * cleanly), compat.commit.every, compat.commit.ms; every other PROP=VALUE is a consumer property
     * (group.instance.id for static membership, session.timeout.ms, client.id, ...). It closes cleanly on
     * SIGTERM (a shutdown hook wakes the consumer up and waits for it to commit and close); SIGKILL is the
     * crash the tests want.
     */
    static void groupConsume(String bootstrap, String topic, String group, List<String> extra) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        Map<String, String> compat = new HashMap<>();
        for (String kv : extra) {
            int eq = kv.indexOf('=');
            String k = kv.substring(0, eq), v = kv.substring(eq + 1);
            if (k.startsWith("compat.")) {
                compat.put(k, v);
            } else {
                p.put(k, v);
            }
        }
        String assignor = compat.getOrDefault("compat.assignor", "default");
        if (!assignor.equals("default")) {
            List<String> classes = new ArrayList<>();
            for (String name : assignor.split(",")) {
                String c = ASSIGNORS.get(name);
                if (c == null) {
                    throw new IllegalArgumentException("unknown assignor " + name);
                }
                classes.add(c);
            }
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, String.join(",", classes));
        }
        long deadline = System.nanoTime() + Duration.ofMillis(
                Long.parseLong(compat.getOrDefault("compat.deadline.ms", "180000"))).toNanos();
        int commitEvery = Integer.parseInt(compat.getOrDefault("compat.commit.every", "100"));
        long commitNanos = Duration.ofMillis(Long.parseLong(compat.getOrDefault("compat.commit.ms", "200"))).toNanos();

        PrintStream out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
                false, StandardCharsets.UTF_8);
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        GroupMember m = new GroupMember(consumer, out);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            m.stopping = true;
            try {
                consumer.wakeup();
                main.join(20_000);
            } catch (Exception e) {
                // closed already, or interrupted: nothing more to wait for
            }
        }));
        consumer.subscribe(List.of(topic), m);
        try {
            while (!m.stopping && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    out.printf("processed %d %d %s %s%n", r.partition(), r.offset(), r.key(), r.value());
                    m.next.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                    m.since++;
                }
                out.flush();
                if (m.since >= commitEvery || System.nanoTime() - m.lastCommit >= commitNanos) {
                    m.commit(new ArrayList<>(m.next.keySet()));
                }
            }
        } catch (WakeupException e) {
            // the shutdown hook: close cleanly
        }
        m.stopping = true;
        m.commit(new ArrayList<>(m.next.keySet()));
        try {
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(10)));
        } catch (Exception e) {
            System.err.println("close: " + e);
        }
        out.printf("closed %d%n", GroupMember.micros());
        out.flush();
    }

    /** The rebalance listener and commit bookkeeping of groupConsume. */
    static final class GroupMember implements ConsumerRebalanceListener {
        final KafkaConsumer<String, String> consumer;
        final PrintStream out;
        final Map<TopicPartition, Long> next = new HashMap<>(); // owned: the next offset to process
        final Map<TopicPartition, Long> committed = new HashMap<>();
        volatile boolean stopping;
        int since;
        long lastCommit = System.nanoTime();

        GroupMember(KafkaConsumer<String, String> consumer, PrintStream out) {
            this.consumer = consumer;
            this.out = out;
        }

        static long micros() {
            Instant now = Instant.now();
            return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
        }

        static String parts(Collection<TopicPartition> ps) {
            if (ps.isEmpty()) {
                return "-";
            }
            List<Integer> l = new ArrayList<>();
            for (TopicPartition tp : ps) {
                l.add(tp.partition());
            }
            l.sort(null);
            StringBuilder b = new StringBuilder();
            for (int p : l) {
                b.append(b.length() == 0 ? "" : ",").append(p);
            }
            return b.toString();
        }

        void line(String s) {
            out.println(s);
            out.flush();
        }

        void commit(Collection<TopicPartition> only) {
            Map<TopicPartition, OffsetAndMetadata> offs = new TreeMap<>(
                    Comparator.comparingInt(TopicPartition::partition));
            for (TopicPartition tp : only) {
                Long n = next.get(tp);
                if (n != null && n > committed.getOrDefault(tp, -1L)) {
                    offs.put(tp, new OffsetAndMetadata(n));
                }
            }
            since = 0;
            lastCommit = System.nanoTime();
            if (offs.isEmpty()) {
                return;
            }
            out.flush(); // what was processed, before the commit that covers it
            for (int attempt = 0; ; attempt++) {
                try {
                    consumer.commitSync(offs, Duration.ofSeconds(10));
                    StringBuilder b = new StringBuilder();
                    for (var e : offs.entrySet()) {
                        committed.put(e.getKey(), e.getValue().offset());
                        b.append(b.length() == 0 ? "" : ",").append(e.getKey().partition()).append(':')
                                .append(e.getValue().offset());
                    }
                    line("committed " + micros() + " " + b);
                    return;
                } catch (WakeupException e) {
                    // the shutdown hook's wakeup hit the commit: stop after it, but commit first
                    stopping = true;
                    if (attempt > 0) {
                        line("commitfailed " + micros() + " " + e);
                        return;
                    }
                } catch (KafkaException e) {
                    line(("commitfailed " + micros() + " " + e.getClass().getSimpleName() + ": " + e.getMessage())
                            .replace('\n', ' '));
                    return;
                }
            }
        }

        void forget(Collection<TopicPartition> ps, String kind) {
            for (TopicPartition tp : ps) {
                next.remove(tp);
                committed.remove(tp);
            }
            line(kind + " " + micros() + " " + parts(ps));
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> ps) {
            commit(ps);
            forget(ps, "revoked");
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> ps) {
            forget(ps, "lost");
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> ps) {
            for (TopicPartition tp : ps) {
                next.remove(tp);
                committed.put(tp, -1L);
            }
            line("assigned " + micros() + " " + parts(ps));
        }
    }

    interface Step {
        String run() throws Exception;
    }

    static int failures;

    static void step(String name, Step s) {
        String line;
        try {
            line = "STEP " + name + " OK " + s.run();
        } catch (Exception e) {
            failures++;
            Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            line = "STEP " + name + " FAIL " + c.getClass().getSimpleName() + ": " + c.getMessage();
        }
        System.out.println(line.replace('\n', ' '));
        System.out.flush();
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }

    static String topicConfig(Admin admin, ConfigResource res, String name) throws Exception {
        Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
        ConfigEntry e = cfg.get(name);
        return e == null ? null : e.value();
    }

    static int partitions(Admin admin, String topic) throws Exception {
        Map<String, TopicDescription> d = admin.describeTopics(List.of(topic)).allTopicNames().get();
        return d.get(topic).partitions().size();
    }

    static void admin(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        TopicPartition p0 = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(p)) {
            step("describeCluster", () -> {
                DescribeClusterResult c = admin.describeCluster();
                int nodes = c.nodes().get().size();
                check(nodes == 1, "nodes=" + nodes);
                return "nodes=" + nodes + " controller=" + c.controller().get().id() + " clusterId=" + c.clusterId().get();
            });
            step("createTopics", () -> {
                NewTopic nt = new NewTopic(topic, 3, (short) 1)
                        .configs(Map.of("retention.ms", "3600000", "max.message.bytes", "2000000",
                                "cleanup.policy", "delete"));
                admin.createTopics(List.of(nt)).all().get();
                return topic;
            });
            step("createTopicsDuplicate", () -> {
                try {
                    admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
                } catch (ExecutionException e) {
                    check(e.getCause() instanceof org.apache.kafka.common.errors.TopicExistsException,
                            "want TopicExistsException, got " + e.getCause());
                    return "TopicExistsException";
                }
                throw new IllegalStateException("creating an existing topic succeeded");
            });
            step("listTopics", () -> {
                Set<String> names = admin.listTopics().names().get();
                check(names.contains(topic), "topic missing from " + names);
                return "contains=" + topic;
            });
            step("describeTopics", () -> {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                check(d.partitions().size() == 3, "partitions=" + d.partitions().size());
                for (var pi : d.partitions()) {
                    check(pi.leader() != null && pi.leader().id() == 0, "leader of " + pi.partition() + ": " + pi.leader());
                }
                return "partitions=" + d.partitions().size() + " topicId=" + d.topicId();
            });
            step("describeConfigs", () -> {
                String v = topicConfig(admin, res, "retention.ms");
                check("3600000".equals(v), "retention.ms=" + v);
                String m = topicConfig(admin, res, "max.message.bytes");
                check("2000000".equals(m), "max.message.bytes=" + m);
                return "retention.ms=" + v + " max.message.bytes=" + m;
            });
            step("incrementalAlterConfigs", () -> {
                Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(res, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE)));
                admin.incrementalAlterConfigs(ops).all().get();
                String v = topicConfig(admin, res, "retention.ms");
                check("7200000".equals(v), "retention.ms after SET=" + v);
                String m = topicConfig(admin, res, "max.message.bytes");
                check(!"2000000".equals(m), "max.message.bytes still 2000000 after DELETE");
                return "retention.ms=" + v + " max.message.bytes=" + m;
            });
            step("createPartitions", () -> {
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
                int n = partitions(admin, topic);
                check(n == 5, "partitions after increaseTo(5)=" + n);
                return "partitions=" + n;
            });
            step("produceForDelete", () -> {
                Properties pp = new Properties();
                pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                // Not under test here: keep this step independent of InitProducerId.
                pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
                pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
                pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
                try (KafkaProducer<String, String> pr = new KafkaProducer<>(pp)) {
                    for (int i = 0; i < 10; i++) {
                        pr.send(new ProducerRecord<>(topic, 0, key(i), value(i))).get();
                    }
                }
                return "records=10";
            });
            step("deleteRecords", () -> {
                Map<TopicPartition, DeletedRecords> d = admin.deleteRecords(
                        Map.of(p0, RecordsToDelete.beforeOffset(5))).lowWatermarks().entrySet().stream()
                        .collect(java.util.stream.Collectors.toMap(Map.Entry::getKey, e -> {
                            try {
                                return e.getValue().get();
                            } catch (Exception ex) {
                                throw new RuntimeException(ex);
                            }
                        }));
                long low = d.get(p0).lowWatermark();
                check(low == 5, "lowWatermark=" + low);
                return "lowWatermark=" + low;
            });
            step("listOffsets", () -> {
                Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e =
                        admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).all().get();
                Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> l =
                        admin.listOffsets(Map.of(p0, OffsetSpec.latest())).all().get();
                long earliest = e.get(p0).offset(), latest = l.get(p0).offset();
                check(earliest == 5 && latest == 10, "earliest=" + earliest + " latest=" + latest);
                return "earliest=" + earliest + " latest=" + latest;
            });
            step("deleteTopics", () -> {
                admin.deleteTopics(List.of(topic)).all().get();
                Set<String> names = admin.listTopics().names().get();
                check(!names.contains(topic), "topic still listed: " + names);
                return "deleted=" + topic;
            });
        }
        System.out.println("ADMIN DONE failures=" + failures);
        System.out.flush();
        System.exit(failures == 0 ? 0 : 1);
    }

    static {
        // slf4j-simple: client warnings and errors to stderr, nothing chattier.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", System.getProperty(
                "org.slf4j.simpleLogger.defaultLogLevel", "warn"));
    }
}
