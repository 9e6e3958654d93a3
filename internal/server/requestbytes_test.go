package server

import (
	"context"
	"testing"
	"time"
)

// TestByteBudget: a big frame waits until its bytes fit, a small one or
// one alone does not, and a wait ends with its context.
func TestByteBudget(t *testing.T) {
	b := newByteBudget(200 << 10)
	ctx := context.Background()
	if !b.acquire(ctx, 150<<10) {
		t.Fatal("the first frame waited")
	}
	got := make(chan bool, 1)
	go func() { got <- b.acquire(ctx, 100<<10) }()
	select {
	case <-got:
		t.Fatal("a frame past the budget did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	if !b.acquire(ctx, 10<<10) {
		t.Fatal("a small frame waited")
	}
	b.release(150 << 10)
	if !<-got {
		t.Fatal("the waiting frame was not let through")
	}
	b.release(100 << 10)
	b.release(10 << 10)
	if !b.acquire(ctx, 1<<30) {
		t.Fatal("a frame larger than the budget, alone, waited")
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if b.acquire(cctx, 100<<10) {
		t.Fatal("a wait outlived its context")
	}
	if !newByteBudget(0).acquire(ctx, 1<<40) {
		t.Fatal("no bound, yet a wait")
	}
}
