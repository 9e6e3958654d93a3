package strandlog.compat;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A Kafka Streams application with exactly_once_v2 (driven by test/compat/txn_streams_test.go): what an EOS
 * Streams application asks of the broker, transactions over output, changelog and repartition topics and the
 * group's offsets, in one small topology.
 *
 * <pre>
 * run BOOTSTRAP APP_ID IN OUT STATE_DIR [PROP=VALUE...]
 *     Input records on IN have values "KEY NUMBER". Each is re-keyed to KEY (a repartition topic,
 *     APP_ID-rekeyed-repartition, which Streams purges with DeleteRecords after its commits) and aggregated per
 *     KEY into a persistent (RocksDB) store "totals" (changelog APP_ID-totals-changelog, compacted, written in
 *     the transactions): the running count, the running sum of the NUMBERs and the last NUMBER. Every update
 *     goes to OUT (the store cache is off) as KEY -> "COUNT SUM LAST". processing.guarantee=exactly_once_v2,
 *     commit.interval.ms=100, replication.factor=1, state.dir=STATE_DIR, one stream thread.
 *     It runs until its standard input is closed (or compat.duration.ms passes, when set), then closes the
 *     application (KafkaStreams.close, up to 30 s) and exits: 0 when it closed without an error.
 *       state OLD NEW                                    a state change of the KafkaStreams instance
 *       running                                          it entered RUNNING
 *       restore-start STORE TOPIC PARTITION FROM TO      restoring a store from its changelog
 *       restored STORE TOPIC PARTITION RECORDS           a store restored (RECORDS read)
 *       error DETAIL                                     an uncaught exception (the client shuts down)
 *       stopping stdin|duration
 *       closed true|false                                whether close finished in time
 *     PROPs go to StreamsConfig (so producer., consumer., main.consumer. ... prefixes work); compat.duration.ms
 *     (0: until stdin is closed) is this helper's.
 * </pre>
 */
public final class Streams {
    private Streams() {}

    static final PrintStream OUT = new PrintStream(
            new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16), false, StandardCharsets.UTF_8);

    static {
        // slf4j-simple: client and Streams warnings and errors to stderr, nothing chattier.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", System.getProperty(
                "org.slf4j.simpleLogger.defaultLogLevel", "warn"));
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 6 || !args[0].equals("run")) {
            System.err.println("usage: Streams run BOOTSTRAP APP_ID IN OUT STATE_DIR [PROP=VALUE...]");
            System.exit(2);
        }
        Map<String, String> extra = new HashMap<>();
        for (int i = 6; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 0) {
                System.err.println("not PROP=VALUE: " + args[i]);
                System.exit(2);
            }
            extra.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        int status;
        try {
            status = run(args[1], args[2], args[3], args[4], args[5], extra);
        } catch (Exception e) {
            error("unexpected " + describe(e));
            status = 1;
        }
        OUT.flush();
        System.exit(status);
    }

    static synchronized void line(String s) {
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

    /** The aggregate, "COUNT SUM LAST". */
    static String add(String agg, String number) {
        String[] f = agg.split(" ");
        long n = Long.parseLong(number);
        return (Long.parseLong(f[0]) + 1) + " " + (Long.parseLong(f[1]) + n) + " " + n;
    }

    static Topology topology(String in, String out) {
        StreamsBuilder b = new StreamsBuilder();
        b.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
                .map((k, v) -> {
                    String[] f = v.split(" ");
                    if (f.length != 2) {
                        throw new IllegalArgumentException("input value not \"KEY NUMBER\": " + v);
                    }
                    return KeyValue.pair(f[0], f[1]);
                })
                .groupByKey(Grouped.with("rekeyed", Serdes.String(), Serdes.String()))
                .aggregate(() -> "0 0 -", (key, number, agg) -> add(agg, number),
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("totals")
                                .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
                .toStream()
                .to(out, Produced.with(Serdes.String(), Serdes.String()));
        return b.build();
    }

    static int run(String bootstrap, String appID, String in, String out, String stateDir, Map<String, String> extra)
            throws Exception {
        long duration = Long.parseLong(extra.getOrDefault("compat.duration.ms", "0"));
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appID);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        // Every update of the aggregate goes downstream: the output shows each increment.
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, "100");
        // A killed instance is noticed within the broker's minimum session timeout.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), "6000");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), "1000");
        p.put(StreamsConfig.producerPrefix(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG), "30000");
        p.put(StreamsConfig.producerPrefix(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG), "10000");
        for (var e : extra.entrySet()) {
            if (!e.getKey().startsWith("compat.")) {
                p.put(e.getKey(), e.getValue());
            }
        }

        AtomicInteger errors = new AtomicInteger();
        CountDownLatch stop = new CountDownLatch(1);
        KafkaStreams streams = new KafkaStreams(topology(in, out), p);
        streams.setStateListener((now, old) -> {
            line("state " + old + " " + now);
            if (now == KafkaStreams.State.RUNNING) {
                line("running");
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stop.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            errors.incrementAndGet();
            error("uncaught " + describe(e));
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long from, long to) {
                line("restore-start " + store + " " + tp.topic() + " " + tp.partition() + " " + from + " " + to);
            }

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {}

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                line("restored " + store + " " + tp.topic() + " " + tp.partition() + " " + total);
            }
        });

        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // only the end matters
                }
            } catch (IOException e) {
                // a broken stdin is a closed one
            }
            line("stopping stdin");
            stop.countDown();
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();

        streams.start();
        if (duration > 0) {
            if (!stop.await(duration, TimeUnit.MILLISECONDS)) {
                line("stopping duration");
            }
        } else {
            stop.await();
        }
        boolean closed = streams.close(Duration.ofSeconds(30));
        line("closed " + closed);
        if (streams.state() == KafkaStreams.State.ERROR && errors.get() == 0) {
            error("the application ended in state ERROR");
            errors.incrementAndGet();
        }
        return closed && errors.get() == 0 ? 0 : 1;
    }
}
