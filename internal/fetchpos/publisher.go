package fetchpos

import (
	"cmp"
	"log/slog"
	"slices"
	"time"

	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/lockrank"
)

// Output is where a publisher's records go: a partition of Topic that
// this broker leads.
type Output interface {
	Append(key, value []byte) error
}

// maxSpans bounds the spans of one interval; past it, new clients and
// partitions wait for the next interval (their reads are not lost, only
// their first fetch's position). perRecord bounds a record's spans, which
// keeps it well under a broker's largest message.
const (
	maxSpans  = 20_000
	perRecord = 2_000
)

// Publisher is the fetch observer of a broker in a cluster: its own
// coordinator sees each fetch at once, and the other brokers' see the
// interval's spans once they are published.
type Publisher struct {
	local    group.FetchObserver
	out      Output
	node     int32
	interval time.Duration
	logger   *slog.Logger

	mu    lockrank.Mutex[lockrank.Leaf]
	spans map[spanKey]*group.Span

	stop, done chan struct{}
	lastWarn   time.Time
}

type spanKey struct {
	addr, clientID, topic string
	partition             int32
}

// NewPublisher publishes node's spans to out every interval, and tells
// local of each fetch.
func NewPublisher(local group.FetchObserver, out Output, node int32, interval time.Duration, logger *slog.Logger) *Publisher {
	p := &Publisher{local: local, out: out, node: node, interval: interval, logger: logger,
		spans: map[spanKey]*group.Span{}, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// Fetched implements group.FetchObserver.
func (p *Publisher) Fetched(clientAddr, clientID string, arrived, answered time.Time, reports []group.FetchReport) {
	p.local.Fetched(clientAddr, clientID, arrived, answered, reports)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range reports {
		if f.Topic == Topic {
			continue
		}
		k := spanKey{clientAddr, clientID, f.Topic, f.Partition}
		s, ok := p.spans[k]
		if !ok {
			if len(p.spans) >= maxSpans {
				continue
			}
			p.spans[k] = &group.Span{ClientAddr: clientAddr, ClientID: clientID, First: f, FirstArrived: arrived,
				Offset: f.Offset, SentEnd: f.SentEnd, Answered: answered}
			continue
		}
		s.Offset, s.SentEnd = max(s.Offset, f.Offset), max(s.SentEnd, f.SentEnd)
		if answered.After(s.Answered) {
			s.Answered = answered
		}
	}
}

func (p *Publisher) run() {
	defer close(p.done)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.flush()
		case <-p.stop:
			p.flush()
			return
		}
	}
}

// flush publishes the interval's spans.
func (p *Publisher) flush() {
	p.mu.Lock()
	taken := p.spans
	if len(taken) == 0 {
		p.mu.Unlock()
		return
	}
	p.spans = make(map[spanKey]*group.Span, len(taken))
	p.mu.Unlock()
	spans := make([]group.Span, 0, len(taken))
	for _, s := range taken {
		spans = append(spans, *s)
	}
	// A partition's spans go in one record: the coordinator takes a
	// record's reads before its first fetches.
	slices.SortFunc(spans, func(a, b group.Span) int {
		return cmp.Or(cmp.Compare(a.First.Topic, b.First.Topic), cmp.Compare(a.First.Partition, b.First.Partition))
	})
	for len(spans) > 0 {
		n := min(len(spans), perRecord)
		for n < len(spans) && n > 1 && samePartition(spans[n-1], spans[n]) {
			n--
		}
		if n == 1 && len(spans) > 1 && samePartition(spans[0], spans[1]) {
			n = min(len(spans), perRecord) // one partition's spans beyond a record
		}
		k, v := Encode(p.node, spans[:n])
		if err := p.out.Append(k, v); err != nil && time.Since(p.lastWarn) > 10*time.Second {
			p.lastWarn = time.Now()
			p.logger.Warn("publishing fetch positions failed: hand-offs coordinated elsewhere lack these reads",
				"spans", len(spans), "err", err)
		}
		spans = spans[n:]
	}
}

func samePartition(a, b group.Span) bool {
	return a.First.Topic == b.First.Topic && a.First.Partition == b.First.Partition
}

// Close publishes what is gathered and stops.
func (p *Publisher) Close() {
	close(p.stop)
	<-p.done
}
