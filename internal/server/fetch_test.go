package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/replica"
	"github.com/strandlog/strand/internal/testutil"
)

func fetchOne(t testing.TB, c *rawConn, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	t.Helper()
	return c.do(req).(*kmsg.FetchResponse)
}

func part(resp *kmsg.FetchResponse, ti, pi int) kmsg.FetchResponseTopicPartition {
	return resp.Topics[ti].Partitions[pi]
}

// TestFetchLongPoll: a parked fetch answers as soon as another client
// produces, and otherwise after MaxWait.
func TestFetchLongPoll(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ensureTopic(t, b.Addr, "poll")

	t.Run("wakes on produce", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		req := fetchRequest(12, 5000, 1, 1<<20, fetchPart{topic: "poll"})
		corr := c.send(req)
		time.Sleep(300 * time.Millisecond) // parked by now
		producer := newClient(t, b.Addr, kgo.DefaultProduceTopic("poll"))
		start := time.Now()
		if err := producer.ProduceSync(context.Background(), &kgo.Record{Value: []byte("wake")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		resp := c.recvWithin(req, corr, 10*time.Second).(*kmsg.FetchResponse)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("answered %v after the produce, MaxWait is 5s", d)
		}
		_, recs := parseBatches(t, part(resp, 0, 0).RecordBatches)
		if len(recs) != 1 || recs[0].value != "wake" {
			t.Fatalf("records %+v", recs)
		}
	})

	t.Run("MaxWait honoured", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		for _, wait := range []int32{300, 1000} {
			start := time.Now()
			resp := fetchOne(t, c, fetchRequest(12, wait, 1, 1<<20, fetchPart{topic: "poll", offset: 1}))
			d := time.Since(start)
			if d < time.Duration(wait)*time.Millisecond-20*time.Millisecond || d > time.Duration(wait)*time.Millisecond+time.Second {
				t.Errorf("MaxWait %dms answered after %v", wait, d)
			}
			if p := part(resp, 0, 0); p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 1 {
				t.Fatalf("%+v", p)
			}
		}
	})

	t.Run("MinBytes 0, MaxBytes 0 and no partitions answer at once", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		for _, req := range []*kmsg.FetchRequest{
			fetchRequest(12, 5000, 0, 1<<20, fetchPart{topic: "poll", offset: 1}),
			fetchRequest(12, 5000, 1, 0, fetchPart{topic: "poll", offset: 1}),
			fetchRequest(12, 5000, 1, 1<<20),
			fetchRequest(4, 5000, 1, 1<<20),
		} {
			start := time.Now()
			fetchOne(t, c, req)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("MinBytes %d MaxBytes %d, %d topics: answered after %v", req.MinBytes, req.MaxBytes, len(req.Topics), d)
			}
		}
	})

	t.Run("MinBytes is capped at MaxBytes", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		start := time.Now()
		resp := fetchOne(t, c, fetchRequest(12, 5000, 10<<20, 10, fetchPart{topic: "poll"}))
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("answered after %v", d)
		}
		if _, recs := parseBatches(t, part(resp, 0, 0).RecordBatches); len(recs) != 1 {
			t.Fatalf("records %+v", recs)
		}
	})

	t.Run("an error answers at once", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		start := time.Now()
		resp := fetchOne(t, c, fetchRequest(12, 5000, 1, 1<<20, fetchPart{topic: "poll", offset: 1}, fetchPart{topic: "poll", partition: 9}))
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("answered after %v", d)
		}
		if p := part(resp, 0, 1); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("%v", kerr.ErrorForCode(p.ErrorCode))
		}
	})

	t.Run("many parked fetches all wake", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				c := dialRaw(t, b.Addr)
				req := fetchRequest(12, 10_000, 1, 1<<20, fetchPart{topic: "poll", offset: 1})
				corr := c.send(req)
				resp := c.recvWithin(req, corr, 8*time.Second).(*kmsg.FetchResponse)
				if _, recs := parseBatches(t, part(resp, 0, 0).RecordBatches); len(recs) != 1 || recs[0].offset != 1 {
					t.Errorf("fetch %d: %+v", i, recs)
				}
			})
		}
		time.Sleep(300 * time.Millisecond)
		c := dialRaw(t, b.Addr)
		produceRaw(t, c, "poll", 0, "second")
		wg.Wait()
	})
}

