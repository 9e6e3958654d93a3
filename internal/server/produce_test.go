package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
)

// highWatermark asks ListOffsets for a partition's latest offset.
func highWatermark(t testing.TB, c *rawConn, topic string, partition int32) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(7)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.ListOffsetsResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets %s[%d]: %v", topic, partition, kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

// TestProduceErrors sends bad produce requests and checks Kafka's error
// code for each, that nothing of them is stored, and that the connection
// stays usable.
func TestProduceErrors(t *testing.T) {
	const maxMessage = 2048
	b := testutil.StartBroker(t, func(c *config.Broker) {
		c.DefaultPartitions = 2
		c.Topic.MaxMessageBytes = maxMessage
	})
	ensureTopic(t, b.Addr, "errs")
	c := dialRaw(t, b.Addr)
	produceRaw(t, c, "errs", 0, "first")

	good := makeBatch("a", "b")
	badCRC := makeBatch("a", "b")
	badCRC[len(badCRC)-1] ^= 1
	baseOffset := makeBatch("a")
	binary.BigEndian.PutUint64(baseOffset, 5)
	magic3 := makeBatch("a")
	magic3[16] = 3
	magicNeg := makeBatch("a")
	magicNeg[16] = 0xff
	shortLength := makeBatch("a")
	binary.BigEndian.PutUint32(shortLength[8:], 13)
	truncated := makeBatch("abcdefgh")[:70]
	big := makeBatch(strings.Repeat("x", maxMessage))
	bigTwo := append(makeBatch(strings.Repeat("x", maxMessage)), good...)
	partialTail := append(makeBatch("a"), 0, 0, 0)
	noRecords := makeBatch("a")
	binary.BigEndian.PutUint32(noRecords[57:], 0) // record count 0
	fixCRC(noRecords)

	cases := []struct {
		name      string
		topic     string
		partition int32
		acks      int16
		records   []byte
		want      *kerr.Error
	}{
		{"bad CRC", "errs", 0, -1, badCRC, kerr.CorruptMessage},
		{"two batches", "errs", 0, -1, append(makeBatch("a"), makeBatch("b")...), kerr.InvalidRecord},
		{"one batch and a partial one", "errs", 0, -1, partialTail, kerr.InvalidRecord},
		{"magic 1 message", "errs", 0, -1, makeLegacyMessage(strings.Repeat("v", 100)), kerr.InvalidRecord},
		{"small magic 1 message", "errs", 0, -1, makeLegacyMessage("v"), kerr.InvalidRecord},
		{"magic 3", "errs", 0, -1, magic3, kerr.CorruptMessage},
		{"negative magic", "errs", 0, -1, magicNeg, kerr.CorruptMessage},
		{"length below the minimum record", "errs", 0, -1, shortLength, kerr.CorruptMessage},
		{"truncated batch", "errs", 0, -1, truncated, kerr.InvalidRecord},
		{"empty records", "errs", 0, -1, []byte{}, kerr.InvalidRecord},
		{"null records", "errs", 0, -1, nil, kerr.InvalidRecord},
		{"11 bytes", "errs", 0, -1, good[:11], kerr.InvalidRecord},
		{"base offset not 0", "errs", 0, -1, baseOffset, kerr.InvalidRecord},
		{"no records in the batch", "errs", 0, -1, noRecords, kerr.InvalidRecord},
		{"over max.message.bytes", "errs", 0, -1, big, kerr.MessageTooLarge},
		{"two batches, one over max.message.bytes", "errs", 0, -1, bigTwo, kerr.InvalidRecord},
		{"unknown topic", "nope", 0, -1, good, kerr.UnknownTopicOrPartition},
		{"unknown partition", "errs", 2, -1, good, kerr.UnknownTopicOrPartition},
		{"negative partition", "errs", -1, -1, good, kerr.UnknownTopicOrPartition},
		{"invalid topic name", "bad/name", 0, -1, good, kerr.UnknownTopicOrPartition},
		{"empty topic name", "", 0, -1, good, kerr.UnknownTopicOrPartition},
		{"acks=2", "errs", 0, 2, good, kerr.InvalidRequiredAcks},
		{"acks=-2", "errs", 0, -2, good, kerr.InvalidRequiredAcks},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []int16{3, 7, 8, 12} {
				records := append([]byte(nil), tc.records...) // the broker owns what it is sent
				if tc.records == nil {
					records = nil
				}
				resp := c.do(produceRequest(v, tc.acks, tc.topic, tc.partition, records)).(*kmsg.ProduceResponse)
				if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Topic != tc.topic {
					t.Fatalf("v%d: answer %+v", v, resp.Topics)
				}
				p := resp.Topics[0].Partitions[0]
				if p.Partition != tc.partition || p.ErrorCode != tc.want.Code {
					t.Fatalf("v%d: partition %d error %v, want %v", v, p.Partition, kerr.ErrorForCode(p.ErrorCode), tc.want)
				}
				if p.BaseOffset != -1 || p.LogAppendTime != -1 || p.LogStartOffset != -1 {
					t.Errorf("v%d: base offset %d, append time %d, log start %d; want -1s", v, p.BaseOffset, p.LogAppendTime, p.LogStartOffset)
				}
				if v >= 8 && tc.want != kerr.InvalidRequiredAcks && (p.ErrorMessage == nil || *p.ErrorMessage == "") {
					t.Errorf("v%d: no error message", v)
				}
			}
		})
	}
	// Nothing failed was stored; the topic was not created; the
	// connection still works.
	if hw := highWatermark(t, c, "errs", 0); hw != 1 {
		t.Fatalf("high watermark %d after failed produces, want 1", hw)
	}
	if recs := fetchAll(t, c, "errs", 0); len(recs) != 1 || recs[0].value != "first" {
		t.Fatalf("stored %+v", recs)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("nope")
	meta.Topics = append(meta.Topics, rt)
	if resp := c.do(meta).(*kmsg.MetadataResponse); resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce created topic nope: %+v", resp.Topics[0])
	}
	if off := produceRaw(t, c, "errs", 0, "after"); off != 1 {
		t.Fatalf("next offset %d, want 1", off)
	}
}

