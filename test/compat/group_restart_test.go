package compat

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
)

// TestGroupBrokerRestart restarts the real binary in the middle of a
// group's life, with franz-go and with the Java client as the members:
//
//   - SIGTERM and restart, everything committed: the group comes back
//     Stable with the same members (member ids), the committed offsets are
//     there, the members carry on, and no record is processed twice;
//   - kill -9 and restart while a producer writes and the members commit
//     every 200 ms: again the same members, every record processed, none
//     skipped, and duplicates only from what was processed but not
//     committed (no committed data is read again).
func TestGroupBrokerRestart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		start func(t *testing.T, addr, group, name string) grouptest.Member
	}{
		{"kgo", func(t *testing.T, addr, group, name string) grouptest.Member {
			return kgoMember(t, addr, "orders", group, name)
		}},
		{"java", func(t *testing.T, addr, group, name string) grouptest.Member {
			return javaMember(t, addr, "orders", group, name, "compat.assignor=cooperative-sticky")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "java" {
				javatest.Helper(t)
			}
			b := startBroker(t, groupBrokerArgs...)
			ctx := groupCtx(t, 3*time.Minute)
			group := "restart-" + c.name
			createTopic(t, b.Addr, "orders", groupPartitions, nil)
			adm := grouptest.Admin(t, b.Addr)
			var ms []grouptest.Member
			for i := range 3 {
				ms = append(ms, c.start(t, b.Addr, group, fmt.Sprintf("%s-%d", group, i)))
			}
			grouptest.WaitSettled(t, ctx, adm, group, "orders", groupPartitions, ms...)
			produced := grouptest.Produced{}
			produceKeyed(t, ctx, b.Addr, "orders", "a", 300, produced)
			grouptest.WaitProcessed(t, ctx, produced, ms...)
			waitCommitted(t, ctx, adm, group, "orders", produced.Ends())
			members := memberIDs(t, ctx, adm, group)
			events := make([]int, len(ms))
			owned := make([][]int32, len(ms))
			for i, m := range ms {
				events[i] = len(m.Log().Events)
				owned[i] = m.Log().Owned()
			}

			// SIGTERM, restart.
			if err := b.Stop(); err != nil {
				t.Fatalf("strand did not exit cleanly on SIGTERM: %v", err)
			}
			b.Restart(t)
			checkMembers(t, ctx, adm, group, members, "after a clean restart")
			checkCommitted(t, ctx, adm, group, "orders", produced.Ends())
			produceKeyed(t, ctx, b.Addr, "orders", "b", 300, produced)
			grouptest.WaitProcessed(t, ctx, produced, ms...)
			grouptest.WaitSettled(t, ctx, adm, group, "orders", groupPartitions, ms...)
			checkAccounting(t, "clean restart", produced, 0, ms...)
			// A member may have rejoined (with its member id: the group
			// rebalanced among the same members): franz-go drops its
			// session when a heartbeat cannot reach the coordinator for
			// about a second (the shutdown of a loaded broker can take
			// that), and then rejoins owning nothing, so partitions can
			// move; the Java client 4.x rebootstraps its metadata when no
			// broker is reachable, which makes its leader rejoin ("cached
			// metadata has changed"). Kafka would see the same, so this is
			// only reported.
			rebalances, moved := 0, 0
			for i, m := range ms {
				if got := m.Log().Owned(); !slices.Equal(got, owned[i]) {
					moved++
				}
				for _, e := range m.Log().Events[events[i]:] {
					if e.Kind == grouptest.Assigned || e.Kind == grouptest.Revoked || e.Kind == grouptest.Lost {
						rebalances++
					}
				}
			}
			t.Logf("clean restart: same member ids; %d assignment events in the members' logs, %d members own other partitions",
				rebalances, moved)

			// kill -9 under load, restart.
			killUnderLoad(t, ctx, b, "orders", produced)
			grouptest.WaitProcessed(t, ctx, produced, ms...)
			grouptest.WaitSettled(t, ctx, adm, group, "orders", groupPartitions, ms...)
			checkMembers(t, ctx, adm, group, members, "after kill -9 and restart")
			checkAccounting(t, "kill -9 and restart", produced, -1, ms...)
			for _, m := range ms {
				if err := m.Stop(); err != nil {
					t.Error(err)
				}
			}
			checkCommitted(t, ctx, adm, group, "orders", produced.Ends())
		})
	}
}

// memberIDs is a Stable group's members: client id → member id.
func memberIDs(t *testing.T, ctx context.Context, adm *kadm.Client, group string) map[string]string {
	t.Helper()
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	d := ds[group]
	if d.State != "Stable" {
		t.Fatalf("group %s is %s", group, d.State)
	}
	out := map[string]string{}
	for _, m := range d.Members {
		out[m.ClientID] = m.MemberID
	}
	return out
}

// checkMembers checks the group is Stable with the same members as before,
// waiting a little for the broker to answer after a restart.
func checkMembers(t *testing.T, ctx context.Context, adm *kadm.Client, group string, want map[string]string, when string) {
	t.Helper()
	var got map[string]string
	var state string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ds, err := adm.DescribeGroups(ctx, group)
		if err != nil || ds[group].Err != nil {
			continue
		}
		state = ds[group].State
		got = map[string]string{}
		for _, m := range ds[group].Members {
			got[m.ClientID] = m.MemberID
		}
		if state == "Stable" && maps.Equal(got, want) {
			return
		}
	}
	t.Errorf("%s: group %s is %s with members %v, had %v", when, group, state, got, want)
}

// waitCommitted waits until the group committed want (the members commit
// periodically).
func waitCommitted(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, want map[int32]int64) {
	t.Helper()
	for ctx.Err() == nil {
		offs, err := adm.FetchOffsets(ctx, group)
		ok := err == nil
		for p, end := range want {
			o, found := offs.Lookup(topic, p)
			ok = ok && found && o.At == end
		}
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("group %s never committed %v", group, want)
}

// killUnderLoad kills the broker (kill -9) and restarts it while a
// producer writes to topic at 300 records/s, and adds what it acknowledged
// to produced, which must stay dense.
func killUnderLoad(t *testing.T, ctx context.Context, b *testutil.Process, topic string, produced grouptest.Produced) {
	t.Helper()
	prod, err := grouptest.StartProducer(b.Addr, topic, 300)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	b.Kill()
	b.Restart(t)
	time.Sleep(1500 * time.Millisecond)
	if err := prod.Stop(ctx); err != nil {
		t.Errorf("producer across the kill: %v", err)
	}
	produced.Add(prod.Acked())
	if err := produced.Dense(); err != nil {
		t.Error(err)
	}
}