// TestFetchLimits: PartitionMaxBytes and MaxBytes give whole batches only,
// except that the first batch of the first partition with data comes
// whatever its size.
func TestFetchLimits(t *testing.T) {
	b := testutil.StartBroker(t, func(c *config.Broker) { c.DefaultPartitions = 2 })
	ensureTopic(t, b.Addr, "limits")
	c := dialRaw(t, b.Addr)
	value := strings.Repeat("v", 1000)
	size := int32(len(makeBatch(value)))
	for i := range 5 {
		for p := range int32(2) {
			produceRaw(t, c, "limits", p, fmt.Sprint(value[:997], p, "-", i))
		}
	}
	type want struct{ p0, p1 int }
	cases := []struct {
		name         string
		maxBytes     int32
		pmax0, pmax1 int32
		offset0      int64
		want         want
	}{
		{"partition limit between batches", 1 << 20, size * 5 / 2, size * 5 / 2, 0, want{2, 2}},
		{"partition limit on a batch boundary", 1 << 20, size * 2, size * 3, 0, want{2, 3}},
		{"partition limit below one batch", 1 << 20, 100, 100, 0, want{1, 0}},
		{"partition limit zero", 1 << 20, 0, 1 << 20, 0, want{1, 5}},
		{"request limit", size * 5 / 2, 1 << 20, 1 << 20, 0, want{2, 0}},
		{"request limit spans partitions", size * 7 / 2, size * 2, 1 << 20, 0, want{2, 1}},
		{"request limit below one batch", 100, 1 << 20, 1 << 20, 0, want{1, 0}},
		{"request limit zero", 0, 1 << 20, 1 << 20, 0, want{1, 0}},
		{"first partition at its end", 100, 100, 100, 5, want{0, 1}},
		{"everything", 1 << 20, 1 << 20, 1 << 20, 0, want{5, 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []int16{4, 11, 12, 17} {
				id := [16]byte{}
				if v >= 13 {
					id = topicID(t, c, "limits")
				}
				req := fetchRequest(v, 0, 1, tc.maxBytes,
					fetchPart{topic: "limits", id: id, partition: 0, offset: tc.offset0, maxBytes: tc.pmax0},
					fetchPart{topic: "limits", id: id, partition: 1, offset: 0, maxBytes: tc.pmax1})
				if tc.pmax0 == 0 {
					req.Topics[0].Partitions[0].PartitionMaxBytes = 0
				}
				resp := fetchOne(t, c, req)
				var got [2]int
				for i := range 2 {
					p := part(resp, 0, i)
					if p.ErrorCode != 0 {
						t.Fatalf("v%d p%d: %v", v, i, kerr.ErrorForCode(p.ErrorCode))
					}
					batches, recs := parseBatches(t, p.RecordBatches)
					got[i] = len(batches)
					for j, r := range recs {
						first := int64(0)
						if i == 0 {
							first = tc.offset0
						}
						if r.offset != first+int64(j) || !strings.HasSuffix(r.value, fmt.Sprint(i, "-", r.offset)) {
							t.Fatalf("v%d p%d: record %+v", v, i, r)
						}
					}
				}
				if got != [2]int{tc.want.p0, tc.want.p1} {
					t.Fatalf("v%d: got %v batches, want %v (batch size %d)", v, got, tc.want, size)
				}
			}
		})
	}
}

// topicID looks a topic's id up with Metadata.
func topicID(t testing.TB, c *rawConn, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata %s: %v", topic, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	return resp.Topics[0].TopicID
}

