package group_test

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/group"
)

// offsetsRecords decodes everything written to __consumer_offsets, in
// order per partition.
func offsetsRecords(t *testing.T, topic *coordinator.MemTopic) []memRecord {
	var out []memRecord
	for i := range topic.Len() {
		out = append(out, partitionRecords(t, topic.Partition(i), int32(i))...)
	}
	return out
}

// memRecord is one decoded record of __consumer_offsets.
type memRecord struct {
	partition    int32
	offsetKey    *kmsg.OffsetCommitKey
	offsetValue  *kmsg.OffsetCommitValue
	groupKey     *kmsg.GroupMetadataKey
	groupValue   *kmsg.GroupMetadataValue
	tombstone    bool
	keyType      int16 // the key's version: Kafka's record type
	batchVersion int8
	attributes   int16 // the batch's
	producerID   int64
	epoch        int16
	baseSequence int32
}

func partitionRecords(t *testing.T, p *coordinator.MemPartition, partition int32) []memRecord {
	var out []memRecord
	for _, raw := range p.Batches() {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatalf("batch: %v", err)
		}
		if crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); crc != uint32(rb.CRC) {
			t.Fatalf("batch CRC %08x, computed %08x", uint32(rb.CRC), crc)
		}
		if rb.Attributes&0x20 != 0 {
			continue // a transaction marker: not the coordinator's record
		}
		recs := rb.Records
		for range rb.NumRecords {
			n, w := binary.Varint(recs)
			var r kmsg.Record
			if err := r.ReadFrom(recs[:w+int(n)]); err != nil {
				t.Fatalf("record: %v", err)
			}
			recs = recs[w+int(n):]
			mr := memRecord{partition: partition, tombstone: r.Value == nil, batchVersion: rb.Magic,
				attributes: rb.Attributes, producerID: rb.ProducerID, epoch: rb.ProducerEpoch, baseSequence: rb.FirstSequence}
			mr.keyType = int16(binary.BigEndian.Uint16(r.Key))
			switch mr.keyType {
			case 3, 4, 5, 6, 7, 8:
				// A consumer group's records; consumerstore_test.go reads them.
			case 0, 1:
				mr.offsetKey = new(kmsg.OffsetCommitKey)
				if err := mr.offsetKey.ReadFrom(r.Key); err != nil {
					t.Fatal(err)
				}
				if r.Value != nil {
					mr.offsetValue = new(kmsg.OffsetCommitValue)
					if err := mr.offsetValue.ReadFrom(r.Value); err != nil {
						t.Fatal(err)
					}
				}
			case 2:
				mr.groupKey = new(kmsg.GroupMetadataKey)
				if err := mr.groupKey.ReadFrom(r.Key); err != nil {
					t.Fatal(err)
				}
				if r.Value != nil {
					mr.groupValue = new(kmsg.GroupMetadataValue)
					if err := mr.groupValue.ReadFrom(r.Value); err != nil {
						t.Fatal(err)
					}
				}
			default:
				t.Fatalf("unexpected key version in %x", r.Key)
			}
			out = append(out, mr)
		}
	}
	return out
}

// env is a coordinator on a fake clock and an in-memory topic.
type env struct {
	t     *testing.T
	clock *coordinator.ManualClock
	topic *coordinator.MemTopic
	cfg   group.Config
	c     *group.Coordinator
}

const (
	session   = 10 * time.Second
	rebalance = 30 * time.Second
	delay     = 3 * time.Second
)

func newEnv(t *testing.T, edit func(*group.Config)) *env {
	t.Helper()
	e := &env{t: t, clock: coordinator.NewManualClock(), topic: &coordinator.MemTopic{}}
	e.cfg = group.Defaults()
	e.cfg.InitialRebalanceDelay = delay
	e.cfg.OffsetsPartitions = 5
	e.cfg.Clock = e.clock
	e.cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if edit != nil {
		edit(&e.cfg)
	}
	e.start()
	return e
}

// start opens a coordinator over the topic (again, after restart).
func (e *env) start() {
	e.t.Helper()
	e.c = group.New(e.cfg, e.topic)
	if err := e.c.Load(); err != nil {
		e.t.Fatal(err)
	}
	c := e.c
	e.t.Cleanup(c.Close)
}

// restart closes the coordinator and opens another on the same topic, as a
// broker restart does.
func (e *env) restart() {
	e.t.Helper()
	e.c.Close()
	e.start()
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	panic("unreachable")
}

