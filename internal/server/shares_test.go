package server_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/share"
	"github.com/strandlog/strand/internal/testutil"
	"github.com/strandlog/strand/test/grouptest"
)

func apiListed(t *testing.T, cl *kgo.Client, key int16) bool {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == key })
}

// TestShareGroupsNeedTheFeature: the share group APIs are listed and
// served while share.version is 1, its level unless an operator finalizes
// another (as in a cluster Kafka 4.2 or later formats); at 0 they are
// neither listed nor served, and at 1 again they are back.
func TestShareGroupsNeedTheFeature(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	keys := []int16{76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}
	listed := func(want bool) {
		t.Helper()
		// A fresh client: a client keeps the versions it was told.
		cl := newClient(t, b.Addr)
		for _, key := range keys {
			if apiListed(t, cl, key) != want {
				t.Fatalf("API %d listed: %v, want %v", key, !want, want)
			}
		}
	}
	listed(true)
	testutil.SetShareVersion(t, newClient(t, b.Addr), 0)
	listed(false)
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version = 1
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "g", "m", []string{"t"}
	if resp := dialRaw(t, b.Addr).do(hb).(*kmsg.ShareGroupHeartbeatResponse); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ShareGroupHeartbeat with share.version 0: %+v", resp)
	}
	testutil.EnableShareGroups(t, newClient(t, b.Addr))
	listed(true)
}

// TestShareGroupConsumers: eight franz-go share consumers read a
// three-partition topic together. Every record is accepted exactly once;
// the records released at their first delivery (those ending in 7) are
// delivered again, counted as a second delivery; and once all is
// acknowledged a new member acquires nothing.
func TestShareGroupConsumers(t *testing.T) {
	t.Parallel() // Slow: eight clients poll until 600 records are accepted.
	b := testutil.StartBroker(t, nil)
	admin := newClient(t, b.Addr)
	testutil.EnableShareGroups(t, admin)
	const topic, group, n = "queue", "workers", 600
	created, err := kadm.NewClient(admin).CreateTopic(context.Background(), 3, 1, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	testutil.SetGroupConfig(t, admin, group, "share.auto.offset.reset", "earliest")
	prod := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("job-%03d", i))})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Polls end once every record is accepted.
	pollCtx, allAccepted := context.WithCancel(ctx)
	defer allAccepted()
	var (
		mu         sync.Mutex
		accepted   = map[string]int{}
		deliveries = map[string][]int32{}
		ackErrs    []error
		wg         sync.WaitGroup
	)
	for c := range 8 {
		cl := newClient(t, b.Addr, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				if err := rs.Error(); err != nil {
					mu.Lock()
					ackErrs = append(ackErrs, err)
					mu.Unlock()
				}
			}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				fs := cl.PollRecords(pollCtx, 50)
				fs.EachRecord(func(r *kgo.Record) {
					v := string(r.Value)
					mu.Lock()
					deliveries[v] = append(deliveries[v], r.DeliveryCount())
					release := r.DeliveryCount() == 1 && v[len(v)-1] == '7'
					if !release {
						accepted[v]++
					}
					if len(accepted) == n {
						allAccepted()
					}
					mu.Unlock()
					if release {
						cl.MarkAcks(kgo.AckRelease, r)
					} else {
						cl.MarkAcks(kgo.AckAccept, r)
					}
				})
			}
			flushCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
			defer stop()
			if err := cl.FlushAcks(flushCtx); err != nil {
				t.Errorf("consumer %d flushing its acknowledgements: %v", c, err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%d of %d records accepted in time", len(accepted), n)
	}
	if len(ackErrs) > 0 {
		t.Fatalf("acknowledgements failed: %v", ackErrs)
	}
	released := 0
	for i := range n {
		v := fmt.Sprintf("job-%03d", i)
		if accepted[v] != 1 {
			t.Fatalf("%s accepted %d times", v, accepted[v])
		}
		ds := deliveries[v]
		for j, d := range ds {
			if d != int32(j+1) {
				t.Fatalf("%s delivered with counts %v", v, ds)
			}
		}
		if len(ds) > 1 {
			released++
		}
	}
	if released != n/10 {
		t.Fatalf("%d records delivered twice, want the %d released", released, n/10)
	}

	// The tools see the group: ListGroups lists it as a share group, and
	// ShareGroupDescribe gives each of the eight members one partition,
	// every partition read by some.
	testutil.Eventually(t, 10*time.Second, func() error {
		lg, err := kmsg.NewPtrListGroupsRequest().RequestWith(context.Background(), admin)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(lg.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return g.Group == group && g.GroupType == "share" && g.GroupState == "Stable"
		}) {
			return fmt.Errorf("ListGroups: %+v", lg.Groups)
		}
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{group}
		resp, err := req.RequestWith(context.Background(), admin)
		if err != nil {
			return err
		}
		g := resp.Groups[0]
		if g.ErrorCode != 0 || len(g.Members) != 8 {
			return fmt.Errorf("described %s with %d members, error %d", g.GroupID, len(g.Members), g.ErrorCode)
		}
		read := map[int32]bool{}
		for _, m := range g.Members {
			if len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != topic ||
				len(m.Assignment.TopicPartitions[0].Partitions) != 1 {
				return fmt.Errorf("member %s assigned %+v", m.MemberID, m.Assignment)
			}
			read[m.Assignment.TopicPartitions[0].Partitions[0]] = true
		}
		if len(read) != 3 {
			return fmt.Errorf("partitions read %v", read)
		}
		return nil
	})

	// DescribeShareGroupOffsets: each partition's share-partition starts
	// past its 200 records, nothing left to deliver.
	dreq := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	dreq.Version = 1
	dg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	dg.GroupID = group
	dreq.Groups = append(dreq.Groups, dg)
	dresp, err := dreq.RequestWith(context.Background(), admin)
	if err != nil || len(dresp.Groups) != 1 || dresp.Groups[0].ErrorCode != 0 || len(dresp.Groups[0].Topics) != 1 {
		t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, dresp)
	}
	for _, p := range dresp.Groups[0].Topics[0].Partitions {
		if p.ErrorCode != 0 || p.StartOffset != n/3 || p.Lag != 0 {
			t.Fatalf("partition %d: start %d, lag %d, error %d; want start %d, lag 0", p.Partition, p.StartOffset, p.Lag, p.ErrorCode, n/3)
		}
	}
	if len(dresp.Groups[0].Topics[0].Partitions) != 3 {
		t.Fatalf("offsets of %d partitions", len(dresp.Groups[0].Topics[0].Partitions))
	}

	// Everything is acknowledged: a new member acquires nothing.
	late := &shareConn{t: t, c: dialRaw(t, b.Addr), group: group, member: "late"}
	late.join(topic)
	if got := acquiredRuns(late.fetchPartitions([16]byte(created.ID), 0, 1, 2)); len(got) != 0 {
		t.Fatalf("a new member acquired %v after all were accepted", got)
	}
}

