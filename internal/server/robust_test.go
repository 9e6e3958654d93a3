package server_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/server"
	"github.com/strandlog/strand/internal/testutil"
)

// ---------------------------------------------------------------------------
// Raw protocol helpers, shared by the tests of this package.

// rawConn speaks the wire protocol directly: it frames kmsg requests with
// request header v1 or v2 and decodes the answers, checking correlation ids
// and that each response is consumed exactly.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	r    *bufio.Reader
	corr int32
	fmt  *kmsg.RequestFormatter
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

// frame encodes req with the next correlation id.
func (c *rawConn) frame(req kmsg.Request) ([]byte, int32) {
	c.corr++
	return c.fmt.AppendRequest(nil, req, c.corr), c.corr
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// send writes req and returns its correlation id.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	b, corr := c.frame(req)
	c.write(b)
	return corr
}

// readFrame reads one response frame (after its size).
func (c *rawConn) readFrame(timeout time.Duration) ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(timeout))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 {
		return nil, fmt.Errorf("response size %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// recv reads the answer to req, sent with correlation id corr.
func (c *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	return c.recvWithin(req, corr, 15*time.Second)
}

func (c *rawConn) recvWithin(req kmsg.Request, corr int32, timeout time.Duration) kmsg.Response {
	c.t.Helper()
	b, err := c.readFrame(timeout)
	if err != nil {
		c.t.Fatalf("reading the answer to %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	resp, err := decodeResponse(req, b)
	if err != nil {
		c.t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		c.t.Fatalf("%s v%d: correlation id %d, want %d", kmsg.NameForKey(req.Key()), req.GetVersion(), got, corr)
	}
	return resp
}

// decodeResponse decodes a response frame (correlation id first) to req,
// failing on bytes left over or missing: a wrong length prefix anywhere
// (say in a spliced records field) shows up here.
func decodeResponse(req kmsg.Request, b []byte) (kmsg.Response, error) {
	rd := kbin.Reader{Src: b[4:]}
	if req.IsFlexible() && req.Key() != 18 {
		kmsg.SkipTags(&rd)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := rd.Complete(); err != nil {
		return nil, fmt.Errorf("%s v%d: bad response header", kmsg.NameForKey(req.Key()), req.GetVersion())
	}
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("%s v%d: decoding the response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if n := len(resp.AppendTo(nil)); n != len(rd.Src) {
		return nil, fmt.Errorf("%s v%d: response body is %d bytes, decodes as %d", kmsg.NameForKey(req.Key()), req.GetVersion(), len(rd.Src), n)
	}
	return resp, nil
}

// do sends req and returns its answer.
func (c *rawConn) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	return c.recv(req, c.send(req))
}

// expectClosed checks that the broker closes the connection without
// answering.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	b, err := c.readFrame(10 * time.Second)
	if err == nil {
		c.t.Fatalf("got a %d-byte answer, want the connection closed", len(b))
	}
	if !isClosed(err) {
		c.t.Fatalf("want the connection closed, got %v", err)
	}
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// rawFrame builds a frame by hand: header v1 (or v2 with an empty tag
// section) and body.
func rawFrame(key, version int16, corr int32, clientID *string, flexible bool, body []byte) []byte {
	b := []byte{0, 0, 0, 0}
	b = kbin.AppendInt16(b, key)
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, corr)
	b = kbin.AppendNullableString(b, clientID)
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// ---------------------------------------------------------------------------
// Record batches.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// makeBatch encodes an uncompressed v2 batch of the values (keys k0, k1, ...
// unless keys are given).
func makeBatch(values ...string) []byte {
	return makeBatchAt(time.Now().UnixMilli(), values...)
}

func makeBatchAt(ts int64, values ...string) []byte {
	recs := make([]rawRecord, len(values))
	for i, v := range values {
		key := fmt.Sprint("k", i)
		recs[i] = rawRecord{key: &key, value: v}
	}
	return batchOf(ts, recs...)
}

// rawRecord is a record of batchOf: a nil key is none; tsDelta is its
// timestamp after the batch's first.
type rawRecord struct {
	key     *string
	value   string
	tsDelta int64
}

// batchOf encodes an uncompressed v2 batch of recs, first timestamp ts.
func batchOf(ts int64, rs ...rawRecord) []byte {
	var recs []byte
	maxTS := ts
	for i, r := range rs {
		var body []byte
		body = append(body, 0)                      // attributes
		body = binary.AppendVarint(body, r.tsDelta) // timestamp delta
		body = binary.AppendVarint(body, int64(i))  // offset delta
		if r.key == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(*r.key)))
			body = append(body, *r.key...)
		}
		body = binary.AppendVarint(body, int64(len(r.value)))
		body = append(body, r.value...)
		body = binary.AppendVarint(body, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
		maxTS = max(maxTS, ts+r.tsDelta)
	}
	b := make([]byte, 61, 61+len(recs))
	binary.BigEndian.PutUint64(b[0:], 0)                    // base offset
	binary.BigEndian.PutUint32(b[8:], uint32(49+len(recs))) // length
	binary.BigEndian.PutUint32(b[12:], math.MaxUint32)      // partition leader epoch -1
	b[16] = 2                                               // magic
	binary.BigEndian.PutUint16(b[21:], 0)                   // attributes
	binary.BigEndian.PutUint32(b[23:], uint32(len(rs)-1))   // last offset delta
	binary.BigEndian.PutUint64(b[27:], uint64(ts))
	binary.BigEndian.PutUint64(b[35:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[43:], math.MaxUint64) // producer id -1
	binary.BigEndian.PutUint16(b[51:], math.MaxUint16) // producer epoch -1
	binary.BigEndian.PutUint32(b[53:], math.MaxUint32) // base sequence -1
	binary.BigEndian.PutUint32(b[57:], uint32(len(rs)))
	b = append(b, recs...)
	fixCRC(b)
	return b
}

func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
}

// makeLegacyMessage encodes a magic 1 message set of one message.
func makeLegacyMessage(value string) []byte {
	var m []byte
	m = append(m, 1, 0) // magic, attributes
	m = binary.BigEndian.AppendUint64(m, uint64(time.Now().UnixMilli()))
	m = binary.BigEndian.AppendUint32(m, math.MaxUint32) // null key
	m = binary.BigEndian.AppendUint32(m, uint32(len(value)))
	m = append(m, value...)
	crc := crc32.ChecksumIEEE(m)
	var b []byte
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(4+len(m)))
	b = binary.BigEndian.AppendUint32(b, crc)
	return append(b, m...)
}

type gotRecord struct {
	offset     int64
	key, value string
}

// parseBatches decodes fetched record data: whole v2 batches only, each
// CRC-checked.
func parseBatches(t testing.TB, data []byte) (batches []kmsg.RecordBatch, recs []gotRecord) {
	t.Helper()
	for len(data) > 0 {
		if len(data) < 61 {
			t.Fatalf("%d trailing bytes are not a batch", len(data))
		}
		size := int(int32(binary.BigEndian.Uint32(data[8:]))) + 12
		if size > len(data) {
			t.Fatalf("partial batch: %d of %d bytes", len(data), size)
		}
		raw := data[:size]
		data = data[size:]
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		if got := crc32.Checksum(raw[21:], castagnoli); uint32(b.CRC) != got {
			t.Fatalf("batch at offset %d: crc %08x, computed %08x", b.FirstOffset, uint32(b.CRC), got)
		}
		if b.Attributes&7 != 0 {
			t.Fatalf("compressed batch in a test that produced none")
		}
		rs := b.Records
		for range b.NumRecords {
			l, n := binary.Varint(rs)
			if n <= 0 || int(l) > len(rs)-n {
				t.Fatalf("bad record framing")
			}
			var r kmsg.Record
			if err := r.ReadFrom(rs[:n+int(l)]); err != nil {
				t.Fatal(err)
			}
			rs = rs[n+int(l):]
			recs = append(recs, gotRecord{offset: b.FirstOffset + int64(r.OffsetDelta), key: string(r.Key), value: string(r.Value)})
		}
		batches = append(batches, b)
	}
	return batches, recs
}

// ---------------------------------------------------------------------------
// Request builders.

func produceRequest(version int16, acks int16, topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = acks
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchPart names one partition of a fetch.
type fetchPart struct {
	topic     string
	id        [16]byte
	partition int32
	offset    int64
	maxBytes  int32
}

func fetchRequest(version int16, maxWait, minBytes, maxBytes int32, parts ...fetchPart) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, minBytes, maxBytes
	req.SessionEpoch = -1
	for _, p := range parts {
		if len(req.Topics) == 0 || req.Topics[len(req.Topics)-1].Topic != p.topic {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.topic, p.id
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.partition, p.offset, p.maxBytes
		if rp.PartitionMaxBytes == 0 {
			rp.PartitionMaxBytes = 1 << 20
		}
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

// ensureTopic creates topic through an auto-creating Metadata request (the
// broker's DefaultPartitions) and returns its id.
func ensureTopic(t testing.TB, addr, topic string) [16]byte {
	t.Helper()
	c := dialRaw(t, addr)
	defer c.nc.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.MetadataResponse)
	// A topic created on the way is LEADER_NOT_AVAILABLE, without
	// partitions; one that exists is described.
	if len(resp.Topics) != 1 || (resp.Topics[0].ErrorCode != 0 && resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code) {
		t.Fatalf("creating %s: %+v", topic, resp.Topics)
	}
	req.AllowAutoTopicCreation = false
	var id [16]byte
	testutil.Eventually(t, 10*time.Second, func() error {
		mt := c.do(req).(*kmsg.MetadataResponse).Topics[0]
		if mt.ErrorCode != 0 || len(mt.Partitions) == 0 {
			return fmt.Errorf("%s: %v, %d partitions", topic, kerr.ErrorForCode(mt.ErrorCode), len(mt.Partitions))
		}
		for _, p := range mt.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("%s/%d: %v", topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
		id = mt.TopicID
		return nil
	})
	return id
}

// produceRaw appends one batch of values and returns its base offset.
func produceRaw(t testing.TB, c *rawConn, topic string, partition int32, values ...string) int64 {
	t.Helper()
	resp := c.do(produceRequest(9, -1, topic, partition, makeBatch(values...))).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("produce to %s[%d]: %v", topic, partition, kerr.ErrorForCode(p.ErrorCode))
	}
	return p.BaseOffset
}

// fetchAll reads a partition from offset 0 to its high watermark.
func fetchAll(t testing.TB, c *rawConn, topic string, partition int32) []gotRecord {
	t.Helper()
	var out []gotRecord
	offset := int64(0)
	for {
		resp := c.do(fetchRequest(11, 0, 1, 1<<20, fetchPart{topic: topic, partition: partition, offset: offset})).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("fetch %s[%d] at %d: %v", topic, partition, offset, kerr.ErrorForCode(p.ErrorCode))
		}
		_, recs := parseBatches(t, p.RecordBatches)
		for _, r := range recs {
			if r.offset >= offset {
				out = append(out, r)
			}
		}
		if len(recs) == 0 || offset >= p.HighWatermark {
			return out
		}
		offset = recs[len(recs)-1].offset + 1
		if offset >= p.HighWatermark {
			return out
		}
	}
}

// newClient returns a franz-go client for the broker, closed at the end of
// the test. Its metadata may be asked again after 100 ms (testMetadataAge).
func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), testMetadataAge}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// testMetadataAge lets a client ask for metadata again 100 ms after the
// last answer. A topic created on the way is first answered
// LEADER_NOT_AVAILABLE, as Kafka answers it, and franz-go may then wait its
// default minimum age, 5 s, before it asks again.
var testMetadataAge = kgo.MetadataMinAge(100 * time.Millisecond)

