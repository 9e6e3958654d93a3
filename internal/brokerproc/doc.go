// Package brokerproc runs brokers as child processes, each in its own
// process group with its output in a log file: any command (Process), and
// Apache Kafka from a directory of its jars as a KRaft node, controller and
// broker in one JVM (Kafka). The side-by-side benchmark and the tests that
// check Strand's tools against a real Kafka use it; nothing in the broker
// does.
package brokerproc
