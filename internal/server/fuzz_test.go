package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/protocol"
)

// fuzzHandled are the APIs whose handlers the fuzz target runs on what
// decodes; others are only decoded (CreateTopics, say, would create
// thousands of partitions from random input).
var fuzzHandled = map[int16]bool{0: true, 1: true, 2: true, 3: true, 18: true,
	22: true, 24: true, 25: true, 26: true, 27: true, 28: true, 61: true, 65: true, 66: true}

// FuzzDecodeRequest feeds arbitrary frames (without their size prefix) to
// the connection's decode path and, for the data-path APIs, to the
// handlers of a real broker and the response encoder: nothing may panic,
// and every answer must frame and decode.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	s := newFuzzServer(f)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // parked fetches answer at once

	f.Fuzz(func(t *testing.T, frame []byte) {
		start := time.Now()
		defer func() {
			if d := time.Since(start); d > time.Second {
				t.Fatalf("took %v", d)
			}
		}()
		req, resp, err := decodeRequest(frame)
		if err != nil {
			return
		}
		if req.Body == nil || req.Body.Key() != req.Key {
			t.Fatalf("decoded key %d into %T", req.Key, req.Body)
		}
		if resp == nil {
			if !fuzzHandled[req.Key] {
				return
			}
			if resp, err = s.broker.Handle(ctx, req); err != nil {
				return
			}
		}
		if resp.Defer != nil {
			if resp, err = resp.Defer(ctx); err != nil {
				return
			}
		}
		if resp == nil || resp.Body == nil {
			return // acks=0
		}
		_, chunks, err := encodeResponse(nil, req, resp)
		if err != nil {
			t.Fatalf("%s v%d: encoding the answer: %v", kmsg.NameForKey(req.Key), req.Version, err)
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
		if n := int(binary.BigEndian.Uint32(out)); n != len(out)-4 {
			t.Fatalf("%s v%d: frame says %d bytes, has %d", kmsg.NameForKey(req.Key), req.Version, n, len(out)-4)
		}
		if got := int32(binary.BigEndian.Uint32(out[4:])); got != req.Correlation {
			t.Fatalf("correlation %d, want %d", got, req.Correlation)
		}
		rd := kbin.Reader{Src: out[8:]}
		if req.Body.IsFlexible() && req.Key != 18 {
			kmsg.SkipTags(&rd)
		}
		body := req.Body.ResponseKind()
		body.SetVersion(resp.Body.GetVersion())
		if err := body.ReadFrom(rd.Src); err != nil {
			t.Fatalf("%s v%d: the answer does not decode: %v", kmsg.NameForKey(req.Key), req.Version, err)
		}
	})
}

// fuzzSeeds encodes a default request of every served API at every
// version, and a few with content.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	add := func(r kmsg.Request) { seeds = append(seeds, fmtr.AppendRequest(nil, r, 7)[4:]) }
	for _, k := range protocol.Ranges() {
		for v := k.MinVersion; v <= k.MaxVersion; v++ {
			r := kmsg.RequestForKey(k.ApiKey)
			r.SetVersion(v)
			add(r)
		}
	}
	for _, v := range []int16{3, 9, 12} {
		p := kmsg.NewPtrProduceRequest()
		p.SetVersion(v)
		p.Acks = -1
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = fuzzBatch("v")
		rt.Partitions = append(rt.Partitions, rp)
		p.Topics = append(p.Topics, rt)
		add(p)
	}
	for _, v := range []int16{4, 11, 12, 13, 17} {
		fr := kmsg.NewPtrFetchRequest()
		fr.SetVersion(v)
		fr.MaxWaitMillis, fr.MinBytes, fr.MaxBytes = 100, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		for p := range int32(2) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		fr.Topics = append(fr.Topics, rt)
		add(fr)
	}
	for _, v := range []int16{1, 9} {
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.SetVersion(v)
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		lo.Topics = append(lo.Topics, rt)
		add(lo)
	}
	for _, v := range []int16{0, 4, 12} {
		m := kmsg.NewPtrMetadataRequest()
		m.SetVersion(v)
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("t")
		m.Topics = append(m.Topics, mt)
		add(m)
	}
	// A transaction's requests, so mutations reach the coordinator's
	// checks: the fuzz broker's producer ids start at 0.
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis, ip.ProducerID, ip.ProducerEpoch = kmsg.StringPtr("x"), 1000, -1, -1
	add(ip)
	for _, v := range []int16{11, 12} {
		p := kmsg.NewPtrProduceRequest()
		p.SetVersion(v)
		p.Acks, p.TransactionID = -1, kmsg.StringPtr("x")
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = fuzzBatch("v")
		binary.BigEndian.PutUint16(rp.Records[21:], 0x10)
		binary.BigEndian.PutUint64(rp.Records[43:], 0)
		binary.BigEndian.PutUint16(rp.Records[51:], 0)
		binary.BigEndian.PutUint32(rp.Records[53:], 0)
		binary.BigEndian.PutUint32(rp.Records[17:], crc32.Checksum(rp.Records[21:], crc32.MakeTable(crc32.Castagnoli)))
		rt.Partitions = append(rt.Partitions, rp)
		p.Topics = append(p.Topics, rt)
		add(p)
	}
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.SetVersion(3)
	ap.TransactionalID = "x"
	apt := kmsg.NewAddPartitionsToTxnRequestTopic()
	apt.Topic, apt.Partitions = "t", []int32{0, 1}
	ap.Topics = append(ap.Topics, apt)
	add(ap)
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.SetVersion(5)
	tc.TransactionalID, tc.Group, tc.Generation = "x", "g", -1
	tct := kmsg.NewTxnOffsetCommitRequestTopic()
	tct.Topic = "t"
	tct.Partitions = append(tct.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
	tc.Topics = append(tc.Topics, tct)
	add(tc)
	for _, commit := range []bool{true, false} {
		et := kmsg.NewPtrEndTxnRequest()
		et.SetVersion(5)
		et.TransactionalID, et.Commit = "x", commit
		add(et)
	}
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.SetVersion(1)
	wmm := kmsg.NewWriteTxnMarkersRequestMarker()
	wmt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	wmt.Topic, wmt.Partitions = "t", []int32{0}
	wmm.Topics = append(wmm.Topics, wmt)
	wm.Markers = append(wm.Markers, wmm)
	add(wm)
	seeds = append(seeds, []byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff}) // ApiVersions v99
	return seeds
}

