package compat

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/internal/testutil"
)

// TestToolsUnreachableCluster: every tool run against an address nobody
// listens on exits non-zero at once, naming the address, instead of
// retrying for its whole timeout (30 s) or, for migrate watch, drawing
// views of nothing.
func TestToolsUnreachableCluster(t *testing.T) {
	t.Parallel()
	addr := testutil.FreePort(t) // free: nobody listens there
	for _, args := range [][]string{
		{"produce", "orders"},
		{"consume", "orders", "--exit-at-end"},
		{"consume", "orders", "--group", "audit"},
		{"topic", "list"},
		{"group", "describe", "--group", "orders-processor"},
		{"cluster", "info"},
		{"migrate", "plan", "--group", "orders-processor"},
		{"migrate", "report", "--group", "orders-processor"},
		{"migrate", "watch", "--group", "orders-processor", "--iterations", "3"},
	} {
		r := run(time.Minute, "", "a\n", testutil.Binary(t), append(args, "--brokers", addr)...)
		if r.err == nil || !strings.Contains(r.stderr, "cannot reach the cluster at "+addr+" (--brokers)") {
			t.Errorf("want a non-zero exit naming %s: %v", addr, r)
		}
		// A refused connection is known at once; 30 s is how long a
		// request may be retried.
		if r.elapsed > 10*time.Second {
			t.Errorf("took %v to fail, want well under 30 s: %v", r.elapsed, r)
		}
	}
}

// TestToolsNoSuchGroup: a group id that names no group is an error of
// every tool that takes one, naming the closest existing ids.
func TestToolsNoSuchGroup(t *testing.T) {
	t.Parallel()
	b := startBroker(t, groupBrokerArgs...)
	createTopic(t, b.Addr, "orders", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(client(t, b.Addr))
	commit := kadm.Offsets{}
	commit.AddOffset("orders", 0, 1, -1)
	for _, g := range []string{"orders-processor", "payments"} {
		if res, err := adm.CommitOffsets(ctx, g, commit); err != nil || res.Error() != nil {
			t.Fatalf("committing for %s: %v %v", g, err, res.Error())
		}
	}
	cli := func(args ...string) result {
		return run(time.Minute, "", "", testutil.Binary(t), append(args, "--brokers", b.Addr)...)
	}
	const mistyped = "no group orders-procesor; did you mean orders-processor?"
	for _, args := range [][]string{
		{"group", "describe", "--group", "orders-procesor"},
		{"group", "lag", "--group", "orders-procesor"},
		{"group", "delete", "--group", "orders-procesor"},
		{"group", "copy-offsets", "--from", "orders-procesor", "--to", "new"},
		{"migrate", "plan", "--group", "orders-procesor"},
		{"migrate", "report", "--group", "orders-procesor"},
		{"migrate", "watch", "--group", "orders-procesor", "--iterations", "1"},
	} {
		wantCLI(t, cli(args...), false, mistyped)
	}
	// Nothing close: the tools say where the groups are listed.
	wantCLI(t, cli("migrate", "report", "--group", "nosuchgroup"), false, "no group nosuchgroup (strand group list lists the groups)")
	wantCLI(t, cli("group", "lag", "--group", "nosuchgroup"), false, "no group nosuchgroup (strand group list lists the groups)")
	// A group yet to start is planned for, and watched until it starts.
	wantCLI(t, cli("migrate", "plan", "--group", "reports"), true, "group reports does not exist yet")
	wantCLI(t, cli("migrate", "watch", "--group", "reports", "--iterations", "1"), true, "no group reports (yet)")
	// The groups that exist are read as before.
	wantCLI(t, cli("migrate", "report", "--group", "orders-processor"), true, "0 hand-offs")
	wantCLI(t, cli("group", "lag", "--group", "payments"), true, "total lag 0")
}

// TestErrorsNameTheThing: an error names what it is about, as the user
// wrote it: the config and its value, the topic a name is refused for and
// why (in the broker's answer, as Kafka words it), the topic that does not
// exist.
func TestErrorsNameTheThing(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopic(t, b.Addr, "orders", 1, nil)
	cli := func(stdin string, args ...string) result {
		return run(time.Minute, "", stdin, testutil.Binary(t), append(args, "--brokers", b.Addr)...)
	}
	wantCLI(t, cli("", "topic", "create", "events", "--config", "retention.ms=1d"), false,
		"events: INVALID_CONFIG: Invalid value 1d for configuration retention.ms: Not a number of type LONG")
	wantCLI(t, cli("", "topic", "alter-config", "orders", "--set", "retention.ms=1d"), false,
		"orders: INVALID_CONFIG: Invalid value 1d for configuration retention.ms: Not a number of type LONG")
	wantCLI(t, cli("", "topic", "alter-config", "orders", "--set", "retention.msx=1"), false,
		"orders: INVALID_CONFIG: Unknown topic config name: retention.msx")
	wantCLI(t, cli("", "cluster", "config", "set", "--set", "log.retention.ms=1d"), false,
		"INVALID_REQUEST: Invalid value 1d for configuration log.retention.ms: Not a number of type LONG")

	long := strings.Repeat("a", 250)
	wantCLI(t, cli("", "topic", "create", long), false,
		"INVALID_TOPIC_EXCEPTION: Topic name is invalid: the length of '"+long+"' is longer than the max allowed length 249")
	wantCLI(t, cli("", "topic", "create", "bad/name"), false,
		"INVALID_TOPIC_EXCEPTION: Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'")
	// The broker's own answer, as any Kafka client gets it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resps, err := kadm.NewClient(client(t, b.Addr)).CreateTopics(ctx, 1, 1, nil, long)
	if err != nil {
		t.Fatal(err)
	}
	if resp := resps[long]; !errors.Is(resp.Err, kerr.InvalidTopicException) {
		t.Errorf("CreateTopics answers %v, want INVALID_TOPIC_EXCEPTION", resp.Err)
	} else if want := "Topic name is invalid: the length of '" + long + "' is longer than the max allowed length 249"; resp.ErrMessage != want {
		t.Errorf("CreateTopics answers %q, want %q", resp.ErrMessage, want)
	}

	const missing = "no topic ordrs; did you mean orders?: UNKNOWN_TOPIC_OR_PARTITION"
	// Where the broker creates topics on first use, produce creates one,
	// as Kafka's producers do; where it does not, a missing one is named.
	wantCLI(t, cli("x\n", "produce", "created-on-use"), true, "wrote 1 records")
	wantCLI(t, cli("", "topic", "describe", "created-on-use"), true)
	closed := startBroker(t, "--auto-create-topics=false")
	createTopic(t, closed.Addr, "orders", 1, nil)
	wantCLI(t, run(time.Minute, "", "x\n", testutil.Binary(t), "produce", "ordrs", "--brokers", closed.Addr), false, missing)
	wantCLI(t, run(time.Minute, "", "", testutil.Binary(t), "topic", "describe", "ordrs", "--brokers", closed.Addr), false)
	wantCLI(t, cli("", "consume", "ordrs", "--exit-at-end"), false, missing)
	wantCLI(t, cli("", "consume", "ordrs", "--exit-at-end", "--group", "audit"), false, missing)
	wantCLI(t, cli("", "group", "reset-offsets", "--group", "audit", "--topic", "ordrs"), false, "topic ordrs: UNKNOWN_TOPIC_OR_PARTITION")
	wantCLI(t, cli("", "topic", "delete", "ordrs"), false, "ordrs: UNKNOWN_TOPIC_OR_PARTITION")
}
