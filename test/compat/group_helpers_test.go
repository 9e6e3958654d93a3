package compat

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/javatest"
)

// Consumer groups with real clients: each client runs as a group member that
// prints test/grouptest's log format (assigned/revoked/processed/committed
// lines), so one set of checks serves them all.

const (
	groupPartitions = 10
	// groupSession is the members' session timeout: short (Strand's
	// group.min.session.timeout.ms default is 6 s) so that crashes are
	// noticed quickly.
	groupSession = 6 * time.Second
)

// rollbackWithin bounds how long a killed member's partitions take to
// reach the others: the broker's default disconnect grace (2 s) plus a
// rebalance at the members' 500 ms heartbeat interval.
const rollbackWithin = 3 * time.Second

// groupBrokerArgs make groups form quickly: the first rebalance waits 200 ms
// for more members instead of Kafka's 3 s.
var groupBrokerArgs = []string{"--group-initial-rebalance-delay", "200ms"}

func groupCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// kgoMember is a franz-go member (grouptest.Consumer) in the test process,
// killed by cutting its connections.
//
// STRAND_COMPAT_KGO_LOG=info (or debug, warn) keeps the client's own log,
// shown when the test fails.
func kgoMember(t *testing.T, addr, topic, group, name string, balancers ...kgo.GroupBalancer) grouptest.Member {
	t.Helper()
	return kgoMemberOf(t, grouptest.ConsumerConfig{Name: name, Addr: addr, Group: group, Topic: topic,
		Balancers: balancers, SessionTimeout: groupSession})
}

// kgoMemberOf is kgoMember for any consumer configuration.
func kgoMemberOf(t *testing.T, cfg grouptest.ConsumerConfig) grouptest.Member {
	t.Helper()
	name := cfg.Name
	var clientLog grouptest.Lines
	var opts []kgo.Opt
	if lvl := os.Getenv("STRAND_COMPAT_KGO_LOG"); lvl != "" {
		l, ok := map[string]kgo.LogLevel{"error": kgo.LogLevelError, "warn": kgo.LogLevelWarn,
			"info": kgo.LogLevelInfo, "debug": kgo.LogLevelDebug}[lvl]
		if !ok {
			t.Fatalf("STRAND_COMPAT_KGO_LOG=%s: want error, warn, info or debug", lvl)
		}
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(&clientLog, l, func() string {
			return time.Now().Format("15:04:05.000 ")
		})))
	}
	cfg.Opts = append(cfg.Opts, opts...)
	c, err := grouptest.StartConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Kill()
		c.Wait()
		if t.Failed() {
			t.Logf("%s log (events but processed):\n%s", name, grouptest.EventsOf(c.Log(), 40))
			if s := clientLog.String(); s != "" {
				t.Logf("%s client log:\n%s", name, tail(s, 16<<10))
			}
		}
	})
	return c
}

// javaMember runs the Java helper's group-consume mode (KafkaConsumer)
// with the test's session timeout; props are PROP=VALUE pairs, consumer
// properties or compat.* settings.
func javaMember(t *testing.T, addr, topic, group, name string, props ...string) grouptest.Member {
	t.Helper()
	return javatest.GroupMember(t, addr, topic, group, name, groupSession, props...)
}

// pythonMember runs test/python/group_consume.py (kafka-python).
func pythonMember(t *testing.T, addr, topic, group, name string, extra ...string) grouptest.Member {
	t.Helper()
	args := []string{"group_consume.py", "--bootstrap", addr, "--topic", topic, "--group", group, "--client-id", name,
		"--session-ms", fmt.Sprint(groupSession.Milliseconds()), "--heartbeat-ms", "500", "--deadline-s", "240"}
	return grouptest.StartProcMember(t, name, pythonDir, nil, systemPython, append(args, extra...)...)
}

// kcatMember runs kcat -G (librdkafka's balanced consumer group, range
// assignor, offsets auto-committed): its output format makes the processed
// lines, and its rebalance messages on stderr ("% Group g rebalanced
// (memberid m): assigned: t [0], t [1]") become assigned and revoked lines.
// Commits are librdkafka's own, so the log has none, and they come every
// 5 s (librdkafka's default) and on revoke and close: kcat's -X sets
// auto.commit.interval.ms on the legacy topic configuration, which the
// group consumer ignores (-X dump shows it), so it cannot be shortened.
func kcatMember(t *testing.T, kcat, addr, topic, group, name string) grouptest.Member {
	t.Helper()
	return kcatMemberArgs(t, kcat, addr, topic, group, name,
		"-X", "client.id="+name, "-X", fmt.Sprintf("session.timeout.ms=%d", groupSession.Milliseconds()),
		"-X", "heartbeat.interval.ms=500")
}

