package share

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var (
	t0     = time.Unix(1_800_000_000, 0)
	limits = Limits{DeliveryLimit: 3, MaxInFlight: 100, LockDuration: 30 * time.Second}
)

func whole(first, last int64) []Range { return []Range{{first, last}} }

func wantAcquired(t *testing.T, got []AcquiredRecords, want ...AcquiredRecords) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("acquired %+v, want %+v", got, want)
	}
}

func wantState(t *testing.T, p *Partition, o int64, st State, deliveries int16) {
	t.Helper()
	if gs, gd := p.StateOf(o); gs != st || gd != deliveries {
		t.Fatalf("offset %d: %v after %d deliveries, want %v after %d", o, gs, gd, st, deliveries)
	}
}

func TestAcquireAndAccept(t *testing.T) {
	p := New(10, limits)
	if o, ok := p.NextFetchOffset(t0); o != 10 || !ok {
		t.Fatalf("next fetch %d %v", o, ok)
	}
	// Offsets before the start are done with; at most maxRecords are taken.
	wantAcquired(t, p.Acquire("a", whole(5, 19), 4, t0), AcquiredRecords{10, 13, 1})
	wantAcquired(t, p.Acquire("b", whole(14, 19), 100, t0), AcquiredRecords{14, 19, 1})
	if p.AcquiredCount() != 10 || p.End() != 20 || p.HolderOf(12) != "a" || p.HolderOf(15) != "b" {
		t.Fatalf("acquired %d, end %d, holders %q %q", p.AcquiredCount(), p.End(), p.HolderOf(12), p.HolderOf(15))
	}
	// Nothing is available in the window: the next read starts at its end.
	if o, ok := p.NextFetchOffset(t0); o != 20 || !ok {
		t.Fatalf("next fetch %d %v", o, ok)
	}
	// b accepts first: the start waits for a's records.
	if err := p.Acknowledge("b", 14, 19, []AckType{AckAccept}, t0); err != nil {
		t.Fatal(err)
	}
	if p.Start() != 10 {
		t.Fatalf("start %d", p.Start())
	}
	if err := p.Acknowledge("a", 10, 13, []AckType{AckAccept}, t0); err != nil {
		t.Fatal(err)
	}
	if p.Start() != 20 || p.InFlight() != 0 || p.AcquiredCount() != 0 {
		t.Fatalf("start %d, in flight %d, acquired %d", p.Start(), p.InFlight(), p.AcquiredCount())
	}
}

func TestAcknowledgeRefusals(t *testing.T) {
	p := New(0, limits)
	p.Acquire("a", whole(0, 4), 10, t0)
	for _, tc := range []struct {
		name        string
		member      string
		first, last int64
		types       []AckType
	}{
		{"another member's records", "b", 0, 1, []AckType{AckAccept}},
		{"past the window", "a", 3, 6, []AckType{AckAccept}},
		{"an unknown type", "a", 0, 0, []AckType{9}},
		{"types not one per offset", "a", 0, 2, []AckType{AckAccept, AckAccept}},
		{"an empty range", "a", 3, 2, []AckType{AckAccept}},
	} {
		if err := p.Acknowledge(tc.member, tc.first, tc.last, tc.types, t0); !errors.Is(err, ErrInvalidRecordState) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// A refused acknowledgement changes nothing, even for offsets it
	// names that the member holds.
	for o := int64(0); o <= 4; o++ {
		wantState(t, p, o, Acquired, 1)
	}
	if err := p.Acknowledge("a", 0, 4, []AckType{AckAccept, AckAccept, AckRelease, AckReject, AckGap}, t0); err != nil {
		t.Fatal(err)
	}
	// Twice is refused: the records are no longer held.
	if err := p.Acknowledge("a", 0, 0, []AckType{AckAccept}, t0); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("accepted twice: %v", err)
	}
	if p.Start() != 2 {
		t.Fatalf("start %d, want 2 (offset 2 released)", p.Start())
	}
	wantState(t, p, 2, Available, 1)
	wantState(t, p, 3, Archived, 1)
	wantState(t, p, 4, Archived, 1)
}

