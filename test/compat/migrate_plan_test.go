package compat

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// TestMigratePlan runs `strand migrate plan` against real groups: ten
// consumers for ten partitions, an eager group to be moved to a
// cooperative assignor, and a group whose versioned twin reads the same
// topic are each flagged, with a non-zero exit; a sound plan passes.
func TestMigratePlan(t *testing.T) {
	t.Parallel()
	b := startBroker(t, groupBrokerArgs...)
	ctx := groupCtx(t, 2*time.Minute)
	adm := grouptest.Admin(t, b.Addr)
	createTopic(t, b.Addr, "full", 10, nil)
	createTopic(t, b.Addr, "eager", 10, nil)
	createTopic(t, b.Addr, "orders", 4, nil)

	var full []grouptest.Member
	for i := range 10 {
		full = append(full, kgoMember(t, b.Addr, "full", "full-group", fmt.Sprintf("full-%d", i)))
	}
	grouptest.WaitSettled(t, ctx, adm, "full-group", "full", 10, full...)
	var eager []grouptest.Member
	for i := range 2 {
		eager = append(eager, kgoMember(t, b.Addr, "eager", "eager-group", fmt.Sprintf("eager-%d", i), kgo.RangeBalancer()))
	}
	grouptest.WaitSettled(t, ctx, adm, "eager-group", "eager", 10, eager...)
	for _, g := range []string{"orders-processor", "orders-processor-v2"} {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 0, LeaderEpoch: -1})
		if res, err := adm.CommitOffsets(ctx, g, os); err != nil || res.Error() != nil {
			t.Fatalf("committing for %s: %v %v", g, err, res.Error())
		}
	}

	plan := func(args ...string) result {
		t.Helper()
		return run(time.Minute, "", "", testutil.Binary(t), append([]string{"migrate", "plan", "--brokers", b.Addr}, args...)...)
	}
	for _, tc := range []struct {
		args []string
		ok   bool
		says string
	}{
		{[]string{"--group", "full-group"}, false, "FAIL  capacity  11 consumers (10 now + 1 planned) for 10 partitions of full"},
		{[]string{"--group", "eager-group", "--assignor", "cooperative-sticky"}, false, "FAIL  assignor"},
		{[]string{"--group", "orders-processor"}, false, "FAIL  group-id  groups with a name close to orders-processor read the same topics: orders-processor-v2 (on orders)"},
		{[]string{"--group", "eager-group", "--assignor", "range"}, true, "ok    assignor"},
	} {
		r := plan(tc.args...)
		t.Logf("migrate plan %v:\n%s", tc.args, r.stdout)
		if (r.err == nil) != tc.ok || !strings.Contains(r.stdout, tc.says) {
			t.Errorf("migrate plan %v: want success %v and %q:\n%v", tc.args, tc.ok, tc.says, r)
		}
	}
	for _, m := range append(full, eager...) {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	}
}