// TestFetchOffsetOutOfRange: past the log end and below the log start.
func TestFetchOffsetOutOfRange(t *testing.T) {
	b := testutil.StartBroker(t, func(c *config.Broker) {
		c.Topic.SegmentBytes = 300
		c.Topic.RetentionBytes = 300
		c.RetentionCheck = 100 * time.Millisecond
	})
	ensureTopic(t, b.Addr, "range")
	c := dialRaw(t, b.Addr)
	for i := range 20 {
		produceRaw(t, c, "range", 0, fmt.Sprint("r", i))
	}
	// Retention moves the log start.
	deadline := time.Now().Add(10 * time.Second)
	var start int64
	for start == 0 {
		if time.Now().After(deadline) {
			t.Fatal("retention never moved the log start")
		}
		time.Sleep(50 * time.Millisecond)
		start = listOffset(t, c, 7, "range", 0, -2).Offset
	}
	for _, v := range []int16{4, 9, 12, 13, 17} {
		id := [16]byte{}
		if v >= 13 {
			id = topicID(t, c, "range")
		}
		for _, off := range []int64{21, 1000, -1, start - 1, 0} {
			resp := fetchOne(t, c, fetchRequest(v, 0, 1, 1<<20, fetchPart{topic: "range", id: id, offset: off}))
			p := part(resp, 0, 0)
			if p.ErrorCode != kerr.OffsetOutOfRange.Code {
				t.Fatalf("v%d offset %d (log %d-20): %v", v, off, start, kerr.ErrorForCode(p.ErrorCode))
			}
			if p.HighWatermark != -1 || p.LastStableOffset != -1 || p.LogStartOffset != -1 || len(p.RecordBatches) != 0 {
				t.Errorf("v%d offset %d: %+v", v, off, p)
			}
		}
		// The edges are in range: the log start has data, the log end
		// none yet.
		for _, off := range []int64{start, 20} {
			resp := fetchOne(t, c, fetchRequest(v, 0, 1, 1<<20, fetchPart{topic: "range", id: id, offset: off}))
			p := part(resp, 0, 0)
			if p.ErrorCode != 0 || p.HighWatermark != 20 || (v >= 5 && p.LogStartOffset != start) {
				t.Fatalf("v%d offset %d: %v %+v", v, off, kerr.ErrorForCode(p.ErrorCode), p)
			}
			_, recs := parseBatches(t, p.RecordBatches)
			if (off == 20) != (len(recs) == 0) || (len(recs) > 0 && recs[0].offset != start) {
				t.Fatalf("v%d offset %d: records %+v", v, off, recs)
			}
		}
	}
}

// TestFetchTopicIDs: v13+ names topics by id.
func TestFetchTopicIDs(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	id := ensureTopic(t, b.Addr, "ids")
	c := dialRaw(t, b.Addr)
	produceRaw(t, c, "ids", 0, "x")
	unknown := [16]byte{0xde, 0xad}
	for v := int16(13); v <= 17; v++ {
		resp := fetchOne(t, c, fetchRequest(v, 0, 1, 1<<20, fetchPart{id: id}, fetchPart{topic: "other", id: unknown}))
		if len(resp.Topics) != 2 {
			t.Fatalf("v%d: %+v", v, resp.Topics)
		}
		if rt := resp.Topics[0]; rt.TopicID != id || rt.Partitions[0].ErrorCode != 0 || rt.Partitions[0].HighWatermark != 1 {
			t.Fatalf("v%d: known id: %+v", v, rt)
		}
		if rt := resp.Topics[1]; rt.TopicID != unknown || rt.Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("v%d: unknown id: %+v, %v", v, rt, kerr.ErrorForCode(rt.Partitions[0].ErrorCode))
		}
	}
	// Before v13 a name is what counts; an unknown one is
	// UNKNOWN_TOPIC_OR_PARTITION.
	resp := fetchOne(t, c, fetchRequest(12, 0, 1, 1<<20, fetchPart{topic: "nope"}))
	if p := part(resp, 0, 0); p.ErrorCode != kerr.UnknownTopicOrPartition.Code || resp.Topics[0].Topic != "nope" {
		t.Fatalf("%+v", resp.Topics[0])
	}
}

