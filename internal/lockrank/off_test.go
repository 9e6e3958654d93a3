//go:build !lockrank

package lockrank

import "testing"

// Built without the tag, a ranked lock is the sync one: it locks, and
// nothing is checked.
func TestUnchecked(t *testing.T) {
	var log RWMutex[Log]
	var part Mutex[Partition]
	log.Lock()
	part.Lock() // out of order, unchecked
	if part.TryLock() {
		t.Fatal("TryLock of a held mutex succeeded")
	}
	part.Unlock()
	log.Unlock()
	if Checked {
		t.Fatal("Checked without the lockrank tag")
	}
}
