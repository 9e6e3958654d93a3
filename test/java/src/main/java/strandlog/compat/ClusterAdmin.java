package strandlog.compat;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The AdminClient against a cluster of brokers (driven by test/compat/cluster_clients_test.go).
 *
 * <pre>
 * ClusterAdmin BOOTSTRAP TOPIC NODES PARTITIONS
 * </pre>
 *
 * One "STEP name OK|FAIL detail" line per call, then "ADMIN DONE failures=N":
 * describeCluster (NODES nodes, the controller one of them), createTopics (TOPIC with PARTITIONS
 * partitions, one replica), describeTopics (every partition led, by all NODES nodes between them, each
 * partition's only replica its leader), deleteTopics, and listTopics and describeTopics after the
 * deletion (the topic gone). Metadata reaches the brokers a moment after the controller commits it, as in
 * Kafka, so the steps after a change retry for a few seconds, and say how many attempts they needed.
 */
public final class ClusterAdmin {
    private ClusterAdmin() {}

    static final long SETTLE_MS = 10_000;

    interface Attempt<T> {
        /** The result, or null to try again. */
        T get() throws Exception;
    }

    /** Runs a until it returns non-null or SETTLE_MS pass; the last failure or a null result ends it. */
    static <T> T settle(String what, Attempt<T> a) throws Exception {
        long deadline = System.nanoTime() + SETTLE_MS * 1_000_000;
        Exception last = null;
        for (int i = 1; ; i++) {
            try {
                T t = a.get();
                if (t != null) {
                    return t;
                }
                last = null;
            } catch (ExecutionException e) {
                last = e;
            }
            if (System.nanoTime() > deadline) {
                if (last != null) {
                    throw last;
                }
                throw new IllegalStateException(what + ": not so after " + i + " attempts");
            }
            Thread.sleep(100);
        }
    }

    static {
        // slf4j-simple: client warnings and errors to stderr, nothing chattier (as in Compat).
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", System.getProperty(
                "org.slf4j.simpleLogger.defaultLogLevel", "warn"));
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: ClusterAdmin BOOTSTRAP TOPIC NODES PARTITIONS");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1];
        int nodes = Integer.parseInt(args[2]), partitions = Integer.parseInt(args[3]);
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        try (Admin admin = Admin.create(p)) {
            Compat.step("describeCluster", () -> {
                DescribeClusterResult c = admin.describeCluster();
                Collection<Node> ns = c.nodes().get();
                Set<Integer> ids = new TreeSet<>();
                for (Node n : ns) {
                    ids.add(n.id());
                }
                Node controller = c.controller().get();
                Compat.check(ns.size() == nodes, "nodes=" + ids + ", want " + nodes);
                Compat.check(controller != null && ids.contains(controller.id()), "controller " + controller
                        + " is not one of " + ids);
                String id = c.clusterId().get();
                Compat.check(id != null && !id.isEmpty(), "no cluster id");
                return "nodes=" + ids + " controller=" + controller.id() + " clusterId=" + id;
            });
            Compat.step("createTopics", () -> {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
                return topic + " partitions=" + partitions;
            });
            Compat.step("describeTopics", () -> {
                int[] attempts = {0};
                TopicDescription d = settle("every partition led", () -> {
                    attempts[0]++;
                    TopicDescription td = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                    for (TopicPartitionInfo pi : td.partitions()) {
                        if (pi.leader() == null || pi.leader().isEmpty()) {
                            return null;
                        }
                    }
                    return td;
                });
                Compat.check(d.partitions().size() == partitions, "partitions=" + d.partitions().size());
                Map<Integer, Integer> leaders = new TreeMap<>();
                for (TopicPartitionInfo pi : d.partitions()) {
                    leaders.put(pi.partition(), pi.leader().id());
                    List<Integer> replicas = new ArrayList<>();
                    for (Node r : pi.replicas()) {
                        replicas.add(r.id());
                    }
                    Compat.check(replicas.equals(List.of(pi.leader().id())),
                            "partition " + pi.partition() + " replicas " + replicas + ", leader " + pi.leader().id());
                }
                Set<Integer> distinct = new TreeSet<>(leaders.values());
                Compat.check(distinct.size() == Math.min(nodes, partitions),
                        "leaders " + leaders + " are on " + distinct.size() + " of " + nodes + " nodes");
                return "leaders=" + leaders + " attempts=" + attempts[0];
            });
            Compat.step("deleteTopics", () -> {
                admin.deleteTopics(List.of(topic)).all().get();
                return "deleted=" + topic;
            });
            Compat.step("listTopicsAfterDelete", () -> {
                int[] attempts = {0};
                Set<String> names = settle("topic unlisted", () -> {
                    attempts[0]++;
                    Set<String> n = admin.listTopics().names().get();
                    return n.contains(topic) ? null : n;
                });
                return "unlisted=" + topic + " attempts=" + attempts[0] + " topics=" + names.size();
            });
            Compat.step("describeTopicsAfterDelete", () -> {
                try {
                    admin.describeTopics(List.of(topic)).allTopicNames().get();
                } catch (ExecutionException e) {
                    Compat.check(e.getCause() instanceof UnknownTopicOrPartitionException,
                            "want UnknownTopicOrPartitionException, got " + e.getCause());
                    return "UnknownTopicOrPartitionException";
                }
                throw new IllegalStateException("describing a deleted topic succeeded");
            });
        }
        System.out.println("ADMIN DONE failures=" + Compat.failures);
        System.out.flush();
        System.exit(Compat.failures == 0 ? 0 : 1);
    }
}