// TestFetchSessions: KIP-227 as Kafka's FetchManager serves it. A full
// fetch at epoch 0 opens a session and names it; incremental fetches send
// only what changed and get only partitions with news (records, or a moved
// high watermark); a wrong epoch is INVALID_FETCH_SESSION_EPOCH, an
// unknown id FETCH_SESSION_ID_NOT_FOUND; forgotten partitions leave the
// session; epoch -1 closes it.
func TestFetchSessions(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ensureTopic(t, b.Addr, "sess")
	c := dialRaw(t, b.Addr)
	produceRaw(t, c, "sess", 0, "x")
	for _, v := range []int16{7, 12, 17} {
		part0 := fetchPart{topic: "sess", maxBytes: 1 << 20}
		if v >= 13 {
			part0.id = topicID(t, c, "sess")
		}
		fetch := func(id, epoch int32, parts []fetchPart, forget bool) *kmsg.FetchResponse {
			t.Helper()
			req := fetchRequest(v, 0, 0, 1<<20, parts...)
			req.SessionID, req.SessionEpoch = id, epoch
			if forget {
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.Topic, ft.TopicID, ft.Partitions = "sess", part0.id, []int32{0}
				req.ForgottenTopics = append(req.ForgottenTopics, ft)
			}
			return fetchOne(t, c, req)
		}
		records := func(resp *kmsg.FetchResponse) int {
			if len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
				return -1 // the partition is not in the answer
			}
			_, recs := parseBatches(t, resp.Topics[0].Partitions[0].RecordBatches)
			return len(recs)
		}
		end := fetchOne(t, c, fetchRequest(v, 0, 0, 1<<20, part0)).Topics[0].Partitions[0].HighWatermark

		// Open: the full answer, with the session's id.
		first := fetch(0, 0, []fetchPart{part0}, false)
		id := first.SessionID
		if first.ErrorCode != 0 || id == 0 || records(first) != int(end) {
			t.Fatalf("v%d opening: error %v, session %d, %d records", v, kerr.ErrorForCode(first.ErrorCode), id, records(first))
		}
		// Caught up (the partition sent with its new offset): no news.
		caught := part0
		caught.offset = end
		if resp := fetch(id, 1, []fetchPart{caught}, false); resp.ErrorCode != 0 || resp.SessionID != id || records(resp) != -1 {
			t.Fatalf("v%d caught up: error %v, session %d, partition answered (%d records)", v,
				kerr.ErrorForCode(resp.ErrorCode), resp.SessionID, records(resp))
		}
		// A new record: the partition, unnamed, is answered with it.
		produceRaw(t, c, "sess", 0, "y")
		if resp := fetch(id, 2, nil, false); records(resp) != 1 || resp.Topics[0].Partitions[0].HighWatermark != end+1 {
			t.Fatalf("v%d after a produce: %d records", v, records(resp))
		}
		if resp := fetch(id, 7, nil, false); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
			t.Fatalf("v%d wrong epoch: %v", v, kerr.ErrorForCode(resp.ErrorCode))
		}
		if resp := fetch(id+1000, 1, nil, false); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("v%d unknown session: %v", v, kerr.ErrorForCode(resp.ErrorCode))
		}
		// Forgotten, the partition is no longer fetched.
		if resp := fetch(id, 3, nil, true); resp.ErrorCode != 0 || records(resp) != -1 {
			t.Fatalf("v%d forgetting: %v, %d records", v, kerr.ErrorForCode(resp.ErrorCode), records(resp))
		}
		produceRaw(t, c, "sess", 0, "z")
		if resp := fetch(id, 4, nil, false); records(resp) != -1 {
			t.Fatalf("v%d a forgotten partition was answered", v)
		}
		// Closed: a full answer without a session, and the id is gone.
		if resp := fetch(id, -1, []fetchPart{part0}, false); resp.SessionID != 0 || records(resp) != int(end)+2 {
			t.Fatalf("v%d closing: session %d, %d records", v, resp.SessionID, records(resp))
		}
		if resp := fetch(id, 5, nil, false); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("v%d closed session: %v", v, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
}

