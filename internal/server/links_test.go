package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/link"
	"github.com/strandlog/strand/internal/mirrorcheck"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
	"github.com/strandlog/strand/test/librdkafkatest"
)

// linkAPI calls a broker's links API and decodes the answer; it returns
// the HTTP status.
func linkAPI(t *testing.T, admin, method, path string, in, out any) int {
	t.Helper()
	var body bytes.Buffer
	if in != nil {
		if err := json.NewEncoder(&body).Encode(in); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, "http://"+admin+path, &body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// startLinkTarget starts a broker with an admin listener that reads its
// links' sources often.
func startLinkTarget(t *testing.T, opts ...func(*config.Broker)) (*testutil.Broker, string) {
	b := testutil.StartBroker(t, func(c *config.Broker) {
		c.AdminListen = "127.0.0.1:0"
		c.LinkMetadataInterval = 100 * time.Millisecond
		for _, o := range opts {
			o(c)
		}
	})
	return b, b.Server().AdminAddr().String()
}

// waitMirrored waits until every partition of the link's mirror topics
// named holds the source's end.
func waitMirrored(t *testing.T, admin, name string, topics ...string) link.Status {
	t.Helper()
	var st link.Status
	testutil.Eventually(t, 30*time.Second, func() error {
		st = link.Status{}
		if code := linkAPI(t, admin, "GET", "/api/links/"+name, nil, &st); code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		for _, want := range topics {
			found := false
			for _, ts := range st.Topics {
				if ts.Topic != want {
					continue
				}
				found = true
				for _, p := range ts.Partitions {
					if p.SourceEnd < 0 || p.MirrorEnd != p.SourceEnd {
						return fmt.Errorf("%s/%d: mirror %d of %d (%s)", want, p.Partition, p.MirrorEnd, p.SourceEnd, p.Error)
					}
				}
			}
			if !found {
				return fmt.Errorf("no mirror of %s yet", want)
			}
		}
		return nil
	})
	return st
}

// compareMirror checks a mirror topic against its source, batch by batch.
func compareMirror(t *testing.T, src, dst *kgo.Client, topic string) mirrorcheck.TopicReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := mirrorcheck.CompareTopic(ctx, src, dst, topic, mirrorcheck.Options{})
	if err != nil {
		t.Fatalf("comparing %s: %v", topic, err)
	}
	if rep.SourceID != rep.MirrorID || rep.SourcePartitions != rep.MirrorPartitions {
		t.Fatalf("%s: topic id %x vs %x, partitions %d vs %d", topic, rep.SourceID, rep.MirrorID, rep.SourcePartitions, rep.MirrorPartitions)
	}
	for _, p := range rep.Partitions {
		if p.MismatchCount > 0 {
			t.Fatalf("%s/%d differs from its source at %d offsets: %v", topic, p.Partition, p.MismatchCount, p.Mismatches)
		}
	}
	return rep
}

func topicStatus(st link.Status, topic string) link.TopicStatus {
	for _, ts := range st.Topics {
		if ts.Topic == topic {
			return ts
		}
	}
	return link.TopicStatus{}
}

func produceSync(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func records(topic string, n int, prefix string) []*kgo.Record {
	var out []*kgo.Record
	for i := range n {
		out = append(out, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i%7)),
			Value: []byte(strings.Repeat(prefix, 20) + fmt.Sprint(i))})
	}
	return out
}