// checkServes proves the broker still works for a real client: it produces
// to and consumes back a fresh topic, and checks that the records of
// `stored` are intact.
func checkServes(t *testing.T, addr string, stored map[string][]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := fmt.Sprint("alive-", rand.Int64())
	cl := newClient(t, addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("still here")}).FirstErr(); err != nil {
		t.Fatalf("broker no longer serves a client: %v", err)
	}
	stored[topic] = append(stored[topic], "still here")
	for topic, want := range stored {
		cons := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var got []string
		for len(got) < len(want) {
			fs := cons.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("consuming %s: %v", topic, err)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if !slices.Equal(got, want) {
			t.Fatalf("topic %s holds %q, want %q", topic, got, want)
		}
		cons.Close()
	}
}

// storeSome produces a few records with kgo before the abuse starts.
func storeSome(t *testing.T, addr string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("before"))
	var want []string
	for i := range 20 {
		v := fmt.Sprint("before-", i)
		want = append(want, v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	return map[string][]string{"before": want}
}

// ---------------------------------------------------------------------------
// Bad input closes the connection (Kafka's SocketServer and RequestContext
// do so for frames they cannot take or parse) and harms nothing else.

func TestBadFramesCloseConnection(t *testing.T) {
	const maxReq = 4096
	b := testutil.StartBroker(t, func(c *config.Broker) { c.MaxRequestBytes = maxReq })
	stored := storeSome(t, b.Addr)

	apiVersions := func(v int16) kmsg.Request {
		r := kmsg.NewPtrApiVersionsRequest()
		r.SetVersion(v)
		r.ClientSoftwareName, r.ClientSoftwareVersion = "raw", "1.0"
		return r
	}
	sizeOnly := func(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }
	validMeta := func() []byte {
		r := kmsg.NewPtrMetadataRequest()
		r.SetVersion(12)
		return kmsg.NewRequestFormatter().AppendRequest(nil, r, 1)
	}()
	metaBody := validMeta[4+10+1:] // after size, key, version, corr, null client id and tags
	cid := "x"
	longID := rawFrame(3, 1, 1, nil, false, nil)
	binary.BigEndian.PutUint16(longID[12:], 1000) // client id claims 1000 bytes
	longID = append(longID[:14], 'a', 'b')
	binary.BigEndian.PutUint32(longID, uint32(len(longID)-4))

	cases := []struct {
		name  string
		frame []byte
	}{
		{"size over the maximum", append(sizeOnly(maxReq+1), make([]byte, maxReq+1)...)},
		{"size far over the maximum", sizeOnly(math.MaxInt32)},
		{"negative size", sizeOnly(-1)},
		{"most negative size", sizeOnly(math.MinInt32)},
		{"zero size", sizeOnly(0)},
		{"size too small for a header", append(sizeOnly(5), 0, 3, 0, 1, 0)},
		{"header cut in the client id", append(sizeOnly(9), 0, 3, 0, 1, 0, 0, 0, 1, 0)},
		{"client id longer than the frame", longID},
		{"unknown API key", rawFrame(9999, 0, 1, &cid, false, nil)},
		{"negative API key", rawFrame(-1, 0, 1, &cid, false, nil)},
		{"API key kmsg knows but Strand does not serve", rawFrame(4, 0, 1, &cid, false, make([]byte, 20))},
		{"Metadata v13 (unsupported)", rawFrame(3, 13, 1, &cid, true, metaBody)},
		{"Metadata v99", rawFrame(3, 99, 1, &cid, true, metaBody)},
		{"Metadata v-1", rawFrame(3, -1, 1, &cid, false, nil)},
		{"Fetch v3 (below our minimum)", rawFrame(1, 3, 1, &cid, false, make([]byte, 30))},
		{"truncated Metadata body", rawFrame(3, 12, 1, &cid, true, metaBody[:len(metaBody)-1])},
		{"Metadata body missing", rawFrame(3, 12, 1, &cid, true, nil)},
		{"Metadata v1 topic array longer than the frame", rawFrame(3, 1, 1, &cid, false, []byte{0, 0, 1, 0, 0, 1, 'a'})},
		{"Metadata v12 header tags cut", rawFrame(3, 12, 1, &cid, false, []byte{3, 1})},
		{"garbled Produce", rawFrame(0, 9, 1, &cid, false, []byte{0xff, 0xff, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5})},
		{"garbled flexible Fetch", rawFrame(1, 13, 1, &cid, true, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80})},
		{"ApiVersions v3 with cut strings", rawFrame(18, 3, 1, &cid, true, []byte{5, 'a'})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bystander := dialRaw(t, b.Addr)
			bystander.do(apiVersions(3))
			c := dialRaw(t, b.Addr)
			c.write(tc.frame)
			c.expectClosed()
			// Other connections are unaffected.
			if resp := bystander.do(apiVersions(3)).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
				t.Fatalf("bystander: %v", kerr.ErrorForCode(resp.ErrorCode))
			}
		})
	}

	t.Run("answers sent before the bad frame still arrive", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		req := apiVersions(3)
		good, corr := c.frame(req)
		c.write(append(good, sizeOnly(-1)...))
		c.recv(req, corr)
		c.expectClosed()
	})

	t.Run("a frame of exactly the maximum size is read", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		req := apiVersions(0)
		frame, corr := c.frame(req)
		frame = append(frame, make([]byte, maxReq+4-len(frame))...) // padding after the body
		binary.BigEndian.PutUint32(frame, maxReq)
		c.write(frame)
		c.recv(req, corr)
	})

	checkServes(t, b.Addr, stored)
}