// TestFetchLeaderEpoch: a CurrentLeaderEpoch other than ours is fenced.
func TestFetchLeaderEpoch(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ensureTopic(t, b.Addr, "epoch")
	c := dialRaw(t, b.Addr)
	produceRaw(t, c, "epoch", 0, "x")
	for _, v := range []int16{9, 12, 17} {
		for _, tc := range []struct {
			epoch int32
			want  int16
		}{{-1, 0}, {0, 0}, {1, kerr.UnknownLeaderEpoch.Code}, {1 << 30, kerr.UnknownLeaderEpoch.Code}} {
			req := fetchRequest(v, 0, 1, 1<<20, fetchPart{topic: "epoch"})
			if v >= 13 {
				req.Topics[0].TopicID = topicID(t, c, "epoch")
			}
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = tc.epoch
			p := part(fetchOne(t, c, req), 0, 0)
			if p.ErrorCode != tc.want {
				t.Errorf("v%d epoch %d: %v, want %v", v, tc.epoch, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(tc.want))
			}
			if tc.want != 0 && (len(p.RecordBatches) != 0 || p.HighWatermark != -1) {
				t.Errorf("v%d epoch %d: fenced partition answered %+v", v, tc.epoch, p)
			}
		}
		// ListOffsets fences the same way.
		if got := listOffsetEpoch(t, c, 4, "epoch", 1); got != kerr.UnknownLeaderEpoch.Code {
			t.Errorf("list offsets epoch 1: %v", kerr.ErrorForCode(got))
		}
	}
}

// TestFetchIsolation: read_committed answers an empty aborted-transactions
// list, read_uncommitted a null one.
func TestFetchIsolation(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ensureTopic(t, b.Addr, "iso")
	c := dialRaw(t, b.Addr)
	produceRaw(t, c, "iso", 0, "x")
	for v := int16(4); v <= 17; v++ {
		id := [16]byte{}
		if v >= 13 {
			id = topicID(t, c, "iso")
		}
		for _, off := range []int64{0, 1} {
			req := fetchRequest(v, 0, 1, 1<<20, fetchPart{topic: "iso", id: id, offset: off})
			req.IsolationLevel = 1
			p := part(fetchOne(t, c, req), 0, 0)
			if p.ErrorCode != 0 || p.AbortedTransactions == nil || len(p.AbortedTransactions) != 0 {
				t.Errorf("v%d read_committed at %d: aborted transactions %v (nil %t)", v, off, p.AbortedTransactions, p.AbortedTransactions == nil)
			}
			if p.LastStableOffset != 1 {
				t.Errorf("v%d: last stable offset %d", v, p.LastStableOffset)
			}
			req.IsolationLevel = 0
			p = part(fetchOne(t, c, req), 0, 0)
			if p.AbortedTransactions != nil {
				t.Errorf("v%d read_uncommitted: aborted transactions %v, want null", v, p.AbortedTransactions)
			}
		}
	}
}

