package compat

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
)

// The migration playbook's rollback with the client ids deployments really
// use: three members of one group on one host, sharing one client id
// (kcat's default "rdkafka", franz-go's default "kgo", one id set for every
// instance of a Java service), and one of them killed. A member's presence
// follows its own connections, so the killed one is removed after the
// broker's disconnect grace (2 s) although its siblings, of the same host
// and client id, are connected and fetching. From the kill to every
// partition owned again: at most the grace, a heartbeat of the survivors
// (500 ms) and the rebalance, never their session (45 s here).

// sharedRollbackWithin is the bound on that: the grace, a
// heartbeat interval and the rebalance.
const sharedRollbackWithin = 3500 * time.Millisecond

// rollbackSession is the members' session timeout here, Kafka's default:
// a member kept by its siblings would wait it out.
const rollbackSession = 45 * time.Second

func TestRollbackSharedClientID(t *testing.T) {
	t.Parallel()
	consumerArgs := []string{"--group-consumer-session-timeout", rollbackSession.String(),
		"--group-consumer-heartbeat-interval", "500ms", "--group-consumer-min-heartbeat-interval", "500ms"}
	for _, c := range []struct {
		name   string
		broker []string
		start  func(t *testing.T, addr, name string) grouptest.Member
	}{
		{name: "kcat-defaults", start: func(t *testing.T, addr, name string) grouptest.Member {
			// No client.id: librdkafka's default, rdkafka, for all three.
			return kcatMemberArgs(t, needKcat(t), addr, "orders", "rollback", name,
				"-X", fmt.Sprintf("session.timeout.ms=%d", rollbackSession.Milliseconds()), "-X", "heartbeat.interval.ms=500")
		}},
		{name: "java-classic", start: func(t *testing.T, addr, name string) grouptest.Member {
			return javaMember(t, addr, "orders", "rollback", name, "client.id=orders-app", "compat.assignor=range",
				fmt.Sprintf("session.timeout.ms=%d", rollbackSession.Milliseconds()))
		}},
		{name: "java-consumer", broker: consumerArgs, start: func(t *testing.T, addr, name string) grouptest.Member {
			return javaMember(t, addr, "orders", "rollback", name, "client.id=orders-app", "group.protocol=consumer")
		}},
		{name: "franz-go", start: func(t *testing.T, addr, name string) grouptest.Member {
			return kgoMemberOf(t, grouptest.ConsumerConfig{Name: name, Addr: addr, Group: "rollback", Topic: "orders",
				SessionTimeout: rollbackSession, Opts: []kgo.Opt{kgo.ClientID("kgo")}})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasPrefix(c.name, "java") {
				javatest.Helper(t) // build (or skip) before starting a broker
			}
			b := startBroker(t, append(slices.Clone(groupBrokerArgs), c.broker...)...)
			ctx := groupCtx(t, 2*time.Minute)
			createTopic(t, b.Addr, "orders", groupPartitions, nil)
			adm := grouptest.Admin(t, b.Addr)
			var ms []grouptest.Member
			for i := range 3 {
				ms = append(ms, c.start(t, b.Addr, fmt.Sprintf("member-%d", i)))
			}
			grouptest.WaitSettled(t, ctx, adm, "rollback", "orders", groupPartitions, ms...)
			var ids []string
			if ds, err := adm.DescribeGroups(ctx, "rollback"); err == nil {
				for _, m := range ds["rollback"].Members {
					ids = append(ids, m.ClientID)
				}
			}
			if cs, err := adm.DescribeConsumerGroups(ctx, "rollback"); err == nil && len(ids) == 0 {
				for _, m := range cs["rollback"].Members {
					ids = append(ids, m.ClientID)
				}
			}
			produced := grouptest.Produced{}
			produceKeyed(t, ctx, b.Addr, "orders", "a", 100, produced)
			grouptest.WaitProcessed(t, ctx, produced, ms...)

			dead := ms[2]
			lost := dead.Log().Owned()
			dead.Kill()
			took := grouptest.WaitSettled(t, ctx, adm, "rollback", "orders", groupPartitions, ms[:2]...)
			t.Logf("%s, client ids %v: the killed member's partitions %v were owned again %v after the kill (session %v)",
				c.name, ids, lost, took.Round(time.Millisecond), rollbackSession)
			if took > sharedRollbackWithin {
				t.Errorf("the killed member's partitions were owned again after %v, more than %v", took, sharedRollbackWithin)
			}
			// The broker said it held the member, then removed it.
			out := b.Output.String()
			for _, want := range []string{"a member's connection closed without a LeaveGroup", "removing a disconnected member"} {
				if !strings.Contains(out, want) {
					t.Errorf("the broker's log has no %q", want)
				}
			}
		})
	}
}

