package ledger

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// fakePartition keeps the batches appended to it.
type fakePartition struct {
	mu      sync.Mutex
	batches [][]byte
	block   chan struct{} // when set, Append waits for it
	err     error
}

func (p *fakePartition) Append(batch []byte) (func() error, error) {
	if p.block != nil {
		<-p.block
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	p.batches = append(p.batches, batch)
	return func() error { return nil }, nil
}

// entries decodes every record appended to p.
func (p *fakePartition) entries(t *testing.T) []Entry {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Entry
	for _, b := range p.batches {
		err := model.EachRecord(model.Batch(b), func(_ int64, key, value []byte) {
			e, err := Decode(value)
			if err != nil {
				t.Error(err)
				return
			}
			if string(key) != e.Group {
				t.Errorf("key %q for group %q", key, e.Group)
			}
			out = append(out, e)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

type fakeTopic struct{ parts []Partition }

func (f fakeTopic) Leading() ([]Partition, error) { return f.parts, nil }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func entry(group string, partition int32) Entry {
	return Entry{Type: TypeHandoff, Time: time.UnixMilli(1_700_000_000_000).UTC(), Group: group, Topic: "t", Partition: partition,
		To: Member{MemberID: "m", ClientID: "c", Host: "/10.0.0.1"}, Committed: 5, LastFetched: -1, LastSent: -1, FirstFetched: 5}
}

// TestWriterPartitions: entries go to their group's partition when it is
// led here, else to another led here; Close writes what is queued.
func TestWriterPartitions(t *testing.T) {
	own := model.CoordinatorPartition("orders", 3)
	parts := make([]*fakePartition, 3)
	leading := make([]Partition, 3)
	for i := range parts {
		parts[i] = &fakePartition{}
		if int32(i) != own {
			leading[i] = parts[i]
		}
	}
	w := NewWriter(fakeTopic{leading}, quiet())
	for i := range 10 {
		w.Record(entry("orders", int32(i)))
	}
	w.Close()
	if w.Written() != 10 || w.Dropped() != 0 || w.Failed() != 0 {
		t.Fatalf("written %d, dropped %d, failed %d", w.Written(), w.Dropped(), w.Failed())
	}
	next := parts[(own+1)%3].entries(t)
	if len(next) != 10 || next[3].Partition != 3 || next[0].V != Version || next[0].Group != "orders" {
		t.Fatalf("the next partition led here got %+v", next)
	}
	w.Record(entry("orders", 0)) // after Close: dropped
	if w.Dropped() != 1 {
		t.Fatalf("dropped %d after Close", w.Dropped())
	}

	// Its own partition when led here.
	leading[own] = parts[own]
	w = NewWriter(fakeTopic{leading}, quiet())
	w.Record(entry("orders", 0))
	w.Close()
	if got := parts[own].entries(t); len(got) != 1 {
		t.Fatalf("its own partition got %d entries", len(got))
	}
}

// TestWriterNeverBlocks: with the topic stuck, Record returns at once and
// counts what the full queue cannot take.
func TestWriterNeverBlocks(t *testing.T) {
	stuck := &fakePartition{block: make(chan struct{})}
	w := NewWriter(fakeTopic{[]Partition{stuck}}, quiet())
	start := time.Now()
	for i := range queueSize + batchSize + 10 {
		w.Record(entry("g", int32(i)))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Record took %v with the topic stuck", d)
	}
	if w.Dropped() == 0 {
		t.Fatal("nothing dropped with the queue full")
	}
	close(stuck.block)
	w.Close()
	if w.Written()+w.Dropped() != queueSize+batchSize+10 {
		t.Fatalf("written %d + dropped %d != recorded %d", w.Written(), w.Dropped(), queueSize+batchSize+10)
	}
}

// TestWriterFailures: a failed append is counted, not retried for ever.
func TestWriterFailures(t *testing.T) {
	bad := &fakePartition{err: errors.New("not the leader")}
	w := NewWriter(fakeTopic{[]Partition{bad}}, quiet())
	w.Record(entry("g", 0))
	w.Close()
	if w.Failed() != 1 || w.Written() != 0 {
		t.Fatalf("failed %d, written %d", w.Failed(), w.Written())
	}
	none := NewWriter(fakeTopic{[]Partition{nil, nil}}, quiet())
	none.Record(entry("g", 0))
	none.Close()
	if none.Failed() != 1 {
		t.Fatalf("with no partition led here: failed %d", none.Failed())
	}
}

// TestEntryRoundTrip: an entry reads back as written, and a value that is
// not an entry is refused.
func TestEntryRoundTrip(t *testing.T) {
	e := entry("g", 4)
	at := time.UnixMilli(1_700_000_000_500).UTC()
	e.From, e.LastFetchedAt = &Member{MemberID: "old", ClientID: "c0", Host: "/10.0.0.2", SoftwareName: "apache-kafka-java", SoftwareVersion: "4.4.0"}, &at
	k, v := e.Encode()
	got, err := Decode(v)
	if err != nil {
		t.Fatal(err)
	}
	e.V = Version
	if string(k) != "g" || got.From == nil || *got.From != *e.From || !got.LastFetchedAt.Equal(at) || got.To != e.To || got.Partition != 4 {
		t.Fatalf("read back %+v from %s", got, v)
	}
	for _, bad := range []string{`{}`, `[1]`, `{"v":1}`, `not json`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%s decoded as an entry", bad)
		}
	}
}