// TestFetchEveryVersion reads the same records at every version, two
// partitions per request (two splices per response), and checks every
// field of the answer.
func TestFetchEveryVersion(t *testing.T) {
	b := testutil.StartBroker(t, func(c *config.Broker) { c.DefaultPartitions = 2; c.NodeID = 7 })
	id := ensureTopic(t, b.Addr, "every")
	c := dialRaw(t, b.Addr)
	var want [2][]gotRecord
	for i := range 4 {
		for p := range int32(2) {
			var values []string
			for j := range i + 1 {
				values = append(values, fmt.Sprint(p, "-", i, "-", j, strings.Repeat("z", rand.IntN(300))))
			}
			base := produceRaw(t, c, "every", p, values...)
			for j, v := range values {
				want[p] = append(want[p], gotRecord{offset: base + int64(j), key: fmt.Sprint("k", j), value: v})
			}
		}
	}
	for v := int16(4); v <= 17; v++ {
		req := fetchRequest(v, 100, 1, 1<<20, fetchPart{topic: "every", id: id, partition: 0}, fetchPart{topic: "every", id: id, partition: 1})
		resp := fetchOne(t, c, req)
		if resp.ErrorCode != 0 || resp.ThrottleMillis != 0 || resp.SessionID != 0 || len(resp.Topics) != 1 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		rt := resp.Topics[0]
		if v < 13 && rt.Topic != "every" || v >= 13 && rt.TopicID != id {
			t.Fatalf("v%d: topic %q %x", v, rt.Topic, rt.TopicID)
		}
		for i, p := range rt.Partitions {
			if p.Partition != int32(i) || p.ErrorCode != 0 || p.HighWatermark != 10 {
				t.Fatalf("v%d p%d: %+v", v, i, p)
			}
			if p.LastStableOffset != 10 {
				t.Errorf("v%d p%d: last stable offset %d", v, i, p.LastStableOffset)
			}
			if v >= 5 && p.LogStartOffset != 0 {
				t.Errorf("v%d p%d: log start offset %d", v, i, p.LogStartOffset)
			}
			if v >= 11 && p.PreferredReadReplica != -1 {
				t.Errorf("v%d p%d: preferred read replica %d, want -1 (none)", v, i, p.PreferredReadReplica)
			}
			if v >= 12 && (p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1) {
				t.Errorf("v%d p%d: diverging epoch %+v", v, i, p.DivergingEpoch)
			}
			batches, recs := parseBatches(t, p.RecordBatches)
			if len(batches) != 4 || !slices.Equal(recs, want[i]) {
				t.Fatalf("v%d p%d: %d batches, records %+v, want %+v", v, i, len(batches), recs, want[i])
			}
			for _, bt := range batches {
				if bt.PartitionLeaderEpoch != 0 {
					t.Errorf("v%d: stored batch leader epoch %d", v, bt.PartitionLeaderEpoch)
				}
			}
		}
		// From the middle of a batch: the whole batch comes, as in Kafka.
		req = fetchRequest(v, 0, 1, 1<<20, fetchPart{topic: "every", id: id, partition: 1, offset: 4})
		_, recs := parseBatches(t, part(fetchOne(t, c, req), 0, 0).RecordBatches)
		if len(recs) == 0 || recs[0].offset != 3 || recs[len(recs)-1].offset != 9 {
			t.Fatalf("v%d from offset 4: %+v", v, recs)
		}
	}
}

// listOffset queries one partition.
func listOffset(t testing.TB, c *rawConn, v int16, topic string, partition int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(v)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != topic || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("list offsets v%d: %+v", v, resp)
	}
	return resp.Topics[0].Partitions[0]
}

func listOffsetEpoch(t testing.TB, c *rawConn, v int16, topic string, epoch int32) int16 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(v)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = -1, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
}

