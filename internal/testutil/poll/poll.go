// Package poll waits in tests for a condition to hold, asking it at an
// interval until a timeout. It is testutil.Eventually's home, kept apart
// with no imports of the project so that the tests of packages testutil
// itself imports (the log, the cluster metadata and its Raft) wait the
// same way; every other test calls testutil.Eventually.
package poll

import (
	"testing"
	"time"
)

// Until waits until cond returns nil, asking it every interval for up to
// timeout, and fails the test with cond's last error if it never does.
func Until(t testing.TB, timeout, interval time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", timeout, err)
			return
		}
		time.Sleep(interval)
	}
}