func TestApiVersions(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	c := dialRaw(t, b.Addr)

	want := map[int16][2]int16{0: {0, 12}, 1: {4, 17}, 2: {1, 9}, 3: {0, 12}, 18: {0, 4}, 22: {0, 5},
		24: {0, 5}, 25: {0, 4}, 26: {0, 5}, 27: {1, 1}, 28: {0, 5}, 61: {0, 0}, 65: {0, 0}, 66: {0, 2}}
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "strand-test", "1.2.3-rc.1"
		resp := c.do(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: %v", v, kerr.ErrorForCode(resp.ErrorCode))
		}
		seen := map[int16]bool{}
		for i, k := range resp.ApiKeys {
			if seen[k.ApiKey] || (i > 0 && k.ApiKey < resp.ApiKeys[i-1].ApiKey) {
				t.Fatalf("v%d: keys not sorted and unique: %+v", v, resp.ApiKeys)
			}
			seen[k.ApiKey] = true
			if k.MinVersion > k.MaxVersion || k.MinVersion < 0 {
				t.Fatalf("v%d: key %d range %d-%d", v, k.ApiKey, k.MinVersion, k.MaxVersion)
			}
			if r, ok := want[k.ApiKey]; ok && (r[0] != k.MinVersion || r[1] != k.MaxVersion) {
				t.Errorf("v%d: %s advertised %d-%d, want %d-%d", v, kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, r[0], r[1])
			}
		}
		for k := range want {
			if !seen[k] {
				t.Errorf("v%d: %s not advertised", v, kmsg.NameForKey(k))
			}
		}
		if v >= 3 {
			checkTransactionVersion(t, resp, 2)
		}
	}

	t.Run("transaction.version follows the broker's setting", func(t *testing.T) {
		for _, level := range []int16{0, 1} {
			b := testutil.StartBroker(t, func(c *config.Broker) { c.TransactionVersion = level })
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(4)
			req.ClientSoftwareName, req.ClientSoftwareVersion = "a", "1"
			checkTransactionVersion(t, dialRaw(t, b.Addr).do(req).(*kmsg.ApiVersionsResponse), level)
		}
	})

	t.Run("unsupported version answers v0 with our range", func(t *testing.T) {
		for _, v := range []int16{5, 99, math.MaxInt16, -1} {
			cid := "future-client"
			// The body of a version we do not know is never parsed.
			frame := rawFrame(18, v, 77, &cid, true, []byte{0xde, 0xad, 0xbe, 0xef})
			c.write(frame)
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(0)
			resp := c.recv(req, 77).(*kmsg.ApiVersionsResponse)
			if resp.ErrorCode != kerr.UnsupportedVersion.Code {
				t.Fatalf("v%d: error %v, want UNSUPPORTED_VERSION", v, kerr.ErrorForCode(resp.ErrorCode))
			}
			if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 4 {
				t.Fatalf("v%d: api keys %+v, want ApiVersions 0-4 only", v, resp.ApiKeys)
			}
		}
		// The connection stays usable: the client retries at v4.
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(4)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "a", "1"
		if resp := c.do(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 || len(resp.ApiKeys) < len(want) {
			t.Fatalf("retry: %v, %d keys", kerr.ErrorForCode(resp.ErrorCode), len(resp.ApiKeys))
		}
	})

	t.Run("v3 with invalid client software", func(t *testing.T) {
		for _, sw := range [][2]string{
			{"", "1.0"}, {"name", ""}, {"bad name", "1.0"}, {"-lead", "1.0"}, {"trail-", "1.0"},
			{"ok", "1.0."}, {"ok", "1_0"}, {"naïve", "1"}, {".", "1"},
		} {
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(3)
			req.ClientSoftwareName, req.ClientSoftwareVersion = sw[0], sw[1]
			resp := c.do(req).(*kmsg.ApiVersionsResponse)
			if resp.ErrorCode != kerr.InvalidRequest.Code {
				t.Errorf("software %q %q: error %v, want INVALID_REQUEST", sw[0], sw[1], kerr.ErrorForCode(resp.ErrorCode))
			}
		}
		for _, sw := range [][2]string{{"a", "1"}, {"apache-kafka-java", "4.0.0"}, {"librdkafka", "2.8.0"}, {"A.b-C", "x"}} {
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(3)
			req.ClientSoftwareName, req.ClientSoftwareVersion = sw[0], sw[1]
			if resp := c.do(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
				t.Errorf("software %q %q: error %v, want none", sw[0], sw[1], kerr.ErrorForCode(resp.ErrorCode))
			}
		}
	})

	t.Run("null client id", func(t *testing.T) {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(2)
		c.write(rawFrame(18, 2, 5, nil, false, req.AppendTo(nil)))
		if resp := c.recv(req, 5).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
		}
	})
}

