package testutil

import (
	"testing"
	"time"
)

// Eventually waits until cond holds (returns nil), asking it again every
// 50 ms, and fails the test with cond's last error if it does not hold
// within timeout. It is the one way tests wait for a condition: no sleeps,
// and no assertion retried until it happens to pass.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", timeout, err)
		}
		<-tick.C
	}
}