// A link mirrors another cluster's topics byte for byte and offset for
// offset, old data and new, compressed and transactional; the mirrors take
// no writes until promoted, follow the source's partition count and log
// start, survive a restart of the mirror's broker, and stop when their
// source topic goes.
func TestLinkMirrorsByteForByte(t *testing.T) {
	// Slow: eight steps, each waiting for the mirror to catch up, one of them a restart of the mirror's broker.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	src := testutil.StartBroker(t, nil)
	dst, admin := startLinkTarget(t)
	srcCl := newClient(t, src.Addr, kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.ProducerLinger(time.Millisecond))
	dstCl := newClient(t, dst.Addr)
	srcAdm, dstAdm := kadm.NewClient(srcCl), kadm.NewClient(dstCl)
	ctx := context.Background()
	if _, err := srcAdm.CreateTopic(ctx, 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := srcAdm.CreateTopic(ctx, 2, 1, nil, "payments"); err != nil {
		t.Fatal(err)
	}
	if _, err := srcAdm.CreateTopic(ctx, 1, 1, nil, "internal-audit"); err != nil {
		t.Fatal(err)
	}
	produceSync(t, srcCl, records("orders", 300, "before")...)

	// Transactions, committed and aborted, before and after the link.
	txn := newClient(t, src.Addr, kgo.TransactionalID("payments-writer"), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	transact := func(commit bool, n int) {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produceSync(t, txn, records("payments", n, fmt.Sprint(commit))...)
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	transact(true, 20)
	transact(false, 10)

	// A source whose log start lies inside a batch: the mirror starts
	// there too, with that batch whole.
	if _, err := srcAdm.CreateTopic(ctx, 1, 1, nil, "trimmed"); err != nil {
		t.Fatal(err)
	}
	produceSync(t, srcCl, records("trimmed", 100, "t")...)
	if _, err := srcAdm.DeleteRecords(ctx, kadm.Offsets{"trimmed": {0: {At: 45}}}); err != nil {
		t.Fatal(err)
	}

	var created map[string]any
	code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"orders|payments|later-.*|trimmed"}}}, &created)
	if code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	transact(true, 15)
	produceSync(t, srcCl, records("orders", 200, "after")...)
	if _, err := srcAdm.CreateTopic(ctx, 2, 1, nil, "later-1"); err != nil {
		t.Fatal(err)
	}
	produceSync(t, srcCl, records("later-1", 50, "late")...)
	st := waitMirrored(t, admin, "prod", "orders", "payments", "later-1", "trimmed")
	for _, topic := range []string{"orders", "payments", "later-1", "trimmed"} {
		compareMirror(t, srcCl, dstCl, topic)
	}
	if p := topicStatus(st, "trimmed").Partitions[0]; p.MirrorStart != 45 || p.MirrorEnd != 100 {
		t.Fatalf("the trimmed mirror holds [%d, %d), want [45, 100)", p.MirrorStart, p.MirrorEnd)
	}
	// Three transactions, each over both partitions: a marker each.
	if rep := compareMirror(t, srcCl, dstCl, "payments"); rep.Partitions[0].ControlBatches != 3 || rep.Partitions[1].ControlBatches != 3 {
		t.Fatalf("payments carries %d and %d markers, want 3 each", rep.Partitions[0].ControlBatches, rep.Partitions[1].ControlBatches)
	}
	if topics, err := dstAdm.ListTopics(ctx, "internal-audit"); err != nil || topics.Has("internal-audit") {
		t.Fatalf("a topic the filter does not match was mirrored: %v", err)
	}

	// Read-only: a produce is refused with a message naming the link, and
	// so are DeleteRecords and new partitions.
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = makeBatch("x")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, dstCl)
	if err != nil {
		t.Fatal(err)
	}
	pr := resp.Topics[0].Partitions[0]
	if pr.ErrorCode != kerr.InvalidRequest.Code || pr.ErrorMessage == nil || !strings.Contains(*pr.ErrorMessage, "prod") {
		t.Fatalf("produce to a mirror: code %d, message %v", pr.ErrorCode, pr.ErrorMessage)
	}
	dr, err := dstAdm.DeleteRecords(ctx, kadm.Offsets{"orders": {0: {At: 1}}})
	if err != nil || dr.Error() == nil {
		t.Fatalf("DeleteRecords on a mirror: %v %v", err, dr.Error())
	}
	if cp, err := dstAdm.CreatePartitions(ctx, 2, "orders"); err == nil && cp.Error() == nil {
		t.Fatal("a mirror took new partitions from a client")
	}

	// The source grows and deletes records: the mirror follows.
	if _, err := srcAdm.CreatePartitions(ctx, 2, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := srcAdm.DeleteRecords(ctx, kadm.Offsets{"orders": {1: {At: 40}}}); err != nil {
		t.Fatal(err)
	}
	produceSync(t, srcCl, records("orders", 100, "grown")...)
	testutil.Eventually(t, 30*time.Second, func() error {
		orders := topicStatus(waitMirrored(t, admin, "prod", "orders"), "orders")
		if n := len(orders.Partitions); n != 5 {
			return fmt.Errorf("mirror has %d partitions", n)
		}
		if p := orders.Partitions[1]; p.MirrorStart != 40 {
			return fmt.Errorf("mirror's partition 1 starts at %d", p.MirrorStart)
		}
		return nil
	})
	compareMirror(t, srcCl, dstCl, "orders")

	// The mirror's broker restarts and carries on where it was.
	dst.Restart(t)
	produceSync(t, srcCl, records("orders", 100, "restart")...)
	dstCl = newClient(t, dst.Addr)
	dstAdm = kadm.NewClient(dstCl)
	admin = dst.Server().AdminAddr().String()
	waitMirrored(t, admin, "prod", "orders")
	compareMirror(t, srcCl, dstCl, "orders")

	// Promotion: orders becomes writable, and a new producer here never
	// gets one of the source's producer ids.
	var rep link.PromoteReport
	if code := linkAPI(t, admin, "POST", "/api/links/prod/promote", map[string]any{"topics": []string{"orders"}}, &rep); code != http.StatusOK {
		t.Fatalf("promote: %d", code)
	}
	maxSourcePID := int64(-1)
	srcDesc, err := srcAdm.DescribeProducers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	srcDesc.EachPartition(func(p kadm.DescribedProducersPartition) {
		for _, pr := range p.ActiveProducers {
			maxSourcePID = max(maxSourcePID, pr.ProducerID)
		}
	})
	fresh := newClient(t, dst.Addr)
	produceSync(t, fresh, records("orders", 10, "promoted")...)
	dstDesc, err := dstAdm.DescribeProducers(ctx, kadm.TopicsSet{"orders": {0: {}, 1: {}, 2: {}, 3: {}, 4: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var newest int64 = -1
	dstDesc.EachPartition(func(p kadm.DescribedProducersPartition) {
		for _, pr := range p.ActiveProducers {
			newest = max(newest, pr.ProducerID)
		}
	})
	if maxSourcePID < 0 || newest <= maxSourcePID {
		t.Fatalf("after promotion the newest producer id is %d, the source's largest %d", newest, maxSourcePID)
	}

	// A source topic deleted stops its mirror, which stays.
	if _, err := srcAdm.DeleteTopics(ctx, "later-1"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		var st link.Status
		linkAPI(t, admin, "GET", "/api/links/prod", nil, &st)
		for _, ts := range st.Topics {
			if ts.Topic == "later-1" && ts.State == "stopped" && strings.Contains(ts.Reason, "gone") {
				return nil
			}
		}
		return fmt.Errorf("later-1 not stopped: %+v", st.Topics)
	})
	var e map[string]string
	if code := linkAPI(t, admin, "DELETE", "/api/links/prod", nil, &e); code != http.StatusConflict || !strings.Contains(e["error"], "later-1") {
		t.Fatalf("deleting a link with mirrors: %d %v", code, e)
	}
}

// A link copies the matched groups' commits, never past the mirror's end
// and never over a group that runs here, so a consumer that moves starts
// exactly where it stopped.
func TestLinkCopiesGroupOffsets(t *testing.T) {
	// Slow: six waits for the link's offset sync to copy a group's commits, or to keep from copying them.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	src := testutil.StartBroker(t, nil)
	dst, admin := startLinkTarget(t)
	srcCl, dstCl := newClient(t, src.Addr), newClient(t, dst.Addr)
	srcAdm, dstAdm := kadm.NewClient(srcCl), kadm.NewClient(dstCl)
	ctx := context.Background()
	if _, err := srcAdm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		recs := records("orders", 50, "o")
		for _, r := range recs {
			r.Partition = p
		}
		produceSync(t, newClient(t, src.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner())), recs...)
	}
	commit := func(adm *kadm.Client, group string, offs map[int32]int64) {
		t.Helper()
		o := kadm.Offsets{}
		for p, at := range offs {
			o.Add(kadm.Offset{Topic: "orders", Partition: p, At: at, LeaderEpoch: -1, Metadata: "from-" + group})
		}
		resp, err := adm.CommitOffsets(ctx, group, o)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	commit(srcAdm, "billing", map[int32]int64{0: 30, 1: 25})
	commit(srcAdm, "billing-capped", map[int32]int64{0: 10_000})
	commit(srcAdm, "audit", map[int32]int64{0: 5})
	// billing-live already consumes here: its commits are its own.
	live := newClient(t, dst.Addr, kgo.ConsumerGroup("billing-live"), kgo.ConsumeTopics("orders"))
	code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"orders"}}, "groups": map[string]any{"include": []string{"billing.*"}},
		"sync_group_offsets": true, "offset_sync_interval_ms": 100}, nil)
	if code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "orders")
	// The consumer here joins once the mirror exists, then commits.
	testutil.Eventually(t, 30*time.Second, func() error {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		live.PollFetches(fctx)
		if err := live.CommitUncommittedOffsets(ctx); err != nil {
			return err
		}
		got, err := dstAdm.FetchOffsets(ctx, "billing-live")
		if err != nil {
			return err
		}
		if o, ok := got.Lookup("orders", 0); !ok || o.At != 50 {
			return fmt.Errorf("billing-live here at %+v", o)
		}
		return nil
	})
	commit(srcAdm, "billing-live", map[int32]int64{0: 3})

	testutil.Eventually(t, 30*time.Second, func() error {
		rep, err := mirrorcheck.CompareGroupOffsets(ctx, srcAdm, dstAdm, "billing")
		if err != nil {
			return err
		}
		for _, m := range rep.Mismatches {
			if len(m.Fields) != 1 || m.Fields[0] != "LeaderEpoch" {
				return fmt.Errorf("%s", m)
			}
		}
		got, err := dstAdm.FetchOffsets(ctx, "billing-capped")
		if err != nil {
			return err
		}
		if o, ok := got.Lookup("orders", 0); !ok || o.At != 50 {
			return fmt.Errorf("billing-capped here at %+v, want the mirror's end 50", o)
		}
		return nil
	})
	// Once a sync has seen billing-live at the source, it skipped it.
	testutil.Eventually(t, 30*time.Second, func() error {
		var st link.Status
		linkAPI(t, admin, "GET", "/api/links/prod", nil, &st)
		if st.OffsetSync == nil || st.OffsetSync.Groups != 3 || st.OffsetSync.Skipped != 1 || st.OffsetError != "" {
			return fmt.Errorf("offset sync status %+v %q", st.OffsetSync, st.OffsetError)
		}
		return nil
	})
	for group, want := range map[string]int64{"billing-live": 50, "audit": -1} {
		got, err := dstAdm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := got.Lookup("orders", 0); (want < 0 && ok && o.At >= 0) || (want >= 0 && o.At != want) {
			t.Fatalf("group %s here at %+v, want %d", group, o, want)
		}
	}
	live.Close()

	// billing moves: it starts here exactly where it stopped there.
	moved := newClient(t, dst.Addr, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"))
	first, last := map[int32]int64{}, map[int32]int64{}
	testutil.Eventually(t, 30*time.Second, func() error {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		moved.PollFetches(fctx).EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
			last[r.Partition] = r.Offset
		})
		if len(first) < 2 || last[0] != 49 || last[1] != 49 {
			return fmt.Errorf("read from %v to %v", first, last)
		}
		return nil
	})
	if first[0] != 30 || first[1] != 25 {
		t.Fatalf("billing started here at %v, want 30 and 25", first)
	}
	// It commits here and stops: the source's older commits never move
	// it back.
	if err := moved.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	moved.Close()
	var st link.Status
	linkAPI(t, admin, "GET", "/api/links/prod", nil, &st)
	before := st.OffsetSyncAt
	testutil.Eventually(t, 30*time.Second, func() error {
		var now link.Status
		linkAPI(t, admin, "GET", "/api/links/prod", nil, &now)
		if now.OffsetSyncAt == nil || before == nil || !now.OffsetSyncAt.After(before.Add(300*time.Millisecond)) {
			return fmt.Errorf("no sync since the group stopped")
		}
		return nil
	})
	got, err := dstAdm.FetchOffsets(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := got.Lookup("orders", 0); o.At != 50 {
		t.Fatalf("billing here at %d after it stopped, want its own commit 50", o.At)
	}

	// The ledger reports the move: the source's commit against where the
	// group started here, nothing skipped or rewound, and no duplicate
	// risk since the group had no member at the source.
	testutil.Eventually(t, 30*time.Second, func() error {
		var rep ledger.Report
		if code := linkAPI(t, admin, "GET", "/api/handoffs?group=billing", nil, &rep); code != http.StatusOK {
			return fmt.Errorf("handoffs: %d", code)
		}
		if len(rep.Moves) != 2 || rep.Totals.Moves != 2 {
			return fmt.Errorf("moves %+v", rep.Moves)
		}
		for _, m := range rep.Moves {
			want := map[int32]int64{0: 30, 1: 25}[m.Partition]
			if m.Link != "prod" || m.Source != src.Addr || m.SourceCommitted != want || m.FirstFetched != want ||
				m.Skipped != 0 || m.Rewound != 0 || m.DuplicateRisk != 0 {
				return fmt.Errorf("move %+v", m)
			}
		}
		return nil
	})
}