// shareConn is a share group member speaking the protocol itself on one
// connection, to see each answer as it comes.
type shareConn struct {
	t             *testing.T
	c             *rawConn
	group, member string
	session       int32
}

func (m *shareConn) join(topic string) int32 {
	m.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.SubscribedTopicNames = m.group, m.member, []string{topic}
	resp := m.c.do(req).(*kmsg.ShareGroupHeartbeatResponse)
	if resp.ErrorCode != 0 || resp.Assignment == nil {
		m.t.Fatalf("%s joins: %+v", m.member, resp)
	}
	return resp.MemberEpoch
}

// fetch sends a ShareFetch at the session's epoch with acks for the
// topic's partition 0, and moves the epoch on.
func (m *shareConn) fetch(id [16]byte, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.member, m.session
	req.MaxRecords, req.MaxBytes, req.MaxWaitMillis = 100, 1<<20, 0
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := m.c.do(req).(*kmsg.ShareFetchResponse)
	if resp.ErrorCode == 0 {
		m.session++
	}
	return resp
}

// fetchPartitions sends a ShareFetch at the session's epoch for the
// topic's partitions, without acknowledgements or a wait, fails the test
// on any error in the answer, and moves the epoch on.
func (m *shareConn) fetchPartitions(id [16]byte, partitions ...int32) *kmsg.ShareFetchResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.member, m.session
	req.MaxRecords, req.MaxBytes = 100, 1<<20
	if len(partitions) > 0 {
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = id
		for _, p := range partitions {
			rp := kmsg.NewShareFetchRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := m.c.do(req).(*kmsg.ShareFetchResponse)
	if resp.ErrorCode != 0 {
		m.t.Fatalf("%s's ShareFetch at epoch %d: error %d", m.member, m.session, resp.ErrorCode)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				m.t.Fatalf("%s's ShareFetch at epoch %d: partition %d error %d", m.member, m.session, p.Partition, p.ErrorCode)
			}
		}
	}
	m.session++
	return resp
}

