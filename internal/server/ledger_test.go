package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// TestLedgerTopic: a group's first assignment reaches __strand_handoffs,
// an internal topic that clients read but may not write.
func TestLedgerTopic(t *testing.T) {
	// Slow: a group's first assignment is waited for, then its entry in the ledger topic.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	b := testutil.StartBroker(t, func(c *config.Broker) { c.GroupInitialRebalanceDelay = 0 })
	createTopic(t, b.Addr, "t", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.ClientID("reader"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var es []ledger.Entry
	for es == nil {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		cons.PollFetches(pctx)
		pcancel()
		if es, err = grouptest.ReadLedger(ctx, b.Addr, "g"); err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			es = nil
		}
		if ctx.Err() != nil {
			t.Fatal("no ledger entry for the group's first assignment")
		}
	}
	if e := es[0]; e.Type != ledger.TypeHandoff || e.Topic != "t" || e.From != nil || e.To.ClientID != "reader" ||
		e.To.SoftwareName != "kgo" || e.FirstFetched != 0 {
		t.Fatalf("entry %+v", e)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, ledger.Topic)
	if err != nil || !td[ledger.Topic].IsInternal {
		t.Fatalf("%s: %+v, %v", ledger.Topic, td[ledger.Topic], err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: ledger.Topic, Value: []byte("{}")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("producing to %s: %v, want INVALID_TOPIC_EXCEPTION", ledger.Topic, err)
	}
}