// checkTransactionVersion checks the transaction.version feature: supported
// 0-2, finalized at level (absent at 0, as Kafka omits level-0 features).
func checkTransactionVersion(t *testing.T, resp *kmsg.ApiVersionsResponse, level int16) {
	t.Helper()
	supported := map[string][2]int16{}
	for _, f := range resp.SupportedFeatures {
		supported[f.Name] = [2]int16{f.MinVersion, f.MaxVersion}
	}
	if want := map[string][2]int16{"transaction.version": {0, 2}, "group.version": {0, 1}, "share.version": {0, 1}}; !maps.Equal(supported, want) {
		t.Errorf("supported features %v, want %v", supported, want)
	}
	if resp.FinalizedFeaturesEpoch < 0 {
		t.Errorf("finalized features epoch %d: clients ignore the levels", resp.FinalizedFeaturesEpoch)
	}
	finalized := map[string][2]int16{}
	for _, f := range resp.FinalizedFeatures {
		finalized[f.Name] = [2]int16{f.MinVersionLevel, f.MaxVersionLevel}
	}
	// group.version and share.version are finalized at 1: the consumer
	// group protocol and share groups are on, as in a cluster Kafka 4.2 or
	// later formats.
	want := map[string][2]int16{"group.version": {1, 1}, "share.version": {1, 1}}
	if level > 0 {
		want["transaction.version"] = [2]int16{level, level}
	}
	if !maps.Equal(finalized, want) {
		t.Errorf("finalized features %v, want %v", finalized, want)
	}
}