func (m *shareConn) acknowledge(id [16]byte, acks ...kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareAcknowledgeResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.member, m.session
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := m.c.do(req).(*kmsg.ShareAcknowledgeResponse)
	if resp.ErrorCode == 0 {
		m.session++
	}
	return resp
}

// shareTopic starts a broker with share groups on and a one-partition
// topic, and returns the broker, a client and the topic's id.
func shareTopic(t *testing.T, topic string) (*testutil.Broker, *kgo.Client, [16]byte) {
	t.Helper()
	b := testutil.StartBroker(t, func(c *config.Broker) { c.AdminListen = "127.0.0.1:0" })
	admin := newClient(t, b.Addr)
	testutil.EnableShareGroups(t, admin)
	created, err := kadm.NewClient(admin).CreateTopic(context.Background(), 1, 1, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	return b, admin, [16]byte(created.ID)
}

// shareHolding starts a broker with a one-partition topic of ten records
// (values 0 to 9) and a share group reading it from the earliest, whose
// member-a has joined and acquired all ten.
func shareHolding(t *testing.T, topic, group string) (*testutil.Broker, *kgo.Client, [16]byte, *shareConn) {
	t.Helper()
	b, admin, id := shareTopic(t, topic)
	testutil.SetGroupConfig(t, admin, group, "share.auto.offset.reset", "earliest")
	produceEach(t, b.Addr, topic, 10)
	a := &shareConn{t: t, c: dialRaw(t, b.Addr), group: group, member: "member-a"}
	a.join(topic)
	if got := acquiredRuns(a.fetch(id)); !slices.Equal(got, [][3]int64{{0, 9, 1}}) {
		t.Fatalf("a acquired %v", got)
	}
	return b, admin, id, a
}

// produceEach writes the values 0 to n-1, a batch each.
func produceEach(t *testing.T, addr, topic string, n int) {
	t.Helper()
	prod := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	for i := range n {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// ack acknowledges offsets first to last with one type.
func ack(first, last int64, typ int8) kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch {
	return kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{typ}}
}

func acquiredRuns(resp *kmsg.ShareFetchResponse) [][3]int64 {
	var out [][3]int64
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			for _, a := range p.AcquiredRecords {
				out = append(out, [3]int64{a.FirstOffset, a.LastOffset, int64(a.DeliveryCount)})
			}
		}
	}
	return out
}

func ackError(resp *kmsg.ShareAcknowledgeResponse) int16 {
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestShareGroupProtocol: acknowledgements of records a member does not
// hold, or holds no longer, are refused with INVALID_RECORD_STATE; a wrong
// share session epoch and a stale member epoch are refused; and when a
// member's connection closes without a word its records go to another
// member at once, counted as a second delivery.
func TestShareGroupProtocol(t *testing.T) {
	const topic, group = "jobs", "g"
	b, admin, id := shareTopic(t, topic)
	testutil.SetGroupConfig(t, admin, group, "share.auto.offset.reset", "earliest")
	produceEach(t, b.Addr, topic, 10)

	a := &shareConn{t: t, c: dialRaw(t, b.Addr), group: group, member: "member-a"}
	bb := &shareConn{t: t, c: dialRaw(t, b.Addr), group: group, member: "member-b"}
	a.join(topic)
	epochB := bb.join(topic)
	if got := acquiredRuns(a.fetch(id)); !slices.Equal(got, [][3]int64{{0, 9, 1}}) {
		t.Fatalf("a acquired %v", got)
	}
	if got := acquiredRuns(bb.fetch(id)); len(got) != 0 {
		t.Fatalf("b acquired %v while a holds everything", got)
	}
	if code := ackError(bb.acknowledge(id, ack(0, 0, 1))); code != kerr.InvalidRecordState.Code {
		t.Fatalf("b accepting a's record: %d", code)
	}
	if code := ackError(a.acknowledge(id, ack(0, 1, 1))); code != 0 {
		t.Fatalf("a accepting its records: %d", code)
	}
	if code := ackError(a.acknowledge(id, ack(0, 1, 1))); code != kerr.InvalidRecordState.Code {
		t.Fatalf("a accepting them twice: %d", code)
	}
	a.session += 5
	if resp := a.acknowledge(id, ack(2, 2, 1)); resp.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("a wrong session epoch: %+v", resp)
	}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version = 1
	hb.GroupID, hb.MemberID, hb.MemberEpoch = group, bb.member, epochB+10
	if resp := bb.c.do(hb).(*kmsg.ShareGroupHeartbeatResponse); resp.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("a member epoch from the future: %+v", resp)
	}

	// a goes away without a word: its eight records are b's at once.
	a.c.nc.Close()
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := acquiredRuns(bb.fetch(id)); !slices.Equal(got, [][3]int64{{2, 9, 2}}) {
			return fmt.Errorf("b acquired %v", got)
		}
		return nil
	})
}

