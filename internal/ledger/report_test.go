package ledger

import (
	"testing"
	"time"
)

func TestParseSince(t *testing.T) {
	zone := time.FixedZone("CET", 3600)
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, zone)
	at := func(d, h, m int, s float64) time.Time {
		return time.Date(2026, 12, d, h, m, int(s), int((s-float64(int(s)))*1e9+0.5), zone)
	}
	printed := at(2, 17, 1, 2.345)
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: ""},
		{in: "30m", want: now.Add(-30 * time.Minute)},
		{in: "1d", want: now.Add(-24 * time.Hour)},
		{in: "1d12h", want: now.Add(-36 * time.Hour)},
		{in: "2026-12-02T17:00:00Z", want: time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)},
		{in: "2026-12-02T17:00:00.25+01:00", want: at(2, 17, 0, 0.25)},
		// What the report prints, read back in the same zone.
		{in: printed.Format(TimeLayout), want: printed},
		{in: "2026-12-02 17:01", want: at(2, 17, 1, 0)},
		{in: "2026-12-02 17:01:02 UTC", want: time.Date(2026, 12, 2, 17, 1, 2, 0, time.UTC)},
		{in: "2026-12-02 17:01:02.500 -0200", want: time.Date(2026, 12, 2, 19, 1, 2, 5e8, time.UTC)},
		{in: "2026-12-02T17:01:02Z", want: time.Date(2026, 12, 2, 17, 1, 2, 0, time.UTC)},
		{in: "2026-12-01", want: at(1, 0, 0, 0)},
		{in: "17:30", want: at(2, 17, 30, 0)},
		{in: "19:30:15", want: at(1, 19, 30, 15)}, // later than now today: yesterday's
		{in: "-5m", bad: true},
		{in: "yesterday", bad: true},
		{in: "2026-13-01", bad: true},
		{in: "xd", bad: true},
	} {
		got, err := ParseSince(tc.in, now)
		if (err != nil) != tc.bad || !got.Equal(tc.want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// TestHolds: a member is held from its connection-lost entry until it
// returns or is removed, and its status counts down to its removal.
func TestHolds(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	entry := func(id, state string, removeAt *time.Time) Entry {
		return Entry{Type: TypePresence, Time: t0, To: Member{MemberID: id}, State: state, Connection: "10.0.0.1:7000", RemoveAt: removeAt}
	}
	h := Holds{}
	h.Learn(entry("a", PresenceLost, at(2*time.Second)))
	h.Learn(entry("b", PresenceLost, at(2*time.Second)))
	h.Learn(entry("c", PresenceLost, at(2*time.Second)))
	h.Learn(Entry{Type: TypeHandoff, To: Member{MemberID: "a"}}) // not a presence entry
	h.Learn(entry("b", PresenceReturned, nil))
	h.Learn(entry("c", PresenceFetching, at(4*time.Second)))
	for _, tc := range []struct {
		id   string
		now  time.Duration
		want string
	}{
		{"a", 0, "connection lost, removed in 2s"},
		{"a", 1100 * time.Millisecond, "connection lost, removed in 1s"},
		{"a", 1900 * time.Millisecond, "connection lost, removed in 1s"},
		{"a", 2 * time.Second, "connection lost, being removed"},
		{"b", 0, ""},
		{"c", 0, "connection lost, kept: still fetching on 10.0.0.1:7000"},
		{"d", 0, ""},
	} {
		if got := h.Status(tc.id, t0.Add(tc.now)); got != tc.want {
			t.Errorf("status of %s at +%v: %q, want %q", tc.id, tc.now, got, tc.want)
		}
	}
	h.Learn(entry("a", PresenceRemoved, nil))
	if got := h.Status("a", t0); got != "" {
		t.Errorf("status of a removed member: %q", got)
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
