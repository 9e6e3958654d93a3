package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxBrowse bounds the records one page shows; a search reads at most
// maxScan records for one page, for at most scanTime.
const (
	maxBrowse = 200
	maxScan   = 20000
	scanTime  = 3 * time.Second
)

// browseQuery is the record browser's form.
type browseQuery struct {
	Topic      string
	Partition  int32
	Partitions int32
	Offset     string // an offset: N, +N from the start, -N from the end; or empty for Time
	Time       string // RFC 3339, when Offset is empty
	Limit      int
	As         string // text, json or hex
	Search     string // text the key, value or a header must hold; empty for every record
	// Start and End are the partition's offsets; From is where the page
	// started reading.
	Start, End, From int64
}

// browsed is what one page read: the records shown, and how far it read
// (Next: the offset after the last record read, Scanned: how many).
type browsed struct {
	Records []browsedRecord
	Next    int64
	Scanned int
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
	bq := browseQuery{Topic: r.PathValue("topic"), Offset: q.Get("offset"), Time: q.Get("time"), Limit: 20, As: q.Get("as"),
		Search: q.Get("q")}
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
	starts, err := c.adm.ListStartOffsets(ctx, bq.Topic)
	if err == nil {
		var ends kadm.ListedOffsets
		ends, err = c.adm.ListEndOffsets(ctx, bq.Topic)
		s, _ := starts.Lookup(bq.Topic, bq.Partition)
		e, _ := ends.Lookup(bq.Topic, bq.Partition)
		bq.Start, bq.End = s.Offset, e.Offset
		err = cmp.Or(err, s.Err, e.Err)
	}
	if err != nil {
		c.fail(w, http.StatusBadGateway, fmt.Errorf("the offsets of %s-%d: %w", bq.Topic, bq.Partition, err))
		return
	}
	bq.From = bq.Start
	switch {
	case bq.Offset != "":
		// As strand consume --from reads it: N, +N from the start, -N
		// from the end.
		n, err := strconv.ParseInt(bq.Offset, 10, 64)
		if err != nil {
			c.fail(w, http.StatusBadRequest, fmt.Errorf("offset %q: N, +N (from the start) or -N (from the end)", bq.Offset))
			return
		}
		switch {
		case strings.HasPrefix(bq.Offset, "+"):
			bq.From = bq.Start + n
		case n < 0:
			bq.From = bq.End + n
		default:
			bq.From = n
		}
		bq.From = min(max(bq.From, bq.Start), bq.End)
	case bq.Time != "":
		t, err := time.Parse(time.RFC3339, bq.Time)
		if err != nil {
			c.fail(w, http.StatusBadRequest, fmt.Errorf("time %q: RFC 3339, e.g. 2026-12-01T10:00:00Z", bq.Time))
			return
		}
		at, err := c.adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), bq.Topic)
		o, _ := at.Lookup(bq.Topic, bq.Partition)
		if err = cmp.Or(err, o.Err); err != nil {
			c.fail(w, http.StatusBadGateway, err)
			return
		}
		bq.From = o.Offset
		if bq.From < 0 {
			bq.From = bq.End
		}
	}
	got, err := c.browse(ctx, bq)
	if err != nil {
		c.fail(w, http.StatusBadGateway, err)
		return
	}
	c.write(w, "Records of "+bq.Topic, "topics", func(d *doc) { viewRecords(d, bq, got) })
}

// browse reads the partition from bq.From: up to bq.Limit records, or,
// with a search, the first bq.Limit that match among at most maxScan
// read within scanTime. It reads what is there now, up to bq.End.
func (c *Console) browse(ctx context.Context, bq browseQuery) (browsed, error) {
	out := browsed{Records: []browsedRecord{}, Next: bq.From}
	if bq.From >= bq.End {
		return out, nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{bq.Topic: {bq.Partition: kgo.NewOffset().At(bq.From)}})}, c.cfg.ClientOpts...)...)
	if err != nil {
		return out, err
	}
	defer cl.Close()
	deadline := time.Now().Add(2 * time.Second)
	if bq.Search != "" {
		deadline = time.Now().Add(scanTime)
	}
	needle := []byte(bq.Search)
	for len(out.Records) < bq.Limit && out.Scanned < maxScan && out.Next < bq.End && time.Now().Before(deadline) {
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fs := cl.PollRecords(pctx, maxBrowse)
		cancel()
		for _, r := range fs.Records() {
			if len(out.Records) == bq.Limit || out.Scanned == maxScan || r.Offset >= bq.End {
				break
			}
			out.Scanned++
			out.Next = r.Offset + 1
			if bq.Search == "" || matches(r, needle) {
				out.Records = append(out.Records, shown(r, bq.As))
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

// matches says whether a record's key, value, or a header's key or
// value holds needle.
func matches(r *kgo.Record, needle []byte) bool {
	if bytes.Contains(r.Key, needle) || bytes.Contains(r.Value, needle) {
		return true
	}
	for _, h := range r.Headers {
		if strings.Contains(h.Key, string(needle)) || bytes.Contains(h.Value, needle) {
			return true
		}
	}
	return false
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