// In a cluster, a mirror partition replicates as any other; when its
// leader stops, the new leader carries on mirroring from its own end, with
// no gap and no duplicate.
func TestLinkMirrorLeaderFailover(t *testing.T) {
	// Slow: a three-broker target whose mirror leader stops: the new leader and its catching up are waited for.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	src := testutil.StartBroker(t, nil)
	dst := testutil.StartCluster(t, 3, 0, func(_ int, c *config.Broker) {
		c.AdminListen = "127.0.0.1:0"
		c.LinkMetadataInterval = 100 * time.Millisecond
		c.DefaultReplicationFactor = 3
	})
	admin := dst.Brokers[0].Server().AdminAddr().String()
	srcCl := newClient(t, src.Addr, kgo.ProducerLinger(time.Millisecond))
	ctx := context.Background()
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produceSync(t, srcCl, records("orders", 200, "a")...)
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"orders"}}}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "orders")

	// The source keeps writing while the mirror's leader of partition 0
	// stops.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			if err := srcCl.ProduceSync(ctx, records("orders", 50, fmt.Sprint("b", i))...).FirstErr(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	p, ok := dst.Brokers[0].Server().Metadata().Partition("orders", 0)
	if !ok || p.Leader < 0 {
		t.Fatalf("no leader of the mirror's partition 0: %+v", p)
	}
	leader := dst.Brokers[p.Leader]
	leader.Stop(t)
	<-done
	var live *testutil.Broker
	for _, b := range dst.Brokers {
		if b != leader {
			live = b
			break
		}
	}
	admin = live.Server().AdminAddr().String()
	waitMirrored(t, admin, "prod", "orders")
	if np, _ := live.Server().Metadata().Partition("orders", 0); np.Leader == p.Leader {
		t.Fatalf("the stopped broker %d still leads", p.Leader)
	}
	var seeds []string
	for _, b := range dst.Brokers {
		if b != leader {
			seeds = append(seeds, b.Addr)
		}
	}
	dstCl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...))
	rep := compareMirror(t, srcCl, dstCl, "orders")
	if rep.Partitions[0].Records+rep.Partitions[1].Records != 1200 {
		t.Fatalf("the mirror holds %d records, want 1200", rep.Partitions[0].Records+rep.Partitions[1].Records)
	}
}

