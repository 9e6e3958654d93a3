package compat

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
)

// What one broker cannot run, by the heading of the section whose sh block
// it is, and why.
var readmeBlocksNotRun = map[string]string{
	"# Strand": "go run ./cmd/strand serve is the broker this test starts, from the binary built once; " +
		"make test is every test",
	"## TLS": "needs a certificate and the host kafka-1.example; TestClientsOverTLS serves TLS to kcat",
	"## Listeners": "needs the hosts 10.0.0.5-7, certificates and two more brokers; " +
		"TestClientsOverSecureListeners runs such listeners",
	"## A cluster": "three brokers; test/cluster's TestREADMEClusterExample runs this block",
	"### Running on several machines": "installs as root on three machines; test/cluster's TestDeployExample starts " +
		"three brokers from the files it installs, by the unit's command line",
	"## ACLs": "Kafka's own kafka-acls.sh with an admin.properties; TestKafkaAclsTool runs it",
	"## Moving from Kafka to Strand": "needs a Kafka cluster at kafka-1:9092; test/link's TestREADMEMoveFromKafka runs this " +
		"section against a real Kafka",
	"### One consumer at a time: a group on both clusters": "needs a Kafka cluster at kafka-1:9092; test/link's " +
		"TestLinkGroupPassThroughFromKafka runs this section against a real Kafka",
	"### Share groups (queues)": "Kafka's own kafka-configs.sh and kafka-console-share-consumer.sh; " +
		"TestKafkaShareGroupTools runs them",
}

const readmeMention = "names a command in the text"

// The code spans of the README's text that start with "strand " but are
// not commands to run, and why.
var readmeSpansNotRun = map[string]string{
	"strand cluster":                      readmeMention,
	"strand topic":                        readmeMention,
	"strand produce":                      readmeMention,
	"strand consume":                      readmeMention,
	"strand consume --from":               readmeMention,
	"strand group":                        readmeMention,
	"strand serve":                        readmeMention,
	"strand user create":                  readmeMention,
	"strand group describe":               readmeMention,
	"strand migrate watch":                readmeMention,
	"strand migrate report --format json": "names the report's JSON, which the report's synopsis runs below",
	"strand serve --log-format json":      "a second broker, on the README's ports; TestLogFormatJSON runs it",
	"strand dev-cluster --brokers N":      "N brokers on the README's ports; test/cluster's dev-cluster tests run it",
	"strand cluster decommission 3":       "needs four brokers; TestClusterDecommission runs it",
	"strand consume TOPIC --share-group G": "needs share groups on and records to settle; test/fault's TestShareGroupFaults " +
		"runs it as a member, killed while it reads",
	"strand link failover kafka-prod": "needs a link; the failover of a link is run by internal/server's " +
		"TestLinkPromoteWithOpenSourceTransaction",
	"strand migrate plan --brokers kafka-1:9092 --group orders-processor --link kafka-prod": "needs a Kafka " +
		"cluster and a link; test/link's TestLinkGroupPassThroughFromKafka runs it",
	"strand migrate watch --source-brokers kafka-1:9092 --group orders-processor": "needs a Kafka cluster and a " +
		"link; test/link's TestLinkGroupPassThroughFromKafka runs it",
}

