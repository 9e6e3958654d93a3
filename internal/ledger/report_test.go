package ledger

import (
	"testing"
	"time"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: ""},
		{in: "30m", want: now.Add(-30 * time.Minute)},
		{in: "2026-12-02T17:00:00Z", want: time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)},
		{in: "-5m", bad: true},
		{in: "yesterday", bad: true},
	} {
		got, err := ParseSince(tc.in, now)
		if (err != nil) != tc.bad || !got.Equal(tc.want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}
