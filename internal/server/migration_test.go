package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// The migration playbook (test/grouptest.RunPlaybook) against an in-process
// broker, franz-go as both v1 and v2 (cooperative-sticky, and eager range,
// where every rebalance revokes everything), cross-checked with the broker's
// hand-off ledger (grouptest.CheckLedger): the hand-offs it recorded are
// the changes of owner the consumers logged, with the committed offsets
// they logged, each new owner's first fetch is the committed offset, and
// the duplicates are within the duplicate risk it reports. test/compat runs the same
// playbook against the real binary, with the Java client as v1 too.

const migrationGroup = "orders-processor"

func TestMigrationPlaybook(t *testing.T) {
	// Slow: for each balancer the playbook's canary, rollback and scale-over wait for rebalances, and for a 3 s
	// session timeout after the canary's crash.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	for _, bal := range []kgo.GroupBalancer{kgo.CooperativeStickyBalancer(), kgo.RangeBalancer()} {
		t.Run(bal.ProtocolName(), func(t *testing.T) {
			t.Parallel()
			b := testutil.StartBroker(t, func(c *config.Broker) {
				c.GroupInitialRebalanceDelay = 100 * time.Millisecond
				c.GroupMinSessionTimeout = 500 * time.Millisecond
			})
			const partitions = 10
			createTopic(t, b.Addr, "orders", partitions)
			const session = 3 * time.Second
			start := func(name string) (grouptest.Member, error) {
				c, err := grouptest.StartConsumer(grouptest.ConsumerConfig{Name: name, Addr: b.Addr, Group: migrationGroup,
					Topic: "orders", Balancers: []kgo.GroupBalancer{bal}, SessionTimeout: session,
					HeartbeatInterval: 200 * time.Millisecond})
				if err == nil {
					t.Cleanup(func() { c.Kill(); c.Wait() })
				}
				return c, err
			}
			res := grouptest.RunPlaybook(t, grouptest.PlaybookConfig{Addr: b.Addr, Topic: "orders", Group: migrationGroup,
				Partitions: partitions, V1: start, V2: start, SessionTimeout: session, Settle: 700 * time.Millisecond})
			if t.Failed() {
				return
			}
			grouptest.CheckLedger(t, context.Background(), b.Addr, res, migrationGroup, "orders", "v2-canary")
		})
	}
}
