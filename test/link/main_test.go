// Package link tests the cluster link end to end: a real Apache Kafka
// cluster as the source, mirrored into Strand.
//
// The source side (kafka_test.go): Apache Kafka from its jars (KRaft,
// controller and broker in one JVM per node, internal/brokerproc), one
// node or three, with nodes killed with SIGKILL and restarted on their
// data. Kafka's log cleaner is set to look for work every 100 ms (the
// dynamic broker config log.cleaner.backoff.ms, cluster-wide), so that
// compaction and time retention happen within a test.
//
// The workloads (workload_test.go) write to any bootstrap address and
// return what they wrote, per partition: the offsets of committed and
// aborted records, the transactions that touched it, its log start and
// end. They cover franz-go's idempotent producer with every codec, its
// transactional producer with commits and aborts interleaved, a
// compacted topic with tombstones read once the cleaner has removed
// records, and a log start moved by DeleteRecords and by time retention.
//
// Broker settings brokerproc does not set, and what the tests do instead:
//   - log.cleaner.backoff.ms (15 s): dynamic, so startKafka sets it for the
//     whole cluster with IncrementalAlterConfigs.
//   - log.retention.check.interval.ms (5 min, static): time retention is
//     shown on a compact,delete topic, whose retention the cleaner applies
//     each time it looks.
//   - broker.session.timeout.ms (9 s, static): a killed leader's
//     partitions get a new leader only once the controller fences it.
//   - transaction.state.log.num.partitions (50, static): the first
//     transaction on three nodes waits some 20 s for __transaction_state.
//
// brokerproc's Start formats the storage, which Kafka refuses on a
// formatted directory: a restart runs the JVM again with the files Start
// wrote.
//
// internal/mirrorcheck compares a mirror with its source (link_test.go);
// checks_test.go checks that each comparison covered what its workload
// wrote.
//
// TestLinkGroupPassThroughFromKafka runs two of its seven variants unless
// STRAND_LINK_PLAYBOOKS=all.
//
// Beside the link, TestShareAPIsServedAsKafka uses the Kafka source to
// check that Strand serves the share group APIs at Kafka's versions.
//
// A test whose Java or Kafka jars are missing skips with a message saying
// so, unless the CI variable is set: CI installs them (.ci/run), so there
// it fails.
package link

import (
	"testing"

	"github.com/strandlog/strand/internal/testutil"
)

// TestMain removes the strand binary the tests built once they end.
func TestMain(m *testing.M) { testutil.Main(m) }
