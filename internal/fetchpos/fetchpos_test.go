package fetchpos

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/group"
)

// recorder is an observer and an output that keep what they are given.
type recorder struct {
	mu      sync.Mutex
	fetches int
	records [][2][]byte
}

func (r *recorder) Fetched(string, string, time.Time, time.Time, []group.FetchReport) {
	r.mu.Lock()
	r.fetches++
	r.mu.Unlock()
}

func (r *recorder) Append(key, value []byte) error {
	r.mu.Lock()
	r.records = append(r.records, [2][]byte{key, value})
	r.mu.Unlock()
	return nil
}

func (r *recorder) spans(t *testing.T) []group.Span {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []group.Span
	for _, kv := range r.records {
		node, spans, err := Decode(kv[1])
		if err != nil || node != 7 || string(kv[0]) != "7" {
			t.Fatalf("record %q: node %d, %v", kv, node, err)
		}
		out = append(out, spans...)
	}
	return out
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestPublisherSpans: the coordinator of the broker sees each fetch; the
// record published holds, per client and partition, the first fetch and
// how far the client read; the topic's own reads are left out.
func TestPublisherSpans(t *testing.T) {
	r := &recorder{}
	p := NewPublisher(r, r, 7, time.Hour, quiet)
	t0 := time.UnixMicro(1_000_000)
	t1, t2 := t0.Add(time.Second), t0.Add(2*time.Second)
	p.Fetched("10.0.0.1:5000", "c", t0, t1, []group.FetchReport{{Topic: "t", Partition: 0, Offset: 10, SentEnd: 20, LogStart: 3},
		{Topic: Topic, Partition: 0, Offset: 1, SentEnd: 2}})
	p.Fetched("10.0.0.1:5000", "c", t1, t2, []group.FetchReport{{Topic: "t", Partition: 0, Offset: 20, SentEnd: 35}})
	p.Fetched("10.0.0.1:5001", "c", t1, t1, []group.FetchReport{{Topic: "t", Partition: 0, Offset: 0, SentEnd: 0}})
	p.Close()
	if r.fetches != 3 {
		t.Fatalf("the local coordinator saw %d fetches, want 3", r.fetches)
	}
	spans := r.spans(t)
	if len(r.records) != 1 || len(spans) != 2 {
		t.Fatalf("%d records, spans %+v", len(r.records), spans)
	}
	for _, s := range spans {
		if s.ClientAddr != "10.0.0.1:5000" {
			continue
		}
		want := group.Span{ClientAddr: "10.0.0.1:5000", ClientID: "c",
			First:        group.FetchReport{Topic: "t", Partition: 0, Offset: 10, SentEnd: 20, LogStart: 3},
			FirstArrived: t0, Offset: 20, SentEnd: 35, Answered: t2}
		if !s.FirstArrived.Equal(want.FirstArrived) || !s.Answered.Equal(want.Answered) {
			t.Fatalf("span %+v, want %+v", s, want)
		}
		s.FirstArrived, s.Answered = want.FirstArrived, want.Answered
		if s != want {
			t.Fatalf("span %+v, want %+v", s, want)
		}
		return
	}
	t.Fatalf("no span of 10.0.0.1:5000 in %+v", spans)
}

// TestPublisherKeepsAPartitionInOneRecord: past a record's bound the
// spans are cut between partitions, never within one.
func TestPublisherKeepsAPartitionInOneRecord(t *testing.T) {
	r := &recorder{}
	p := NewPublisher(r, r, 7, time.Hour, quiet)
	now := time.Now()
	for c := range perRecord + 10 {
		p.Fetched("10.0.0.1:5000", string(rune('a'+c%26))+string(rune('a'+c/26)), now, now,
			[]group.FetchReport{{Topic: "t", Partition: int32(c % 3), Offset: 1, SentEnd: 1}})
	}
	p.Close()
	r.mu.Lock()
	n := len(r.records)
	r.mu.Unlock()
	if n < 2 {
		t.Fatalf("%d records, want the spans cut", n)
	}
	inRecord := map[int32]int{}
	for i, kv := range r.records {
		_, spans, _ := Decode(kv[1])
		for _, s := range spans {
			if j, ok := inRecord[s.First.Partition]; ok && j != i {
				t.Fatalf("partition %d in records %d and %d", s.First.Partition, j, i)
			}
			inRecord[s.First.Partition] = i
		}
	}
}

// source serves one partition's records once and then nothing.
type source struct {
	records [][2][]byte
	served  chan struct{}
}

func (s *source) Partitions() int32                         { return 1 }
func (s *source) End(context.Context, int32) (int64, error) { return 5, nil }
func (s *source) Read(ctx context.Context, _ int32, offset int64, fn func(key, value []byte)) (int64, error) {
	if offset == 5 {
		for _, kv := range s.records {
			fn(kv[0], kv[1])
		}
		close(s.served)
		return 6, nil
	}
	<-ctx.Done()
	return offset, errors.New("stopped")
}

// TestFollowerSkipsItsOwn: a follower applies the other brokers' spans,
// not its own broker's.
func TestFollowerSkipsItsOwn(t *testing.T) {
	mine, _ := spanRecord(3)
	theirs, theirValue := spanRecord(4)
	src := &source{records: [][2][]byte{{mine, theirValue}, {theirs, theirValue}}, served: make(chan struct{})}
	var got []group.Span
	f := NewFollower(src, 3, func(s []group.Span) { got = append(got, s...) }, quiet)
	<-src.served
	f.Close()
	if len(got) != 1 || got[0].ClientID != "c4" {
		t.Fatalf("applied %+v, want node 4's one span", got)
	}
}

// spanRecord is a record of one span of client c<node>, written by node.
func spanRecord(node int32) (key, value []byte) {
	return Encode(node, []group.Span{{ClientAddr: "10.0.0.1:5000", ClientID: "c" + string(rune('0'+node)),
		First: group.FetchReport{Topic: "t"}, FirstArrived: time.Now(), Answered: time.Now()}})
}

// TestPublisherConcurrentFetches: fetches go on while the publisher
// flushes (run with -race).
func TestPublisherConcurrentFetches(t *testing.T) {
	r := &recorder{}
	p := NewPublisher(r, r, 7, time.Millisecond, quiet)
	var wg sync.WaitGroup
	for c := range 2 {
		wg.Go(func() {
			for i := range 2000 {
				now := time.Now()
				p.Fetched("10.0.0.1:5000", string(rune('a'+c)), now, now,
					[]group.FetchReport{{Topic: "t", Partition: int32(i % 4), Offset: int64(i), SentEnd: int64(i)}})
				if i%100 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	p.Close()
	if r.fetches != 4000 || len(r.spans(t)) == 0 {
		t.Fatalf("%d fetches seen, %d spans published", r.fetches, len(r.spans(t)))
	}
}

type discard struct{}

func (discard) Fetched(string, string, time.Time, time.Time, []group.FetchReport) {}
func (discard) Append([]byte, []byte) error                                       { return nil }

// BenchmarkPublisherFetched is what publishing adds to one answer to a
// consumer's fetch of 8 partitions.
func BenchmarkPublisherFetched(b *testing.B) {
	p := NewPublisher(discard{}, discard{}, 7, fetchInterval, quiet)
	defer p.Close()
	reports := make([]group.FetchReport, 8)
	for i := range reports {
		reports[i] = group.FetchReport{Topic: "orders", Partition: int32(i), Offset: 100, SentEnd: 200}
	}
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range reports {
			reports[j].Offset, reports[j].SentEnd = int64(i), int64(i+50)
		}
		p.Fetched("10.0.0.1:5000", "orders-1", now, now, reports)
	}
}

const fetchInterval = 100 * time.Millisecond
