package strandlog.compat;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactions with the Java client (driven by test/compat/txn_java_test.go). Every mode prints
 * machine-readable lines on stdout; anything unexpected is an "error ..." line and exit status 1.
 *
 * <pre>
 * transform BOOTSTRAP IN OUT GROUP TXNID COUNT ABORT_EVERY [PROP=VALUE...]
 *     Consume-transform-produce, exactly once: a read_committed KafkaConsumer in GROUP (subscribed to IN, no
 *     auto commit) and a transactional KafkaProducer (TXNID). Each poll is one transaction: every input record
 *     (k, v) becomes (k, v + "-out-" + txn) on OUT, and the consumed offsets go into the transaction with
 *     sendOffsetsToTransaction(offsets, consumer.groupMetadata()). Every ABORT_EVERY-th transaction (0: none)
 *     is flushed and then aborted, and the consumer seeks back to the group's committed offsets
 *     (consumer.committed(), as an EOS application does). It stops once COUNT input records are committed
 *     (by the committed offsets it knows: the input must start at offset 0). A transaction that fails (an
 *     exception other than ProducerFencedException, which ends the run) is aborted, or when even that fails
 *     the producer is replaced by a new one with the same transactional id, and the consumer goes back to the
 *     committed offsets: whether it committed is unknown, so its records are not printed.
 *       initialized                              initTransactions succeeded (init-retry DETAIL: it failed)
 *       out TXN PARTITION OFFSET KEY VALUE       a record the transaction wrote (after flush/commit)
 *       committed-txn TXN RECORDS P:NEXT,...     a committed transaction and the offsets it committed
 *       aborted-txn TXN RECORDS                  an aborted transaction
 *       failed-txn TXN DETAIL                    a failed transaction (reinit TXN DETAIL: a new producer)
 *       rewind TXN P:OFFSET,...|-                the committed offsets the consumer went back to (-1: none)
 *       done COMMITTED                           all input committed
 *     Settings: compat.deadline.ms (120000), compat.max.poll.records (10); other PROPs go to the producer or
 *     the consumer when prefixed producer. or consumer. (prefix removed).
 *
 * read-committed BOOTSTRAP TOPIC EXPECTED [PROP=VALUE...]
 *     A read_committed KafkaConsumer, assign + seekToBeginning on every partition, until it has seen EXPECTED
 *     records and its position reached the last stable offset of every partition (or it idles for
 *     compat.idle.ms, 10000, or compat.deadline.ms, 60000, passes).
 *       rec PARTITION OFFSET KEY VALUE
 *       caughtup true|false                      positions at the last stable offsets when it stopped
 *       seen N
 *
 * fence BOOTSTRAP TOPIC TXNID N
 *     Two producers with one transactional id. "STEP name OK|FAIL detail" lines (steps first-init,
 *     first-commit, first-open, lso-held, second-init, lso-released, first-fenced, second-commit) and
 *       out first-committed|first-open|second PARTITION OFFSET KEY VALUE
 *     The first producer commits N records "a-committed-i", then writes N records "a-open-i" (flushed) in a
 *     transaction it leaves open; the second producer's initTransactions must fence it and abort that
 *     transaction; the first's next send and commit must fail with ProducerFencedException or
 *     InvalidProducerEpochException; the second then commits N records "b-i". Keys are key-(i%7).
 *
 * abandon BOOTSTRAP TOPIC TXNID N [PROP=VALUE...]
 *     A transactional producer (PROPs are producer properties, such as transaction.timeout.ms) writes N records
 *     "abandoned-i" in a transaction, flushes, prints them ("out abandoned P O K V") and "abandoning", and halts
 *     the JVM: no abort, no close, as a crashed application leaves its transaction to the coordinator's timeout.
 *
 * produce-txn BOOTSTRAP TOPIC TXNID PREFIX N [PROP=VALUE...]
 *     initTransactions, then transactions of N records "PREFIX-i" each: "out PREFIX P O K V" lines for those
 *     committed, "aborted PREFIX P O K V" for those aborted (flushed first, so their records are in the log), and
 *     "produced N" with the records committed. Settings: compat.transactions (1), compat.abort.every (0: none;
 *     K: every K-th transaction is aborted); other PROPs go to the producer.
 * </pre>
 */
public final class Txn {
    private Txn() {}

