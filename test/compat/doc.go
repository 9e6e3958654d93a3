// Package compat is Strand's end-to-end compatibility suite: real Kafka
// clients against the real strand binary (built by testutil.Binary and run
// as a child process by testutil.StartProcess).
//
// Clients covered, each in its own file:
//
//   - kcat (librdkafka): metadata, keyed produce and consume with every
//     compression codec, partition-specific produce and consume.
//   - kafka-python (Debian's python3-kafka under /usr/bin/python3):
//     test/python/roundtrip.py and test/python/admin.py.
//   - The Java client (org.apache.kafka:kafka-clients): the Maven project in
//     test/java, built once per run (offline when .ci/run has resolved its
//     dependencies): default idempotent producer, assign-style consumer and
//     the AdminClient.
//   - franz-go (kgo, kadm): topics, keyed partitioning, every codec, listing
//     offsets by time, DeleteRecords.
//
// And the process itself: kill -9 during production and restart (every
// acknowledged record survives), and SIGTERM under load (exit 0 within
// seconds, clean logs on restart).
//
// Consumer groups (classic protocol), every client a group member that
// prints test/grouptest's log format (what it was assigned, processed and
// committed), so that one accounting (grouptest.Check) serves them all:
//
//   - group_clients_test.go: three members on a 10-partition topic get
//     every partition exactly once (by their logs and by DescribeGroups)
//     and process every record once; a member killed without a LeaveGroup
//     (process killed, or franz-go's connections cut) loses its partitions
//     to the others within the session timeout (6 s), with duplicates only
//     from its uncommitted tail; the rest leave cleanly, everything
//     committed. franz-go (range, cooperative-sticky), the Java client
//     (Compat group-consume: eager range, CooperativeStickyAssignor, and
//     static membership with a restart inside the session that must not
//     rebalance), kcat -G (librdkafka) and kafka-python
//     (test/python/group_consume.py).
//   - migration_test.go: the migration playbook (grouptest.RunPlaybook)
//     with franz-go as v1 and v2, and with the Java client as v1 and
//     franz-go as v2 in one group.
//   - group_restart_test.go: the broker restarted (SIGTERM, then kill -9
//     under load) in the middle of a group's life: same members, committed
//     offsets kept, nothing committed read again.
//
// The broker runs with group.initial.rebalance.delay.ms at 200 ms so that
// groups form quickly.
//
// Transactions, each suite under both of Kafka's transaction protocols (the
// broker's --transaction-version=2, KIP-890's, and =1, the older flow):
//
//   - txn_kgo_test.go: franz-go's GroupTransactSession consuming,
//     transforming and producing with every fifth transaction aborted and a
//     second session joining and the first leaving midway (plus a client
//     capped at Kafka 3.9's versions on a version-2 broker): every input
//     record once in the read_committed output, nothing of an aborted
//     transaction, the group's committed offsets at the input's end; and the
//     operator views (DescribeTransactions, ListTransactions,
//     DescribeProducers) and read_committed ListOffsets and Fetch while a
//     transaction is open and after it ends.
//   - txn_crash_test.go: kill -9 at random moments of a stream of
//     transactions (commits, aborts, and clients that vanish mid-transaction
//     and are fenced by the next), restart on the same directory: every
//     transaction the client saw committed is visible once and whole, no
//     aborted or partial one is, and no transaction is left hanging (the last
//     stable offset reaches the high watermark within the timeout).
//     STRAND_TXN_KILLS raises the number of kills.
//   - txn_java_test.go: the Java client (test/java Txn.java): a
//     consume-transform-produce loop with sendOffsetsToTransaction, every
//     fourth transaction aborted and the consumer rewound, read back by
//     read_committed Java and franz-go consumers (every input once, nothing
//     aborted, offsets committed in the transactions); the same across a
//     broker restart (SIGTERM and kill -9); fencing of a producer by a second
//     one with the same transactional.id; a transaction abandoned open,
//     holding read_committed readers at its first offset until its timeout
//     aborts it; and an operator ending such a transaction at once with the
//     AdminClient (listTransactions, describeProducers, abortTransaction).
//   - txn_librdkafka_test.go: librdkafka through confluent-kafka for Python
//     (test/python/txn_librdkafka.py, in the virtualenv .ci/run makes under
//     ${XDG_CACHE_HOME:-~/.cache}/strand-py, or $STRAND_PY_VENV): the same
//     consume-transform-produce loop (send_offsets_to_transaction with the
//     consumer's positions, every fourth transaction aborted and the
//     consumer rewound), read back by read_committed franz-go and librdkafka
//     and by read_uncommitted franz-go, the group's offsets (require_stable)
//     at the input's end; and fencing by a second producer with the same
//     transactional.id (the first's produce and commit fail fatally). Being
//     without KIP-890, librdkafka 2.16 keeps one producer epoch under both
//     versions: the older flow served by a version-2 broker.
//   - txn_streams_test.go: Kafka Streams (org.apache.kafka:kafka-streams,
//     test/java Streams.java) with processing.guarantee=exactly_once_v2: a
//     re-key (a repartition topic, purged with DeleteRecords) and a per-key
//     count and sum in a persistent store (a compacted changelog), one
//     output record per update. One instance is killed (SIGKILL) mid-stream
//     with a transaction open and restarted on the same state directory
//     (same transactional id: the dead one is fenced), that one killed too
//     and replaced by one on a fresh state directory (the store restored
//     from the changelog; the dead transaction ends by its timeout). The
//     read_committed output counts 1, 2, 3, ... per key with no gap or
//     repeat, the sums match the input, the group's offsets reach the
//     input's end, and the internal topics have the configs Streams asked
//     for.
//
// A cluster of three brokers (real processes, testutil.StartProcessCluster),
// topics with leaders on every broker:
//
//   - cluster_clients_test.go: franz-go, the Java producer (default,
//     idempotent) and consumer group, the AdminClient (ClusterAdmin.java),
//     kcat, confluent-kafka (test/python/cluster_librdkafka.py) and
//     kafka-python (roundtrip.py, group_consume.py, cluster_admin.py), each
//     given one seed broker: every acknowledged record read back once at
//     its partition and offset, in order.
//   - cluster_groups_test.go: a group whose coordinator is neither its
//     members' seed nor most partitions' leader resumes from its committed
//     offsets after a member is killed (Java, kafka-python); the
//     coordinator's broker killed for 10 s: the group commits nothing while
//     it is gone and carries on once it is back (Java, franz-go).
//   - cluster_restart_test.go: a restarted broker never serves a partition
//     at the leadership it had before it died.
//   - cluster_tools_test.go: Kafka's own tools (org.apache.kafka:kafka-tools
//     in test/java's class path): kafka-metadata-quorum.sh describe --status
//     and --replication, kafka-topics.sh --create, --describe, and its
//     refusal of a replication factor of 3.
//
// The README (readme_test.go): every command it shows, in its sh blocks
// and in its text, run as written through bash in the README's order
// against one broker, each exiting 0 and printing what the README says it
// prints; what one broker cannot run is listed in the test with the
// reason.
//
// A test whose client tool is missing skips with a message saying so, unless
// the CI variable is set: CI installs every tool (.ci/run), so there a
// missing tool fails the test.
package compat