// TestMetadataEveryVersion decodes the answer of every Metadata version.
func TestMetadataEveryVersion(t *testing.T) {
	b := testutil.StartBroker(t, func(c *config.Broker) { c.DefaultPartitions = 3; c.NodeID = 7 })
	id := ensureTopic(t, b.Addr, "meta")
	c := dialRaw(t, b.Addr)
	host, port, _ := net.SplitHostPort(b.Addr)
	for v := int16(0); v <= 12; v++ {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) {
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(v)
			// Before v4 a named topic is always auto-created (the broker
			// allows it); from v4 only when the request asks.
			other := "missing"
			if v < 4 {
				other = fmt.Sprint("auto", v)
			}
			for _, name := range []string{"meta", other} {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(name)
				req.Topics = append(req.Topics, rt)
			}
			req.AllowAutoTopicCreation = false
			resp := c.do(req).(*kmsg.MetadataResponse)
			if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 7 || resp.Brokers[0].Host != host || fmt.Sprint(resp.Brokers[0].Port) != port {
				t.Fatalf("brokers %+v, want node 7 at %s", resp.Brokers, b.Addr)
			}
			if resp.Brokers[0].Rack != nil {
				t.Errorf("rack %q", *resp.Brokers[0].Rack)
			}
			if v >= 1 && resp.ControllerID != 7 {
				t.Errorf("controller %d", resp.ControllerID)
			}
			if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID == "") {
				t.Errorf("no cluster id")
			}
			if len(resp.Topics) != 2 {
				t.Fatalf("topics %+v", resp.Topics)
			}
			if v < 4 {
				// The other was created: as Kafka, LEADER_NOT_AVAILABLE
				// without partitions; the next answer describes it.
				if mt := resp.Topics[1]; mt.ErrorCode != kerr.LeaderNotAvailable.Code || *mt.Topic != other || len(mt.Partitions) != 0 {
					t.Fatalf("topic %s, created: %v %+v", other, kerr.ErrorForCode(mt.ErrorCode), mt)
				}
				resp = c.do(req).(*kmsg.MetadataResponse)
			}
			existing := resp.Topics[:1]
			if v < 4 {
				existing = resp.Topics
			}
			for i, mt := range existing {
				if mt.ErrorCode != 0 || mt.Topic == nil || *mt.Topic != []string{"meta", other}[i] || len(mt.Partitions) != 3 || mt.IsInternal {
					t.Fatalf("topic %d: %+v", i, mt)
				}
				if v >= 10 && i == 0 && mt.TopicID != id {
					t.Errorf("topic id %x, want %x", mt.TopicID, id)
				}
				if v >= 10 && mt.TopicID == ([16]byte{}) {
					t.Errorf("zero topic id")
				}
				for j, p := range mt.Partitions {
					if p.Partition != int32(j) || p.Leader != 7 || !slices.Equal(p.Replicas, []int32{7}) || !slices.Equal(p.ISR, []int32{7}) || p.ErrorCode != 0 {
						t.Errorf("partition %+v", p)
					}
					if len(p.OfflineReplicas) != 0 {
						t.Errorf("offline replicas %v", p.OfflineReplicas)
					}
					if v >= 7 && p.LeaderEpoch < 0 {
						t.Errorf("leader epoch %d", p.LeaderEpoch)
					}
				}
			}
			if v >= 4 {
				if miss := resp.Topics[1]; miss.ErrorCode != kerr.UnknownTopicOrPartition.Code || *miss.Topic != "missing" {
					t.Errorf("missing topic: %v %+v", kerr.ErrorForCode(miss.ErrorCode), miss)
				}
			}
		})
	}
	t.Run("all topics", func(t *testing.T) {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		resp := c.do(req).(*kmsg.MetadataResponse)
		var names []string
		for _, mt := range resp.Topics {
			names = append(names, *mt.Topic)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"auto0", "auto1", "auto2", "auto3", "meta"}) {
			t.Fatalf("topics %q", names)
		}
	})
	t.Run("by id", func(t *testing.T) {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
		rt.TopicID = [16]byte{1, 2, 3}
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 0 || *resp.Topics[0].Topic != "meta" ||
			resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("%+v", resp.Topics)
		}
	})
}

