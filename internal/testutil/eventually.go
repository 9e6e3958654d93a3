package testutil

import (
	"testing"
	"time"
)

// Eventually calls check every interval until it returns nil, and fails t
// with check's last error once total has passed. A test awaits a condition
// with it instead of sleeping for a guess of how long the condition takes.
func Eventually(t testing.TB, total, interval time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not so after %v: %v", total, err)
		}
		time.Sleep(interval)
	}
}