// TestShareGroupStateSurvivesRestart: what a share group acknowledged is
// kept in __share_group_state before it is answered. After a restart the
// accepted and rejected records are not delivered again; the released
// one, and those held when the broker stopped, are, counted as second
// deliveries.
func TestShareGroupStateSurvivesRestart(t *testing.T) {
	const topic, group = "durable", "g"
	b, _, id, a := shareHolding(t, topic, group)
	if code := ackError(a.acknowledge(id, ack(0, 3, 1), ack(4, 4, 3), ack(5, 5, 2))); code != 0 {
		t.Fatalf("a's acknowledgements: %d", code)
	}

	b.Restart(t)
	c := &shareConn{t: t, c: dialRaw(t, b.Addr), group: group, member: "member-c"}
	c.join(topic)
	if got := acquiredRuns(c.fetch(id)); !slices.Equal(got, [][3]int64{{5, 9, 2}}) {
		t.Fatalf("after the restart c acquired %v, want offsets 5-9 at their second delivery", got)
	}
}

// TestShareGroupReadCommitted: a group with share.isolation.level
// read_committed never delivers an aborted transaction's records; its
// markers and the aborted records are passed over. One with the default,
// read_uncommitted, gets every record.
func TestShareGroupReadCommitted(t *testing.T) {
	const topic = "txns"
	b, admin, id := shareTopic(t, topic)
	tx := newClient(t, b.Addr, kgo.TransactionalID("share-tx"), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, commit := range []bool{true, false, true} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := range 3 {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("%v-%d", commit, i))})
		}
		if err := tx.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	// Three records and a marker each: 0-2 committed, 4-6 aborted, 8-10
	// committed.
	for level, want := range map[string][][3]int64{
		"read_committed":   {{0, 2, 1}, {8, 10, 1}},
		"read_uncommitted": {{0, 2, 1}, {4, 6, 1}, {8, 10, 1}},
	} {
		group := "g-" + level
		testutil.SetGroupConfig(t, admin, group, "share.auto.offset.reset", "earliest")
		testutil.SetGroupConfig(t, admin, group, "share.isolation.level", level)
		m := &shareConn{t: t, c: dialRaw(t, b.Addr), group: group, member: "m"}
		m.join(topic)
		if got := acquiredRuns(m.fetch(id)); !slices.Equal(got, want) {
			t.Errorf("%s: acquired %v, want %v", level, got, want)
		}
	}
}

// TestShareGroupResetByDuration: share.auto.offset.reset
// by_duration:PT1H starts a group at the first record of the last hour;
// a config Kafka would refuse is refused; a group that sets none starts at
// the latest.
func TestShareGroupResetByDuration(t *testing.T) {
	const topic, group = "timed", "g"
	b, admin, id := shareTopic(t, topic)
	prod := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic))
	now := time.Now()
	for i, at := range []time.Time{now.Add(-3 * time.Hour), now.Add(-2 * time.Hour), now.Add(-30 * time.Minute), now} {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte(fmt.Sprint(i)), Timestamp: at}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.SetGroupConfig(t, admin, group, "share.auto.offset.reset", "by_duration:PT1H")
	m := &shareConn{t: t, c: dialRaw(t, b.Addr), group: group, member: "m"}
	m.join(topic)
	if got := acquiredRuns(m.fetch(id)); !slices.Equal(got, [][3]int64{{2, 3, 1}}) {
		t.Fatalf("acquired %v, want offsets 2-3, the last hour's", got)
	}
	if code := testutil.AlterGroupConfig(t, admin, group, "share.isolation.level", "committed"); code != kerr.InvalidConfig.Code {
		t.Fatalf("share.isolation.level=committed: error %d, want INVALID_CONFIG", code)
	}
	// A group that sets none starts at the latest: only what comes after.
	late := &shareConn{t: t, c: dialRaw(t, b.Addr), group: "unset", member: "l"}
	late.join(topic)
	if got := acquiredRuns(late.fetchPartitions(id, 0)); len(got) != 0 {
		t.Fatalf("a group reading from the latest acquired %v", got)
	}
	produceEach(t, b.Addr, topic, 1)
	if got := acquiredRuns(late.fetchPartitions(id, 0)); !slices.Equal(got, [][3]int64{{4, 4, 1}}) {
		t.Fatalf("a group reading from the latest acquired %v, want offset 4", got)
	}
}

