package testutil

import (
	"testing"
	"time"
)

// Eventually waits until cond returns nil, asking it every 10 ms for up to
// timeout, and fails the test with cond's last error if it never does.
// Tests wait for conditions with it instead of sleeping.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	EventuallyEvery(t, timeout, 10*time.Millisecond, cond)
}

// EventuallyEvery is Eventually asking cond every interval: for a
// condition that costs a process or a page load to ask.
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}