// A transaction the source leaves open holds a planned promotion back; a
// failover goes ahead, and the transaction is aborted once the link's
// transaction timeout has passed, so read_committed consumers of the
// promoted topic are not stuck.
func TestLinkPromoteWithOpenSourceTransaction(t *testing.T) {
	// Slow: a promotion waits out the link's transaction timeout.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	src := testutil.StartBroker(t, nil)
	dst, admin := startLinkTarget(t)
	srcCl := newClient(t, src.Addr)
	ctx := context.Background()
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 1, 1, nil, "ledger"); err != nil {
		t.Fatal(err)
	}
	produceSync(t, srcCl, records("ledger", 10, "plain")...)
	txn := newClient(t, src.Addr, kgo.TransactionalID("ledger-writer"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, txn, records("ledger", 5, "open")...)
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"ledger"}}, "transaction_timeout_ms": 1000}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "ledger")

	var e map[string]string
	if code := linkAPI(t, admin, "POST", "/api/links/prod/promote", map[string]any{"timeout_ms": 500}, &e); code != http.StatusConflict ||
		!strings.Contains(e["error"], "transaction open") {
		t.Fatalf("a promotion with a source transaction open: %d %v", code, e)
	}
	var rep link.PromoteReport
	if code := linkAPI(t, admin, "POST", "/api/links/prod/failover", map[string]any{}, &rep); code != http.StatusOK || !rep.Failover {
		t.Fatalf("failover: %d %+v", code, rep)
	}
	dstCl := newClient(t, dst.Addr)
	produceSync(t, dstCl, records("ledger", 3, "here")...)
	reader := newClient(t, dst.Addr, kgo.ConsumeTopics("ledger"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	testutil.Eventually(t, 20*time.Second, func() error {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		reader.PollFetches(fctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		if len(got) < 13 {
			return fmt.Errorf("read_committed read %d records", len(got))
		}
		return nil
	})
	for _, v := range got {
		if strings.HasPrefix(v, "open") {
			t.Fatalf("read_committed read a record of the aborted transaction: %s", v)
		}
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, buf.String())
	}
	return buf.String()
}

// metricValue reads one sample of /metrics, or "" when absent.
func metricValue(t *testing.T, admin, series string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	for _, line := range strings.Split(buf.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// A source that goes away is retried and reported, in the status and in
// /metrics; when it comes back the mirror carries on, exact.
func TestLinkSourceUnreachable(t *testing.T) {
	// Slow: the source stops and comes back; the link's retries and the mirror's catching up are waited for.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	src := testutil.StartBroker(t, nil)
	dst, admin := startLinkTarget(t)
	srcCl := newClient(t, src.Addr)
	ctx := context.Background()
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produceSync(t, srcCl, records("orders", 20, "a")...)
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"orders"}}}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "orders")
	for page, want := range map[string][]string{
		"/links":      {`data-link="prod"`, src.Addr},
		"/links/prod": {`id="mirror-table"`, `href="/topics/orders"`, "mirroring"},
	} {
		body := httpGet(t, "http://"+admin+page)
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Fatalf("console page %s lacks %q:\n%s", page, w, body)
			}
		}
	}
	series := `{link="prod",partition="0",topic="orders"}`
	if v := metricValue(t, admin, "strand_link_lag_records"+series); v != "0" {
		t.Fatalf("lag metric %q, want 0", v)
	}
	src.Stop(t)
	testutil.Eventually(t, 30*time.Second, func() error {
		var st link.Status
		linkAPI(t, admin, "GET", "/api/links/prod", nil, &st)
		if st.State != "source unreachable" || st.Error == "" {
			return fmt.Errorf("status %q %q", st.State, st.Error)
		}
		if v := metricValue(t, admin, "strand_link_partition_failing"+series); v != "1" {
			return fmt.Errorf("failing metric %q", v)
		}
		return nil
	})
	src.Restart(t)
	srcCl = newClient(t, src.Addr)
	produceSync(t, srcCl, records("orders", 30, "b")...)
	waitMirrored(t, admin, "prod", "orders")
	testutil.Eventually(t, 30*time.Second, func() error {
		if v := metricValue(t, admin, "strand_link_partition_failing"+series); v != "0" {
			return fmt.Errorf("failing metric %q", v)
		}
		return nil
	})
	rep := compareMirror(t, srcCl, newClient(t, dst.Addr), "orders")
	if rep.Partitions[0].Records != 50 {
		t.Fatalf("the mirror holds %d records, want 50", rep.Partitions[0].Records)
	}
}

// A link reaches sources that ask for SASL (PLAIN, SCRAM) or mutual TLS,
// never shows their secrets back, reports a refused login without
// mirroring anything, and refuses at creation a filter that does not
// parse and a source that is this cluster.
func TestLinkSourceSecurity(t *testing.T) {
	files := testutil.NewTLSFiles(t)
	readFile := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sasl := saslBroker(t, "SASL_PLAINTEXT", nil)
	mtls := sslBroker(t, files, func(c *config.Broker) { c.SSLClientAuth, c.SSLTruststore = "required", files.CA })
	dst, admin := startLinkTarget(t)
	ctx := context.Background()
	seed := func(addr string, opts ...kgo.Opt) {
		cl := newClient(t, addr, opts...)
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
			t.Fatal(err)
		}
		produceSync(t, cl, records("orders", 10, "x")...)
	}
	for _, tc := range []struct {
		name   string
		source map[string]any
		addr   string
		opts   []kgo.Opt
	}{
		{"scram", map[string]any{"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
			"sasl_username": "alice", "sasl_password": "alice-secret"}, sasl.Addr,
			[]kgo.Opt{kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())}},
		{"mtls", map[string]any{"security_protocol": "SSL", "ca_cert_pem": readFile(files.CA),
			"cert_pem": readFile(files.ClientCert), "key_pem": readFile(files.ClientKey)}, mtls.Addr,
			[]kgo.Opt{kgo.DialTLSConfig(files.ClientConfig(t, files.CA, true))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "orders"
			seed(tc.addr, tc.opts...)
			tc.source["bootstrap_servers"] = []string{tc.addr}
			name := "secure-" + tc.name
			if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": name, "source": tc.source,
				"topics": map[string]any{"include": []string{topic}}}, nil); code != http.StatusCreated {
				t.Fatalf("creating the link: %d", code)
			}
			waitMirrored(t, admin, name, topic)
			// Promoted, so that the next link may mirror the same name.
			if code := linkAPI(t, admin, "POST", "/api/links/"+name+"/promote", map[string]any{}, nil); code != http.StatusOK {
				t.Fatalf("promote: %d", code)
			}
			if code := linkAPI(t, admin, "DELETE", "/api/links/"+name, nil, nil); code != http.StatusOK {
				t.Fatalf("delete: %d", code)
			}
			if _, err := kadm.NewClient(newClient(t, dst.Addr)).DeleteTopics(ctx, topic); err != nil {
				t.Fatal(err)
			}
		})
	}

	// A wrong password: reported, nothing mirrored, the secret hidden.
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "wrong",
		"source": map[string]any{"bootstrap_servers": []string{sasl.Addr}, "security_protocol": "SASL_PLAINTEXT",
			"sasl_mechanism": "PLAIN", "sasl_username": "alice", "sasl_password": "not-the-password"},
		"topics": map[string]any{"include": []string{"orders"}}}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		var st link.Status
		linkAPI(t, admin, "GET", "/api/links/wrong", nil, &st)
		if st.State != "source unreachable" || !strings.Contains(strings.ToLower(st.Error), "sasl") {
			return fmt.Errorf("status %q: %s", st.State, st.Error)
		}
		if len(st.Topics) != 0 {
			return fmt.Errorf("mirrored through a refused login: %+v", st.Topics)
		}
		return nil
	})
	for _, path := range []string{"/api/links", "/api/links/wrong"} {
		if body := httpGet(t, "http://"+admin+path); strings.Contains(body, "not-the-password") || !strings.Contains(body, "(hidden)") {
			t.Fatalf("%s shows the password or hides nothing:\n%s", path, body)
		}
	}
	// Altered with the right password alone, the link keeps the rest of
	// its source's settings and mirrors.
	var altered map[string]any
	if code := linkAPI(t, admin, "PATCH", "/api/links/wrong", map[string]any{"source": map[string]any{"sasl_password": "alice-secret"}},
		&altered); code != http.StatusOK {
		t.Fatalf("alter: %d %v", code, altered)
	}
	waitMirrored(t, admin, "wrong", "orders")

	// Refused at creation.
	var e map[string]string
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "bad-filter",
		"source": map[string]any{"bootstrap_servers": []string{sasl.Addr}}, "topics": map[string]any{"include": []string{"orders("}}},
		&e); code != http.StatusBadRequest || !strings.Contains(e["error"], "orders(") {
		t.Fatalf("a filter that does not parse: %d %v", code, e)
	}
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "loop",
		"source": map[string]any{"bootstrap_servers": []string{dst.Addr}}, "topics": map[string]any{"include": []string{".*"}}},
		&e); code != http.StatusBadRequest || !strings.Contains(e["error"], "this cluster") {
		t.Fatalf("a link to this cluster: %d %v", code, e)
	}
}

