package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

// migrateReport runs the real binary's `migrate report` for group and
// returns its JSON and how the command ended.
func migrateReport(t *testing.T, addr, group string) (ledger.Report, result) {
	t.Helper()
	rep, r, err := tryMigrateReport(t, addr, group)
	if err != nil {
		t.Fatal(err)
	}
	return rep, r
}

// tryMigrateReport is migrateReport, with no report (the group not
// there yet) an error.
func tryMigrateReport(t *testing.T, addr, group string) (ledger.Report, result, error) {
	t.Helper()
	r := run(time.Minute, "", "", testutil.Binary(t), "migrate", "report", "--brokers", addr, "--group", group, "--format", "json")
	var rep ledger.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		return rep, r, fmt.Errorf("migrate report: %v\n%v", err, r)
	}
	return rep, r, nil
}

// TestMigrateReportSkipped: a broken migration, reported. v1 reads both
// partitions of a topic to the end (100 records each), commits only
// partition 0, and leaves; 50 more records arrive on each. v2 starts with
// auto.offset.reset=latest and moves its position on partition 0 forward
// by 30 past the commit (a seek). The ledger says partition 1 skipped the
// 50 records between what v1 was sent and the end where v2 started, and
// partition 0 the 30 it seeked past; `strand migrate report` gives both
// and exits non-zero.
func TestMigrateReportSkipped(t *testing.T) {
	t.Parallel()
	b := startBroker(t, append(slices.Clone(groupBrokerArgs), "--handoff-ledger-retention", "1h")...)
	ctx := groupCtx(t, 2*time.Minute)
	const topic, group = "broken", "broken-migration"
	createTopic(t, b.Addr, topic, 2, nil)
	produceTo := func(n int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for p := range int32(2) {
			for range n {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}, nil)
			}
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produceTo(100)

	// v1 reads everything, commits partition 0 only, and leaves.
	v1, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ClientID("v1"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 200; {
		fs := v1.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	var commitErr error
	v1.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: 100}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err == nil {
				err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
			}
			commitErr = err
		})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	v1.Close() // LeaveGroup
	produceTo(50)

	// v2: reset to the end where nothing is committed, and 30 past the
	// commit on partition 0.
	v2, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ClientID("v2"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.DisableAutoCommit(),
		kgo.AdjustFetchOffsetsFn(func(_ context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			if o, ok := offs[topic][0]; ok && o.EpochOffset().Offset >= 0 {
				offs[topic][0] = kgo.NewOffset().At(o.EpochOffset().Offset + 30)
			}
			return offs, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()

	var rep ledger.Report
	var r result
	testutil.Eventually(t, 20*time.Second, func() error {
		// v2 reads on (franz-go fetches again once its buffer is polled).
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		v2.PollFetches(pctx)
		cancel()
		if rep, r = migrateReport(t, b.Addr, group); rep.Totals.Handoffs < 4 {
			return fmt.Errorf("migrate report: %d hand-offs, want 4\n%s", rep.Totals.Handoffs, r.stdout)
		}
		return nil
	})
	skipped := map[int32]int64{}
	for _, e := range rep.Handoffs {
		if e.From != nil && e.From.ClientID == "v1" && e.To.ClientID == "v2" {
			skipped[e.Partition] = e.Skipped
		}
	}
	if rep.Totals.Handoffs != 4 || skipped[0] != 30 || skipped[1] != 50 || rep.Totals.Skipped != 80 {
		t.Fatalf("migrate report: %d hand-offs, skipped %v (total %d); want 4, 30 on partition 0 and 50 on partition 1\n%s",
			rep.Totals.Handoffs, skipped, rep.Totals.Skipped, r.stdout)
	}
	if r.err == nil || !strings.Contains(r.stderr, "skipped") {
		t.Fatalf("migrate report exited zero with records skipped: %v", r)
	}
	table := run(time.Minute, "", "", testutil.Binary(t), "migrate", "report", "--brokers", b.Addr, "--group", group)
	if table.err == nil || !strings.Contains(table.stdout, "skipped 80 (in 2 hand-offs)") {
		t.Fatalf("migrate report (table): %v", table)
	}
	t.Logf("migrate report:\n%s", table.stdout)

	// /metrics counts the same, and the ledger is kept for
	// group.handoff.ledger.retention.ms (here 1 h).
	fams := grouptest.Scrape(t, b.Admin)
	labels := map[string]string{"group": group}
	if v, _ := grouptest.Sample(fams, "strand_group_handoff_skipped_records_total", labels); v != 80 {
		t.Errorf("strand_group_handoff_skipped_records_total = %v, want 80", v)
	}
	if v, _ := grouptest.Sample(fams, "strand_group_handoff_duplicate_risk_records_total", labels); v != float64(rep.Totals.DuplicateRisk) {
		t.Errorf("strand_group_handoff_duplicate_risk_records_total = %v, migrate report's %d", v, rep.Totals.DuplicateRisk)
	}
	if v, _ := grouptest.Sample(fams, "strand_group_handoffs_total", labels); v != float64(rep.Totals.Handoffs) {
		t.Errorf("strand_group_handoffs_total = %v, migrate report's %d", v, rep.Totals.Handoffs)
	}
	// A hand-off whose previous owner's last fetch and new owner's first
	// are both known is one sample of the time the partition went unread.
	timed := 0
	for _, e := range rep.Handoffs {
		if e.LastFetchedAt != nil && e.FirstFetchedAt != nil {
			timed++
		}
	}
	if v, _ := grouptest.Sample(fams, "strand_group_handoff_unowned_seconds", labels); timed == 0 || v != float64(timed) {
		t.Errorf("strand_group_handoff_unowned_seconds counts %v hand-offs; the report has %d with both fetches known", v, timed)
	}
	cfgs, err := kadm.NewClient(client(t, b.Addr)).DescribeTopicConfigs(ctx, ledger.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := cfgs.On(ledger.Topic, nil); err != nil || !slices.ContainsFunc(c.Configs, func(c kadm.Config) bool {
		return c.Key == "retention.ms" && c.MaybeValue() == "3600000"
	}) {
		t.Errorf("%s's configs: %+v (%v), want retention.ms 3600000", ledger.Topic, c.Configs, err)
	}
}

// TestMigrateReportFirstStart: a group's first start is not a migration.
// A consumer with auto.offset.reset=latest starts a new group on a topic
// that holds 100 records a partition: `strand migrate report` gives the
// first starts apart, past 200 records, counts nothing as skipped and
// exits zero; /metrics counts no skipped record either. --since takes a
// time the report printed.
func TestMigrateReportFirstStart(t *testing.T) {
	t.Parallel()
	b := startBroker(t, groupBrokerArgs...)
	ctx := groupCtx(t, time.Minute)
	const topic, group = "fresh", "fresh-latest"
	createTopic(t, b.Addr, topic, 2, nil)
	produceKeyed(t, ctx, b.Addr, topic, "before", 200, grouptest.Produced{}, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	c, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ClientID("fresh"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var rep ledger.Report
	var r result
	testutil.Eventually(t, 20*time.Second, func() error {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		c.PollFetches(pctx)
		cancel()
		var err error
		// The group is made by the consumer's first poll: until then
		// there is no report.
		if rep, r, err = tryMigrateReport(t, b.Addr, group); err != nil {
			return err
		}
		if rep.Totals.FirstStarts < 2 {
			return fmt.Errorf("migrate report: %d first starts, want 2\n%s", rep.Totals.FirstStarts, r.stdout)
		}
		return nil
	})
	if rep.Totals.FirstStarts != 2 || rep.Totals.FirstStartsPast != 200 || rep.Totals.Skipped != 0 || len(rep.Versions) != 0 {
		t.Fatalf("migrate report: %+v, versions %+v; want 2 first starts past 200 records, nothing skipped\n%s",
			rep.Totals, rep.Versions, r.stdout)
	}
	if r.err != nil {
		t.Errorf("migrate report failed on a group's first start: %v", r)
	}
	table := run(time.Minute, "", "", testutil.Binary(t), "migrate", "report", "--brokers", b.Addr, "--group", group, "--all")
	if table.err != nil || !strings.Contains(table.stdout, "First starts: 2") || !strings.Contains(table.stdout, "past 200 records") {
		t.Fatalf("migrate report --all: %v", table)
	}
	t.Logf("migrate report --all:\n%s", table.stdout)
	// The rows' times, read back by --since: from the first row on, both
	// first starts; from a minute after it, none.
	var first string
	for _, line := range strings.Split(table.stdout, "\n") {
		if strings.Contains(line, "first start ") {
			first = line[:len(ledger.TimeLayout)]
			break
		}
	}
	for since, want := range map[string]int{first: 2, "2099-01-01": 0} {
		r := run(time.Minute, "", "", testutil.Binary(t), "migrate", "report", "--brokers", b.Addr, "--group", group,
			"--since", since, "--format", "json")
		var got ledger.Report
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Totals.FirstStarts != want {
			t.Errorf("--since %q: %d first starts (%v), want %d\n%v", since, got.Totals.FirstStarts, err, want, r)
		}
	}
	if v, _ := grouptest.Sample(grouptest.Scrape(t, b.Admin), "strand_group_handoff_skipped_records_total",
		map[string]string{"group": group}); v != 0 {
		t.Errorf("strand_group_handoff_skipped_records_total = %v for a group's first start", v)
	}
}