// TestShareGroupOffsetsAdmin: a share group's offsets are reset and
// deleted only while it has no member (NON_EMPTY_GROUP), and a reset
// fences what the partition's leader held: the acknowledgement of a
// member still holding records from before is refused, and a new member
// gets every record again from the new start.
func TestShareGroupOffsetsAdmin(t *testing.T) {
	const topic, group = "reset", "g"
	b, admin, id, a := shareHolding(t, topic, group)
	if code := ackError(a.acknowledge(id, ack(0, 4, 1))); code != 0 {
		t.Fatalf("a accepting 0-4: %d", code)
	}
	c := admin
	alter := func(start int64) *kmsg.AlterShareGroupOffsetsResponse {
		t.Helper()
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: start}}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	deleteOffsets := func(g string) *kmsg.DeleteShareGroupOffsetsResponse {
		t.Helper()
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = g
		req.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: topic}}
		resp, err := req.RequestWith(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := alter(0); resp.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("resetting a group with a member: %+v", resp)
	}
	if resp := deleteOffsets(group); resp.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("deleting the offsets of a group with a member: %+v", resp)
	}
	if resp := deleteOffsets("nobody"); resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("deleting the offsets of an unknown group: %+v", resp)
	}

	// leave: the member leaves the group, keeping its share session and
	// the records it holds.
	leave := func(m *shareConn) {
		t.Helper()
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.Version = 1
		hb.GroupID, hb.MemberID, hb.MemberEpoch = group, m.member, -1
		if resp := m.c.do(hb).(*kmsg.ShareGroupHeartbeatResponse); resp.ErrorCode != 0 {
			t.Fatalf("%s leaving: %+v", m.member, resp)
		}
	}
	leave(a) // holding 5-9
	if resp := alter(2); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("resetting the empty group to 2: %+v", resp)
	}
	// A member opening its session reads the state anew: all from 2.
	d := &shareConn{t: t, c: dialRaw(t, b.Addr), group: group, member: "member-d"}
	d.join(topic)
	if got := acquiredRuns(d.fetch(id)); !slices.Equal(got, [][3]int64{{2, 9, 1}}) {
		t.Fatalf("after the reset to 2, d acquired %v", got)
	}
	if code := ackError(a.acknowledge(id, ack(5, 9, 1))); code != kerr.InvalidRecordState.Code {
		t.Fatalf("a accepting records it held before the reset: %d, want INVALID_RECORD_STATE", code)
	}
	// A leader's write of the state before a reset is fenced.
	leave(d) // holding 2-9
	if resp := alter(0); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("resetting the empty group to 0: %+v", resp)
	}
	if code := ackError(d.acknowledge(id, ack(2, 9, 1))); code != kerr.InvalidRecordState.Code {
		t.Fatalf("d accepting records it held before the reset: %d, want INVALID_RECORD_STATE", code)
	}
	e := &shareConn{t: t, c: dialRaw(t, b.Addr), group: group, member: "member-e"}
	e.join(topic)
	if got := acquiredRuns(e.fetch(id)); !slices.Equal(got, [][3]int64{{0, 9, 1}}) {
		t.Fatalf("after the reset to 0, e acquired %v", got)
	}
	// strand group describe's reading: e owns the partition, whose share-
	// partition starts at 0 with all ten records still to deliver.
	g, err := inspect.ReadGroup(context.Background(), kadm.NewClient(admin), group)
	wantParts := []inspect.PartitionLag{{Topic: topic, Partition: 0, Committed: 0, End: 10, Lag: 10, MemberID: e.member}}
	if err != nil || g.Type != "share" || g.State != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != e.member ||
		!slices.Equal(g.Members[0].Owned, []inspect.Partition{{Topic: topic, Partition: 0}}) || !slices.Equal(g.Partitions, wantParts) ||
		g.TotalLag != 10 {
		t.Fatalf("the share group read as %+v, %v", g, err)
	}
}

