package fetchpos

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/model"
)

// Topic is the internal topic the spans travel in.
const Topic = model.FetchPositionsTopic

// version is the schema version of a record's value.
const version = 1

type record struct {
	V     int        `json:"v"`
	Node  int32      `json:"node"`
	Spans []wireSpan `json:"spans"`
}

type wireSpan struct {
	Addr        string `json:"addr"`
	ClientID    string `json:"client_id"`
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	FirstOffset int64  `json:"first_offset"`
	FirstSent   int64  `json:"first_sent"`
	LogStart    int64  `json:"log_start"`
	FirstAt     int64  `json:"first_arrived_us"`
	Offset      int64  `json:"offset"`
	Sent        int64  `json:"sent"`
	AnsweredAt  int64  `json:"answered_us"`
}

// Encode is the record of node's spans: its key and value.
func Encode(node int32, spans []group.Span) (key, value []byte) {
	r := record{V: version, Node: node, Spans: make([]wireSpan, len(spans))}
	for i, s := range spans {
		r.Spans[i] = wireSpan{Addr: s.ClientAddr, ClientID: s.ClientID, Topic: s.First.Topic, Partition: s.First.Partition,
			FirstOffset: s.First.Offset, FirstSent: s.First.SentEnd, LogStart: s.First.LogStart,
			FirstAt: s.FirstArrived.UnixMicro(), Offset: s.Offset, Sent: s.SentEnd, AnsweredAt: s.Answered.UnixMicro()}
	}
	value, _ = json.Marshal(r) // of plain fields: it cannot fail
	return []byte(strconv.Itoa(int(node))), value
}

// Decode reads a record's value back.
func Decode(value []byte) (node int32, spans []group.Span, err error) {
	var r record
	if err := json.Unmarshal(value, &r); err != nil {
		return 0, nil, fmt.Errorf("fetch positions record: %w", err)
	}
	if r.V != version {
		return 0, nil, fmt.Errorf("fetch positions record of schema version %d, want %d", r.V, version)
	}
	spans = make([]group.Span, len(r.Spans))
	for i, w := range r.Spans {
		spans[i] = group.Span{ClientAddr: w.Addr, ClientID: w.ClientID,
			First:        group.FetchReport{Topic: w.Topic, Partition: w.Partition, Offset: w.FirstOffset, SentEnd: w.FirstSent, LogStart: w.LogStart},
			FirstArrived: time.UnixMicro(w.FirstAt), Offset: w.Offset, SentEnd: w.Sent, Answered: time.UnixMicro(w.AnsweredAt)}
	}
	return r.Node, spans, nil
}
