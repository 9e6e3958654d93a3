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

// TestSoftwareByMember: each member's software is the latest an entry
// names for it, in any of the entry's roles; a member never named with
// its software has none.
func TestSoftwareByMember(t *testing.T) {
	v1 := Member{MemberID: "m1", SoftwareName: "app", SoftwareVersion: "1.0"}
	v1b := Member{MemberID: "m1", SoftwareName: "app", SoftwareVersion: "1.1"}
	v2 := Member{MemberID: "m2", SoftwareName: "librdkafka"}
	anon := Member{MemberID: "m3"}
	got := SoftwareByMember([]Entry{
		{Type: TypeHandoff, To: v1},
		{Type: TypeHandoff, From: &v1, To: anon},
		{Type: TypeCommitNotOwned, Committer: &v2, Owner: &v1b},
	})
	want := map[string]string{"m1": "app 1.1", "m2": "librdkafka"}
	if len(got) != len(want) || got["m1"] != want["m1"] || got["m2"] != want["m2"] {
		t.Fatalf("SoftwareByMember = %v, want %v", got, want)
	}
}