func parked[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	time.Sleep(10 * time.Millisecond) // let durable writes be reported
	select {
	case v := <-ch:
		t.Fatalf("answered early: %+v", v)
	default:
	}
}

func subscription(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = topics
	return m.AppendTo(nil)
}

func consumerProtocols(names ...string) []group.Protocol {
	var ps []group.Protocol
	for _, n := range names {
		ps = append(ps, group.Protocol{Name: n, Metadata: subscription("t")})
	}
	return ps
}

func assignment(topic string, partitions ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = topic, partitions
	a.Topics = append(a.Topics, at)
	return a.AppendTo(nil)
}

// joinReq is a consumer's JoinGroup v9 for group g.
func joinReq(g, client string) group.JoinRequest {
	return group.JoinRequest{
		Client: group.Client{ID: client, Addr: "10.0.0.1:5000"}, Group: g,
		SessionTimeout: session, RebalanceTimeout: rebalance,
		ProtocolType: "consumer", Protocols: consumerProtocols("range"),
		RequireKnownMemberID: true, SupportsSkipAssignment: true,
	}
}

// firstJoin does the MEMBER_ID_REQUIRED round trip and returns the
// parked second join.
func (e *env) firstJoin(req group.JoinRequest) (string, <-chan group.JoinResult) {
	e.t.Helper()
	r := recv(e.t, e.c.Join(req))
	if r.Err != group.ErrMemberIDRequired || r.MemberID == "" {
		e.t.Fatalf("first join: %+v", r)
	}
	req.MemberID = r.MemberID
	return r.MemberID, e.c.Join(req)
}

// stableGroup forms group g of n consumers (clients c0, c1, ...), the
// first leading, each assigned partitions of "t" round robin over parts;
// it returns the member ids in join order and the generation.
func (e *env) stableGroup(g string, n int, parts int32) ([]string, int32) {
	e.t.Helper()
	var ids []string
	var chs []<-chan group.JoinResult
	for i := range n {
		id, ch := e.firstJoin(joinReq(g, clientName(i)))
		ids = append(ids, id)
		chs = append(chs, ch)
	}
	e.clock.Advance(delay)
	if n > 1 {
		e.clock.Advance(delay) // members joined during the delay: it is extended once
	}
	var gen int32
	var leader string
	for i, ch := range chs {
		r := recv(e.t, ch)
		if r.Err != nil {
			e.t.Fatalf("join %d: %v", i, r.Err)
		}
		gen, leader = r.Generation, r.Leader
	}
	if leader != ids[0] {
		e.t.Fatalf("leader %s, want the first member %s", leader, ids[0])
	}
	var as []group.Assignment
	for i, id := range ids {
		var ps []int32
		for p := int32(i); p < parts; p += int32(n) {
			ps = append(ps, p)
		}
		as = append(as, group.Assignment{MemberID: id, Data: assignment("t", ps...)})
	}
	e.sync(g, gen, ids, as)
	return ids, gen
}

// sync has every member sync (the first with the assignment) and checks
// they all get theirs.
func (e *env) sync(g string, gen int32, ids []string, as []group.Assignment) {
	e.t.Helper()
	var chs []<-chan group.SyncResult
	for i, id := range ids {
		req := group.SyncRequest{Client: group.Client{ID: clientName(i), Addr: "10.0.0.1:5001"}, Group: g, Generation: gen, MemberID: id}
		if i == 0 {
			req.Assignments = as
		}
		chs = append(chs, e.c.Sync(req))
	}
	for i, ch := range chs {
		r := recv(e.t, ch)
		if r.Err != nil {
			e.t.Fatalf("sync %d: %v", i, r.Err)
		}
		want := []byte{}
		for _, a := range as {
			if a.MemberID == ids[i] {
				want = a.Data
			}
		}
		if string(r.Assignment) != string(want) {
			e.t.Fatalf("sync %d: assignment %x, want %x", i, r.Assignment, want)
		}
	}
}

func clientName(i int) string { return "c" + string(rune('0'+i)) }

func (e *env) heartbeat(g string, gen int32, id string) error {
	return e.c.Heartbeat(group.HeartbeatRequest{Group: g, Generation: gen, MemberID: id})
}

func (e *env) state(g string) string {
	return e.c.Describe([]string{g})[0].State
}