func TestReleaseRedeliversUpToTheLimit(t *testing.T) {
	p := New(0, limits)
	for delivery := int16(1); delivery <= 3; delivery++ {
		member := []string{"a", "b", "c"}[delivery-1]
		if o, ok := p.NextFetchOffset(t0); o != 0 || !ok {
			t.Fatalf("delivery %d: next fetch %d %v", delivery, o, ok)
		}
		wantAcquired(t, p.Acquire(member, whole(0, 1), 10, t0), AcquiredRecords{0, 1, delivery})
		if err := p.Acknowledge(member, 0, 1, []AckType{AckRelease}, t0); err != nil {
			t.Fatal(err)
		}
	}
	// The third release reached share.delivery.count.limit: given up.
	wantState(t, p, 0, Acknowledged, 0) // before the start
	if p.Start() != 2 {
		t.Fatalf("start %d", p.Start())
	}
}

func TestLockExpiry(t *testing.T) {
	p := New(0, limits)
	p.Acquire("a", whole(0, 2), 10, t0)
	if d, ok := p.NextDeadline(); !ok || !d.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("deadline %v %v", d, ok)
	}
	// a renews offset 1's lock just before it runs out.
	if err := p.Acknowledge("a", 1, 1, []AckType{AckRenew}, t0.Add(29*time.Second)); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(30 * time.Second)
	if !p.Expire(later) {
		t.Fatal("no lock expired")
	}
	wantState(t, p, 0, Available, 1)
	wantState(t, p, 1, Acquired, 1)
	// An acknowledgement after the lock ran out is refused, checked or not.
	if err := p.Acknowledge("a", 2, 2, []AckType{AckAccept}, later); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("late accept: %v", err)
	}
	wantAcquired(t, p.Acquire("b", whole(0, 2), 10, later), AcquiredRecords{0, 0, 2}, AcquiredRecords{2, 2, 2})
	if err := p.Acknowledge("a", 1, 1, []AckType{AckAccept}, later); err != nil {
		t.Fatalf("the renewed lock: %v", err)
	}
	// The member's records go back when it leaves.
	if n := p.ReleaseMember("b"); n != 2 {
		t.Fatalf("released %d", n)
	}
	wantState(t, p, 0, Available, 2)
	if _, ok := p.NextDeadline(); ok {
		t.Fatal("a deadline with nothing held")
	}
}

func TestGapsAndWindow(t *testing.T) {
	p := New(0, Limits{DeliveryLimit: 5, MaxInFlight: 6, LockDuration: time.Minute})
	// Offsets 2-3 hold no record (a control batch, compacted records):
	// archived as they are passed, and the window is full at 6.
	wantAcquired(t, p.Acquire("a", []Range{{0, 1}, {4, 9}}, 100, t0), AcquiredRecords{0, 1, 1}, AcquiredRecords{4, 5, 1})
	wantState(t, p, 2, Archived, 0)
	if o, ok := p.NextFetchOffset(t0); o != 6 || ok {
		t.Fatalf("next fetch %d %v, want 6 and a full window", o, ok)
	}
	if err := p.Acknowledge("a", 0, 1, []AckType{AckAccept}, t0); err != nil {
		t.Fatal(err)
	}
	// The start passes the archived gap: room for four more.
	if p.Start() != 4 {
		t.Fatalf("start %d", p.Start())
	}
	wantAcquired(t, p.Acquire("a", whole(6, 20), 100, t0), AcquiredRecords{6, 9, 1})
	// Aborted records are archived, never delivered.
	if err := p.Acknowledge("a", 4, 9, []AckType{AckAccept}, t0); err != nil {
		t.Fatal(err)
	}
	p.Archive(10, 12)
	wantAcquired(t, p.Acquire("a", whole(10, 14), 100, t0), AcquiredRecords{13, 14, 1})
	// Retention took records in flight: they are gone, held or not.
	p.MoveStart(14)
	if p.Start() != 14 || p.AcquiredCount() != 1 {
		t.Fatalf("start %d, acquired %d", p.Start(), p.AcquiredCount())
	}
}

