package server

import (
	"testing"
	"time"
)

// TestWarnLimiter: one warning per kind and client host per warnEvery,
// with the count of those left out given on the next one.
func TestWarnLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newWarnLimiter(func() time.Time { return now })
	if ok, left := l.allow("bad", "10.0.0.1"); !ok || left != 0 {
		t.Fatalf("first: %v %d", ok, left)
	}
	for range 5 {
		if ok, _ := l.allow("bad", "10.0.0.1"); ok {
			t.Fatal("a repeat within warnEvery was logged")
		}
	}
	if ok, _ := l.allow("bad", "10.0.0.2"); !ok {
		t.Fatal("another host's warning was held back")
	}
	if ok, _ := l.allow("other", "10.0.0.1"); !ok {
		t.Fatal("another warning of the host was held back")
	}
	now = now.Add(warnEvery)
	if ok, left := l.allow("bad", "10.0.0.1"); !ok || left != 5 {
		t.Fatalf("after warnEvery: %v, %d left out (want 5)", ok, left)
	}
	if ok, _ := l.allow("bad", "10.0.0.1"); ok {
		t.Fatal("a repeat right after was logged")
	}
}