    static final PrintStream OUT = new PrintStream(
            new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16), false, StandardCharsets.UTF_8);

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        int status;
        try {
            status = switch (args[0]) {
                case "transform" -> {
                    need(args, 8);
                    yield transform(args[1], args[2], args[3], args[4], args[5], Integer.parseInt(args[6]),
                            Integer.parseInt(args[7]), props(args, 8));
                }
                case "read-committed" -> {
                    need(args, 4);
                    yield readCommitted(args[1], args[2], Integer.parseInt(args[3]), props(args, 4));
                }
                case "fence" -> {
                    need(args, 5);
                    yield fence(args[1], args[2], args[3], Integer.parseInt(args[4]));
                }
                case "abandon" -> {
                    need(args, 5);
                    yield abandon(args[1], args[2], args[3], Integer.parseInt(args[4]), props(args, 5));
                }
                case "abort-hanging" -> {
                    need(args, 4);
                    yield abortHanging(args[1], args[2], args[3]);
                }
                case "produce-txn" -> {
                    need(args, 6);
                    yield produceTxn(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]), props(args, 6));
                }
                default -> {
                    usage();
                    yield 2;
                }
            };
        } catch (Exception e) {
            error("unexpected " + describe(e));
            status = 1;
        }
        OUT.flush();
        System.exit(status);
    }

    static void usage() {
        System.err.println("usage: Txn transform BOOTSTRAP IN OUT GROUP TXNID COUNT ABORT_EVERY [PROP=VALUE...]\n"
                + "       Txn read-committed BOOTSTRAP TOPIC EXPECTED [PROP=VALUE...]\n"
                + "       Txn fence BOOTSTRAP TOPIC TXNID N\n"
                + "       Txn abandon BOOTSTRAP TOPIC TXNID N [PROP=VALUE...]\n"
                + "       Txn produce-txn BOOTSTRAP TOPIC TXNID PREFIX N [PROP=VALUE...]\n"
                + "       Txn abort-hanging BOOTSTRAP TOPIC TXNID");
        System.exit(2);
    }

    static void need(String[] args, int n) {
        if (args.length < n) {
            usage();
        }
    }

    static Map<String, String> props(String[] args, int from) {
        Map<String, String> m = new HashMap<>();
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 0) {
                usage();
            }
            m.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return m;
    }

    static void line(String s) {
        OUT.println(s.replace('\n', ' '));
        OUT.flush();
    }

    static void error(String s) {
        line("error " + s);
    }

    /** An exception and its causes, "Class: message <- Class: message". */
    static String describe(Throwable e) {
        StringBuilder b = new StringBuilder();
        Set<Throwable> seen = new HashSet<>();
        for (Throwable c = e; c != null && seen.add(c); c = c.getCause()) {
            if (b.length() > 0) {
                b.append(" <- ");
            }
            b.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
        }
        return b.toString().replace('\n', ' ');
    }

    /** Whether e or one of its causes is the broker fencing a producer. */
    static boolean fenced(Throwable e) {
        Set<Throwable> seen = new HashSet<>();
        for (Throwable c = e; c != null && seen.add(c); c = c.getCause()) {
            if (c instanceof ProducerFencedException || c instanceof InvalidProducerEpochException) {
                return true;
            }
        }
        return false;
    }

    static Properties producerProps(String bootstrap, String txnID) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnID);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        return p;
    }

    static Properties consumerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return p;
    }

    static String offsets(Map<TopicPartition, ? extends Object> m) {
        if (m.isEmpty()) {
            return "-";
        }
        Map<Integer, Object> sorted = new TreeMap<>();
        for (var e : m.entrySet()) {
            Object v = e.getValue();
            sorted.put(e.getKey().partition(), v instanceof OffsetAndMetadata om ? om.offset() : v);
        }
        StringBuilder b = new StringBuilder();
        for (var e : sorted.entrySet()) {
            b.append(b.length() == 0 ? "" : ",").append(e.getKey()).append(':').append(e.getValue());
        }
        return b.toString();
    }

    /** A sent record and its acknowledgement. */
    record Sent(String key, String value, Future<RecordMetadata> ack) {}

    /** Prints "out TAG P O K V" for records whose sends completed (after a flush or commit). */
    static void printSent(String tag, List<Sent> sent) throws Exception {
        for (Sent s : sent) {
            RecordMetadata md = s.ack().get();
            OUT.printf("out %s %d %d %s %s%n", tag, md.partition(), md.offset(), s.key(), s.value());
        }
        OUT.flush();
    }

    static int transform(String bootstrap, String in, String out, String group, String txnID, int count,
            int abortEvery, Map<String, String> extra) throws Exception {
        long deadline = System.nanoTime()
                + Duration.ofMillis(Long.parseLong(extra.getOrDefault("compat.deadline.ms", "120000"))).toNanos();
        Properties pp = producerProps(bootstrap, txnID);
        Properties cp = consumerProps(bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, extra.getOrDefault("compat.max.poll.records", "10"));
        for (var e : extra.entrySet()) {
            if (e.getKey().startsWith("producer.")) {
                pp.put(e.getKey().substring("producer.".length()), e.getValue());
            } else if (e.getKey().startsWith("consumer.")) {
                cp.put(e.getKey().substring("consumer.".length()), e.getValue());
            }
        }
        // The group's committed offsets as far as this application knows them: from its commits and from
        // what it read back after an abort or a failure. The input starts at offset 0, so their sum is the
        // number of input records committed.
        Map<TopicPartition, Long> position = new HashMap<>();
        int txn = 0;
        KafkaProducer<String, String> producer = initProducer(pp, deadline);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(List.of(in), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                    line("revoked " + ps.size());
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                    line("assigned " + ps.size());
                }
            });
            while (sum(position) < count) {
                if (System.nanoTime() > deadline) {
                    error("time limit: " + sum(position) + " of " + count + " input records committed after "
                            + txn + " transactions");
                    return 1;
                }
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                txn++;
                List<Sent> sent = new ArrayList<>();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                try {
                    producer.beginTransaction();
                    for (ConsumerRecord<String, String> r : recs) {
                        String v = r.value() + "-out-" + txn;
                        sent.add(new Sent(r.key(), v, producer.send(new ProducerRecord<>(out, r.key(), v))));
                        next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                    if (abortEvery > 0 && txn % abortEvery == 0) {
                        // The records reach the log before the abort, so that readers can tell the abort from
                        // a transaction that never wrote anything.
                        producer.flush();
                        printSent(String.valueOf(txn), sent);
                        producer.abortTransaction();
                        line("aborted-txn " + txn + " " + sent.size());
                        rewind(consumer, position, txn, deadline);
                        continue;
                    }
                    producer.commitTransaction();
                } catch (Exception e) {
                    if (e instanceof ProducerFencedException) {
                        throw e; // another instance has the transactional id: this one must stop
                    }
                    // Whether the transaction committed is unknown (a commit that timed out may have
                    // completed): abort what can be aborted and go back to what the group committed.
                    line("failed-txn " + txn + " " + describe(e));
                    try {
                        producer.abortTransaction();
                    } catch (Exception e2) {
                        line("reinit " + txn + " " + describe(e2));
                        producer.close(Duration.ZERO);
                        producer = initProducer(pp, deadline);
                    }
                    rewind(consumer, position, txn, deadline);
                    continue;
                }
                printSent(String.valueOf(txn), sent);
                for (var e : next.entrySet()) {
                    position.put(e.getKey(), e.getValue().offset());
                }
                line("committed-txn " + txn + " " + sent.size() + " " + offsets(next));
            }
            line("done " + sum(position));
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
        return 0;
    }

    static long sum(Map<TopicPartition, Long> m) {
        long s = 0;
        for (long v : m.values()) {
            s += v;
        }
        return s;
    }

    /** A transactional producer after initTransactions, retried (a broker may be restarting). */
    static KafkaProducer<String, String> initProducer(Properties pp, long deadline) throws Exception {
        KafkaProducer<String, String> p = new KafkaProducer<>(pp);
        for (;;) {
            try {
                p.initTransactions();
                line("initialized");
                return p;
            } catch (org.apache.kafka.common.errors.TimeoutException e) {
                // initTransactions may be called again after a timeout
                line("init-retry " + describe(e));
            } catch (Exception e) {
                line("init-retry " + describe(e));
                p.close(Duration.ZERO);
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(500);
                p = new KafkaProducer<>(pp);
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("initTransactions did not succeed before the time limit");
            }
        }
    }

    /**
     * After an abort: the consumer goes back to the group's committed offsets (consumer.committed, so
     * OffsetFetch with require_stable for read_committed), or to the start of a partition with none.
     */
    static void rewind(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> position, int txn,
            long deadline) throws Exception {
        for (;;) {
            try {
                Set<TopicPartition> assigned = consumer.assignment();
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned,
                        Duration.ofSeconds(30));
                Map<TopicPartition, Long> rewound = new HashMap<>();
                List<TopicPartition> fromStart = new ArrayList<>();
                for (TopicPartition tp : assigned) {
                    OffsetAndMetadata om = committed.get(tp);
                    if (om == null) {
                        fromStart.add(tp);
                        rewound.put(tp, -1L);
                        position.remove(tp);
                    } else {
                        consumer.seek(tp, om);
                        rewound.put(tp, om.offset());
                        position.put(tp, om.offset());
                    }
                }
                if (!fromStart.isEmpty()) {
                    consumer.seekToBeginning(fromStart); // an empty list would mean every partition
                }
                line("rewind " + txn + " " + offsets(rewound));
                return;
            } catch (Exception e) {
                line("rewind-retry " + txn + " " + describe(e));
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }
    }

    static int readCommitted(String bootstrap, String topic, int expected, Map<String, String> extra)
            throws Exception {
        long now = System.nanoTime();
        long deadline = now + Duration.ofMillis(Long.parseLong(extra.getOrDefault("compat.deadline.ms", "60000")))
                .toNanos();
        long idle = Duration.ofMillis(Long.parseLong(extra.getOrDefault("compat.idle.ms", "10000"))).toNanos();
        Properties cp = consumerProps(bootstrap);
        for (var e : extra.entrySet()) {
            if (!e.getKey().startsWith("compat.")) {
                cp.put(e.getKey(), e.getValue());
            }
        }
        int seen = 0;
        boolean caughtUp = false;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            tps.sort(Comparator.comparingInt(TopicPartition::partition));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long last = System.nanoTime();
            while (System.nanoTime() < deadline && System.nanoTime() - last < idle) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : recs) {
                    OUT.printf("rec %d %d %s %s%n", r.partition(), r.offset(), r.key(), r.value());
                    seen++;
                }
                OUT.flush();
                if (!recs.isEmpty()) {
                    last = System.nanoTime();
                }
                if (seen >= expected) {
                    // For read_committed, endOffsets is the last stable offset.
                    Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(10));
                    caughtUp = true;
                    for (TopicPartition tp : tps) {
                        if (consumer.position(tp, Duration.ofSeconds(10)) < ends.get(tp)) {
                            caughtUp = false;
                        }
                    }
                    if (caughtUp) {
                        break;
                    }
                }
            }
        }
        line("caughtup " + caughtUp);
        line("seen " + seen);
        return 0;
    }

    interface Step {
        String run() throws Exception;
    }

    static int failures;

    static boolean step(String name, Step s) {
        String l;
        boolean ok = false;
        try {
            l = "STEP " + name + " OK " + s.run();
            ok = true;
        } catch (Exception e) {
            failures++;
            Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            l = "STEP " + name + " FAIL " + describe(c);
        }
        line(l);
        return ok;
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }

    static String key(int i) {
        return "key-" + (i % 7);
    }

    static List<Sent> sendN(KafkaProducer<String, String> p, String topic, String prefix, int n) {
        List<Sent> sent = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String v = prefix + "-" + i;
            sent.add(new Sent(key(i), v, p.send(new ProducerRecord<>(topic, key(i), v))));
        }
        return sent;
    }

    /** The last stable offset of every partition of topic. */
    static Map<Integer, Long> lso(Admin admin, String topic, int partitions) throws Exception {
        Map<TopicPartition, OffsetSpec> req = new HashMap<>();
        for (int p = 0; p < partitions; p++) {
            req.put(new TopicPartition(topic, p), OffsetSpec.latest());
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> got = admin.listOffsets(req,
                new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get();
        Map<Integer, Long> out = new TreeMap<>();
        for (var e : got.entrySet()) {
            out.put(e.getKey().partition(), e.getValue().offset());
        }
        return out;
    }

    static int fence(String bootstrap, String topic, String txnID, int n) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        ap.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        KafkaProducer<String, String> first = new KafkaProducer<>(producerProps(bootstrap, txnID));
        KafkaProducer<String, String> second = null;
        try (Admin admin = Admin.create(ap)) {
            int partitions = first.partitionsFor(topic).size();
            if (!step("first-init", () -> {
                first.initTransactions();
                return "";
            })) {
                return 1;
            }
            if (!step("first-commit", () -> {
                first.beginTransaction();
                List<Sent> sent = sendN(first, topic, "a-committed", n);
                first.commitTransaction();
                printSent("first-committed", sent);
                return "records=" + n;
            })) {
                return 1;
            }
            // The open transaction's first offset per partition: where the last stable offset must stop.
            Map<Integer, Long> openFirst = new TreeMap<>();
            Map<Integer, Long> openEnd = new TreeMap<>();
            if (!step("first-open", () -> {
                first.beginTransaction();
                List<Sent> sent = sendN(first, topic, "a-open", n);
                first.flush();
                printSent("first-open", sent);
                for (Sent s : sent) {
                    RecordMetadata md = s.ack().get();
                    openFirst.merge(md.partition(), md.offset(), Math::min);
                    openEnd.merge(md.partition(), md.offset() + 1, Math::max);
                }
                return "records=" + n + " first=" + openFirst;
            })) {
                return 1;
            }
            step("lso-held", () -> {
                Map<Integer, Long> got = lso(admin, topic, partitions);
                for (var e : openFirst.entrySet()) {
                    check(got.get(e.getKey()).equals(e.getValue()), "last stable offsets " + got
                            + ", want the open transaction's first offsets " + openFirst);
                }
                return "lso=" + got;
            });
            long t0 = System.nanoTime();
            second = new KafkaProducer<>(producerProps(bootstrap, txnID));
            KafkaProducer<String, String> b = second;
            if (!step("second-init", () -> {
                b.initTransactions();
                return "took=" + Duration.ofNanos(System.nanoTime() - t0).toMillis() + "ms";
            })) {
                return 1;
            }
            step("lso-released", () -> {
                // The fencing abort wrote a marker after the open records: the last stable offset passed them.
                Map<Integer, Long> got = lso(admin, topic, partitions);
                for (var e : openEnd.entrySet()) {
                    check(got.get(e.getKey()) > e.getValue(), "last stable offsets " + got
                            + ", want each past the aborted transaction's records and marker (ends " + openEnd + ")");
                }
                return "lso=" + got;
            });
            step("first-fenced", () -> {
                List<String> seen = new ArrayList<>();
                boolean sendFailed = false, fencedSeen = false;
                try {
                    first.send(new ProducerRecord<>(topic, key(0), "a-late-0")).get(30, java.util.concurrent.TimeUnit.SECONDS);
                    seen.add("send=ok");
                } catch (Exception e) {
                    sendFailed = true;
                    fencedSeen |= fenced(e);
                    seen.add("send=" + describe(e));
                }
                boolean endFailed = false;
                try {
                    first.commitTransaction();
                    seen.add("commit=ok");
                } catch (Exception e) {
                    endFailed = true;
                    fencedSeen |= fenced(e);
                    seen.add("commit=" + describe(e));
                }
                if (!fencedSeen) {
                    // An abortable error (InvalidProducerEpoch) lets the application abort: that must be
                    // refused as fenced too.
                    try {
                        first.abortTransaction();
                        seen.add("abort=ok");
                    } catch (Exception e) {
                        fencedSeen |= fenced(e);
                        seen.add("abort=" + describe(e));
                    }
                }
                check(sendFailed, "the fenced producer's send succeeded: " + seen);
                check(endFailed, "the fenced producer's commit succeeded: " + seen);
                check(fencedSeen, "no ProducerFencedException or InvalidProducerEpochException: " + seen);
                return String.join(" | ", seen);
            });
            step("second-commit", () -> {
                b.beginTransaction();
                List<Sent> sent = sendN(b, topic, "b", n);
                b.commitTransaction();
                printSent("second", sent);
                return "records=" + n;
            });
        } finally {
            try {
                first.close(Duration.ofSeconds(5));
            } catch (Exception e) {
                System.err.println("closing the first producer: " + describe(e));
            }
            if (second != null) {
                second.close(Duration.ofSeconds(5));
            }
        }
        line("FENCE DONE failures=" + failures);
        return failures == 0 ? 0 : 1;
    }

    static Properties producerProps(String bootstrap, String txnID, Map<String, String> extra) {
        Properties p = producerProps(bootstrap, txnID);
        p.putAll(extra);
        return p;
    }

    static int abandon(String bootstrap, String topic, String txnID, int n, Map<String, String> extra)
            throws Exception {
        KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(bootstrap, txnID, extra));
        p.initTransactions();
        p.beginTransaction();
        List<Sent> sent = sendN(p, topic, "abandoned", n);
        p.flush();
        printSent("abandoned", sent);
        line("abandoning");
        Runtime.getRuntime().halt(0);
        return 0;
    }

    static int produceTxn(String bootstrap, String topic, String txnID, String prefix, int n,
            Map<String, String> extra) throws Exception {
        Map<String, String> props = new HashMap<>(extra);
        int transactions = Integer.parseInt(props.getOrDefault("compat.transactions", "1"));
        int abortEvery = Integer.parseInt(props.getOrDefault("compat.abort.every", "0"));
        props.remove("compat.transactions");
        props.remove("compat.abort.every");
        int committed = 0;
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(bootstrap, txnID, props))) {
            p.initTransactions();
            for (int txn = 1; txn <= transactions; txn++) {
                p.beginTransaction();
                List<Sent> sent = sendN(p, topic, prefix, n);
                if (abortEvery > 0 && txn % abortEvery == 0) {
                    p.flush();
                    p.abortTransaction();
                    for (Sent s : sent) {
                        RecordMetadata md = s.ack().get();
                        OUT.printf("aborted %s %d %d %s %s%n", prefix, md.partition(), md.offset(), s.key(), s.value());
                    }
                    OUT.flush();
                    continue;
                }
                p.commitTransaction();
                printSent(prefix, sent);
                committed += n;
            }
        }
        line("produced " + committed);
        return 0;
    }

    static {
        // slf4j-simple: client warnings and errors to stderr, nothing chattier.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", System.getProperty(
                "org.slf4j.simpleLogger.defaultLogLevel", "warn"));
    }

    /**
     * What an operator does about a transaction left open (kafka-transactions.sh find-hanging and abort): finds
     * the transactional id with ListTransactions, the producers with an open transaction on each partition of
     * TOPIC with DescribeProducers, aborts each with Admin.abortTransaction (WriteTxnMarkers to the partition),
     * and checks that no open transaction is left and that read_committed end offsets reach the log end.
     */
    static int abortHanging(String bootstrap, String topic, String txnID) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        ap.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        try (Admin admin = Admin.create(ap)) {
            List<TopicPartition> tps = new ArrayList<>();
            int partitions = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
            for (int i = 0; i < partitions; i++) {
                tps.add(new TopicPartition(topic, i));
            }
            step("list-ongoing", () -> {
                for (TransactionListing l : admin.listTransactions().all().get()) {
                    if (l.transactionalId().equals(txnID)) {
                        check(l.state().toString().equals("Ongoing"), "state " + l.state());
                        return "producer=" + l.producerId() + " state=" + l.state();
                    }
                }
                throw new IllegalStateException(txnID + " not listed");
            });
            List<AbortTransactionSpec> specs = new ArrayList<>();
            step("find-hanging", () -> {
                Map<TopicPartition, PartitionProducerState> states = admin.describeProducers(tps).all().get();
                for (TopicPartition tp : tps) {
                    for (ProducerState ps : states.get(tp).activeProducers()) {
                        if (ps.currentTransactionStartOffset().isPresent()) {
                            specs.add(new AbortTransactionSpec(tp, ps.producerId(), (short) ps.producerEpoch(),
                                    ps.coordinatorEpoch().orElse(0)));
                        }
                    }
                }
                check(!specs.isEmpty(), "no partition has an open transaction");
                return "open=" + specs.size();
            });
            step("abort", () -> {
                for (AbortTransactionSpec spec : specs) {
                    admin.abortTransaction(spec).all().get();
                }
                return "aborted=" + specs.size();
            });
            step("none-open", () -> {
                Map<TopicPartition, PartitionProducerState> states = admin.describeProducers(tps).all().get();
                for (TopicPartition tp : tps) {
                    for (ProducerState ps : states.get(tp).activeProducers()) {
                        check(ps.currentTransactionStartOffset().isEmpty(),
                                tp + ": producer " + ps.producerId() + " still open at " + ps.currentTransactionStartOffset());
                    }
                }
                return "";
            });
            step("stable", () -> {
                Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                for (TopicPartition tp : tps) {
                    latest.put(tp, OffsetSpec.latest());
                }
                var committed = admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get();
                var uncommitted = admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).all().get();
                for (TopicPartition tp : tps) {
                    check(committed.get(tp).offset() == uncommitted.get(tp).offset(), tp + ": read_committed end "
                            + committed.get(tp).offset() + ", log end " + uncommitted.get(tp).offset());
                }
                return "";
            });
        }
        return failures == 0 ? 0 : 1;
    }
}
