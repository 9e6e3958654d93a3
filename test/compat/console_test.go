package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/testutil"
)

// TestConsoleInBrowser loads every page of the web console in headless
// Chromium against a broker with real data: a topic with records, and a
// group that read part of it, changed owners and stopped. What the pages
// show is checked against the CLI (the group's lag, partition by
// partition), the overview names the controller, the topic's page its
// leaders, in-sync sets and configs, the record browser shows the records
// written (as text, JSON and hex, with their headers, from an offset or
// from the offset ListOffsets gives for a time), a group with a member
// shows it Stable with its client id and software, the lag chart and the
// hand-off timeline are drawn, and a reset of the group's offsets works
// once confirmed. Screenshots go to STRAND_SCREENSHOTS (a
// directory), else to the test's own.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	chromium := needTool(t, "chromium", "apt-get install chromium")
	b := startBroker(t, append(groupBrokerArgs, "--admin-console-actions", "--admin-console-sample-interval", "200ms")...)
	ctx := groupCtx(t, 2*time.Minute)
	createTopic(t, b.Addr, "orders", 3, map[string]*string{"retention.ms": kmsg.StringPtr("86400000")})
	cl := client(t, b.Addr, kgo.DefaultProduceTopic("orders"))
	var midway time.Time // before the last 15 records
	for i := range 30 {
		if i == 15 {
			time.Sleep(10 * time.Millisecond)
			midway = time.Now()
		}
		r := &kgo.Record{Key: fmt.Appendf(nil, "customer-%d", i%5), Value: fmt.Appendf(nil, `{"order":%d,"total":%d.50}`, i, i*3),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("console-test")}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	readPartly(t, ctx, b.Addr, "billing", "orders")

	// The CLI's figures, which the console must show.
	lag := strandCLI(t, b.Addr, "group")("lag", "--group", "billing", "--format", "json")
	wantCLI(t, lag, true)
	var want inspect.Group
	if err := json.Unmarshal([]byte(lag.stdout), &want); err != nil {
		t.Fatal(err)
	}
	// The partitions the group committed (the first member may not have
	// read every partition before the second took some).
	if want.TotalLag == 0 || len(want.Partitions) == 0 {
		t.Fatalf("the group's lag from the CLI: %+v", want)
	}

	shots := os.Getenv("STRAND_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	base := "http://" + b.Admin
	alloc, cancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.Headless, chromedp.WindowSize(1280, 1000))...)
	defer cancel()
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()
	// Each step runs with a timeout of its own, on a context derived
	// from one that ran once (chromedp.Run's rule).
	if err := chromedp.Do(browser, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", chromium, err)
	}
	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(browser, 30*time.Second) }
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := step()
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		sctx, cancel := step()
		defer cancel()
		v, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("the text of %s: %v", sel, err)
		}
		return strings.TrimSpace(v)
	}
	count := func(sel string) int {
		t.Helper()
		sctx, cancel := step()
		defer cancel()
		n, err := chromedp.Run(sctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
		if err != nil {
			t.Fatalf("counting %s: %v", sel, err)
		}
		return n
	}
	shot := func(name string) {
		t.Helper()
		sctx, cancel := step()
		defer cancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.WriteFile(filepath.Join(shots, name), png, 0o644)
		}
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
	}

	do("the overview", chromedp.Navigate(base+"/"))
	if h, n, tc, gc := text("#health"), text("#brokers"), text("#topics"), text("#groups"); h != "healthy" || n != "1" || tc != "1" || gc != "1" {
		t.Errorf("overview: health %q, brokers %q, topics %q, groups %q", h, n, tc, gc)
	}
	if c := text("#controller"); c != "0" {
		t.Errorf("overview: controller %q, want broker 0", c)
	}
	shot("console-overview.png")

	// A member reading while the groups' pages load.
	live := client(t, b.Addr, kgo.ConsumerGroup("watchers"), kgo.ConsumeTopics("orders"), kgo.ClientID("console-live"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n < 30 && ctx.Err() == nil; {
		n += live.PollFetches(ctx).NumRecords()
	}

	do("the topics", chromedp.Navigate(base+"/topics"))
	if records, size := text(`tr[data-topic="orders"] .records`), text(`tr[data-topic="orders"] .size`); records != "30" || !strings.HasSuffix(size, "B") {
		t.Errorf("topics: orders has %q records in %q", records, size)
	}
	shot("console-topics.png")
	do("a topic", chromedp.Navigate(base+"/topics/orders"))
	if records, partitions := text("#records"), count("#partition-table tr")-1; records != "30" || partitions != 3 {
		t.Errorf("topic orders: %q records, %d partitions", records, partitions)
	}
	for p := range 3 {
		row := fmt.Sprintf(`#partition-table tr[data-partition="%d"] `, p)
		if l, r, i := text(row+".leader"), text(row+".replicas"), text(row+".isr"); l != "0" || r != "0" || i != "0" {
			t.Errorf("partition %d: leader %q, replicas %q, in sync %q; want broker 0 for each", p, l, r, i)
		}
	}
	if rate, err := strconv.ParseFloat(text("#rate"), 64); err != nil || rate < 0 {
		t.Errorf("topic orders: records/s %v (%v)", rate, err)
	}
	if v, src := text(`#config-table tr[data-config="retention.ms"] .value`), text(`#config-table tr[data-config="retention.ms"] .source`); v != "86400000" || src != "topic" {
		t.Errorf("topic orders: retention.ms shown as %q from %q, want 86400000 from the topic", v, src)
	}
	if v, src := text(`#config-table tr[data-config="cleanup.policy"] .value`), text(`#config-table tr[data-config="cleanup.policy"] .source`); v != "delete" || src != "default" {
		t.Errorf("topic orders: cleanup.policy shown as %q from %q, want delete from the default", v, src)
	}
	if lag := text(`#topic-group-table tr[data-group="billing"] .lag`); lag != strconv.FormatInt(want.TotalLag, 10) {
		t.Errorf("topic orders: billing's lag %q, the CLI's %d", lag, want.TotalLag)
	}
	shot("console-topic.png")

	// The record browser, from the topic's page, and as JSON.
	do("the record browser", chromedp.Click(chromedp.CSS("#browse")), chromedp.WaitVisible(chromedp.CSS("#record-table")))
	if n, key := count("#record-table pre.key"), text("#record-table pre.key"); n == 0 || !strings.HasPrefix(key, "customer-") {
		t.Errorf("records of partition 0: %d, the first key %q", n, key)
	}
	shot("console-records.png")
	do("records as JSON", chromedp.Navigate(base+"/topics/orders/records?partition=0&offset=0&limit=1&as=json"))
	sctx, cancel := step()
	value, err := chromedp.Run(sctx, chromedp.TextContent(chromedp.CSS("#record-table pre.value")))
	cancel()
	if err != nil || !strings.Contains(value, "\n  \"order\": ") {
		t.Errorf("a JSON value shown as %q (%v)", value, err)
	}
	if h := text("#record-table .headers"); h != "source: console-test" {
		t.Errorf("a record's headers shown as %q", h)
	}
	// Pages: the latest records (a negative offset, as strand consume
	// --from takes it), and on from the first page.
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	end0, _ := ends.Lookup("orders", 0)
	do("the latest records", chromedp.Navigate(base+"/topics/orders/records?partition=0&offset=-2&limit=2"))
	if first := text("#record-table td.offset"); first != strconv.FormatInt(end0.Offset-2, 10) || count("#record-table td.offset") != 2 {
		t.Errorf("the latest 2 records of partition 0 (end %d) start at %s", end0.Offset, first)
	}
	do("the next page", chromedp.Navigate(base+"/topics/orders/records?partition=0&offset=0&limit=2"),
		chromedp.Click(chromedp.CSS("#later")), chromedp.WaitVisible(chromedp.CSS("#earlier")))
	if first := text("#record-table td.offset"); first != "2" {
		t.Errorf("the page after offsets 0-1 starts at %s", first)
	}
	// A search: one record's value holds `"order":7,`, every record's
	// header "console-test".
	found := 0
	for p := range 3 {
		do("a search", chromedp.Navigate(fmt.Sprintf("%s/topics/orders/records?partition=%d&q=%s&limit=50", base, p, url.QueryEscape(`"order":7,`))))
		found += count("#record-table td.offset")
		if progress := text("#search-progress"); !strings.Contains(progress, "the end of the partition") {
			t.Errorf("partition %d: search progress %q", p, progress)
		}
	}
	if found != 1 {
		t.Errorf("a search for one record's value found %d", found)
	}
	do("a search of headers", chromedp.Navigate(base+"/topics/orders/records?partition=0&q=console-test&limit=3"))
	if n, progress := count("#record-table td.offset"), text("#search-progress"); n != 3 || !strings.Contains(progress, "3 found") {
		t.Errorf("a search of headers: %d records shown, %q", n, progress)
	}
	do("records as hex", chromedp.Navigate(base+"/topics/orders/records?partition=0&offset=0&limit=1&as=hex"))
	if key := text("#record-table pre.key"); !strings.Contains(key, "63 75 73 74 6f 6d 65 72") || !strings.Contains(key, "|customer-") {
		t.Errorf("a key shown in hex as %q", key)
	}
	// From a time: the first record shown is the one ListOffsets gives
	// for that time.
	byTime, err := kadm.NewClient(cl).ListOffsetsAfterMilli(ctx, midway.UnixMilli(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		o, _ := byTime.Lookup("orders", p)
		do("records from a time", chromedp.Navigate(fmt.Sprintf("%s/topics/orders/records?partition=%d&time=%s&limit=50", base, p,
			url.QueryEscape(midway.UTC().Format(time.RFC3339Nano)))))
		n := count("#record-table td.offset")
		if o.Offset < 0 || n == 0 {
			if n != 0 {
				t.Errorf("partition %d: records shown from %v, none written since", p, midway)
			}
			continue
		}
		if first := text("#record-table td.offset"); first != strconv.FormatInt(o.Offset, 10) {
			t.Errorf("partition %d from %v: the first record shown is %s, ListOffsets says %d", p, midway, first, o.Offset)
		}
	}

	do("the groups", chromedp.Navigate(base+"/groups"))
	if lag := text(`tr[data-group="billing"] .lag`); lag != strconv.FormatInt(want.TotalLag, 10) {
		t.Errorf("groups: billing's lag %q, the CLI's %d", lag, want.TotalLag)
	}
	if st, m := text(`tr[data-group="watchers"] td:nth-child(3)`), text(`tr[data-group="watchers"] .members`); st != "Stable" || m != "1" {
		t.Errorf("groups: watchers is %q with %q members, want Stable with 1", st, m)
	}
	shot("console-groups.png")
	do("a group with a member", chromedp.Navigate(base+"/groups/watchers"))
	if st, cid, sw := text("#state"), text("#member-table tr:nth-child(2) td:nth-child(2)"), text("#member-table .software"); st != "Stable" ||
		cid != "console-live" || !strings.HasPrefix(sw, "kgo ") {
		t.Errorf("group watchers: state %q, member's client id %q and software %q; want Stable, console-live and kgo's", st, cid, sw)
	}
	live.Close()

	// The group's page: its lag, partition by partition as the CLI, and
	// once samples came, the chart; its hand-offs.
	testutil.EventuallyEvery(t, 20*time.Second, 300*time.Millisecond, func() error {
		do("the group", chromedp.Navigate(base+"/groups/billing"))
		if n := count("#lag-chart polyline"); n <= 1 {
			return fmt.Errorf("no lag chart on the group's page: %d polylines", n)
		}
		return nil
	})
	if total := text("#total-lag"); total != strconv.FormatInt(want.TotalLag, 10) {
		t.Errorf("group page: total lag %q, the CLI's %d", total, want.TotalLag)
	}
	for _, p := range want.Partitions {
		if got := text(fmt.Sprintf(`tr[data-partition="orders-%d"] .lag`, p.Partition)); got != strconv.FormatInt(p.Lag, 10) {
			t.Errorf("partition %d: the page shows lag %q, the CLI %d", p.Partition, got, p.Lag)
		}
	}
	report := run(time.Minute, "", "", testutil.Binary(t), "migrate", "report", "--group", "billing", "--format", "json", "--brokers", b.Addr)
	wantCLI(t, report, true)
	var rep struct {
		Totals struct {
			Handoffs    int `json:"handoffs"`
			FirstStarts int `json:"first_starts"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(report.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	// By default, the hand-offs that moved a partition; every one, first
	// starts too, when asked.
	if n := count("#handoff-table tr") - 1; n != rep.Totals.Handoffs-rep.Totals.FirstStarts || n < 1 {
		t.Errorf("%d hand-offs on the group's page, %d (%d first starts) in migrate report", n, rep.Totals.Handoffs, rep.Totals.FirstStarts)
	}
	if n := count("#handoff-table .to .version"); n == 0 || !strings.HasPrefix(text("#handoff-table .to .version"), "kgo ") {
		t.Errorf("the hand-offs name no member's version")
	}
	if n := count("#lag-chart line.mark"); n == 0 {
		t.Errorf("no rebalance marked on the lag chart")
	}
	for _, p := range want.Partitions {
		secs := text(fmt.Sprintf(`tr[data-partition="orders-%d"] .seconds`, p.Partition))
		if s, err := strconv.ParseFloat(secs, 64); p.Lag > 0 && (err != nil || s <= 0) {
			t.Errorf("partition %d lags %d records and %q s", p.Partition, p.Lag, secs)
		}
	}
	shot("console-group.png")
	do("every hand-off", chromedp.Click(chromedp.CSS(`#handoff-filter a[data-risk="all"]`)), chromedp.WaitVisible(chromedp.CSS("#handoff-table")))
	if n := count("#handoff-table tr") - 1; n != rep.Totals.Handoffs || n < 4 {
		t.Errorf("%d hand-offs listed with all, %d in migrate report; want the first starts and a move", n, rep.Totals.Handoffs)
	}
	do("the lag by version", chromedp.Navigate(base+"/groups/billing?by=version"))
	if legend := text(".legend"); !strings.Contains(legend, "total") {
		t.Errorf("the chart by version: legend %q", legend)
	}

	// An open page refreshes itself: a group started while the groups'
	// page is open shows up on it.
	do("the groups, refreshing every second", chromedp.Navigate(base+"/groups?refresh=1"))
	late := client(t, b.Addr, kgo.ConsumerGroup("latecomers"), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n < 30 && ctx.Err() == nil; {
		n += late.PollFetches(ctx).NumRecords()
	}
	do("a group appearing on an open page", chromedp.WaitVisible(chromedp.CSS(`tr[data-group="latecomers"]`)))
	late.Close()

	// A reset, confirmed, moves the offsets; one without the group's
	// name does nothing.
	do("the group's actions", chromedp.Navigate(base+"/groups/billing"), chromedp.Click(chromedp.CSS("#actions")),
		chromedp.WaitVisible(chromedp.CSS("#reset-form")))
	do("a reset without confirming", chromedp.SetValue(chromedp.CSS(`#reset-form select[name="to"]`), "earliest"),
		chromedp.Submit(chromedp.CSS("#reset-form")), chromedp.WaitVisible(chromedp.CSS("#error")))
	if msg := text("#error"); !strings.Contains(msg, "not confirmed") {
		t.Errorf("a reset without confirmation: %q", msg)
	}
	do("a confirmed reset", chromedp.Navigate(base+"/groups/billing/actions"), chromedp.SetValue(chromedp.CSS(`#reset-form select[name="to"]`), "earliest"),
		chromedp.SendKeys(chromedp.CSS(`#reset-form input[name="confirm"]`), "billing"), chromedp.Submit(chromedp.CSS("#reset-form")),
		chromedp.WaitVisible(chromedp.CSS("#message")))
	if msg, total := text("#message"), text("#total-lag"); !strings.Contains(msg, "reset 3 offsets to earliest") || total != "30" {
		t.Errorf("after the reset: message %q, total lag %q", msg, total)
	}
	wantCLI(t, strandCLI(t, b.Addr, "group")("lag", "--group", "billing"), true, "total lag 30")

	// A post from another site is refused; a confirmed delete deletes.
	req, _ := http.NewRequest(http.MethodPost, base+"/groups/billing/delete", strings.NewReader("confirm=billing"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a delete posted from another site: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	do("a confirmed delete", chromedp.Navigate(base+"/groups/billing/actions"),
		chromedp.SendKeys(chromedp.CSS(`#delete-form input[name="confirm"]`), "billing"), chromedp.Submit(chromedp.CSS("#delete-form")),
		chromedp.WaitVisible(chromedp.CSS("#done")))
	if msg := text("#done"); msg != "deleted group billing" {
		t.Errorf("after the delete: %q", msg)
	}
	if l := strandCLI(t, b.Addr, "group")("list"); strings.Contains(l.stdout, "billing") {
		t.Errorf("billing still listed after the console deleted it: %v", l)
	}

	// Another broker, read-only by default, refuses actions.
	ro := startBroker(t)
	resp, err := http.PostForm("http://"+ro.Admin+"/groups/billing/delete", url.Values{"confirm": {"billing"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an action on a read-only console: %s", resp.Status)
	}
	t.Logf("screenshots in %s", shots)
}

// readPartly makes group read part of topic and stop: a member reads and
// commits a third, a second joins and takes partitions over, the first
// leaves, the second reads a little more and leaves.
func readPartly(t *testing.T, ctx context.Context, addr, group, topic string) {
	t.Helper()
	member := func(name string) *kgo.Client {
		return client(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(name), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	poll := func(cl *kgo.Client, n int) {
		t.Helper()
		for got := 0; got < n; {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			fs := cl.PollRecords(pctx, n-got)
			cancel()
			if ctx.Err() != nil {
				t.Fatal("the group did not read")
			}
			got += fs.NumRecords()
			if err := cl.CommitRecords(ctx, fs.Records()...); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := member("reader-1")
	poll(first, 10)
	second := member("reader-2")
	// The second joins: the group moves partitions to it.
	for ctx.Err() == nil {
		if _, gen := second.GroupMetadata(); gen > 1 {
			break
		}
		for _, cl := range []*kgo.Client{first, second} {
			pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			cl.PollRecords(pctx, 1)
			cancel()
		}
	}
	first.Close()
	poll(second, 2)
	second.Close()
}