// kcatMemberArgs is kcatMember with the client's settings in args (-X
// client.id=..., session.timeout.ms=...) instead of the test's.
func kcatMemberArgs(t *testing.T, kcat, addr, topic, group, name string, args ...string) grouptest.Member {
	t.Helper()
	setup := func(p *grouptest.ProcMember) {
		p.ClosedLine = true
		// One pipe for both streams (exec shares it when Stdout and
		// Stderr are the same writer), so that a rebalance message and
		// the records around it stay in the order kcat wrote them.
		w := &lineWriter{line: func(l string) {
			switch {
			case strings.HasPrefix(l, "processed "):
				p.LogLines.Printf("%s", l)
			default:
				p.Stderr.Printf("%s", l)
				if e := kcatRebalance(l); e != "" {
					p.LogLines.Printf("%s", e)
				}
			}
		}}
		p.Cmd.Stdout, p.Cmd.Stderr = w, w
	}
	args = append([]string{"-b", addr, "-G", group, "-u", "-f", `processed %p %o %k %s\n`, "-X", "auto.offset.reset=earliest"}, args...)
	return grouptest.StartProcMember(t, name, "", setup, kcat, append(args, topic)...)
}

var (
	kcatRebalanceRE = regexp.MustCompile(`^% Group \S+ rebalanced \(memberid [^)]*\): (assigned|revoked): ?(.*)$`)
	kcatPartRE      = regexp.MustCompile(`\[(\d+)\]`)
)

// kcatRebalance turns a kcat rebalance message into a log line, or "".
func kcatRebalance(line string) string {
	m := kcatRebalanceRE.FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	var ps []string
	for _, pm := range kcatPartRE.FindAllStringSubmatch(m[2], -1) {
		ps = append(ps, pm[1])
	}
	list := "-"
	if len(ps) > 0 {
		list = strings.Join(ps, ",")
	}
	return fmt.Sprintf("%s %s %s", m[1], grouptest.Micros(time.Now()), list)
}

// lineWriter hands whole lines to line; output from two streams can then
// share a log without tearing lines.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	line func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

// produceKeyed writes n keyed records synchronously with franz-go (key
// key-(i%64), value PREFIX-i) and adds what was acknowledged to into.
func produceKeyed(t *testing.T, ctx context.Context, addr, topic, prefix string, n int, into grouptest.Produced, opts ...kgo.Opt) {
	t.Helper()
	cl := client(t, addr, append([]kgo.Opt{kgo.DefaultProduceTopic(topic)}, opts...)...)
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i%grouptest.ProducerKeys), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing %s: %v", prefix, err)
	}
	for _, r := range rs {
		if into[r.Partition] == nil {
			into[r.Partition] = map[int64]grouptest.Record{}
		}
		into[r.Partition][r.Offset] = grouptest.Record{Key: string(r.Key), Value: string(r.Value)}
	}
}

// checkAccounting runs grouptest.Check and reports problems; maxDup >= 0
// also caps the duplicates.
func checkAccounting(t *testing.T, what string, produced grouptest.Produced, maxDup int, ms ...grouptest.Member) *grouptest.Report {
	t.Helper()
	var logs []*grouptest.Log
	for _, m := range ms {
		logs = append(logs, m.Log())
	}
	r := grouptest.Check(produced, logs...)
	t.Logf("%s: %s", what, r.Summary())
	if !r.OK() {
		t.Errorf("%s: accounting failed:\n%s", what, r.Details(30))
	}
	if maxDup >= 0 && r.Duplicates > maxDup {
		t.Errorf("%s: %d records processed twice, want at most %d:\n%s", what, r.Duplicates, maxDup, r.Details(30))
	}
	return r
}

// groupScenario is the group-of-three test for one client.
type groupScenario struct {
	group, topic string
	start        func(name string) grouptest.Member
	session      time.Duration
	// static: the members have group.instance.ids; the scenario also
	// restarts one within the session timeout, which must not rebalance.
	static bool
	// produce are options for the producers (kafka-python cannot read
	// franz-go's default snappy batches).
	produce []kgo.Opt
}