// TestGarbageFrames sends random frames, some with valid headers and
// random bodies, over many connections: the broker must survive all of
// them and still serve (and keep) data.
func TestGarbageFrames(t *testing.T) {
	b := testutil.StartBroker(t, func(c *config.Broker) { c.MaxRequestBytes = 64 << 10 })
	stored := storeSome(t, b.Addr)
	// Mutated produce requests go to a scratch topic: a flip in a batch's
	// partition leader epoch (which the CRC does not cover, and the broker
	// overwrites) leaves a valid request.
	ensureTopic(t, b.Addr, "scratch")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	keys := []int16{0, 1, 2, 3, 18, 19, 22, -1, 1000}

	// Valid requests to mutate.
	var valid [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("garbage"))
	for _, key := range []int16{0, 1, 2, 3, 18} {
		r := kmsg.RequestForKey(key)
		for v := r.MaxVersion(); v >= 0; v-- {
			r.SetVersion(v)
			valid = append(valid, f.AppendRequest(nil, r, 1))
		}
	}
	valid = append(valid, f.AppendRequest(nil, produceRequest(9, 1, "scratch", 0, makeBatch("x")), 1))
	valid = append(valid, f.AppendRequest(nil, fetchRequest(12, 10, 1, 1000, fetchPart{topic: "before"}), 1))
	valid = append(valid, f.AppendRequest(nil, fetchRequest(4, 10_000, 1, 1000, fetchPart{topic: "scratch"}), 1))

	var wg sync.WaitGroup
	for w := range 8 {
		rng := rand.New(rand.NewPCG(seed, uint64(w)+2))
		wg.Go(func() {
			for range 40 {
				nc, err := net.Dial("tcp", b.Addr)
				if err != nil {
					t.Error(err)
					return
				}
				var out []byte
				for range 1 + rng.IntN(5) {
					var frame []byte
					switch rng.IntN(4) {
					case 0: // pure noise with a plausible size
						body := make([]byte, rng.IntN(200))
						for i := range body {
							body[i] = byte(rng.Uint32())
						}
						frame = binary.BigEndian.AppendUint32(nil, uint32(len(body)))
						frame = append(frame, body...)
					case 1: // valid header, random body
						body := make([]byte, rng.IntN(300))
						for i := range body {
							body[i] = byte(rng.Uint32())
						}
						cid := "g"
						frame = rawFrame(keys[rng.IntN(len(keys))], int16(rng.IntN(20)), 1, &cid, rng.IntN(2) == 0, body)
					default: // a valid request with a few bytes flipped or cut
						frame = slices.Clone(valid[rng.IntN(len(valid))])
						for range 1 + rng.IntN(4) {
							i := 4 + rng.IntN(len(frame)-4)
							frame[i] ^= byte(1 + rng.IntN(255))
						}
						if rng.IntN(3) == 0 {
							frame = frame[:4+rng.IntN(len(frame)-4)]
							binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
						}
					}
					out = append(out, frame...)
				}
				nc.SetDeadline(time.Now().Add(5 * time.Second))
				nc.Write(out)
				if tc, ok := nc.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
				// The broker answers what it can and closes: once the
				// client has finished sending, parked fetches answer at
				// once rather than after their MaxWait.
				if _, err := io.Copy(io.Discard, nc); err != nil && !isClosed(err) {
					t.Errorf("after the client finished: %v", err)
				}
				nc.Close()
			}
		})
	}
	wg.Wait()
	checkServes(t, b.Addr, stored)
}

