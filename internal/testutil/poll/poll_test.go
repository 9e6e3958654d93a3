package poll

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps a Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUntil(t *testing.T) {
	calls := 0
	r := &recorder{TB: t}
	Until(r, time.Minute, time.Millisecond, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if r.failed != "" || calls != 3 {
		t.Fatalf("a condition true at the third ask: %d asks, failure %q", calls, r.failed)
	}

	// Never true: the last error is the failure.
	r = &recorder{TB: t}
	calls = 0
	Until(r, 20*time.Millisecond, time.Millisecond, func() error { calls++; return fmt.Errorf("ask %d", calls) })
	if want := fmt.Sprintf("not within 20ms: ask %d", calls); r.failed != want {
		t.Fatalf("failure %q, want %q", r.failed, want)
	}
}
