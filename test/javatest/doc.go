// Package javatest runs the Java helper in Strand's end-to-end tests: the
// Maven project in test/java (the official Kafka client, Kafka Streams and
// Kafka's tools behind the main classes strandlog.compat.Compat, Txn,
// Streams, ClusterAdmin and CoordinatorRecords), used by test/compat and
// test/link.
//
// Helper builds the project once per test binary and returns the java
// binary and the class path: offline first (.ci/run resolved its
// dependencies into the local Maven repository), online when that fails.
// A missing java or mvn goes through testutil.Missing: the test skips, or
// fails under CI, which installs them.
//
// GroupMember runs Compat's group-consume mode as a group member process
// (grouptest.ProcMember) whose standard output is test/grouptest's log.
//
// The JVM options of each run (C1 only, the serial collector) are at the
// call sites: every run is short. STRAND_COMPAT_JAVA_OPTS adds JVM options
// to a group member, such as a log level for the client.
package javatest
