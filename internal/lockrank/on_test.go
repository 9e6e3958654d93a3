//go:build lockrank

package lockrank

import (
	"strings"
	"testing"
)

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, want) {
			t.Errorf("panic %v, want one saying %q", r, want)
		}
	}()
	f()
}

func TestOrderChecked(t *testing.T) {
	var part Mutex[Partition]
	var log RWMutex[Log]
	var meta RWMutex[Metadata]

	// In order, and again after letting go.
	for range 2 {
		part.Lock()
		log.RLock()
		meta.Lock()
		meta.Unlock()
		log.RUnlock()
		part.Unlock()
	}

	// Out of order: the partition's lock under the log's.
	log.Lock()
	mustPanic(t, "taking a Partition lock while holding a Log lock: LOCKS.md orders Partition before Log", part.Lock)
	log.Unlock()

	// One rank never nests with itself.
	var other Mutex[Partition]
	part.Lock()
	mustPanic(t, "locks of one rank never nest", other.Lock)
	part.Unlock()

	// A try cannot wait, so it is not checked, but what it takes is held.
	log.Lock()
	if !part.TryLock() {
		t.Fatal("TryLock of a free lock failed")
	}
	part.Unlock()
	log.Unlock()
	if ok := meta.TryRLock(); !ok {
		t.Fatal("TryRLock of a free lock failed")
	}
	mustPanic(t, "taking a Log lock while holding a Metadata lock", log.RLock)
	meta.RUnlock()

	// Another goroutine holds nothing of this one's.
	log.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		part.Lock()
		part.Unlock()
	}()
	<-done
	log.Unlock()
}

func TestLeavesTakeNothing(t *testing.T) {
	var leaf Mutex[Leaf]
	var meta RWMutex[Metadata]
	var history Mutex[History]
	var ledger RWMutex[LedgerWriter]

	// A chain down to a leaf is in order.
	history.Lock()
	ledger.RLock()
	ledger.RUnlock()
	history.Unlock()

	// Under a leaf nothing is taken, even a lock ranked after it.
	leaf.Lock()
	mustPanic(t, "taking a Metadata lock while holding a Leaf lock: Leaf is a leaf", meta.RLock)
	leaf.Unlock()
	ledger.Lock()
	mustPanic(t, "LedgerWriter is a leaf", leaf.Lock)
	ledger.Unlock()
}
