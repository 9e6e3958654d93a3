package strandlog.compat;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
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
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
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
            default -> usage();
        }
    }

    private static void usage() {
        System.err.println("usage: Compat produce|consume|admin BOOTSTRAP TOPIC [N] [PROP=VALUE...]");
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