func TestStateBatchesRestore(t *testing.T) {
	p := New(100, limits)
	p.Acquire("a", whole(100, 109), 100, t0)
	p.Acknowledge("a", 102, 104, []AckType{AckAccept}, t0)
	p.Acknowledge("a", 105, 105, []AckType{AckReject}, t0)
	p.Acknowledge("a", 106, 107, []AckType{AckRelease}, t0)
	got := p.StateBatches()
	want := []StateBatch{{100, 101, Available, 1}, {102, 104, Acknowledged, 1}, {105, 105, Archived, 1},
		{106, 109, Available, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("batches %+v, want %+v", got, want)
	}
	// Restored elsewhere, what was held is delivered again, counted.
	q := Restore(100, got, limits)
	if q.Start() != 100 || q.End() != 110 || q.AcquiredCount() != 0 {
		t.Fatalf("restored start %d end %d acquired %d", q.Start(), q.End(), q.AcquiredCount())
	}
	wantAcquired(t, q.Acquire("b", whole(100, 115), 100, t0),
		AcquiredRecords{100, 101, 2}, AcquiredRecords{106, 109, 2}, AcquiredRecords{110, 115, 1})
	// A persisted start past done batches moves on.
	if r := Restore(0, []StateBatch{{0, 4, Acknowledged, 1}, {5, 5, Available, 2}}, limits); r.Start() != 5 {
		t.Fatalf("restored start %d", r.Start())
	}
}

// TestRandomMembers runs members that acquire, accept, release, reject,
// renew and go silent at random, and checks the account: every offset
// before the final start accepted exactly once or archived, never held by
// two members at once, delivered no more than the limit.
func TestRandomMembers(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		l := Limits{DeliveryLimit: 4, MaxInFlight: 30, LockDuration: 10 * time.Second}
		p := New(0, l)
		const logEnd = 400
		now := t0
		type held struct {
			member string
			until  time.Time
		}
		holder := map[int64]held{}
		accepted, rejected, deliveries := map[int64]int{}, map[int64]bool{}, map[int64]int{}
		members := []string{"a", "b", "c", "d", "e"}
		for step := 0; step < 20000 && p.Start() < logEnd; step++ {
			now = now.Add(time.Duration(rng.IntN(800)) * time.Millisecond)
			m := members[rng.IntN(len(members))]
			// Locks that ran out are no one's.
			for o, h := range holder {
				if !now.Before(h.until) {
					delete(holder, o)
				}
			}
			from, ok := p.NextFetchOffset(now)
			if !ok && p.AcquiredCount() == 0 {
				t.Fatalf("seed %d: stuck at start %d with nothing held", seed, p.Start())
			}
			if rng.IntN(3) == 0 && from < logEnd {
				for _, a := range p.Acquire(m, whole(from, logEnd-1), 1+rng.IntN(8), now) {
					for o := a.First; o <= a.Last; o++ {
						if h, taken := holder[o]; taken {
							t.Fatalf("seed %d: offset %d given to %s while %s holds it", seed, o, m, h.member)
						}
						deliveries[o]++
						if int(a.Deliveries) != deliveries[o] {
							t.Fatalf("seed %d: offset %d delivery %d, counted %d", seed, o, a.Deliveries, deliveries[o])
						}
						holder[o] = held{m, now.Add(l.LockDuration)}
					}
				}
				continue
			}
			var mine []int64
			for o, h := range holder {
				if h.member == m {
					mine = append(mine, o)
				}
			}
			if len(mine) == 0 {
				continue
			}
			o := mine[rng.IntN(len(mine))]
			typ := []AckType{AckAccept, AckAccept, AckAccept, AckRelease, AckReject, AckRenew}[rng.IntN(6)]
			if err := p.Acknowledge(m, o, o, []AckType{typ}, now); err != nil {
				t.Fatalf("seed %d: %s acknowledging %d it holds: %v", seed, m, o, err)
			}
			switch typ {
			case AckAccept:
				accepted[o]++
				delete(holder, o)
			case AckReject:
				rejected[o] = true
				delete(holder, o)
			case AckRelease:
				delete(holder, o)
			case AckRenew:
				holder[o] = held{m, now.Add(l.LockDuration)}
			}
		}
		if p.Start() < logEnd {
			t.Fatalf("seed %d: start %d after the steps", seed, p.Start())
		}
		for o := int64(0); o < logEnd; o++ {
			switch {
			case deliveries[o] > int(l.DeliveryLimit):
				t.Fatalf("seed %d: offset %d delivered %d times", seed, o, deliveries[o])
			case accepted[o] > 1 || (accepted[o] == 1 && rejected[o]):
				t.Fatalf("seed %d: offset %d accepted %d times, rejected %v", seed, o, accepted[o], rejected[o])
			case accepted[o] == 0 && !rejected[o] && deliveries[o] < int(l.DeliveryLimit):
				t.Fatalf("seed %d: offset %d done with after %d deliveries, neither accepted nor rejected", seed, o, deliveries[o])
			}
		}
	}
}
