package link

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// passThroughGrace is Strand's disconnect grace in the cross-cluster
// playbook: a canary killed on Strand leaves the group on Kafka this long
// after its connections closed.
const passThroughGrace = 1500 * time.Millisecond

// TestLinkGroupPassThroughFromKafka runs the migration playbook across
// clusters (test/grouptest.RunPlaybook) from a real Apache Kafka, one node
// and three: three v1 consumers on Kafka, a v2 canary on Strand in the
// same group through the link's group pass-through, the canary killed,
// v2 scaled up on Strand while v1 retires on Kafka. Nothing skipped, one
// owner per partition at any time (by the consumers' logs and by Kafka's
// DescribeGroups), duplicates within each hand-off's uncommitted window,
// and the canary's partitions back on Kafka within Strand's grace, a
// heartbeat and the rebalance. Classic groups, and consumer groups
// (KIP-848) on one node.
func TestLinkGroupPassThroughFromKafka(t *testing.T) {
	for _, c := range []struct {
		nodes      int
		serverSide bool // consumer groups (KIP-848) instead of classic ones
	}{{1, false}, {3, false}, {1, true}} {
		name := fmt.Sprintf("kafka-%d-classic", c.nodes)
		if c.serverSide {
			name = fmt.Sprintf("kafka-%d-consumer", c.nodes)
		}
		t.Run(name, func(t *testing.T) {
			kc := startKafka(t, c.nodes)
			tg := kc.target()
			const partitions, group = 6, "orders-processor"
			tg.createTopic(t, "orders", partitions, nil)
			st := testutil.StartProcess(t, "", "--link-metadata-interval", "200ms",
				"--group-member-disconnect-grace", passThroughGrace.String())
			out := strand(t, "link", "create", "kafka", "--admin", st.Admin, "--source-brokers", kc.Bootstrap(),
				"--topics", "orders", "--groups", group, "--group-pass-through", "--offset-sync-interval", "200ms")
			if !strings.Contains(out, "created link kafka") {
				t.Fatalf("link create said: %s", out)
			}
			waitCaughtUp(t, st.Admin, "kafka", "orders")
			const session = 10 * time.Second
			member := func(addr string) func(string) (grouptest.Member, error) {
				return func(name string) (grouptest.Member, error) {
					m, err := grouptest.StartConsumer(grouptest.ConsumerConfig{Name: name, Addr: addr, Group: group,
						Topic: "orders", SessionTimeout: session, HeartbeatInterval: 500 * time.Millisecond,
						ServerSide: c.serverSide})
					if err == nil {
						t.Cleanup(func() { m.Kill(); m.Wait() })
					}
					return m, err
				}
			}
			// The playbook's clients take one seed address.
			seed := kc.Addrs()[0]
			res := grouptest.RunPlaybook(t, grouptest.PlaybookConfig{Addr: seed, Topic: "orders", Group: group,
				Partitions: partitions, V1: member(seed), V2: member(st.Addr), SessionTimeout: session,
				RollbackWithin: passThroughGrace + 2*time.Second})
			t.Logf("%s: rollback %v, longest time a partition went unowned %v; %s", name,
				res.Rollback.Round(time.Millisecond), res.LongestUnowned.Round(time.Millisecond), res.Report.Summary())
		})
	}
}
