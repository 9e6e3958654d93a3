package quota

import (
	"math"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/cluster"
)

type fixed []cluster.ClientQuota

func (f fixed) ClientQuotas() ([]cluster.ClientQuota, int64) { return f, 1 }
func (f fixed) ClientQuotasEpoch() int64                     { return 1 }

func part(typ, name string) cluster.QuotaEntityPart {
	if name == "" {
		return cluster.QuotaEntityPart{Type: typ, Default: true}
	}
	return cluster.QuotaEntityPart{Type: typ, Name: name}
}

func quota(v float64, parts ...cluster.QuotaEntityPart) cluster.ClientQuota {
	return cluster.ClientQuota{Entity: parts, Values: map[string]float64{"producer_byte_rate": v}}
}

// Kafka's order: user and client, user and default client, user, default
// user and client, default user and default client, default user, client,
// default client.
func TestResolutionOrder(t *testing.T) {
	all := fixed{
		quota(1, part("user", "alice"), part("client-id", "app")),
		quota(2, part("user", "alice"), part("client-id", "")),
		quota(3, part("user", "alice")),
		quota(4, part("user", ""), part("client-id", "app")),
		quota(5, part("user", ""), part("client-id", "")),
		quota(6, part("user", "")),
		quota(7, part("client-id", "app")),
		quota(8, part("client-id", "")),
	}
	for i := range all {
		m := New(all[i:], DefaultConfig)
		if got, ok := m.Bound(Produce, "alice", "app"); !ok || got != float64(i+1) {
			t.Errorf("with quotas %d and after: %v %v, want %d", i+1, got, ok, i+1)
		}
	}
	if _, ok := New(fixed{quota(3, part("user", "bob"))}, DefaultConfig).Bound(Produce, "alice", "app"); ok {
		t.Error("another user's quota applied")
	}
	if _, ok := New(all, DefaultConfig).Bound(Fetch, "alice", "app"); ok {
		t.Error("a producer quota bounded fetches")
	}
}

// A client that sends as fast as it may, waiting out its throttle times,
// averages its quota.
func TestThrottledRateMeetsQuota(t *testing.T) {
	const bound = 50_000.0 // bytes a second
	m := New(fixed{quota(bound, part("user", "alice"))}, DefaultConfig)
	start := time.Unix(1_000_000, 0)
	now := start
	sent := 0.0
	for now.Sub(start) < 120*time.Second {
		const batch = 5_000
		sent += batch
		wait := m.Record(Produce, "alice", "c", batch, now)
		now = now.Add(time.Millisecond + wait) // a fast client: 5 MB/s unthrottled
	}
	got := sent / now.Sub(start).Seconds()
	if math.Abs(got-bound)/bound > 0.05 {
		t.Fatalf("throttled rate %.0f B/s, quota %.0f", got, bound)
	}
	// Another user is not bounded by alice's quota.
	if w := m.Record(Produce, "bob", "c", 1e9, now); w != 0 {
		t.Fatalf("bob throttled %v by alice's quota", w)
	}
	// A user quota is shared by the user's clients.
	if w := m.Record(Produce, "alice", "other-client", 1e6, now); w == 0 {
		t.Fatal("alice's second client was not throttled by her shared quota")
	}
}

func TestRequestPercentage(t *testing.T) {
	m := New(fixed{{Entity: []cluster.QuotaEntityPart{part("client-id", "")}, Values: map[string]float64{"request_percentage": 10}}}, DefaultConfig)
	now := time.Unix(1_000_000, 0)
	// 10% of a thread is 100 ms a second; 2 s of handler time at once is
	// far over, and waits about (200%-10%)/10% of the 10 s window.
	w := m.Record(Request, "alice", "c", float64(2*time.Second), now)
	if w < 10*time.Second || w > 11*time.Second {
		t.Fatalf("throttle %v for 2 s of handler time at 10%%", w)
	}
	if w := m.Record(Request, "alice", "c2", float64(time.Millisecond), now); w != 0 {
		t.Fatalf("a default client-id quota is each client's own, yet c2 was throttled %v", w)
	}
}

func TestConnectionRate(t *testing.T) {
	m := New(fixed{
		{Entity: []cluster.QuotaEntityPart{part("ip", "10.0.0.1")}, Values: map[string]float64{"connection_creation_rate": 2}},
		{Entity: []cluster.QuotaEntityPart{part("ip", "")}, Values: map[string]float64{"connection_creation_rate": 100}},
	}, DefaultConfig)
	now := time.Unix(1_000_000, 0)
	accepted := 0
	for i := range 100 {
		if m.Connect("10.0.0.1", now.Add(time.Duration(i)*100*time.Millisecond)) {
			accepted++
		}
	}
	// 10 s at 2 a second, and the new IP's allowance of the windows but
	// one (Kafka counts a new rate over at least 10 s).
	if accepted < 18 || accepted > 24 {
		t.Fatalf("10.0.0.1 opened %d connections in 10 s at 2 a second", accepted)
	}
	for range 50 {
		if !m.Connect("10.0.0.2", now) {
			t.Fatal("the default IP quota of 100 a second refused the 50th connection of another IP")
		}
	}
}
