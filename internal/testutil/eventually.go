package testutil

import (
	"testing"
	"time"

	"github.com/strandlog/strand/internal/testutil/poll"
)

// Eventually waits until cond returns nil, asking it every 10 ms for up to
// timeout, and fails the test with cond's last error if it never does.
// Tests wait for conditions with it instead of sleeping.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	poll.Until(t, timeout, 10*time.Millisecond, cond)
}

// EventuallyEvery is Eventually asking cond every interval: for a
// condition that costs a process or a page load to ask.
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, cond func() error) {
	t.Helper()
	poll.Until(t, timeout, interval, cond)
}