// A source that loses what the mirror copied (an unclean leader election
// there) is followed: the mirror finds by the source's epochs, which it
// keeps across its own restart, where they part, is cut back to what they
// share in one step, says so, and goes on with the source's new records,
// exact again.
func TestLinkSourceUncleanElection(t *testing.T) {
	// Slow: the source's partition loses its leader twice and the mirror's broker restarts; each step waits for
	// the metadata to move and the mirror to catch up.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	// Node 0 alone votes, so the source keeps its metadata quorum while
	// nodes 1 and 2, which hold the partition, go down in turn.
	src := testutil.StartCluster(t, 3, 1, nil)
	dst, admin := startLinkTarget(t)
	ctx := context.Background()
	srcCl := newClient(t, src.Brokers[0].Addr, kgo.SeedBrokers(src.Seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "ledger", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 2}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	for k, v := range map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, srcCl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatal(err)
	}
	write := func(n int, prefix string) {
		recs := records("ledger", n, prefix)
		for _, r := range recs {
			r.Partition = 0
		}
		produceSync(t, srcCl, recs...)
	}
	write(10, "both")
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": src.Seeds()},
		"topics": map[string]any{"include": []string{"ledger"}}}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "ledger")
	leader := func(want int32) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, func() error {
			if p, _ := src.Brokers[0].Server().Metadata().Partition("ledger", 0); p.Leader != want {
				return fmt.Errorf("led by %d", p.Leader)
			}
			return nil
		})
	}

	// The leader goes: the follower leads, at a new epoch, alone, and
	// takes records in five batches that the mirror copies.
	src.Brokers[1].Stop(t)
	leader(2)
	for i := range 5 {
		write(2, fmt.Sprint("lost-", i))
	}
	waitMirrored(t, admin, "prod", "ledger")
	// The mirror's broker restarts: it keeps the source's epochs of what
	// it mirrored beside the log.
	dst.Restart(t)
	admin = dst.Server().AdminAddr().String()
	waitMirrored(t, admin, "prod", "ledger")

	// That leader goes too, and the first comes back: it leads uncleanly,
	// without the last ten records, and takes new ones. The source's
	// epochs tell the mirror where to cut at once: where the first
	// leader's epoch ends.
	src.Brokers[2].Stop(t)
	src.Brokers[1].Restart(t)
	leader(1)
	write(5, "after")
	testutil.Eventually(t, 30*time.Second, func() error {
		st := topicStatus(waitMirrored(t, admin, "prod", "ledger"), "ledger")
		if p := st.Partitions[0]; p.Truncations != 1 || !strings.Contains(p.LastTruncation, "from 20 to 10") ||
			!strings.Contains(p.LastTruncation, "the source's epoch") || p.MirrorEnd != 15 {
			return fmt.Errorf("mirror at %d after %d truncations (%s)", p.MirrorEnd, p.Truncations, p.LastTruncation)
		}
		return nil
	})
	rep := compareMirror(t, newClient(t, src.Brokers[0].Addr, kgo.SeedBrokers(src.Brokers[0].Addr, src.Brokers[1].Addr)),
		newClient(t, dst.Addr), "ledger")
	if rep.Partitions[0].Records != 15 {
		t.Fatalf("the mirror holds %d records, the source 15", rep.Partitions[0].Records)
	}
}

// With reverse offset sync, a group that moved here has its commits here
// copied back to the source once it has no member there, so that its
// consumers can go back at the exact offset.
func TestLinkReverseOffsetSync(t *testing.T) {
	// Slow: waits for commits to be copied here, for the group to leave the source, and for them to be copied
	// back.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	src := testutil.StartBroker(t, nil)
	dst, admin := startLinkTarget(t)
	srcCl, dstCl := newClient(t, src.Addr), newClient(t, dst.Addr)
	srcAdm := kadm.NewClient(srcCl)
	ctx := context.Background()
	if _, err := srcAdm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produceSync(t, srcCl, records("orders", 40, "o")...)
	o := kadm.Offsets{}
	o.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 10, LeaderEpoch: -1})
	if err := srcAdm.CommitAllOffsets(ctx, "billing", o); err != nil {
		t.Fatal(err)
	}
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"orders"}}, "groups": map[string]any{"include": []string{"billing"}},
		"sync_group_offsets": true, "offset_sync_interval_ms": 100, "reverse_offset_sync": true}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "orders")
	testutil.Eventually(t, 30*time.Second, func() error {
		got, err := kadm.NewClient(dstCl).FetchOffsets(ctx, "billing")
		if err != nil {
			return err
		}
		if o, _ := got.Lookup("orders", 0); o.At != 10 {
			return fmt.Errorf("billing here at %d", o.At)
		}
		return nil
	})
	// The group runs here, reads to offset 25 and stops.
	here := newClient(t, dst.Addr, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit())
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	for read := 0; read < 15; {
		fs := here.PollRecords(pctx, 15-read)
		if pctx.Err() != nil {
			t.Fatalf("read %d records here in 30 s", read)
		}
		read += fs.NumRecords()
	}
	if err := here.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	here.Close()
	// Back at the source, it stands where it stopped here.
	testutil.Eventually(t, 30*time.Second, func() error {
		got, err := srcAdm.FetchOffsets(ctx, "billing")
		if err != nil {
			return err
		}
		if o, _ := got.Lookup("orders", 0); o.At != 25 {
			return fmt.Errorf("billing at the source at %d", o.At)
		}
		return nil
	})
	back := newClient(t, src.Addr, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"))
	fs := back.PollRecords(pctx, 1)
	if recs := fs.Records(); len(recs) != 1 || recs[0].Offset != 25 {
		t.Fatalf("back at the source the group read %v", recs)
	}
}

