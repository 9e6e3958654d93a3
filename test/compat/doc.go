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
// A test whose client tool is missing skips with a message saying so, unless
// the CI variable is set: CI installs every tool (.ci/run), so there a
// missing tool fails the test.
package compat