// TestProduceMixedPartitions: a failure in one partition does not affect
// the others of the same request.
func TestProduceMixedPartitions(t *testing.T) {
	b := testutil.StartBroker(t, func(c *config.Broker) { c.DefaultPartitions = 2 })
	ensureTopic(t, b.Addr, "mixed")
	c := dialRaw(t, b.Addr)
	bad := makeBatch("bad")
	bad[30] ^= 0xff
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = 5000
	for _, topic := range []string{"mixed", "unknown"} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		for p, recs := range [][]byte{makeBatch("p0"), bad, makeBatch("p2")} {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = int32(p), append([]byte(nil), recs...)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := c.do(req).(*kmsg.ProduceResponse)
	want := [][]*kerr.Error{
		{nil, kerr.CorruptMessage, kerr.UnknownTopicOrPartition},
		{kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	}
	for i, rt := range resp.Topics {
		for j, p := range rt.Partitions {
			if p.Partition != int32(j) || kerr.ErrorForCode(p.ErrorCode) != errOrNil(want[i][j]) {
				t.Errorf("%s[%d]: %v, want %v", rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode), want[i][j])
			}
		}
	}
	if p := resp.Topics[0].Partitions[0]; p.BaseOffset != 0 || p.LogStartOffset != 0 {
		t.Errorf("good partition: %+v", p)
	}
}

func errOrNil(e *kerr.Error) error {
	if e == nil {
		return nil
	}
	return e
}

// TestProduceOldVersions: v0-2 are advertised (for librdkafka) but every
// partition is answered UNSUPPORTED_VERSION, and the connection stays open.
func TestProduceOldVersions(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ensureTopic(t, b.Addr, "old")
	c := dialRaw(t, b.Addr)
	for v := int16(0); v <= 2; v++ {
		resp := c.do(produceRequest(v, 1, "old", 0, makeLegacyMessage("old"))).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.UnsupportedVersion.Code || p.BaseOffset != -1 {
			t.Fatalf("v%d: %v, base offset %d", v, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
		}
	}
	if off := produceRaw(t, c, "old", 0, "new"); off != 0 {
		t.Fatalf("offset %d: an old-version produce was stored", off)
	}
}

// TestProduceAcksZero: no answer, but the data is stored and the next
// request's answer carries its own correlation id.
func TestProduceAcksZero(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ensureTopic(t, b.Addr, "fire")
	c := dialRaw(t, b.Addr)
	for i := range 3 {
		c.send(produceRequest(9, 0, "fire", 0, makeBatch(fmt.Sprint("v", i))))
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	c.recv(meta, c.send(meta)) // checks the correlation id
	deadline := time.Now().Add(5 * time.Second)
	for highWatermark(t, c, "fire", 0) != 3 {
		if time.Now().After(deadline) {
			t.Fatal("acks=0 records not stored")
		}
		time.Sleep(10 * time.Millisecond)
	}
	recs := fetchAll(t, c, "fire", 0)
	for i, r := range recs {
		if r.value != fmt.Sprint("v", i) || r.offset != int64(i) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}

	// A failed acks=0 produce closes the connection (as Kafka does), the
	// only way the client can learn of it.
	c.send(produceRequest(9, 0, "unknown-topic", 0, makeBatch("x")))
	c.expectClosed()
	c = dialRaw(t, b.Addr)
	bad := makeBatch("x")
	bad[40] ^= 1
	c.send(produceRequest(9, 0, "fire", 0, bad))
	c.expectClosed()
}

// TestProducePipelined: requests sent back to back without waiting are
// answered in order, with increasing offsets.
func TestProducePipelined(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ensureTopic(t, b.Addr, "pipe")
	c := dialRaw(t, b.Addr)
	const n = 5
	var out []byte
	var corrs []int32
	var reqs []kmsg.Request
	for i := range n {
		req := produceRequest(int16(3+i*2), -1, "pipe", 0, makeBatch(fmt.Sprint("a", i), fmt.Sprint("b", i), fmt.Sprint("c", i)))
		f, corr := c.frame(req)
		out = append(out, f...)
		corrs = append(corrs, corr)
		reqs = append(reqs, req)
	}
	c.write(out) // all five in one write
	for i := range n {
		resp := c.recv(reqs[i], corrs[i]).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != int64(3*i) {
			t.Fatalf("request %d: %v at offset %d, want %d", i, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, 3*i)
		}
	}
	recs := fetchAll(t, c, "pipe", 0)
	if len(recs) != 3*n {
		t.Fatalf("%d records stored, want %d", len(recs), 3*n)
	}
	for i, r := range recs {
		if want := fmt.Sprint(string("abc"[i%3]), i/3); r.value != want || r.offset != int64(i) {
			t.Fatalf("record %d: %+v, want %s", i, r, want)
		}
	}
}

// TestProduceEveryVersion produces at v3..v12 and checks every field of
// the answer, with create-time and log-append-time topics.
func TestProduceEveryVersion(t *testing.T) {
	for _, appendTime := range []bool{false, true} {
		t.Run(fmt.Sprint("LogAppendTime=", appendTime), func(t *testing.T) {
			b := testutil.StartBroker(t, func(c *config.Broker) { c.Topic.LogAppendTime = appendTime })
			ensureTopic(t, b.Addr, "versions")
			c := dialRaw(t, b.Addr)
			before := time.Now().UnixMilli()
			for v := int16(3); v <= 12; v++ {
				resp := c.do(produceRequest(v, -1, "versions", 0, makeBatchAt(1000, fmt.Sprint("v", v)))).(*kmsg.ProduceResponse)
				if len(resp.Topics) != 1 || resp.Topics[0].Topic != "versions" || len(resp.Topics[0].Partitions) != 1 {
					t.Fatalf("v%d: %+v", v, resp)
				}
				p := resp.Topics[0].Partitions[0]
				if p.ErrorCode != 0 || p.BaseOffset != int64(v-3) || p.ErrorMessage != nil || len(p.ErrorRecords) != 0 {
					t.Fatalf("v%d: %+v", v, p)
				}
				if resp.ThrottleMillis != 0 {
					t.Errorf("v%d: throttle %d", v, resp.ThrottleMillis)
				}
				if !appendTime && p.LogAppendTime != -1 {
					t.Errorf("v%d: log append time %d on a create-time topic", v, p.LogAppendTime)
				}
				if appendTime && (p.LogAppendTime < before || p.LogAppendTime > time.Now().UnixMilli()) {
					t.Errorf("v%d: log append time %d", v, p.LogAppendTime)
				}
				if v >= 5 && p.LogStartOffset != 0 {
					t.Errorf("v%d: log start offset %d", v, p.LogStartOffset)
				}
			}
			recs := fetchAll(t, c, "versions", 0)
			if len(recs) != 10 {
				t.Fatalf("%d records", len(recs))
			}
		})
	}
}

// TestProduceUnknownTopicAutoCreateOff: with auto-creation off, a produce
// to an unknown topic fails, a Metadata request does not create it, and a
// real client reports the error.
func TestProduceUnknownTopicAutoCreateOff(t *testing.T) {
	b := testutil.StartBroker(t, func(c *config.Broker) { c.AutoCreateTopics = false })
	c := dialRaw(t, b.Addr)
	for _, v := range []int16{3, 12} {
		p := c.do(produceRequest(v, -1, "ghost", 0, makeBatch("x"))).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d: %v", v, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	meta.AllowAutoTopicCreation = true // the broker says no
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("ghost")
	meta.Topics = append(meta.Topics, rt)
	if mt := c.do(meta).(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("metadata: %v", kerr.ErrorForCode(mt.ErrorCode))
	}
	cl := newClient(t, b.Addr, kgo.DefaultProduceTopic("ghost"), kgo.RecordDeliveryTimeout(time.Second))
	err := cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte("x")}).FirstErr()
	if err == nil {
		t.Fatal("producing to an unknown topic succeeded")
	}
	t.Logf("client error: %v", err)
}

// TestProduceRecordErrors: a batch with records that break the topic's
// rules is refused whole, and from v8 the answer names each of them
// (KIP-467): the keyless records of a batch to a compacted topic
// (INVALID_RECORD), the records of a timestamp out of the topic's window
// (INVALID_TIMESTAMP, which wins). Before v8 only the code is given.
func TestProduceRecordErrors(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	adm := kadm.NewClient(newClient(t, b.Addr))
	cfg := map[string]*string{"cleanup.policy": kmsg.StringPtr("compact"), "message.timestamp.after.max.ms": kmsg.StringPtr("60000")}
	if r, err := adm.CreateTopic(t.Context(), 1, 1, cfg, "compacted"); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	c := dialRaw(t, b.Addr)
	key := func(s string) *string { return &s }
	now := time.Now().UnixMilli()
	for _, tc := range []struct {
		name    string
		records []rawRecord
		code    int16
		refused map[int32]string // by index, a word of the message
	}{
		{"keyless", []rawRecord{{key: key("a"), value: "0"}, {value: "1"}, {key: key("c"), value: "2"}, {value: "3"}},
			kerr.InvalidRecord.Code, map[int32]string{1: "key", 3: "key"}},
		{"keyless and in the future", []rawRecord{{value: "0"}, {key: key("b"), value: "1", tsDelta: 3_600_000}, {key: key("c"), value: "2"}},
			kerr.InvalidTimestamp.Code, map[int32]string{0: "key", 1: "timestamp"}},
	} {
		for _, v := range []int16{7, 8, 11} {
			p := c.do(produceRequest(v, -1, "compacted", 0, batchOf(now, tc.records...))).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
			if p.ErrorCode != tc.code {
				t.Errorf("%s, v%d: %v, want %v", tc.name, v, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(tc.code))
			}
			if v < 8 {
				if len(p.ErrorRecords) != 0 {
					t.Errorf("%s, v%d: record errors %+v", tc.name, v, p.ErrorRecords)
				}
				continue
			}
			got := map[int32]string{}
			for _, r := range p.ErrorRecords {
				got[r.RelativeOffset] = *r.ErrorMessage
			}
			if len(got) != len(tc.refused) {
				t.Errorf("%s, v%d: records refused %v, want %v", tc.name, v, got, tc.refused)
			}
			for i, word := range tc.refused {
				if !strings.Contains(got[i], word) {
					t.Errorf("%s, v%d: record %d: %q, want a message about its %s", tc.name, v, i, got[i], word)
				}
			}
			if p.ErrorMessage == nil || *p.ErrorMessage == "" {
				t.Errorf("%s, v%d: no error message", tc.name, v)
			}
		}
	}
	// Nothing was written.
	if o, err := adm.ListEndOffsets(t.Context(), "compacted"); err != nil || o["compacted"][0].Offset != 0 {
		t.Fatalf("end offset %+v %v", o["compacted"][0], err)
	}
}

// TestProduceAutoCreatedTopic: a Metadata request that creates a topic is
// answered as Kafka answers it, LEADER_NOT_AVAILABLE with no partitions
// (not the new partitions at once); franz-go asks again and produces to
// it, to the partition its key picks among the default count.
func TestProduceAutoCreatedTopic(t *testing.T) {
	b := testutil.StartBroker(t, func(c *config.Broker) { c.DefaultPartitions = 4 })
	cl := newClient(t, b.Addr, kgo.AllowAutoTopicCreation())
	meta := kmsg.NewPtrMetadataRequest()
	meta.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("made")
	meta.Topics = append(meta.Topics, rt)
	resp, err := meta.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if mt := resp.Topics[0]; mt.ErrorCode != kerr.LeaderNotAvailable.Code || len(mt.Partitions) != 0 || mt.TopicID != ([16]byte{}) {
		t.Fatalf("the answer that creates it: %v, %d partitions, id %x", kerr.ErrorForCode(mt.ErrorCode), len(mt.Partitions), mt.TopicID)
	}
	r, err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "made", Key: []byte("k"), Value: []byte("x")}).First()
	if err != nil {
		t.Fatal(err)
	}
	if want := (&kgo.Record{Key: []byte("k")}); int(r.Partition) != kgo.StickyKeyPartitioner(nil).ForTopic("made").Partition(want, 4) {
		t.Errorf("the record went to partition %d of 4", r.Partition)
	}
	// A second client produces to a new topic in one call.
	if err := newClient(t, b.Addr, kgo.AllowAutoTopicCreation()).ProduceSync(t.Context(),
		&kgo.Record{Topic: "made-by-produce", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// Produce frames are reused once answered (frames.go): large records of
// distinct bytes, from pipelining producers with acks=all, acks=1 and
// acks=0, come back exactly as sent. One record per batch and one
// partition give every request the same size, so frames are reused often
// and a frame handed to two connections at once would show.
func TestReusedProduceFramesKeepRecords(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	createTopic(t, b.Addr, "frames", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const perProducer, size = 150, 200 << 10
	value := func(p, i int) []byte {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(p*perProducer + i + j/997)
		}
		return v
	}
	acks := []kgo.Acks{kgo.AllISRAcks(), kgo.LeaderAck(), kgo.NoAck()}
	var wg sync.WaitGroup
	for p, a := range acks {
		opts := []kgo.Opt{kgo.DefaultProduceTopic("frames"), kgo.RequiredAcks(a), kgo.ProducerBatchMaxBytes(size + 1<<10), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.MaxBufferedRecords(64), kgo.ProducerLinger(time.Millisecond)}
		if a != kgo.AllISRAcks() {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl := newClient(t, b.Addr, opts...)
		wg.Go(func() {
			for i := range perProducer {
				cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "%d-%03d", p, i), Value: value(p, i)}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Error(err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	want := len(acks) * perProducer
	recs := consumeAll(ctx, t, b.Addr, "frames", want)
	if len(recs) != want {
		t.Fatalf("%d records, want %d", len(recs), want)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		var p, i int
		if _, err := fmt.Sscanf(string(r.Key), "%d-%d", &p, &i); err != nil {
			t.Fatalf("key %q: %v", r.Key, err)
		}
		if seen[string(r.Key)] {
			t.Fatalf("record %s twice", r.Key)
		}
		seen[string(r.Key)] = true
		if !bytes.Equal(r.Value, value(p, i)) {
			t.Fatalf("record %s: its value is not what was sent", r.Key)
		}
	}
}