// A link's byte rate caps how fast it copies: a backlog of B bytes at R
// bytes a second, fetched at most R bytes at a time, takes at least about
// (B-R)/R: every fetch but the last waits for its bytes' turn.
func TestLinkByteRate(t *testing.T) {
	// Slow: a capped rate takes the time it caps to.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	src := testutil.StartBroker(t, nil)
	_, admin := startLinkTarget(t)
	srcCl := newClient(t, src.Addr)
	ctx := context.Background()
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	// 60 batches of ten 1 KB records that do not compress.
	for range 60 {
		var recs []*kgo.Record
		for range 10 {
			v := make([]byte, 1000)
			rand.Read(v)
			recs = append(recs, &kgo.Record{Topic: "orders", Value: v})
		}
		produceSync(t, srcCl, recs...)
	}
	const rate = 200_000
	began := time.Now()
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"orders"}}, "max_bytes_per_sec": rate}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "orders")
	if took, least := time.Since(began), 1600*time.Millisecond; took < least {
		t.Fatalf("600 KB mirrored in %v at %d bytes a second; the cap allows no less than %v", took, rate, least)
	}
}

// A paused link stops following its source, its mirrors still read-only;
// resumed, it catches up, exact.
func TestLinkPauseResume(t *testing.T) {
	src := testutil.StartBroker(t, nil)
	dst, admin := startLinkTarget(t)
	srcCl := newClient(t, src.Addr)
	ctx := context.Background()
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produceSync(t, srcCl, records("orders", 10, "a")...)
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"orders"}}}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "orders")
	if code := linkAPI(t, admin, "POST", "/api/links/prod/pause", nil, nil); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	produceSync(t, srcCl, records("orders", 20, "b")...)
	dstCl := newClient(t, dst.Addr)
	// Paused: the status says so, the mirror stays at 10 while the source
	// is at 30 (seen through the source's own client), and takes no
	// writes.
	var st link.Status
	linkAPI(t, admin, "GET", "/api/links/prod", nil, &st)
	if st.State != "paused" {
		t.Fatalf("state %q", st.State)
	}
	ends, err := kadm.NewClient(dstCl).ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("orders", 0); o.Offset != 10 {
		t.Fatalf("a paused mirror moved to %d", o.Offset)
	}
	if err := dstCl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("a paused mirror took a write")
	}
	if code := linkAPI(t, admin, "POST", "/api/links/prod/resume", nil, nil); code != http.StatusOK {
		t.Fatalf("resume: %d", code)
	}
	waitMirrored(t, admin, "prod", "orders")
	if rep := compareMirror(t, srcCl, dstCl, "orders"); rep.Partitions[0].Records != 30 {
		t.Fatalf("the mirror holds %d records, want 30", rep.Partitions[0].Records)
	}
}

// With ACL sync, the source's ACLs of the mirror topics and of the
// matched groups (literal names) are created here; others are not.
func TestLinkSyncACLs(t *testing.T) {
	src := testutil.StartBroker(t, func(c *config.Broker) { c.Authorizer, c.SuperUsers = "acl", "User:ANONYMOUS" })
	dst, admin := startLinkTarget(t)
	srcCl := newClient(t, src.Addr)
	srcAdm := kadm.NewClient(srcCl)
	ctx := context.Background()
	if _, err := srcAdm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").Groups("billing").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:bob").Topics("audit").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:bob").Topics("ord").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed),
	} {
		res, err := srcAdm.CreateACLs(ctx, b)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"orders"}}, "groups": map[string]any{"include": []string{"billing"}},
		"sync_acls": true}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "orders")
	testutil.Eventually(t, 30*time.Second, func() error {
		acls, _ := dst.Server().Metadata().ACLs()
		var got []string
		for _, a := range acls {
			got = append(got, fmt.Sprintf("%d:%s:%d:%s:%d", a.ResourceType, a.ResourceName, a.PatternType, a.Principal, a.Operation))
		}
		slices.Sort(got)
		// Topic orders read (3) and describe (8), group billing read.
		want := []string{"2:orders:3:User:alice:3", "2:orders:3:User:alice:8", "3:billing:3:User:alice:3"}
		if !slices.Equal(got, want) {
			return fmt.Errorf("ACLs here %v, want %v", got, want)
		}
		return nil
	})
}

// With config sync, a mirror takes its source topic's config overrides
// (those Strand has), follows their changes, and refuses changes from
// clients, naming the link.
func TestLinkSyncTopicConfigs(t *testing.T) {
	src := testutil.StartBroker(t, nil)
	dst, admin := startLinkTarget(t)
	srcAdm := kadm.NewClient(newClient(t, src.Addr))
	dstAdm := kadm.NewClient(newClient(t, dst.Addr))
	ctx := context.Background()
	if _, err := srcAdm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("3600000"),
		"cleanup.policy": kmsg.StringPtr("compact")}, "orders"); err != nil {
		t.Fatal(err)
	}
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"orders"}}, "sync_topic_configs": true}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "orders")
	configs := func() map[string]string {
		t.Helper()
		t1, ok := dst.Server().Metadata().Topic("orders")
		if !ok {
			t.Fatal("no mirror")
		}
		return t1.Configs
	}
	if c := configs(); c["retention.ms"] != "3600000" || c["cleanup.policy"] != "compact" {
		t.Fatalf("mirror configs %v", c)
	}
	if _, err := srcAdm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("7200000")}}, "orders"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if c := configs(); c["retention.ms"] != "7200000" {
			return fmt.Errorf("mirror configs %v", c)
		}
		return nil
	})
	res, err := dstAdm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}, "orders")
	if err == nil {
		err = res[0].Err
	}
	if err == nil || !strings.Contains(res[0].ErrMessage+err.Error(), "prod") {
		t.Fatalf("a client changed a synced mirror's configs: %v %q", err, res[0].ErrMessage)
	}
}

