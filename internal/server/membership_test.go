package server

import (
	"testing"
	"time"
)

// A broker that has not heard from the quorum's leader yet counts its
// silence from its start, not from the zero time: otherwise a broker caught
// up from its own log would give up its partitions on the first check.
func TestQuorumSilence(t *testing.T) {
	started := time.Unix(1000, 0)
	now := started.Add(2 * time.Second)
	if got := quorumSilence(time.Time{}, started, now); got != 2*time.Second {
		t.Fatalf("before any contact: %v, want 2s", got)
	}
	if got := quorumSilence(now.Add(-300*time.Millisecond), started, now); got != 300*time.Millisecond {
		t.Fatalf("after contact: %v, want 300ms", got)
	}
}