// TestHeldMemberShown: while a killed member is held (the grace is long
// here, 15 s), the broker's log, `strand group describe`, `strand migrate
// watch` and the console's group page say that its connection was lost and when it will be removed;
// once it is removed, they say so and stop showing it held. The members
// are kcat's with its default client id, all on one host.
func TestHeldMemberShown(t *testing.T) {
	t.Parallel()
	const grace = 15 * time.Second
	kcat := needKcat(t)
	b := startBroker(t, append(slices.Clone(groupBrokerArgs), "--group-member-disconnect-grace", grace.String())...)
	ctx := groupCtx(t, 2*time.Minute)
	createTopic(t, b.Addr, "orders", 4, nil)
	adm := grouptest.Admin(t, b.Addr)
	var ms []grouptest.Member
	for i := range 2 {
		ms = append(ms, kcatMemberArgs(t, kcat, b.Addr, "orders", "held", fmt.Sprintf("member-%d", i),
			"-X", "heartbeat.interval.ms=500"))
	}
	grouptest.WaitSettled(t, ctx, adm, "held", "orders", 4, ms...)
	produced := grouptest.Produced{}
	produceKeyed(t, ctx, b.Addr, "orders", "a", 40, produced)
	grouptest.WaitProcessed(t, ctx, produced, ms...)

	ms[1].Kill()
	killed := time.Now()
	watch := func() string {
		r := strandCLI(t, b.Addr, "migrate")("watch", "--group", "held", "--iterations", "1")
		if r.err != nil {
			t.Fatalf("migrate watch: %v", r)
		}
		return r.stdout
	}
	describe := func() string {
		r := strandCLI(t, b.Addr, "group")("describe", "held")
		if r.err != nil {
			t.Fatalf("group describe: %v", r)
		}
		return r.stdout
	}
	page := func() string {
		resp, err := http.Get("http://" + b.Admin + "/groups/held")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	const held = "connection lost, removed in "
	testutil.Eventually(t, grace-2*time.Second, func() error {
		if !strings.Contains(b.Output.String(), "removed_in="+grace.String()) {
			return fmt.Errorf("the broker's log does not say the member is removed in %v", grace)
		}
		if w := watch(); !strings.Contains(w, held) || !strings.Contains(w, "lost without a LeaveGroup") {
			return fmt.Errorf("migrate watch does not show the member held:\n%s", w)
		}
		if d := describe(); !strings.Contains(d, held) {
			return fmt.Errorf("group describe does not show the member held:\n%s", d)
		}
		if p := page(); !strings.Contains(p, held) {
			return fmt.Errorf("the console's group page does not show the member held")
		}
		return nil
	})
	if since := time.Since(killed); since >= grace {
		t.Fatalf("the member was shown held only %v after the kill, past its grace", since)
	}
	grouptest.WaitSettled(t, ctx, adm, "held", "orders", 4, ms[0])
	testutil.Eventually(t, 10*time.Second, func() error {
		if w := watch(); strings.Contains(w, held) || !strings.Contains(w, "removed: it did not return within the grace") {
			return fmt.Errorf("migrate watch after the removal:\n%s", w)
		}
		if p := page(); strings.Contains(p, held) {
			return fmt.Errorf("the console's group page still shows the member held")
		}
		if d := describe(); strings.Contains(d, held) {
			return fmt.Errorf("group describe still shows the member held:\n%s", d)
		}
		return nil
	})
}