// The synopses in the README's text (placeholders, [options], a | b) and
// the commands run for each, with the README's own names.
var readmeSynopses = map[string][]string{
	"strand migrate plan --group G [--planned N] [--protocol classic|consumer] [--assignor A] [--static]": {
		"strand migrate plan --group orders-processor --planned 1 --protocol classic --assignor cooperative-sticky --static",
		"strand migrate plan --group orders-processor --protocol consumer --assignor uniform",
	},
	"strand migrate watch --group G [--interval 1s] [--since 1h]": {
		"strand migrate watch --group orders-processor --interval 1s --since 1h",
	},
	"strand migrate report --brokers 127.0.0.1:9092 --group G [--since 30m] [--all | --risk duplicate] [--format json]": {
		"strand migrate report --brokers 127.0.0.1:9092 --group orders-processor --since 30m --format json",
		"strand migrate report --brokers 127.0.0.1:9092 --group orders-processor --since 1d --all",
		"strand migrate report --brokers 127.0.0.1:9092 --group orders-processor --risk duplicate",
	},
	"strand group list | describe | lag | reset-offsets | copy-offsets | delete": {
		"strand group list",
		"strand group describe --group orders-processor",
		"strand group lag --group orders-processor",
		"strand group copy-offsets --from orders-processor --to green",
		"strand group reset-offsets --group green --to earliest",
		"strand group reset-offsets --group green --to latest --execute",
		"strand group delete --group green",
	},
	"strand acl list [--topic orders --match]": {
		"strand acl list",
		"strand acl list --topic orders --match",
	},
}

// TestREADMECommands runs the README's commands as written, in the
// README's order, against one real broker: every line of its sh blocks and
// every command in a code span of its text, each through bash -c in one
// working directory, with `strand` the built binary. The broker's
// addresses replace the README's (127.0.0.1:9092 for clients,
// 127.0.0.1:9644 for the admin listener), STRAND_BROKERS points the tools'
// default at it, and its data directory is ./strand-data there, the
// default. Every command must exit 0, and what the README says a command
// prints or does is checked. strand migrate watch runs with --iterations
// 1, since it redraws until interrupted; the consumer of the Everyday use
// block that runs until stopped is interrupted (SIGINT, as Ctrl-C) once
// its periodic commit covers everything it read, and must then have
// printed every record and committed them. What one broker cannot run is
// listed above with the reason.
//
// The broker runs with --authorizer acl (User:ANONYMOUS, the plain
// listener's principal, a super user), as the README's strand acl commands
// need, and with groups forming 200 ms after their first member. The SASL
// section runs last: it stops the broker, creates a user in its data
// directory and starts it again with a SASL listener.
func TestREADMECommands(t *testing.T) {
	t.Parallel()
	needKcat(t)
	doc := testutil.README(t)
	r := newReadmeRun(t)

	var sasl *testutil.Section
	sections := testutil.Sections(doc)
	headings := map[string]bool{}
	for i, s := range sections {
		headings[s.Heading] = true
		switch s.Heading {
		case "## SASL":
			sasl = &sections[i]
			continue
		case "## Consumer groups":
			r.startGroup("orders-processor", "orders")
		}
		r.section(s)
		switch s.Heading {
		case "## 1-minute walkthrough with kcat":
			r.checkWalkthrough(doc, s)
		case "### Migrating consumers safely":
			r.checkCopied("orders-processor", "orders-processor-v2")
		}
	}
	if sasl == nil {
		t.Fatal("README.md has no SASL section")
	}
	// The first user is made in the stopped broker's data directory.
	if err := r.broker.Interrupt(); err != nil {
		t.Errorf("the broker stopped by Ctrl-C: %v", err)
	}
	r.section(*sasl)

	for _, h := range []string{"## 1-minute walkthrough with kcat", "## Everyday use", "## Consumer groups",
		"### Migrating consumers safely"} {
		if !headings[h] {
			t.Errorf("README.md has no %q section, which this test checks", h)
		}
	}
	for _, table := range []map[string]bool{
		keys(readmeBlocksNotRun), keys(readmeSpansNotRun), keys(readmeSynopses), keys(r.interrupted),
	} {
		for k := range table {
			if !r.used[k] {
				t.Errorf("%q is listed in this test but not in README.md: update the list", k)
			}
		}
	}
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range maps.Keys(m) {
		out[k] = true
	}
	return out
}

