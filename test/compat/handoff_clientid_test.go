package compat

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// TestHandoffsOfOneClientID: two franz-go members on one host with one
// client id (as two JVMs of the Java client's default client.id are) are
// two members to the hand-off ledger. The second joins while the first
// reads; every partition that moves is an entry from the first member to
// the second, by member id, whose first fetch is the first offset the
// second processed, with nothing skipped.
func TestHandoffsOfOneClientID(t *testing.T) {
	t.Parallel()
	b := startBroker(t, groupBrokerArgs...)
	ctx := groupCtx(t, 2*time.Minute)
	const topic, group, clientID = "same", "same-app-group", "same-app"
	createTopic(t, b.Addr, topic, 4, nil)
	produced := grouptest.Produced{}
	produceKeyed(t, ctx, b.Addr, topic, "a", 400, produced)
	member := func(name string) grouptest.Member {
		return kgoMemberOf(t, grouptest.ConsumerConfig{Name: name, Addr: b.Addr, Group: group, Topic: topic,
			SessionTimeout: groupSession, Opts: []kgo.Opt{kgo.ClientID(clientID)}})
	}
	first := member("first")
	grouptest.WaitProcessed(t, ctx, produced, first)
	second := member("second")
	// The members' own logs say when the partitions are spread (the
	// broker's description names both by the one client id).
	adm := kadm.NewClient(client(t, b.Addr))
	testutil.EventuallyEvery(t, 30*time.Second, 100*time.Millisecond, func() error {
		ds, err := adm.DescribeGroups(ctx, group)
		f, s := first.Log().Owned(), second.Log().Owned()
		if err != nil || ds[group].State != "Stable" || len(f) == 0 || len(s) == 0 || len(f)+len(s) != 4 {
			return fmt.Errorf("the partitions not spread over both members: %v and %v (group %q, %v)", f, s, ds[group].State, err)
		}
		return nil
	})
	produceKeyed(t, ctx, b.Addr, topic, "b", 200, produced)
	grouptest.WaitProcessed(t, ctx, produced, first, second)

	firstProcessed := map[int32]int64{}
	for _, e := range second.Log().Events {
		if _, seen := firstProcessed[e.Partition]; e.Kind == grouptest.Processed && !seen {
			firstProcessed[e.Partition] = e.Offset
		}
	}
	moved := second.Log().Owned()
	if len(moved) == 0 {
		t.Fatal("the second member took no partition")
	}
	var entries []ledger.Entry
	byPartition := map[int32]ledger.Entry{}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		if entries, err = grouptest.ReadLedger(ctx, b.Addr, group); err != nil {
			t.Fatal(err)
		}
		clear(byPartition)
		for _, e := range entries {
			if e.Type == ledger.TypeHandoff && e.From != nil && e.FirstFetched >= 0 {
				byPartition[e.Partition] = e
			}
		}
		if len(byPartition) >= len(moved) || time.Now().After(deadline) {
			break
		}
	}
	for _, p := range moved {
		e, ok := byPartition[p]
		switch {
		case !ok:
			t.Errorf("partition %d moved to the second member: no hand-off in the ledger %+v", p, entries)
		case e.From.ClientID != clientID || e.To.ClientID != clientID || e.From.MemberID == e.To.MemberID:
			t.Errorf("partition %d: a hand-off from %+v to %+v, want two members of client id %s", p, e.From, e.To, clientID)
		case e.FirstFetched != firstProcessed[p] || e.Skipped != 0:
			t.Errorf("partition %d: first fetched %d, skipped %d; the second member first processed %d", p, e.FirstFetched,
				e.Skipped, firstProcessed[p])
		}
	}
	for p := range byPartition {
		if !slices.Contains(moved, p) {
			t.Errorf("partition %d: a hand-off between members in the ledger, but it stayed with the first", p)
		}
	}
}