// TestListOffsetsEveryVersion checks every special timestamp at every
// version.
func TestListOffsetsEveryVersion(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ensureTopic(t, b.Addr, "lo")
	c := dialRaw(t, b.Addr)
	for i, ts := range []int64{1000, 3000, 2000} {
		if off := c.do(produceRequest(9, -1, "lo", 0, makeBatchAt(ts, fmt.Sprint(i)))).(*kmsg.ProduceResponse).Topics[0].Partitions[0].BaseOffset; off != int64(i) {
			t.Fatalf("offset %d", off)
		}
	}
	type want struct{ offset, ts int64 }
	for v := int16(1); v <= 9; v++ {
		cases := map[int64]want{
			-1:   {3, -1},   // latest
			-2:   {0, -1},   // earliest
			0:    {0, 1000}, // first with timestamp >= 0
			1500: {1, 3000},
			2500: {1, 3000},
			3000: {1, 3000},
			3001: {-1, -1},
		}
		if v >= 7 {
			cases[-3] = want{1, 3000} // max timestamp
		}
		if v >= 8 {
			cases[-4] = want{0, -1} // earliest local
		}
		if v >= 9 {
			cases[-5] = want{-1, -1} // latest tiered: no tiered storage
		}
		for ts, w := range cases {
			p := listOffset(t, c, v, "lo", 0, ts)
			if p.ErrorCode != 0 || p.Offset != w.offset || p.Timestamp != w.ts {
				t.Errorf("v%d timestamp %d: %v offset %d ts %d, want %d %d", v, ts, kerr.ErrorForCode(p.ErrorCode), p.Offset, p.Timestamp, w.offset, w.ts)
			}
			if v >= 4 && p.ErrorCode == 0 && p.Offset >= 0 && p.LeaderEpoch != 0 {
				t.Errorf("v%d timestamp %d: leader epoch %d", v, ts, p.LeaderEpoch)
			}
		}
		if p := listOffset(t, c, v, "nope", 0, -1); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("v%d unknown topic: %v", v, kerr.ErrorForCode(p.ErrorCode))
		}
		if p := listOffset(t, c, v, "lo", 3, -1); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("v%d unknown partition: %v", v, kerr.ErrorForCode(p.ErrorCode))
		}
		// A partition named twice is INVALID_REQUEST.
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(v)
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		for range 2 {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		for _, p := range c.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions {
			if p.ErrorCode != kerr.InvalidRequest.Code {
				t.Errorf("v%d duplicate partition: %v", v, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
}

// TestFetchLargeTopic consumes ~50 MB over 8 partitions with franz-go,
// which checks every batch's CRC; every value is checked too. Each
// response carries many spliced sections.
func TestFetchLargeTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("50 MB")
	}
	b := testutil.StartBroker(t, func(c *config.Broker) { c.DefaultPartitions = 8 })
	const (
		n         = 3200
		valueSize = 16 << 10
	)
	value := func(i int) []byte {
		v := make([]byte, valueSize)
		r := rand.New(rand.NewPCG(uint64(i), 42))
		for j := 0; j < len(v); j += 8 {
			binary.LittleEndian.PutUint64(v[j:], r.Uint64())
		}
		return v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prod := newClient(t, b.Addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("large"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: value(i)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	prod.Close()

	for _, pmax := range []int32{1 << 20, 16 << 20} {
		cons := newClient(t, b.Addr, kgo.ConsumeTopics("large"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxPartitionBytes(pmax), kgo.FetchMaxBytes(50<<20))
		seen := make([]bool, n)
		got := 0
		for got < n {
			fs := cons.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				var i int
				if _, err := fmt.Sscan(string(r.Key), &i); err != nil || i < 0 || i >= n || seen[i] {
					t.Fatalf("bad or repeated key %q", r.Key)
				}
				if !bytes.Equal(r.Value, value(i)) {
					t.Fatalf("record %d: value differs", i)
				}
				seen[i] = true
				got++
			})
		}
		cons.Close()
	}
}

// TestChunks: markers are replaced by the right length prefix for
// flexible and non-flexible encodings, and a missing marker is an error.
func TestChunks(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := make([]byte, 70000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	sizes := []int64{1, 15, 16, 17, 126, 127, 128, 16383, 16384, 20000}
	for _, v := range []int16{4, 11, 12, 17} {
		flexible := v >= 12
		for _, size := range sizes {
			resp := kmsg.NewPtrFetchResponse()
			resp.SetVersion(v)
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = "t"
			var splices []protocol.Splice
			var want [][]byte
			for p := range int32(4) {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = p
				if p == 1 { // no data: null records, no splice
					want = append(want, nil)
					rt.Partitions = append(rt.Partitions, sp)
					continue
				}
				pos := int64(p) * 10000
				s := protocol.NewSplice(replica.Section{File: f, Pos: pos, Size: size + int64(p)})
				sp.RecordBatches = s.Marker
				splices = append(splices, s)
				want = append(want, data[pos:pos+size+int64(p)])
				rt.Partitions = append(rt.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, rt)
			body := resp.AppendTo(nil)
			chunks, err := protocol.Chunks(slices.Clone(body), flexible, splices)
			if err != nil {
				t.Fatalf("v%d size %d: %v", v, size, err)
			}
			var out []byte
			for _, ch := range chunks {
				out = append(out, ch.Bytes...)
				if ch.Section.Size > 0 {
					b, err := ch.Section.ReadAll()
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, b...)
				}
			}
			got := kmsg.NewPtrFetchResponse()
			got.SetVersion(v)
			if err := got.ReadFrom(out); err != nil {
				t.Fatalf("v%d size %d: spliced response does not decode: %v", v, size, err)
			}
			if n := len(got.AppendTo(nil)); n != len(out) {
				t.Fatalf("v%d size %d: %d bytes decode as %d", v, size, len(out), n)
			}
			for i, p := range got.Topics[0].Partitions {
				if !bytes.Equal(p.RecordBatches, want[i]) || (want[i] == nil) != (p.RecordBatches == nil) {
					t.Fatalf("v%d size %d partition %d: %d bytes, want %d", v, size, i, len(p.RecordBatches), len(want[i]))
				}
			}
		}
		// A marker that is not in the body (say the handler lost it) is
		// an error, not a corrupt response.
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(v)
		lost := protocol.NewSplice(replica.Section{File: f, Size: 10})
		if _, err := protocol.Chunks(resp.AppendTo(nil), flexible, []protocol.Splice{lost}); err == nil {
			t.Errorf("v%d: missing marker not reported", v)
		}
		// Nor are the marker's bytes taken for it where they are not a
		// records field of 16 bytes.
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = string(lost.Marker) + "x"
		resp.Topics = append(resp.Topics, rt)
		if _, err := protocol.Chunks(resp.AppendTo(nil), flexible, []protocol.Splice{lost}); err == nil {
			t.Errorf("v%d: marker inside a topic name taken for a records field", v)
		}
		// Markers out of order are not found either.
		a := protocol.NewSplice(replica.Section{File: f, Size: 10})
		bsp := protocol.NewSplice(replica.Section{File: f, Size: 10})
		resp = kmsg.NewPtrFetchResponse()
		resp.SetVersion(v)
		rt = kmsg.NewFetchResponseTopic()
		for i, m := range [][]byte{a.Marker, bsp.Marker} {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.RecordBatches = int32(i), m
			rt.Partitions = append(rt.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, rt)
		if _, err := protocol.Chunks(resp.AppendTo(nil), flexible, []protocol.Splice{bsp, a}); err == nil {
			t.Errorf("v%d: out-of-order markers not reported", v)
		}
	}
}

// A session answers first, next time, the partitions the last response
// had no room for: those just served records go to the end of its order,
// so that a full response does not starve the partitions after them.
func TestFetchSessionRotates(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ensureTopic(t, b.Addr, "rot-a")
	ensureTopic(t, b.Addr, "rot-b")
	c := dialRaw(t, b.Addr)
	produceRaw(t, c, "rot-a", 0, "a")
	produceRaw(t, c, "rot-b", 0, "b")
	parts := []fetchPart{{topic: "rot-a", maxBytes: 1 << 20}, {topic: "rot-b", maxBytes: 1 << 20}}
	served := func(resp *kmsg.FetchResponse) []string {
		var out []string
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if len(rp.RecordBatches) > 0 {
					out = append(out, rt.Topic)
				}
			}
		}
		return out
	}
	// One byte of room: each response carries the first batch it reads.
	req := fetchRequest(12, 0, 0, 1, parts...)
	req.SessionEpoch = 0
	first := fetchOne(t, c, req)
	if got := served(first); len(got) != 1 || got[0] != "rot-a" || first.SessionID == 0 {
		t.Fatalf("opening: served %v, session %d", got, first.SessionID)
	}
	next := fetchRequest(12, 0, 0, 1)
	next.SessionID, next.SessionEpoch = first.SessionID, 1
	if got := served(fetchOne(t, c, next)); len(got) != 1 || got[0] != "rot-b" {
		t.Fatalf("the next fetch served %v, want rot-b, which the first had no room for", got)
	}
}