// readmeRun is the README's commands being run.
type readmeRun struct {
	t      *testing.T
	dir    string   // where every command runs
	env    []string // their environment, but for STRAND_BROKERS
	broker *testutil.Process
	adm    *kadm.Client    // on the first broker, to check what commands did
	used   map[string]bool // entries of the lists above that the README has
	// The lines that run until interrupted (Ctrl-C), each with the
	// condition to wait for before the interrupt: the consumer's periodic
	// commit has covered everything it read.
	interrupted map[string]func() error
	results     map[string]result // by line as written
}

func newReadmeRun(t *testing.T) *readmeRun {
	r := &readmeRun{t: t, dir: t.TempDir(), used: map[string]bool{}, results: map[string]result{}}
	bin := filepath.Join(r.dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testutil.Binary(t), filepath.Join(bin, "strand")); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRAND_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			r.env = append(r.env, kv)
		}
	}
	r.env = append(r.env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"XDG_CONFIG_HOME="+filepath.Join(r.dir, "config"), // strand profile's files
		"ADMIN_PASSWORD=readme-secret")
	r.broker = testutil.StartProcess(t, filepath.Join(r.dir, "strand-data"),
		"--group-initial-rebalance-delay", "200ms", "--authorizer", "acl", "--super-users", "User:ANONYMOUS")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("strand output (last 8 KiB):\n%s", tail(r.broker.Output.String(), 8<<10))
		}
	})
	r.adm = kadm.NewClient(client(t, r.broker.Addr))
	r.interrupted = map[string]func() error{
		"strand consume orders --group audit": func() error { return r.caughtUp("audit", "orders") },
	}
	return r
}

// section runs a section's sh blocks, then the commands of its text.
func (r *readmeRun) section(s testutil.Section) {
	t := r.t
	if why, ok := readmeBlocksNotRun[s.Heading]; ok && len(s.Blocks) > 0 {
		r.used[s.Heading] = true
		t.Logf("not run: the block of %q: %s", s.Heading, why)
	} else {
		for _, b := range s.Blocks {
			for _, line := range testutil.CommandLines(b) {
				r.line(line)
			}
		}
	}
	for _, span := range s.Spans {
		if !strings.HasPrefix(span, "strand ") {
			continue
		}
		if why, ok := readmeSpansNotRun[span]; ok {
			r.used[span] = true
			t.Logf("not run: %q: %s", span, why)
			continue
		}
		lines, ok := readmeSynopses[span]
		if ok {
			r.used[span] = true
		} else {
			lines = []string{span}
		}
		for _, line := range lines {
			r.line(line)
		}
	}
}

// fixedAddr is an address the test does not move to one of its own.
var fixedAddr = regexp.MustCompile(`(127\.0\.0\.1|localhost|0\.0\.0\.0):\d+`)

// rewrite puts the broker's addresses for the README's.
func (r *readmeRun) rewrite(line string) string {
	line = strings.ReplaceAll(line, "127.0.0.1:9092", r.broker.Addr)
	line = strings.ReplaceAll(line, "127.0.0.1:9644", r.broker.Admin)
	if strings.HasPrefix(line, "strand migrate watch ") {
		cmd, comment, _ := strings.Cut(line, " #")
		line = cmd + " --iterations 1"
		if comment != "" {
			line += " #" + comment
		}
	}
	return line
}

// line runs one command line of the README.
func (r *readmeRun) line(line string) {
	t := r.t
	t.Helper()
	rewritten := r.rewrite(line)
	if a := fixedAddr.FindString(strings.NewReplacer(r.broker.Addr, "", r.broker.Admin, "").Replace(rewritten)); a != "" {
		t.Errorf("%q: the address %s is not one this test moves to its broker", line, a)
		return
	}
	if rest, ok := strings.CutPrefix(rewritten, "strand serve"); ok {
		r.serve(rest)
		return
	}
	cmd, _, _ := strings.Cut(line, " #")
	cmd = strings.TrimSpace(cmd)
	var res result
	if ready, ok := r.interrupted[cmd]; ok {
		r.used[cmd] = true
		res = r.runUntil(rewritten, ready)
	} else {
		res = r.run(rewritten)
	}
	r.results[line] = res
	if res.err != nil {
		t.Errorf("README command %q failed: %v", line, res)
		return
	}
	t.Logf("%s (%v)", line, res.elapsed.Round(time.Millisecond))
	if cmd == "strand consume orders --group audit" {
		r.checkPrintedCommitted(res, "audit", "orders")
	}
}