func fuzzBatch(value string) []byte {
	rec := []byte{0, 0, 0, 1} // attributes, timestamp delta 0, offset delta 0, null key
	rec = binary.AppendVarint(rec, int64(len(value)))
	rec = append(rec, value...)
	rec = append(rec, 0) // no headers
	recs := binary.AppendVarint(nil, int64(len(rec)))
	recs = append(recs, rec...)
	b := make([]byte, 61, 61+len(recs))
	binary.BigEndian.PutUint32(b[8:], uint32(49+len(recs)))
	b[16] = 2
	for i := 43; i < 57; i++ {
		b[i] = 0xff // producer id, epoch, sequence -1
	}
	binary.BigEndian.PutUint32(b[57:], 1)
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// newFuzzServer opens a broker (not listening) with topic "t" of two
// partitions; writes are not synced, so the fuzzer runs fast.
func newFuzzServer(tb testing.TB) *Server {
	cfg := config.Defaults()
	cfg.DataDir = tb.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminListen = ""
	cfg.AutoCreateTopics = false
	cfg.Topic.FlushPolicy = log.FlushNever
	cfg.Topic.SegmentBytes = 1 << 20
	cfg.TransactionStatePartitions, cfg.OffsetsTopicPartitions = 2, 2
	s, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Shutdown(context.Background()) })
	if _, err := s.broker.Topics.CreateTopic(cluster.TopicSpec{Name: "t", Partitions: 2, ReplicationFactor: 1}, false); err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestDecodeRequestSeeds runs the fuzz seeds through the decoder: each
// must decode (they are valid requests).
func TestDecodeRequestSeeds(t *testing.T) {
	for _, seed := range fuzzSeeds() {
		req, resp, err := decodeRequest(seed)
		if err != nil {
			t.Errorf("%x: %v", seed[:min(len(seed), 16)], err)
			continue
		}
		if req.Correlation != 7 && !bytes.Equal(seed[:4], []byte{0, 18, 0, 99}) {
			t.Errorf("correlation %d", req.Correlation)
		}
		if req.Key == 18 && req.Version == 99 && resp == nil {
			t.Errorf("ApiVersions v99 not answered directly")
		}
	}
}

// TestHandlerPanicFailsRequest: a handler that panics fails its request
// (the connection then closes) instead of crashing the broker. A broker
// with no cluster store makes every topic lookup panic.
func TestHandlerPanicFailsRequest(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &Server{logger: logger, broker: &protocol.Broker{Logger: logger}}
	c := &conn{srv: s, logger: logger}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rt.Partitions = append(rt.Partitions, kmsg.NewFetchRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := c.handle(context.Background(), &protocol.Request{Key: 1, Version: 12, Body: req})
	if err == nil || resp != nil {
		t.Fatalf("handle: %v, %v; want an error", resp, err)
	}
	deferred := &protocol.Response{Defer: func(context.Context) (*protocol.Response, error) { panic("boom") }}
	if _, err := c.finish(context.Background(), &protocol.Request{Key: 0, Body: kmsg.NewPtrProduceRequest()}, deferred); err == nil {
		t.Fatal("finish: a panicking deferred part did not fail")
	}
}
