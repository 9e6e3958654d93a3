package ledger

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/model"
)

// entries decodes every record appended to p.
func entries(t *testing.T, p *coordinator.MemPartition) []Entry {
	t.Helper()
	var out []Entry
	for _, b := range p.Batches() {
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

type fakeTopic struct{ parts []Appender }

func (f fakeTopic) Writable() ([]Appender, error) { return f.parts, nil }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func entry(group string, partition int32) Entry {
	return Entry{Type: TypeHandoff, Time: time.UnixMilli(1_700_000_000_000).UTC(), Group: group, Topic: "t", Partition: partition,
		To: Member{MemberID: "m", ClientID: "c", Host: "/10.0.0.1"}, Committed: 5, LastFetched: -1, LastSent: -1, FirstFetched: 5}
}

// TestWriterPartitions: entries go to their group's partition when it is
// writable, else to the next writable one; Close writes what is queued.
func TestWriterPartitions(t *testing.T) {
	own := model.CoordinatorPartition("orders", 3)
	parts := make([]*coordinator.MemPartition, 3)
	leading := make([]Appender, 3)
	for i := range parts {
		parts[i] = &coordinator.MemPartition{}
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
	next := entries(t, parts[(own+1)%3])
	if len(next) != 10 || next[3].Partition != 3 || next[0].V != Version || next[0].Group != "orders" {
		t.Fatalf("the next writable partition got %+v", next)
	}
	w.Record(entry("orders", 0)) // after Close: dropped
	if w.Dropped() != 1 {
		t.Fatalf("dropped %d after Close", w.Dropped())
	}

	// Its own partition when writable.
	leading[own] = parts[own]
	w = NewWriter(fakeTopic{leading}, quiet())
	w.Record(entry("orders", 0))
	w.Close()
	if got := entries(t, parts[own]); len(got) != 1 {
		t.Fatalf("its own partition got %d entries", len(got))
	}
}

// TestWriterNeverBlocks: with the topic stuck, Record returns at once and
// counts what the full queue cannot take.
func TestWriterNeverBlocks(t *testing.T) {
	stuck, gate := &coordinator.MemPartition{}, make(chan struct{})
	stuck.HoldAppends(gate)
	w := NewWriter(fakeTopic{[]Appender{stuck}}, quiet())
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
	close(gate)
	w.Close()
	if w.Written()+w.Dropped() != queueSize+batchSize+10 {
		t.Fatalf("written %d + dropped %d != recorded %d", w.Written(), w.Dropped(), queueSize+batchSize+10)
	}
}

// TestWriterFailures: a failed append is counted, not retried for ever.
func TestWriterFailures(t *testing.T) {
	bad := &coordinator.MemPartition{}
	bad.FailAppends(coordinator.ErrNotLeader)
	w := newWriter(fakeTopic{[]Appender{bad}}, quiet(), time.Millisecond)
	w.Record(entry("g", 0))
	w.Close()
	if w.Failed() != 1 || w.Written() != 0 {
		t.Fatalf("failed %d, written %d", w.Failed(), w.Written())
	}
	// A partition that refuses twice (its replica not made yet on its
	// leader) takes the entries at the third try.
	flaky := &refusing{n: 2, p: &coordinator.MemPartition{}}
	w = newWriter(fakeTopic{[]Appender{flaky}}, quiet(), time.Millisecond)
	w.Record(entry("g", 0))
	w.Close()
	if w.Failed() != 0 || w.Written() != 1 || len(entries(t, flaky.p)) != 1 {
		t.Fatalf("after two refusals: failed %d, written %d", w.Failed(), w.Written())
	}
	// A write that may be in the log (durable here, not confirmed by
	// every in-sync replica) is not tried again: the entries would be
	// there twice.
	unconfirmed := &refusing{n: 1, err: coordinator.ErrNotReplicated, p: &coordinator.MemPartition{}}
	w = newWriter(fakeTopic{[]Appender{unconfirmed}}, quiet(), time.Millisecond)
	w.Record(entry("g", 0))
	w.Close()
	if w.Failed() != 1 || w.Written() != 0 || len(entries(t, unconfirmed.p)) != 0 {
		t.Fatalf("after an unconfirmed write: failed %d, written %d", w.Failed(), w.Written())
	}
	none := newWriter(fakeTopic{[]Appender{nil, nil}}, quiet(), time.Millisecond)
	none.Record(entry("g", 0))
	none.Close()
	if none.Failed() != 1 {
		t.Fatalf("with no partition writable: failed %d", none.Failed())
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

// refusing fails its first n appends with err (ErrNotLeader when nil),
// then appends to p.
type refusing struct {
	n   int
	err error
	p   *coordinator.MemPartition
}

func (r *refusing) Append(batch []byte) (int64, func() error, error) {
	if r.n > 0 {
		r.n--
		if r.err != nil {
			return -1, nil, r.err
		}
		return -1, nil, coordinator.ErrNotLeader
	}
	return r.p.Append(batch)
}