// serve starts the broker of a strand serve line (its arguments after
// "serve"), in place of the stopped one: with the data directory the
// commands' ./strand-data, and an admin listener of its own, unless the
// line gives them.
func (r *readmeRun) serve(args string) {
	t := r.t
	if strings.ContainsAny(args, `'"$\`) {
		t.Fatalf("strand serve%s: quoting is not split here", args)
	}
	words := append([]string{"serve"}, strings.Fields(args)...)
	if !slices.Contains(words, "--data-dir") {
		words = append(words, "--data-dir", filepath.Join(r.dir, "strand-data"))
	}
	admin := testutil.FreePort(t)
	if !slices.Contains(words, "--admin-listen") {
		words = append(words, "--admin-listen", admin)
	}
	p := testutil.StartCommand(t, words...)
	p.Addr, p.Admin = r.broker.Addr, admin
	r.broker = p
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("strand serve%s output (last 8 KiB):\n%s", args, tail(p.Output.String(), 8<<10))
		}
	})
}

// command is bash running a line, in a process group of its own (a pipe's
// commands are interrupted and killed together).
func (r *readmeRun) command(ctx context.Context, line string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = r.dir
	cmd.Env = append(slices.Clone(r.env), "STRAND_BROKERS="+r.broker.Addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

const readmeLineTimeout = 30 * time.Second

func (r *readmeRun) run(line string) result {
	ctx, cancel := context.WithTimeout(context.Background(), readmeLineTimeout)
	defer cancel()
	cmd, stdout, stderr := r.command(ctx, line)
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after %v (%v)", readmeLineTimeout, err)
	}
	return result{cmdline: line, stdout: stdout.String(), stderr: stderr.String(), err: err, elapsed: time.Since(start)}
}

// runUntil runs a line that runs until interrupted, and interrupts it
// (SIGINT, as Ctrl-C) once ready returns nil.
func (r *readmeRun) runUntil(line string, ready func() error) result {
	ctx, cancel := context.WithTimeout(context.Background(), readmeLineTimeout)
	defer cancel()
	cmd, stdout, stderr := r.command(ctx, line)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	r.t.Cleanup(func() { cancel(); <-done })
	testutil.Eventually(r.t, 20*time.Second, func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("exited before it was interrupted: %v", err)
		default:
			return ready()
		}
	})
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	err := <-done
	done <- err
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after %v (%v)", readmeLineTimeout, err)
	}
	return result{cmdline: line, stdout: stdout.String(), stderr: stderr.String(), err: err, elapsed: time.Since(start)}
}

// committedAndEnds are a group's committed offsets of a topic and the
// topic's start and end offsets, by partition.
func (r *readmeRun) committedAndEnds(group, topic string) (committed, starts, ends map[int32]int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := r.adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, nil, nil, err
	}
	committed = map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			committed[o.Partition] = o.At
		}
	})
	if starts, err = r.listed(ctx, r.adm.ListStartOffsets, topic); err != nil {
		return nil, nil, nil, err
	}
	if ends, err = r.listed(ctx, r.adm.ListEndOffsets, topic); err != nil {
		return nil, nil, nil, err
	}
	return committed, starts, ends, nil
}

func (r *readmeRun) listed(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error),
	topic string) (map[int32]int64, error) {
	listed, err := list(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// caughtUp is nil once the group has committed the end of every
// partition of the topic that has records.
func (r *readmeRun) caughtUp(group, topic string) error {
	committed, starts, ends, err := r.committedAndEnds(group, topic)
	if err != nil {
		return err
	}
	for p, end := range ends {
		if end > starts[p] && committed[p] != end {
			return fmt.Errorf("group %s has committed %v of %s, whose ends are %v", group, committed, topic, ends)
		}
	}
	return nil
}

// checkPrintedCommitted checks that a consumer of a group printed every
// record of the topic, one per line, and that the group's commits are
// the ends: it commits what it printed when it stops.
func (r *readmeRun) checkPrintedCommitted(res result, group, topic string) {
	t := r.t
	committed, starts, ends, err := r.committedAndEnds(group, topic)
	if err != nil {
		t.Fatal(err)
	}
	records := int64(0)
	for p, end := range ends {
		records += end - starts[p]
		if end > starts[p] && committed[p] != end {
			t.Errorf("%s: committed %v after it stopped, the ends are %v", res.cmdline, committed, ends)
		}
	}
	if printed := strings.Count(res.stdout, "\n"); int64(printed) != records || records == 0 {
		t.Errorf("%s printed %d records of %d:\n%s", res.cmdline, printed, records, res.stdout)
	}
}

// checkWalkthrough checks that the walkthrough's consume printed what the
// README says, and that after Ctrl-C and a restart it prints the same.
func (r *readmeRun) checkWalkthrough(doc string, s testutil.Section) {
	t := r.t
	m := regexp.MustCompile("prints `([^`]+)` through `([^`]+)`").FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("the walkthrough no longer says what the consume prints: update this test")
	}
	var consume string
	for _, b := range s.Blocks {
		for _, line := range testutil.CommandLines(b) {
			if strings.HasPrefix(line, "kcat -C") {
				consume = line
			}
		}
	}
	res, ok := r.results[consume]
	if !ok {
		t.Fatal("the walkthrough has no kcat -C line")
	}
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	if lines[0] != m[1] || lines[len(lines)-1] != m[2] {
		t.Errorf("the walkthrough's consume printed %q, not %q through %q", lines, m[1], m[2])
	}
	// "Stop the broker with Ctrl-C (it shuts down cleanly) and start it
	// again: the messages are still there."
	if err := r.broker.Interrupt(); err != nil {
		t.Errorf("the broker stopped by Ctrl-C: %v", err)
	}
	r.broker.Restart(t)
	again := r.run(r.rewrite(consume))
	if again.err != nil || again.stdout != res.stdout {
		t.Errorf("after a restart the walkthrough's consume printed %q, before %q: %v", again.stdout, res.stdout, again)
	}
}

// startGroup runs a member of group reading topic (3 partitions, 30
// records), as the README's group commands expect ("v1 running"), and
// waits until it has committed everything.
func (r *readmeRun) startGroup(group, topic string) {
	t := r.t
	createTopic(t, r.broker.Addr, topic, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	producer := client(t, r.broker.Addr, kgo.DefaultProduceTopic(topic))
	for i := range 30 {
		rec := &kgo.Record{Key: []byte(fmt.Sprint("customer-", i%7)), Value: []byte(fmt.Sprint("order-", i))}
		if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	member := client(t, r.broker.Addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.AutoCommitInterval(100*time.Millisecond))
	pctx, stop := context.WithCancel(context.Background())
	polling := make(chan struct{})
	go func() {
		defer close(polling)
		for pctx.Err() == nil {
			member.PollFetches(pctx)
		}
	}()
	t.Cleanup(func() { stop(); <-polling })
	testutil.Eventually(t, 20*time.Second, func() error { return r.caughtUp(group, topic) })
}

// checkCopied checks that copy-offsets gave the new group the old one's
// offsets.
func (r *readmeRun) checkCopied(from, to string) {
	t := r.t
	want, _, _, err := r.committedAndEnds(from, "orders")
	if err != nil {
		t.Fatal(err)
	}
	got, _, _, err := r.committedAndEnds(to, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) || len(got) == 0 {
		t.Errorf("group %s has offsets %v, copied from %s's %v", to, got, from, want)
	}
}
