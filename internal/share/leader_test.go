package share

import (
	"errors"
	"slices"
	"testing"
)

func TestShareSessions(t *testing.T) {
	l := NewLeader(2)
	a, b, c := SessionKey{"g", "a"}, SessionKey{"g", "b"}, SessionKey{"g", "c"}
	if _, err := l.Session(a, 1, "conn-1"); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("no session yet: %v", err)
	}
	s, err := l.Session(a, 0, "conn-1")
	if err != nil || s.Epoch != 1 {
		t.Fatalf("open: %+v %v", s, err)
	}
	p0, p1 := Key{"g", [16]byte{1}, 0}, Key{"g", [16]byte{1}, 1}
	if got := l.SetPartitions(a, []Key{p0, p1}, nil); !slices.Equal(got, []Key{p0, p1}) {
		t.Fatalf("partitions %v", got)
	}
	if _, err := l.Session(a, 2, "conn-1"); !errors.Is(err, ErrInvalidSessionEpoch) {
		t.Fatalf("a skipped epoch: %v", err)
	}
	if s, err := l.Session(a, 1, "conn-1"); err != nil || s.Epoch != 2 || len(s.Partitions) != 2 {
		t.Fatalf("next: %+v %v", s, err)
	}
	if got := l.SetPartitions(a, nil, []Key{p0}); !slices.Equal(got, []Key{p1}) {
		t.Fatalf("after forgetting: %v", got)
	}
	// A partition named (for its acknowledgements) and forgotten in one
	// request is not kept.
	if got := l.SetPartitions(a, []Key{p0, p1}, []Key{p0}); !slices.Equal(got, []Key{p1}) {
		t.Fatalf("named and forgotten: %v", got)
	}
	// The limit counts open sessions; a member's new session replaces
	// its last.
	if _, err := l.Session(b, 0, "conn-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Session(c, 0, "conn-1"); !errors.Is(err, ErrSessionLimit) {
		t.Fatalf("a third session: %v", err)
	}
	if s, err := l.Session(a, 0, "conn-1"); err != nil || s.Epoch != 1 || len(s.Partitions) != 0 {
		t.Fatalf("reopened: %+v %v", s, err)
	}
	// The last request names the session's partitions; closing it frees
	// a place.
	l.SetPartitions(a, []Key{p1}, nil)
	if s, err := l.Session(a, -1, "conn-1"); err != nil || s.Epoch != -1 || !slices.Equal(s.Partitions, []Key{p1}) {
		t.Fatalf("final: %+v %v", s, err)
	}
	if got := l.CloseSession(a); !slices.Equal(got, []Key{p1}) || l.SessionCount() != 1 {
		t.Fatalf("closed %v, %d left", got, l.SessionCount())
	}
	// A closed connection ends the sessions whose last request it
	// carried.
	if _, err := l.Session(a, 0, "conn-2"); err != nil {
		t.Fatal(err)
	}
	l.SetPartitions(a, []Key{p0}, nil)
	if gone := l.ConnectionClosed("conn-2"); len(gone) != 1 || !slices.Equal(gone[a], []Key{p0}) || l.SessionCount() != 1 {
		t.Fatalf("connection closed: %v, %d sessions left", gone, l.SessionCount())
	}
	if _, err := l.Session(a, 1, "conn-2"); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("after its connection closed: %v", err)
	}
}

func TestSharePartitionsHeld(t *testing.T) {
	l := NewLeader(10)
	k := Key{"g", [16]byte{1}, 0}
	if l.Get(k) != nil {
		t.Fatal("a share-partition before any")
	}
	sp := l.GetOrAdd(k, New(5, limits), 1)
	if again := l.GetOrAdd(k, New(9, limits), 1); again != sp || again.P.Start() != 5 {
		t.Fatal("a second share-partition for one key")
	}
	// Led again at another epoch, the state is read again.
	if again := l.GetOrAdd(k, New(9, limits), 2); again == sp || again.P.Start() != 9 {
		t.Fatal("the share-partition of an older leader epoch kept")
	}
	l.GetOrAdd(Key{"h", [16]byte{1}, 0}, New(0, limits), 1)
	l.Drop(func(k Key) bool { return k.Group != "g" })
	if keys := l.Keys(); len(keys) != 1 || keys[0].Group != "h" {
		t.Fatalf("kept %v", keys)
	}
}