// TestShareGroupSurvivesRestart: a share group with no member is kept in
// __consumer_offsets: after a restart it is still listed, and its offsets
// described, as kafka-share-groups.sh shows them; deleted, it stays gone.
func TestShareGroupSurvivesRestart(t *testing.T) {
	const topic, group = "kept", "g"
	b, _, id, a := shareHolding(t, topic, group)
	if code := ackError(a.acknowledge(id, ack(0, 3, 1))); code != 0 {
		t.Fatalf("a accepting 0-3: %d", code)
	}
	b.Restart(t)
	adm := kadm.NewClient(newClient(t, b.Addr))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listed, err := adm.ListGroups(ctx)
	if err != nil || listed[group].GroupType != "share" || listed[group].State != "Empty" {
		t.Fatalf("after the restart the groups list as %+v, %v", listed, err)
	}
	offs, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil || offs[group].Err != nil {
		t.Fatalf("after the restart, the group's offsets: %+v %v", offs, err)
	}
	// DescribeGroups describes classic groups: a share group is Dead to
	// it, as to Kafka before v6.
	if d, err := adm.DescribeGroups(ctx, group); err != nil || d[group].Err != nil || d[group].State != "Dead" {
		t.Fatalf("DescribeGroups of the share group: %+v %v", d[group], err)
	}
	if o, ok := offs[group].Offsets.Lookup(topic, 0); !ok || o.Err != nil || o.StartOffset != 4 || o.Lag != 6 {
		t.Fatalf("after the restart, partition 0's offset %+v %v; want start 4, lag 6", o, ok)
	}
	deleted, err := adm.DeleteGroups(ctx, group)
	if err != nil || deleted[group].Err != nil {
		t.Fatalf("deleting the group: %+v %v", deleted, err)
	}
	b.Restart(t)
	adm = kadm.NewClient(newClient(t, b.Addr))
	if listed, err := adm.ListGroups(ctx); err != nil || listed[group].Group != "" {
		t.Fatalf("deleted, then restarted, the groups list as %+v, %v", listed, err)
	}
}

// TestShareGroupMetrics: /metrics has a share group's members on its
// coordinator, and each share-partition's lag, acquired and in-flight
// records on the partition's leader; the console shows the group.
func TestShareGroupMetrics(t *testing.T) {
	const topic, group = "measured", "g"
	b, _, id, a := shareHolding(t, topic, group)
	// 0-3 accepted, 4 rejected, 5 released: 6-9 still held.
	if code := ackError(a.acknowledge(id, ack(0, 3, 1), ack(4, 4, 3), ack(5, 5, 2))); code != 0 {
		t.Fatalf("a's acknowledgements: %d", code)
	}
	fams := grouptest.Scrape(t, b.Server().AdminAddr().String())
	part := map[string]string{"group": group, "topic": topic, "partition": "0"}
	for name, want := range map[string]float64{"strand_share_partition_lag": 5, "strand_share_partition_acquired": 4,
		"strand_share_partition_in_flight": 5} {
		if v, ok := grouptest.Sample(fams, name, part); !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", name, v, ok, want)
		}
	}
	if v, ok := grouptest.Sample(fams, "strand_group_members", map[string]string{"group": group, "type": "share", "state": "Stable"}); !ok || v != 1 {
		t.Errorf("strand_group_members of the share group = %v (%v), want 1", v, ok)
	}
	// The console's page of the group: its member, and each partition
	// from the share-partition's start.
	resp, err := http.Get("http://" + b.Server().AdminAddr().String() + "/groups/" + group)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`<th class="num">Start</th>`, "member-a", `data-partition="` + topic + `-0"`} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("the console's page of share group %s (%d) lacks %q:\n%s", group, resp.StatusCode, want, body)
		}
	}
}

