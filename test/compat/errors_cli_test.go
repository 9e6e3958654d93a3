package compat

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

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