// ---------------------------------------------------------------------------
// Shutdown.

func TestShutdownAnswersParkedFetch(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	ensureTopic(t, b.Addr, "parked")
	c := dialRaw(t, b.Addr)
	req := fetchRequest(12, 60_000, 1, 1<<20, fetchPart{topic: "parked"})
	corr := c.send(req)
	time.Sleep(200 * time.Millisecond) // let it park

	start := time.Now()
	stopped := make(chan struct{})
	go func() {
		b.Stop(t)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown hangs while a fetch is parked")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Shutdown took %v", d)
	}
	// The client gets an answer or a closed connection, never a hang.
	frame, err := c.readFrame(5 * time.Second)
	switch {
	case err == nil:
		resp, derr := decodeResponse(req, frame)
		if derr != nil {
			t.Fatal(derr)
		}
		if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
			t.Fatalf("correlation %d, want %d", got, corr)
		}
		if p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
			t.Fatalf("answer %+v", p)
		}
		if _, err := c.readFrame(5 * time.Second); !isClosed(err) {
			t.Fatalf("after the answer: %v, want closed", err)
		}
	case isClosed(err):
	default:
		t.Fatalf("reading after shutdown: %v", err)
	}
}

// TestShutdownStuckClient: a client that stops reading cannot hold up
// Shutdown past its deadline.
func TestShutdownStuckClient(t *testing.T) {
	srv, addr := startServer(t, nil)
	cl := newClient(t, addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("stuck"))
	ctx := context.Background()
	value := make([]byte, 100<<10)
	for range 40 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	c := dialRaw(t, addr)
	if tc, ok := c.nc.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	// Pipeline fetches of ~4 MB each and never read the answers.
	for range 30 {
		c.send(fetchRequest(12, 0, 1, 50<<20, fetchPart{topic: "stuck", maxBytes: 50 << 20}))
	}
	time.Sleep(500 * time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown hangs on a client that does not read")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Shutdown took %v with a 1s deadline", d)
	}
}