// TestShareCoordinatorLookup: FindCoordinator of the share type (2), as a
// broker asks it for a share-partition's state, names the leader of the
// __share_group_state partition the key hashes to, creating the topic on
// the way; a key of another form, or a version below 6, is
// INVALID_REQUEST, and while share.version is 0 there is no coordinator.
func TestShareCoordinatorLookup(t *testing.T) {
	t.Parallel()
	b, admin, id := shareTopic(t, "lookup")
	find := func(version int16, key string) kmsg.FindCoordinatorResponseCoordinator {
		t.Helper()
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.Version, r.CoordinatorType, r.CoordinatorKey, r.CoordinatorKeys = version, 2, key, []string{key}
		resp := dialRaw(t, b.Addr).do(r).(*kmsg.FindCoordinatorResponse)
		if len(resp.Coordinators) != 1 {
			t.Fatalf("FindCoordinator v%d of %q: %+v", version, key, resp)
		}
		return resp.Coordinators[0]
	}
	brokers, err := kadm.NewClient(admin).ListBrokers(context.Background())
	if err != nil || len(brokers) != 1 {
		t.Fatalf("ListBrokers: %v %+v", err, brokers)
	}
	key := share.CoordinatorKey(share.Key{Group: "a:b", TopicID: id, Partition: 0})
	if c := find(6, key); c.ErrorCode != 0 || c.NodeID != brokers[0].NodeID || c.Key != key {
		t.Fatalf("FindCoordinator of %s: %+v", key, c)
	}
	md, err := kadm.NewClient(admin).ListTopicsWithInternal(context.Background(), share.StateTopic)
	if err != nil || md[share.StateTopic].Err != nil || len(md[share.StateTopic].Partitions) == 0 {
		t.Fatalf("%s after the lookup: %v %+v", share.StateTopic, err, md)
	}
	for _, bad := range []string{"a", "a:b:0", "g:" + base64.RawURLEncoding.EncodeToString(id[:4]) + ":0",
		":" + base64.RawURLEncoding.EncodeToString(id[:]) + ":0", key[:len(key)-1] + "-1"} {
		if c := find(6, bad); c.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("FindCoordinator of %q: %+v, want INVALID_REQUEST", bad, c)
		}
	}
	if c := find(5, key); c.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("FindCoordinator v5 of a share-partition: %+v, want INVALID_REQUEST", c)
	}
	testutil.SetShareVersion(t, admin, 0)
	if c := find(6, key); c.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("FindCoordinator of a share-partition at share.version 0: %+v", c)
	}
}

// TestShareFetchForgetsANamedPartition: a request that names a partition
// for its acknowledgements and forgets it too (as franz-go does for a
// partition no longer assigned to the member) leaves it out of the
// session: later fetches acquire nothing there, where they would hand
// the member records its client no longer reads. The records the member
// still holds there stay its own, as in Kafka: another member cannot
// acquire them, and the member acknowledges them later.
func TestShareFetchForgetsANamedPartition(t *testing.T) {
	t.Parallel()
	b, _, id, a := shareHolding(t, "forget", "forget-group")
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &a.group, &a.member, a.session
	req.MaxRecords, req.MaxBytes = 100, 1<<20
	req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{
		Partition: 0, AcknowledgementBatches: []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 4, AcknowledgeTypes: []int8{1}}},
	}}}}
	req.ForgottenTopicsData = []kmsg.ShareFetchRequestForgottenTopicsData{{TopicID: id, Partitions: []int32{0}}}
	resp := a.c.do(req).(*kmsg.ShareFetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].AcknowledgeErrorCode != 0 {
		t.Fatalf("acknowledging and forgetting: %+v", resp)
	}
	if got := acquiredRuns(resp); len(got) != 0 {
		t.Fatalf("acquired %v from a partition the request forgets", got)
	}
	a.session++
	produceEach(t, b.Addr, "forget", 5)
	if got := acquiredRuns(a.fetchPartitions(id)); len(got) != 0 {
		t.Fatalf("acquired %v from a forgotten partition", got)
	}
	// Another member gets the new records, not those member-a holds.
	c := &shareConn{t: t, c: dialRaw(t, b.Addr), group: a.group, member: "member-c"}
	c.join("forget")
	if got := acquiredRuns(c.fetch(id)); !slices.Equal(got, [][3]int64{{10, 14, 1}}) {
		t.Fatalf("member-c acquired %v", got)
	}
	if code := ackError(a.acknowledge(id, ack(5, 9, 1))); code != 0 {
		t.Fatalf("member-a accepting what it still holds: error %d", code)
	}
}