// The migration playbook across clusters (test/grouptest.RunPlaybook):
// three v1 consumers on the source, a v2 canary on the target in the same
// group through the link's group pass-through, the canary killed and its
// partitions back with the v1 consumers within the target's disconnect
// grace and a rebalance, then v2 scaled up on the target while v1
// retires on the source; nothing skipped, one owner per partition at any
// time, the duplicates within each hand-off's uncommitted window.
func TestLinkGroupPassThroughPlaybook(t *testing.T) {
	if testing.Short() {
		t.Skip("a playbook of half a minute, timed: make test's run without -short has it, not the race detector's")
	}
	for _, c := range []struct {
		name       string
		serverSide bool
		librdkafka bool // librdkafka's classic members: SyncGroup v3, without its protocol
	}{{"classic", false, false}, {"consumer", true, false}, {"classic-librdkafka", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			if c.librdkafka {
				librdkafkatest.Python(t)
			}
			passThroughPlaybook(t, c.serverSide, c.librdkafka)
		})
	}
}

func passThroughPlaybook(t *testing.T, serverSide, librdkafka bool) {
	const grace = 1500 * time.Millisecond
	groupOpts := func(c *config.Broker) {
		c.GroupInitialRebalanceDelay = 100 * time.Millisecond
		c.GroupMinSessionTimeout = 500 * time.Millisecond
		c.GroupMemberDisconnectGrace = grace
		c.GroupConsumerMinHeartbeatInterval = 100 * time.Millisecond
		c.GroupConsumerHeartbeatInterval = 500 * time.Millisecond
		c.GroupConsumerMinSessionTimeout = 500 * time.Millisecond
		c.GroupConsumerSessionTimeout = 10 * time.Second
	}
	src := testutil.StartBroker(t, groupOpts)
	dst, admin := startLinkTarget(t, groupOpts)
	const partitions = 6
	createTopic(t, src.Addr, "orders", partitions)
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source":             map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics":             map[string]any{"include": []string{"orders"}},
		"groups":             map[string]any{"include": []string{migrationGroup}},
		"sync_group_offsets": true, "offset_sync_interval_ms": 200, "group_pass_through": true}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "orders")
	const session = 10 * time.Second
	member := func(addr string) func(string) (grouptest.Member, error) {
		return func(name string) (grouptest.Member, error) {
			if librdkafka {
				return librdkafkatest.GroupMember(t, addr, "orders", migrationGroup, name, "classic"), nil
			}
			c, err := grouptest.StartConsumer(grouptest.ConsumerConfig{Name: name, Addr: addr, Group: migrationGroup,
				Topic: "orders", SessionTimeout: session, HeartbeatInterval: 500 * time.Millisecond, ServerSide: serverSide})
			if err == nil {
				t.Cleanup(func() { c.Kill(); c.Wait() })
			}
			return c, err
		}
	}
	// With every member on the target, the group moves home: the members
	// rejoin the target's coordinator and go on from the same offsets.
	var (
		home     time.Duration
		homeFrom time.Time
	)
	moveHome := func(v2 []grouptest.Member) {
		started := time.Now()
		homeFrom = started
		var rep link.GroupPromotion
		if code := linkAPI(t, admin, "POST", "/api/links/prod/promote-group", map[string]any{"group": migrationGroup}, &rep); code != http.StatusOK ||
			rep.Members != len(v2) {
			t.Errorf("promote-group: %d, %+v; want %d members", code, rep, len(v2))
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		grouptest.WaitSettled(t, ctx, grouptest.Admin(t, dst.Addr), migrationGroup, "orders", partitions, v2...)
		home = time.Since(started)
		if ms, err := sourceGroupSize(ctx, src.Addr, migrationGroup); err != nil || ms != 0 {
			t.Errorf("the group keeps %d members at the source (%v)", ms, err)
		}
	}
	res := grouptest.RunPlaybook(t, grouptest.PlaybookConfig{Addr: src.Addr, Topic: "orders", Group: migrationGroup,
		Partitions: partitions, V1: member(src.Addr), V2: member(dst.Addr), SessionTimeout: session,
		RollbackWithin: grace + 2*time.Second, Settle: 700 * time.Millisecond, AfterScaleOver: moveHome})
	t.Logf("rollback %v, longest time a partition went unowned %v, group home after %v; %s", res.Rollback.Round(time.Millisecond),
		res.LongestUnowned.Round(time.Millisecond), home.Round(time.Millisecond), res.Report.Summary())
	// The ledger here has the hand-offs the link took part in.
	if !t.Failed() {
		grouptest.CheckLinkLedger(t, context.Background(), dst.Addr, res, migrationGroup, "orders", "prod", "v2-canary",
			[]string{"v2-canary", "v2-0", "v2-1", "v2-2"}, homeFrom)
	}
	// Promoted once, it stays home: asking again changes nothing.
	var again link.GroupPromotion
	if code := linkAPI(t, admin, "POST", "/api/links/prod/promote-group", map[string]any{"group": migrationGroup}, &again); code != http.StatusOK || again.Members != 0 {
		t.Errorf("promote-group again: %d, %+v", code, again)
	}
}

// sourceGroupSize is how many members a group has: of a consumer group
// (KIP-848) or a classic one.
func sourceGroupSize(ctx context.Context, addr, group string) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 {
		return len(resp.Groups[0].Members), nil
	}
	ds, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		return 0, err
	}
	return len(ds[group].Members), nil
}