// startServer runs a broker without testutil, for tests that drive
// Shutdown themselves.
func startServer(t *testing.T, edit func(*config.Broker)) (*server.Server, string) {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminListen = ""
	if edit != nil {
		edit(&cfg)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		})
	})
	return srv, srv.Addr().String()
}

// TestHostileClientDoesNotFloodTheLog: a client that opens connection
// after connection, each with a bad frame, gets one warning line per
// warnEvery, naming it by address, client id and software.
func TestHostileClientDoesNotFloodTheLog(t *testing.T) {
	var log testutil.SyncBuffer
	cfg := config.Defaults()
	cfg.DataDir, cfg.Listen, cfg.AdminListen = t.TempDir(), "127.0.0.1:0", ""
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	cid := "x"
	for range 30 {
		c := dialRaw(t, srv.Addr().String())
		av := kmsg.NewPtrApiVersionsRequest()
		av.SetVersion(3)
		av.ClientSoftwareName, av.ClientSoftwareVersion = "hammer", "6.6"
		c.do(av)
		c.write(rawFrame(9999, 0, 99, &cid, false, nil))
		c.expectClosed()
	}
	lines := strings.Count(log.String(), "closing connection: bad request")
	if lines != 1 {
		t.Fatalf("%d warning lines for 30 bad connections, want 1:\n%s", lines, log.String())
	}
	if !strings.Contains(log.String(), "client_id=raw-test") || !strings.Contains(log.String(), `software="hammer 6.6"`) ||
		!strings.Contains(log.String(), "client=127.0.0.1:") {
		t.Fatalf("the warning does not name the client:\n%s", log.String())
	}
}

// readFrameAfter sends req and reads one answer frame, returning the
// error instead of failing: for a connection that may be closed.
func (c *rawConn) readFrameAfter(req kmsg.Request) ([]byte, error) {
	frame, _ := c.frame(req)
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(frame); err != nil {
		return nil, err
	}
	return c.readFrame(5 * time.Second)
}

// TestConnectionErrorsNamed: a client that closes its connection in the
// middle of a request gets one warning line naming it (address, client id,
// software), however many times it does so in a row, and a client that
// closes between requests, as clients do, gets none.
func TestConnectionErrorsNamed(t *testing.T) {
	var log testutil.SyncBuffer
	cfg := config.Defaults()
	cfg.DataDir, cfg.Listen, cfg.AdminListen = t.TempDir(), "127.0.0.1:0", ""
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	hello := func() *rawConn {
		c := dialRaw(t, srv.Addr().String())
		av := kmsg.NewPtrApiVersionsRequest()
		av.SetVersion(3)
		av.ClientSoftwareName, av.ClientSoftwareVersion = "halfway", "1.0"
		c.do(av)
		return c
	}
	clean := hello()
	clean.nc.Close()
	for range 5 {
		c := hello()
		c.write([]byte{0, 0, 0x10, 0, 0, 18, 0, 3}) // 4 KiB announced, 4 bytes sent
		c.nc.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(log.String(), "connection closed mid-request"); {
		if time.Now().After(deadline) {
			t.Fatalf("no line for a connection closed mid-request:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // for lines that should not come
	out := log.String()
	if n := strings.Count(out, "level="); n != 1 {
		t.Fatalf("%d lines, want the one for the first connection closed mid-request:\n%s", n, out)
	}
	for _, want := range []string{"client=127.0.0.1:", "client_id=raw-test", `software="halfway 1.0"`, "size=4096"} {
		if !strings.Contains(out, want) {
			t.Errorf("the line lacks %s:\n%s", want, out)
		}
	}
}
