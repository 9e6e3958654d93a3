package compat

import (
	"testing"
	"time"

	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/librdkafkatest"
)

// Transactions with librdkafka, through confluent-kafka for Python
// (test/python/txn_librdkafka.py), against the real binary, under both
// transaction protocols. librdkafka 2.16 does not implement KIP-890: it adds
// partitions with AddPartitionsToTxn and keeps one producer epoch for all its
// transactions even where the broker finalizes transaction.version 2, so
// these tests are also the older flow served by a version-2 broker.
//
// confluent-kafka and its virtualenv: test/librdkafkatest.

// librdkafkaTxn is librdkafka in the transaction scenarios of
// txn_clients_test.go. Its tests read with raw fetches through franz-go's
// batch processing; Java's use a franz-go consumer.
var librdkafkaTxn = txnClient{
	name:   "librdkafka",
	reader: "librdkafka",
	prefix: "rdk-txn-",
	ready:  func(t *testing.T) { librdkafkatest.Python(t) },
	run:    runLibrdkafkaTxn,
	read:   readByFetches,
	fenceSteps: []string{"first-init", "first-commit", "first-open", "second-init", "first-fenced",
		"second-commit"},
	// librdkafka 2.16 has no KIP-890: it keeps its epoch, and a version-2
	// broker must not bump it for a client using the older EndTxn versions.
	epochs: func(int) (bool, string) {
		return false, "librdkafka 2.16 uses the older transaction flow, which keeps the epoch"
	},
}

// runLibrdkafkaTxn runs txn_librdkafka.py with args; when the test fails,
// the tail of its output is logged.
func runLibrdkafkaTxn(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	python := librdkafkatest.Python(t)
	r := run(timeout, pythonDir, "", python, append([]string{"txn_librdkafka.py"}, args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("txn_librdkafka.py %s: %v after %v\nstderr:\n%s\nstdout, the last lines but records:\n%s", args[0],
				r.err, r.elapsed.Round(time.Millisecond), grouptest.HeadLines(r.stderr, 40), txnHelperTail(r.stdout, 60))
		}
	})
	return r
}

// TestLibrdkafkaTransformExactlyOnce runs a consume-transform-produce loop
// with librdkafka (read_committed Consumer in a group, transactional
// Producer, offsets committed with send_offsets_to_transaction from the
// consumer's positions, every fourth transaction aborted after its records
// reached the log and the consumer sent back to the group's committed
// offsets) over input franz-go produced, then checks:
//   - every input record is in the output exactly once, from a committed
//     transaction, for read_committed readers (franz-go's batch processing
//     over raw fetches, and librdkafka), at exactly the offsets the producer
//     had acknowledged;
//   - a read_uncommitted reader sees the aborted transactions' records too;
//   - each rewind after an abort went to the offsets committed so far
//     (OffsetFetch with require_stable, after transactional commits);
//   - the group's committed offsets (require_stable) are the input's end
//     offsets, and the output's last stable offsets its end offsets;
//   - one producer id and one epoch for every transaction: librdkafka 2.16
//     keeps the older flow under both transaction versions.
func TestLibrdkafkaTransformExactlyOnce(t *testing.T) {
	librdkafkaTxn.eachVersion(t, librdkafkaTxn.transform)
}

// TestLibrdkafkaTransactionalFencing: a second librdkafka producer with the
// same transactional.id fences the first. The first commits a transaction,
// then leaves one open with its records in the log; the second's
// init_transactions aborts it and fences the first, whose next produce and
// commit fail with a fatal (fenced) error; the second commits.
// read_committed readers (franz-go and librdkafka) then see the first's
// committed records and the second's, never the open transaction's nor the
// fenced producer's late record; read_uncommitted sees the open
// transaction's too, at the offsets acknowledged, written with an epoch
// below the second producer's.
func TestLibrdkafkaTransactionalFencing(t *testing.T) {
	librdkafkaTxn.eachVersion(t, librdkafkaTxn.fencing)
}
