package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxBrowse bounds the records one page shows.
const maxBrowse = 200

// browseQuery is the record browser's form.
type browseQuery struct {
	Topic      string
	Partition  int32
	Partitions int32
	Offset     string // an offset, or empty for Time
	Time       string // RFC 3339, when Offset is empty
	Limit      int
	As         string // text, json or hex
}

// browsedRecord is a record as the browser shows it.
type browsedRecord struct {
	Offset    int64
	Timestamp time.Time
	Key       string
	Value     string
	Headers   []browsedHeader
}

type browsedHeader struct{ Key, Value string }

func (c *Console) records(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	q := r.URL.Query()
	bq := browseQuery{Topic: r.PathValue("topic"), Offset: q.Get("offset"), Time: q.Get("time"), Limit: 20, As: q.Get("as")}
	if bq.As == "" {
		bq.As = "text"
	}
	if bq.As != "text" && bq.As != "json" && bq.As != "hex" {
		c.fail(w, http.StatusBadRequest, fmt.Errorf("as=%q: text, json or hex", bq.As))
		return
	}
	if p, err := strconv.ParseInt(q.Get("partition"), 10, 32); err == nil {
		bq.Partition = int32(p)
	}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		bq.Limit = min(n, maxBrowse)
	}
	tds, err := c.adm.ListTopicsWithInternal(ctx, bq.Topic)
	if err != nil || tds[bq.Topic].Err != nil {
		c.fail(w, http.StatusNotFound, fmt.Errorf("topic %s: not found", bq.Topic))
		return
	}
	bq.Partitions = int32(len(tds[bq.Topic].Partitions))
	if bq.Partition < 0 || bq.Partition >= bq.Partitions {
		c.fail(w, http.StatusBadRequest, fmt.Errorf("topic %s has no partition %d", bq.Topic, bq.Partition))
		return
	}
	start := kgo.NewOffset().AtStart()
	switch {
	case bq.Offset != "":
		o, err := strconv.ParseInt(bq.Offset, 10, 64)
		if err != nil || o < 0 {
			c.fail(w, http.StatusBadRequest, fmt.Errorf("offset %q: a number", bq.Offset))
			return
		}
		start = kgo.NewOffset().At(o)
	case bq.Time != "":
		t, err := time.Parse(time.RFC3339, bq.Time)
		if err != nil {
			c.fail(w, http.StatusBadRequest, fmt.Errorf("time %q: RFC 3339, e.g. 2026-12-01T10:00:00Z", bq.Time))
			return
		}
		start = kgo.NewOffset().AfterMilli(t.UnixMilli())
	}
	recs, err := c.browse(ctx, bq, start)
	if err != nil {
		c.fail(w, http.StatusBadGateway, err)
		return
	}
	c.write(w, "Records of "+bq.Topic, "topics", func(d *doc) { viewRecords(d, bq, recs) })
}

// browse reads up to bq.Limit records of the partition from start: those
// there are now, waiting no longer than a moment for more.
func (c *Console) browse(ctx context.Context, bq browseQuery, start kgo.Offset) ([]browsedRecord, error) {
	ends, err := c.adm.ListEndOffsets(ctx, bq.Topic)
	if err != nil {
		return nil, err
	}
	end, ok := ends.Lookup(bq.Topic, bq.Partition)
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("the end of %s-%d: %v", bq.Topic, bq.Partition, end.Err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{bq.Topic: {bq.Partition: start}})}, c.cfg.ClientOpts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := []browsedRecord{}
	deadline := time.Now().Add(2 * time.Second)
	for len(out) < bq.Limit && time.Now().Before(deadline) {
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fs := cl.PollRecords(pctx, bq.Limit-len(out))
		cancel()
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if len(out) < bq.Limit {
				out = append(out, shown(r, bq.As))
			}
			done = done || r.Offset+1 >= end.Offset
		})
		if done || ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

// shown renders a record's key, value and headers as text, JSON
// (indented when valid) or hex.
func shown(r *kgo.Record, as string) browsedRecord {
	b := browsedRecord{Offset: r.Offset, Timestamp: r.Timestamp, Key: render(r.Key, as), Value: render(r.Value, as)}
	for _, h := range r.Headers {
		b.Headers = append(b.Headers, browsedHeader{h.Key, render(h.Value, as)})
	}
	return b
}

func render(v []byte, as string) string {
	if v == nil {
		return "(null)"
	}
	switch as {
	case "hex":
		return hex.Dump(v)
	case "json":
		var out bytes.Buffer
		if json.Indent(&out, v, "", "  ") == nil {
			return out.String()
		}
	}
	if utf8.Valid(v) {
		return string(v)
	}
	return hex.Dump(v)
}
