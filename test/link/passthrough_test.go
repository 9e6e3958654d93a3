package link

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
	"github.com/strandlog/strand/test/librdkafkatest"
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
// heartbeat and the rebalance; Strand's hand-off ledger has the hand-offs
// its members took part in. Then the group moves home and the producers
// move, with the README's commands. Classic groups and consumer groups
// (KIP-848), franz-go, the Java client and librdkafka, Kafka of one node
// and of three; in one variant Kafka's coordinator of the group is killed
// once every member is on Strand. make test runs two variants, to keep
// within its budget: franz-go's classic members on one Kafka node, and the
// Java client's consumer group members; STRAND_LINK_PLAYBOOKS=all runs the
// others too (the coordinator's kill takes three nodes, about 45 s).
func TestLinkGroupPassThroughFromKafka(t *testing.T) {
	all := os.Getenv("STRAND_LINK_PLAYBOOKS") == "all"
	for _, c := range []struct {
		nodes      int
		serverSide bool // consumer groups (KIP-848) instead of classic ones
		// client is the consumers' on both clusters: franz-go, java (the
		// Java client's KafkaConsumer) or librdkafka (confluent-kafka).
		client string
		// always: run by make test; the others with
		// STRAND_LINK_PLAYBOOKS=all (half a minute each).
		always bool
		// killCoordinator: once every member is on Strand, Kafka's
		// coordinator of the group is killed; the members, passed
		// through, follow the group to its new coordinator.
		killCoordinator bool
	}{
		{nodes: 1, client: "franz-go", always: true},
		{nodes: 3, client: "franz-go"},
		{nodes: 3, client: "franz-go", killCoordinator: true},
		{nodes: 1, serverSide: true, client: "franz-go"},
		{nodes: 1, client: "java"},
		{nodes: 1, serverSide: true, client: "java", always: true},
		{nodes: 1, client: "librdkafka"},
		{nodes: 1, serverSide: true, client: "librdkafka"},
	} {
		protocol := "classic"
		if c.serverSide {
			protocol = "consumer"
		}
		name := fmt.Sprintf("kafka-%d-%s-%s", c.nodes, protocol, c.client)
		if c.killCoordinator {
			name += "-coordinator-killed"
		}
		t.Run(name, func(t *testing.T) {
			if !c.always && !all {
				t.Skip("STRAND_LINK_PLAYBOOKS=all runs this variant")
			}
			// The client is found (or the test skips) before Kafka starts.
			switch c.client {
			case "java":
				javatest.Helper(t)
			case "librdkafka":
				librdkafkatest.Python(t)
			}
			var props map[string]string
			if c.killCoordinator {
				// Kafka's controller fences the killed node after 4 s
				// instead of 9 s.
				props = map[string]string{"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000"}
			}
			kc := startKafka(t, c.nodes, props)
			tg := kc.target()
			const partitions, group = 6, "orders-processor"
			tg.createTopic(t, "orders", partitions, nil)
			st := testutil.StartProcess(t, "", "--link-metadata-interval", "200ms",
				"--group-member-disconnect-grace", passThroughGrace.String())
			// The README's commands, as written.
			const heading = "### One consumer at a time: a group on both clusters"
			blocks := readmeBlocks(t, heading, 2)
			var planLine, watchLine string
			for _, span := range readmeSection(t, heading).Spans {
				switch {
				case strings.HasPrefix(span, "strand migrate plan "):
					planLine = span
				case strings.HasPrefix(span, "strand migrate watch "):
					watchLine = span + " --iterations 1" // it redraws until interrupted
				}
			}
			if planLine == "" || watchLine == "" {
				t.Fatal("the README's section gives no strand migrate plan or watch command")
			}
			steps := testutil.CommandLines(blocks[1])
			if len(steps) != 2 {
				t.Fatalf("the README's last block has %d commands: promote-group and promote", len(steps))
			}
			for _, line := range testutil.CommandLines(blocks[0]) {
				runREADMELine(t, kc, st, line)
			}
			waitCaughtUp(t, st.Admin, "kafka-prod", "orders")
			const session = 10 * time.Second
			member := func(addr string) func(string) (grouptest.Member, error) {
				return func(name string) (grouptest.Member, error) {
					switch c.client {
					case "java":
						return javatest.GroupMember(t, addr, "orders", group, name, session, "group.protocol="+protocol), nil
					case "librdkafka":
						return librdkafkatest.GroupMember(t, addr, "orders", group, name, protocol), nil
					}
					m, err := grouptest.StartConsumer(grouptest.ConsumerConfig{Name: name, Addr: addr, Group: group,
						Topic: "orders", SessionTimeout: session, HeartbeatInterval: 500 * time.Millisecond,
						ServerSide: c.serverSide})
					if err == nil {
						t.Cleanup(func() { m.Kill(); m.Wait() })
					}
					return m, err
				}
			}
			// The playbook's clients take one seed address: a node that is
			// not the group's coordinator, which may be killed.
			// FindCoordinator makes __consumer_offsets; the group's
			// coordinator is known once its partition has a leader, and
			// stays while no node fails.
			var coordinator int32
			testutil.Eventually(t, time.Minute, func() error {
				if coordinator = kc.coordinator(group); coordinator < 0 {
					return fmt.Errorf("no coordinator of %s yet", group)
				}
				return nil
			})
			seed := kc.Addrs()[0]
			for _, nd := range kc.nodes {
				if nd.id != coordinator {
					seed = nd.kafka.Addr()
					break
				}
			}
			// Once every member is on Strand, the group moves home.
			var (
				home     time.Duration
				homeFrom time.Time
			)
			moveHome := func(v2 []grouptest.Member) {
				// Every member is on Strand now, as the watch shows.
				testutil.Eventually(t, 10*time.Second, func() error {
					out := runREADMELine(t, kc, st, watchLine)
					if n := strings.Count(out, "  strand  "); n != len(v2) {
						return fmt.Errorf("migrate watch shows %d members on Strand, want %d:\n%s", n, len(v2), out)
					}
					return nil
				})
				started := time.Now()
				homeFrom = started
				out := runREADMELine(t, kc, st, steps[0])
				if !strings.Contains(out, fmt.Sprintf("%d members rejoin here", len(v2))) {
					t.Errorf("promote-group said: %s", out)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				grouptest.WaitSettled(t, ctx, grouptest.Admin(t, st.Addr), group, "orders", partitions, v2...)
				home = time.Since(started)
			}
			// The plan checks the move before the canary starts.
			plan := func() {
				out := runREADMELine(t, kc, st, planLine)
				for _, want := range []string{"link kafka-prod passes group orders-processor through", "topic orders is mirrored"} {
					if !strings.Contains(out, want) {
						t.Errorf("migrate plan does not say %q:\n%s", want, out)
					}
				}
			}
			afterScaleOver := moveHome
			if c.killCoordinator {
				afterScaleOver = func(v2 []grouptest.Member) {
					killed := kc.coordinator(group)
					if killed != coordinator {
						t.Fatalf("the group's coordinator moved from node %d to %d", coordinator, killed)
					}
					kc.Kill(killed)
					from := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					adm := grouptest.Admin(t, seed)
					testutil.Eventually(t, time.Minute, func() error {
						if now := kc.coordinator(group); now == killed || now < 0 {
							return fmt.Errorf("the group's coordinator is still node %d", now)
						}
						return nil
					})
					grouptest.WaitSettled(t, ctx, adm, group, "orders", partitions, v2...)
					// They kept their partitions, as members connected to
					// Kafka itself do: the new coordinator loads the group.
					for _, m := range v2 {
						for _, e := range m.Log().Events {
							if (e.Kind == grouptest.Revoked || e.Kind == grouptest.Lost) && e.Time.After(from) {
								t.Errorf("%s: %s %v after the coordinator was killed", m.Name(), e.Kind, e.Partitions)
							}
						}
					}
					t.Logf("Kafka's coordinator of the group, node %d, killed: the group settled on its new coordinator, node %d, "+
						"with its members on Strand after %v", killed, kc.coordinator(group), time.Since(from).Round(time.Millisecond))
					moveHome(v2)
				}
			}
			res := grouptest.RunPlaybook(t, grouptest.PlaybookConfig{Addr: seed, Topic: "orders", Group: group,
				Partitions: partitions, V1: member(seed), V2: member(st.Addr), SessionTimeout: session,
				RollbackWithin: passThroughGrace + 2*time.Second, BeforeCanary: plan, AfterScaleOver: afterScaleOver})
			// Strand's ledger has the hand-offs its members took part in.
			if !t.Failed() {
				grouptest.CheckLinkLedger(t, context.Background(), st.Addr, res, group, "orders", "kafka-prod", "v2-canary",
					[]string{"v2-canary", "v2-0", "v2-1", "v2-2"}, homeFrom)
			}
			pause := moveProducers(t, seed, "orders", st, func() string { return runREADMELine(t, kc, st, steps[1]) })
			t.Logf("%s: rollback %v, longest time a partition went unowned %v, group home after %v, write pause %v; %s", name,
				res.Rollback.Round(time.Millisecond), res.LongestUnowned.Round(time.Millisecond), home.Round(time.Millisecond),
				pause.Round(time.Millisecond), res.Report.Summary())
		})
	}
}

// maxWritePause is the bound on the producers' move: from the last
// write acknowledged by Kafka to the first by Strand, the link caught up.
const maxWritePause = 2 * time.Second

// moveProducers moves a producer from Kafka to Strand as an operator
// would: it stops writing to Kafka, the topic is promoted (promote, which
// waits for the mirror to hold everything), and it writes to Strand. It returns
// the write pause: from Kafka's last acknowledgement to Strand's first.
func moveProducers(t *testing.T, kafka, topic string, st *testutil.Process, promote func() string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := before.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("before-move-", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	lastOnKafka := time.Now()
	before.Close()
	if out := promote(); !strings.Contains(out, "writable now") {
		t.Fatalf("promote said: %s", out)
	}
	after, err := kgo.NewClient(kgo.SeedBrokers(st.Addr), kgo.DefaultProduceTopic(topic), kgo.RecordRetries(100))
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if err := after.ProduceSync(ctx, kgo.StringRecord("after-move")).FirstErr(); err != nil {
		t.Fatalf("the first write to Strand after the promotion: %v", err)
	}
	pause := time.Since(lastOnKafka)
	if pause > maxWritePause {
		t.Errorf("writes paused %v between Kafka and Strand, more than %v", pause, maxWritePause)
	}
	return pause
}

// thrown matches a Java exception as a thread's death prints it: the
// exception's class and its message.
var thrown = regexp.MustCompile(`(?:[a-z0-9_]+\.)+[A-Z]\w*(?:Exception|Error): [^\n]*`)

// TestLinkPassThroughSourceWithoutConsumerGroups: a consumer group member
// (KIP-848) passed through to a Kafka that serves classic groups only
// (group.coordinator.rebalance.protocols=classic) is answered as that
// Kafka answers it, UNSUPPORTED_VERSION: the Java client stops with the
// same error on Strand as on Kafka, which tells the user to set
// group.protocol=classic. A classic member of the group still joins it on
// Kafka through Strand.
func TestLinkPassThroughSourceWithoutConsumerGroups(t *testing.T) {
	t.Parallel()
	javatest.Helper(t)
	kc := startKafka(t, 1, map[string]string{"group.coordinator.rebalance.protocols": "classic"})
	tg := kc.target()
	const group = "orders-processor"
	tg.createTopic(t, "orders", 2, nil)
	st := testutil.StartProcess(t, "", "--link-metadata-interval", "200ms")
	strand(t, "link", "create", "kafka-prod", "--admin", st.Admin, "--source-brokers", kc.Bootstrap(),
		"--topics", "orders", "--groups", group, "--group-pass-through")
	waitCaughtUp(t, st.Admin, "kafka-prod", "orders")

	// The Java client's member, on Kafka and then on Strand.
	failure := func(where, addr string) string {
		m := javatest.GroupMember(t, addr, "orders", group, "v2-"+where, 10*time.Second, "group.protocol=consumer")
		testutil.Eventually(t, time.Minute, func() error {
			if m.Crashed() == nil {
				return fmt.Errorf("the consumer group member on %s still runs", where)
			}
			return nil
		})
		// The exception the main thread died of. Another thread's log line
		// can land between its "Exception in thread" prefix and the
		// exception itself, so the exception is looked for after the
		// prefix rather than on its line.
		stderr := m.Stderr.String()
		if i := strings.Index(stderr, `Exception in thread "main" `); i >= 0 {
			if e := thrown.FindString(stderr[i:]); e != "" {
				return e
			}
		}
		t.Fatalf("the member on %s exited without an exception from its main thread:\n%s", where, grouptest.HeadLines(stderr, 20))
		return ""
	}
	onKafka := failure("kafka", kc.Addrs()[0])
	if !strings.Contains(onKafka, "UnsupportedVersionException") {
		t.Fatalf("on Kafka the member failed with %q, not UnsupportedVersionException", onKafka)
	}
	if onStrand := failure("strand", st.Addr); onStrand != onKafka {
		t.Errorf("through Strand the member failed with\n\t%s\non Kafka with\n\t%s", onStrand, onKafka)
	}

	// A classic member still joins the group on Kafka through Strand.
	m, err := grouptest.StartConsumer(grouptest.ConsumerConfig{Name: "v2-classic", Addr: st.Addr, Group: group,
		Topic: "orders", SessionTimeout: 10 * time.Second, HeartbeatInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Kill(); m.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	grouptest.WaitSettled(t, ctx, grouptest.Admin(t, kc.Addrs()[0]), group, "orders", 2, m)
}
