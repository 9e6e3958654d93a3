package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// TestConsumerGroupBrokerRestart kills the real binary (kill -9) under a
// consumer group (KIP-848) of three franz-go members while a producer
// writes: the group comes back from __consumer_offsets with the same
// members at the same group epoch (no rebalance), and every record is
// processed, duplicates coming only from what was not yet committed; the
// hand-off ledger keeps every entry it had.
func TestConsumerGroupBrokerRestart(t *testing.T) {
	t.Parallel()
	b := startBroker(t, consumerGroupBrokerArgs...)
	ctx := groupCtx(t, 3*time.Minute)
	group := "consumer-restart"
	createTopic(t, b.Addr, "orders", groupPartitions, nil)
	adm := grouptest.Admin(t, b.Addr)
	var ms []grouptest.Member
	for i := range 3 {
		ms = append(ms, kgoMemberOf(t, grouptest.ConsumerConfig{Name: fmt.Sprintf("%s-%d", group, i), Addr: b.Addr,
			Group: group, Topic: "orders", SessionTimeout: consumerSession, ServerSide: true}))
	}
	grouptest.WaitSettled(t, ctx, adm, group, "orders", groupPartitions, ms...)
	produced := grouptest.Produced{}
	produceKeyed(t, ctx, b.Addr, "orders", "a", 300, produced)
	grouptest.WaitProcessed(t, ctx, produced, ms...)
	before := consumerGroupState(t, ctx, adm, group)
	// The hand-off ledger has the first assignment of each partition.
	ledgerBefore := waitLedger(t, ctx, b.Addr, group, groupPartitions)

	killUnderLoad(t, ctx, b, "orders", produced)
	grouptest.WaitProcessed(t, ctx, produced, ms...)
	after := consumerGroupState(t, ctx, adm, group)
	if after.epoch != before.epoch || !maps.Equal(after.members, before.members) {
		t.Errorf("after kill -9 and restart: group epoch %d with members %v; before: epoch %d with %v",
			after.epoch, after.members, before.epoch, before.members)
	}
	checkAccounting(t, "kill -9 and restart", produced, -1, ms...)
	// What the ledger held before the kill, it holds after it.
	ledgerAfter, err := grouptest.ReadLedger(ctx, b.Addr, group)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledgerAfter) < len(ledgerBefore) || !slices.EqualFunc(ledgerBefore, ledgerAfter[:len(ledgerBefore)], sameEntry) {
		t.Errorf("hand-off ledger after kill -9 and restart: %d entries, %d before, or not the same ones", len(ledgerAfter), len(ledgerBefore))
	}
	for _, m := range ms {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	}
}

type consumerGroupSnapshot struct {
	epoch   int32
	members map[string]string // client id -> member id
}

// consumerGroupState waits for the group to be Stable and reads its epoch
// and members.
func consumerGroupState(t *testing.T, ctx context.Context, adm *kadm.Client, group string) consumerGroupSnapshot {
	t.Helper()
	var s consumerGroupSnapshot
	testutil.EventuallyEvery(t, 20*time.Second, 100*time.Millisecond, func() error {
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return fmt.Errorf("consumer group %s not Stable: %w", group, err)
		}
		d := ds[group]
		if d.Err != nil || d.State != "Stable" {
			return fmt.Errorf("consumer group %s not Stable: %s %v", group, d.State, d.Err)
		}
		s = consumerGroupSnapshot{epoch: d.Epoch, members: map[string]string{}}
		for _, m := range d.Members {
			s.members[m.ClientID] = m.MemberID
		}
		return nil
	})
	return s
}

// waitLedger waits until the hand-off ledger holds at least n entries of
// group, and returns them.
func waitLedger(t *testing.T, ctx context.Context, addr, group string, n int) []ledger.Entry {
	t.Helper()
	var es []ledger.Entry
	testutil.EventuallyEvery(t, 10*time.Second, 200*time.Millisecond, func() error {
		var err error
		if es, err = grouptest.ReadLedger(ctx, addr, group); err != nil {
			t.Fatal(err)
		}
		if len(es) < n {
			return fmt.Errorf("the hand-off ledger holds %d entries of %s, want %d", len(es), group, n)
		}
		return nil
	})
	return es
}

// sameEntry compares two entries field by field, as their JSON.
func sameEntry(a, b ledger.Entry) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