// runGroupOfThree: three members on a 10-partition topic get every
// partition exactly once (by their logs and by DescribeGroups) and
// process every record once; a killed member's partitions (no LeaveGroup)
// move to the others once the broker's disconnect grace has passed (a
// static member's within its session timeout), and the records after
// that are all processed, duplicates only from the dead member's
// uncommitted tail; the survivors then leave cleanly.
func runGroupOfThree(t *testing.T, b *testutil.Process, sc groupScenario) {
	ctx := groupCtx(t, 3*time.Minute)
	createTopic(t, b.Addr, sc.topic, groupPartitions, nil)
	adm := grouptest.Admin(t, b.Addr)
	settled := func(ms ...grouptest.Member) time.Duration {
		t.Helper()
		return grouptest.WaitSettled(t, ctx, adm, sc.group, sc.topic, groupPartitions, ms...)
	}
	var ms []grouptest.Member
	for i := range 3 {
		ms = append(ms, sc.start(fmt.Sprintf("%s-%d", sc.group, i)))
	}
	took := settled(ms...)
	var owned [][]int32
	for _, m := range ms {
		owned = append(owned, m.Log().Owned())
		if n := len(m.Log().Owned()); n < 3 || n > 4 {
			t.Errorf("%s owns %v: not balanced", m.Name(), m.Log().Owned())
		}
	}
	ds, _ := adm.DescribeGroups(ctx, sc.group)
	t.Logf("3 members settled after %v, protocol %s: %v", took.Round(time.Millisecond), ds[sc.group].Protocol, owned)

	produced := grouptest.Produced{}
	produceKeyed(t, ctx, b.Addr, sc.topic, "a", 300, produced, sc.produce...)
	grouptest.WaitProcessed(t, ctx, produced, ms...)
	checkAccounting(t, "3 members", produced, 0, ms...)

	if sc.static {
		// A static member restarts within its session: it takes its place
		// back with its partitions, and the others see no rebalance.
		before := make([]int, len(ms))
		for i, m := range ms {
			before[i] = len(m.Log().Events)
		}
		old := ms[1]
		prev := old.Log().Owned()
		if err := old.Stop(); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		ms[1] = sc.start(old.Name())
		settled(ms...)
		t.Logf("static member %s restarted and owned %v again after %v", old.Name(), ms[1].Log().Owned(),
			time.Since(restarted).Round(time.Millisecond))
		if got := ms[1].Log().Owned(); !slices.Equal(got, prev) {
			t.Errorf("restarted static member owns %v, had %v", got, prev)
		}
		for _, i := range []int{0, 2} {
			for _, e := range ms[i].Log().Events[before[i]:] {
				if e.Kind == grouptest.Assigned || e.Kind == grouptest.Revoked || e.Kind == grouptest.Lost {
					t.Errorf("%s saw a rebalance when the static member restarted: %s %v", ms[i].Name(), e.Kind, e.Partitions)
				}
			}
		}
		ds, _ := adm.DescribeGroups(ctx, sc.group)
		for _, m := range ds[sc.group].Members {
			if m.InstanceID == nil {
				t.Errorf("member %s (%s) has no instance id", m.MemberID, m.ClientID)
			}
		}
		produceKeyed(t, ctx, b.Addr, sc.topic, "s", 200, produced, sc.produce...)
		grouptest.WaitProcessed(t, ctx, produced, append(ms, old)...)
		// Everything was committed when it stopped: nothing is read twice.
		checkAccounting(t, "after the static restart", produced, 0, append(ms, old)...)
		ms = append(ms, old) // its log stays part of the accounting
	}

	// The kill comes while a producer writes, so the dead member has
	// records processed and not yet committed.
	prod, err := grouptest.StartProducer(b.Addr, sc.topic, 300, sc.produce...)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	dead := ms[2]
	lost := dead.Log().Owned()
	dead.Kill()
	took = settled(ms[:2]...)
	t.Logf("killed %s: its partitions %v moved after %v (session timeout %v)", dead.Name(), lost,
		took.Round(time.Millisecond), sc.session)
	// Its connections closed without a LeaveGroup: the broker removes it
	// after the disconnect grace, unless it is static (then it waits out
	// its session, as in Kafka).
	if sc.static {
		if limit := sc.session + 4*time.Second; took > limit {
			t.Errorf("partitions of the killed static member moved after %v, more than the session timeout %v and a rebalance", took, sc.session)
		}
	} else if took > rollbackWithin {
		t.Errorf("partitions of the killed member moved after %v, more than the disconnect grace and a rebalance (%v)", took, rollbackWithin)
	}
	time.Sleep(time.Second)
	if err := prod.Stop(ctx); err != nil {
		t.Errorf("producer: %v", err)
	}
	produced.Add(prod.Acked())
	if err := produced.Dense(); err != nil {
		t.Errorf("producer: %v", err)
	}
	grouptest.WaitProcessed(t, ctx, produced, ms...)
	for _, m := range ms[:2] {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	}
	checkAccounting(t, "after the kill", produced, -1, ms...)
	for _, m := range ms[:2] {
		if !m.Log().Has(grouptest.Closed) {
			t.Errorf("%s did not close cleanly", m.Name())
		}
	}
	// Closing cleanly committed everything.
	checkCommitted(t, ctx, adm, sc.group, sc.topic, produced.Ends())
}

// checkCommitted checks a group's committed offsets are want.
func checkCommitted(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, want map[int32]int64) {
	t.Helper()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetching %s's offsets: %v", group, err)
	}
	for p, end := range want {
		if o, ok := offs.Lookup(topic, p); !ok || o.At != end || o.Err != nil {
			t.Errorf("group %s: partition %d committed %+v, want %d", group, p, o, end)
		}
	}
}

// waitHandoffs waits until the ledger, read through addr, holds n
// hand-offs of group, and returns its entries.
func waitHandoffs(t *testing.T, ctx context.Context, addr, group string, n int, what string) []ledger.Entry {
	t.Helper()
	var es []ledger.Entry
	testutil.EventuallyEvery(t, 30*time.Second, 100*time.Millisecond, func() error {
		var err error
		if es, err = grouptest.ReadLedger(ctx, addr, group); err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, e := range es {
			if e.Type == ledger.TypeHandoff {
				got++
			}
		}
		if got < n {
			return fmt.Errorf("waiting for %s: %d hand-offs in the ledger, want %d", what, got, n)
		}
		return nil
	})
	return es
}