// A consumer on the target fetching a mirror at an offset its source has
// and the mirror has not copied yet (a member of a passed-through group
// committed there on the source) is answered as at the end, and waits,
// instead of OFFSET_OUT_OF_RANGE, which would reset its position; past the
// source's end it is out of range as anywhere.
func TestLinkFetchAheadOfMirrorWaits(t *testing.T) {
	src := testutil.StartBroker(t, nil)
	dst, admin := startLinkTarget(t)
	srcCl := newClient(t, src.Addr)
	createTopic(t, src.Addr, "slow", 1)
	const n = 400
	for range 4 {
		// Incompressible: each produce is one batch of about 100 KiB.
		recs := records("slow", n/4, "")
		for _, r := range recs {
			r.Value = make([]byte, 1024)
			rand.Read(r.Value)
		}
		produceSync(t, srcCl, recs...)
	}
	// One byte a second: the mirror takes its first fetch and waits.
	if code := linkAPI(t, admin, "POST", "/api/links", map[string]any{"name": "prod",
		"source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"slow"}}, "max_bytes_per_sec": 1}, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	var mirrorEnd int64
	testutil.Eventually(t, 30*time.Second, func() error {
		var st link.Status
		linkAPI(t, admin, "GET", "/api/links/prod", nil, &st)
		if len(st.Topics) == 0 || len(st.Topics[0].Partitions) == 0 {
			return fmt.Errorf("no mirror yet")
		}
		p := st.Topics[0].Partitions[0]
		if p.SourceEnd != n || p.MirrorEnd <= 0 {
			return fmt.Errorf("mirror %d of %d", p.MirrorEnd, p.SourceEnd)
		}
		mirrorEnd = p.MirrorEnd
		return nil
	})
	if mirrorEnd >= n {
		t.Fatalf("the mirror caught up (%d) despite its byte rate", mirrorEnd)
	}
	dstCl := newClient(t, dst.Addr)
	tds, err := kadm.NewClient(dstCl).ListTopics(context.Background(), "slow")
	if err != nil || tds["slow"].Err != nil {
		t.Fatalf("the mirror's metadata: %v %v", err, tds["slow"].Err)
	}
	fetch := func(offset int64) (int16, int) {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 300, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "slow", tds["slow"].ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = 0, offset, -1, -1, -1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), dstCl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode, len(p.RecordBatches)
	}
	if code, got := fetch(n); code != 0 || got != 0 {
		t.Errorf("a fetch at the source's end %d, past the mirror's %d: error %d, %d bytes; want none, empty", n, mirrorEnd, code, got)
	}
	if code, _ := fetch(n + 1); code != kerr.OffsetOutOfRange.Code {
		t.Errorf("a fetch past the source's end: error %d, want OFFSET_OUT_OF_RANGE", code)
	}
}

// passThroughLink starts a source broker with the topic orders of the
// partitions given and a target whose link prod mirrors it and passes the
// group billing through, with more link settings from extra; it returns
// once the mirror has caught up.
func passThroughLink(t *testing.T, partitions int32, extra map[string]any) (src, dst *testutil.Broker, admin string) {
	t.Helper()
	groupOpts := func(c *config.Broker) { c.GroupInitialRebalanceDelay = 0 }
	src = testutil.StartBroker(t, groupOpts)
	dst, admin = startLinkTarget(t, groupOpts)
	createTopic(t, src.Addr, "orders", partitions)
	settings := map[string]any{"name": "prod", "source": map[string]any{"bootstrap_servers": []string{src.Addr}},
		"topics": map[string]any{"include": []string{"orders"}}, "groups": map[string]any{"include": []string{"billing"}},
		"group_pass_through": true}
	maps.Copy(settings, extra)
	if code := linkAPI(t, admin, "POST", "/api/links", settings, nil); code != http.StatusCreated {
		t.Fatalf("creating the link: %d", code)
	}
	waitMirrored(t, admin, "prod", "orders")
	return src, dst, admin
}

// A link does not stop passing a group through while members of it are
// connected here: pausing it or turning pass-through off would leave
// their partitions owned on both clusters. Once they leave, it may.
func TestLinkPassThroughKeepsMembers(t *testing.T) {
	src, dst, admin := passThroughLink(t, 2, nil)
	consumer := newClient(t, dst.Addr, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"))
	ctx := context.Background()
	testutil.Eventually(t, 30*time.Second, func() error {
		if n, err := sourceGroupSize(ctx, src.Addr, "billing"); err != nil || n != 1 {
			return fmt.Errorf("the source's group has %d members (%v)", n, err)
		}
		return nil
	})
	// The status lists it, with the partitions the source gave it.
	testutil.Eventually(t, 30*time.Second, func() error {
		var st link.Status
		linkAPI(t, admin, "GET", "/api/links/prod", nil, &st)
		if len(st.PassedThrough) != 1 || st.PassedThrough[0].Group != "billing" || len(st.PassedThrough[0].Partitions) != 2 {
			return fmt.Errorf("members passed through: %+v", st.PassedThrough)
		}
		return nil
	})
	var e map[string]string
	if code := linkAPI(t, admin, "POST", "/api/links/prod/pause", nil, &e); code != http.StatusConflict ||
		!strings.Contains(e["error"], "promote-group") {
		t.Errorf("pausing with a member connected: %d %v", code, e)
	}
	if code := linkAPI(t, admin, "PATCH", "/api/links/prod", map[string]any{"group_pass_through": false}, &e); code != http.StatusConflict {
		t.Errorf("turning pass-through off with a member connected: %d %v", code, e)
	}
	consumer.Close() // leaves the group (at the source)
	testutil.Eventually(t, 30*time.Second, func() error {
		if code := linkAPI(t, admin, "POST", "/api/links/prod/pause", nil, nil); code != http.StatusOK {
			return fmt.Errorf("pausing once the member left: %d", code)
		}
		return nil
	})
}

// A link that promotes groups by itself moves a passed-through group home
// once none of its members is left on the source, and not before.
func TestLinkAutoPromoteGroup(t *testing.T) {
	src, dst, admin := passThroughLink(t, 2, map[string]any{"auto_promote_groups": true})
	ctx := context.Background()
	promoted := func() []string {
		var st link.Status
		linkAPI(t, admin, "GET", "/api/links/prod", nil, &st)
		return st.Link.PromotedGroups
	}
	onKafka := newClient(t, src.Addr, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"))
	newClient(t, dst.Addr, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders")) // on Strand
	testutil.Eventually(t, 30*time.Second, func() error {
		if n, err := sourceGroupSize(ctx, src.Addr, "billing"); err != nil || n != 2 {
			return fmt.Errorf("the source's group has %d members (%v)", n, err)
		}
		return nil
	})
	// A member is left on the source: the group stays there.
	if p := promoted(); len(p) != 0 {
		t.Fatalf("promoted %v with a member on the source", p)
	}
	onKafka.Close()
	testutil.Eventually(t, 30*time.Second, func() error {
		if p := promoted(); !slices.Equal(p, []string{"billing"}) {
			return fmt.Errorf("promoted groups %v", p)
		}
		ds, err := kadm.NewClient(newClient(t, dst.Addr)).DescribeGroups(ctx, "billing")
		if err != nil {
			return err
		}
		if d := ds["billing"]; d.State != "Stable" || len(d.Members) != 1 {
			return fmt.Errorf("the group here is %s with %d members", d.State, len(d.Members))
		}
		return nil
	})
}

// When the source cannot be reached, a passed-through member's requests
// fail with an error it retries, and the link's status says so.
func TestLinkPassThroughSourceLost(t *testing.T) {
	// Slow: the link's retries against a source that went away are waited for.
	// It waits more than it works, so it runs beside the other slow tests.
	t.Parallel()
	src, dst, admin := passThroughLink(t, 1, nil)
	consumer := newClient(t, dst.Addr, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"))
	status := func() link.Status {
		var st link.Status
		linkAPI(t, admin, "GET", "/api/links/prod", nil, &st)
		return st
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if st := status(); len(st.PassedThrough) != 1 || st.PassThroughError != "" {
			return fmt.Errorf("members passed through %+v, error %q", st.PassedThrough, st.PassThroughError)
		}
		return nil
	})
	src.Stop(t)
	testutil.Eventually(t, 30*time.Second, func() error {
		if st := status(); st.PassThroughError == "" {
			return fmt.Errorf("no pass-through error reported with the source down")
		}
		return nil
	})
	// Its leave cannot reach the source either: not waited for.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	consumer.LeaveGroupContext(ctx)
}
