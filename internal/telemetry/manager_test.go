package telemetry

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newManager(c *clock) *Manager {
	return New(Config{MaxBytes: 1 << 10, Now: c.now,
		Decompress: func(codec int8, src []byte, limit int) ([]byte, error) {
			switch {
			case codec == 1: // a bomb: more than any limit
				return nil, fmt.Errorf("%w: a bomb", ErrTooLarge)
			case codec != 0:
				return nil, errors.New("only uncompressed pushes in these tests")
			}
			return src, nil
		}})
}

func subscription(t *testing.T, name string, configs map[string]string) Subscription {
	t.Helper()
	s, err := ParseSubscription(name, configs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSubscribeMatches(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := newManager(c)
	subs := []Subscription{
		subscription(t, "consumers", map[string]string{"metrics": "org.apache.kafka.consumer.", "interval.ms": "2000",
			"match": "client_id=orders-.*,client_software_name=apache-kafka-java"}),
		subscription(t, "everything-fast", map[string]string{"metrics": "*", "interval.ms": "500", "match": "client_id=debug"}),
		subscription(t, "producers", map[string]string{"metrics": "org.apache.kafka.producer.", "interval.ms": "60000"}),
	}
	for _, tc := range []struct {
		client   Client
		metrics  []string
		interval time.Duration
	}{
		{Client{ClientID: "orders-1", SoftwareName: "apache-kafka-java"},
			[]string{"org.apache.kafka.consumer.", "org.apache.kafka.producer."}, 2 * time.Second},
		// A selector's pattern matches the whole value.
		{Client{ClientID: "my-orders-1", SoftwareName: "apache-kafka-java"}, []string{"org.apache.kafka.producer."}, time.Minute},
		{Client{ClientID: "orders-1", SoftwareName: "librdkafka"}, []string{"org.apache.kafka.producer."}, time.Minute},
		{Client{ClientID: "debug"}, []string{"*"}, 500 * time.Millisecond},
	} {
		a, err := m.Subscribe(tc.client, subs)
		if err != nil {
			t.Fatalf("%+v: %v", tc.client, err)
		}
		if a.InstanceID == [16]byte{} || !slices.Equal(a.Metrics, tc.metrics) || a.Interval != tc.interval || a.MaxBytes != 1<<10 {
			t.Errorf("%+v: answered %+v, want metrics %v every %v", tc.client, a, tc.metrics, tc.interval)
		}
	}
	a, err := m.Subscribe(Client{ClientID: "anyone"}, nil)
	if err != nil || len(a.Metrics) != 0 || a.Interval != DefaultInterval {
		t.Errorf("without subscriptions: %+v, %v; want no metrics every %v", a, err, DefaultInterval)
	}
}

func TestPushChecks(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := newManager(c)
	subs := []Subscription{subscription(t, "all", map[string]string{"metrics": "*", "interval.ms": "1000"})}
	a, err := m.Subscribe(Client{ClientID: "app"}, subs)
	if err != nil {
		t.Fatal(err)
	}
	client := Client{InstanceID: a.InstanceID, ClientID: "app"}
	if _, err := m.Subscribe(client, subs); !errors.Is(err, ErrThrottled) {
		t.Errorf("asking again at once: %v, want ErrThrottled", err)
	}
	payload := metricsData(gaugeMetric("org.apache.kafka.consumer.connection.count", doublePoint(2)))
	// The first push after the answer is taken at once.
	if err := m.Push(client, a.SubscriptionID, false, 0, payload, subs); err != nil {
		t.Fatalf("first push: %v", err)
	}
	c.advance(400 * time.Millisecond)
	if err := m.Push(client, a.SubscriptionID, false, 0, payload, subs); !errors.Is(err, ErrThrottled) {
		t.Errorf("pushing within the interval: %v, want ErrThrottled", err)
	}
	c.advance(time.Second)
	if err := m.Push(client, a.SubscriptionID+1, false, 0, payload, subs); !errors.Is(err, ErrUnknownSubscription) {
		t.Errorf("pushing for another subscription: %v, want ErrUnknownSubscription", err)
	}
	// After that refusal the client may ask again at once.
	if b, err := m.Subscribe(client, subs); err != nil || b.SubscriptionID != a.SubscriptionID {
		t.Errorf("asking after an unknown subscription: %+v, %v", b, err)
	}
	for name, tc := range map[string]struct {
		codec   int8
		payload []byte
		want    error
	}{
		"unknown codec":        {codec: 9, payload: payload, want: ErrUnsupportedCompression},
		"over telemetry bytes": {payload: make([]byte, 2<<10), want: ErrTooLarge},
		"not OTLP":             {payload: []byte("garbage!"), want: ErrMalformed},
		"codec that fails":     {codec: 4, payload: payload, want: ErrMalformed},
		"decompresses too far": {codec: 1, payload: payload, want: ErrTooLarge},
	} {
		c.advance(time.Second)
		if err := m.Push(client, a.SubscriptionID, false, tc.codec, tc.payload, subs); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if err := m.Push(Client{}, 0, false, 0, payload, subs); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("pushing without an instance id: %v, want ErrInvalidRequest", err)
	}
	// A terminating push is taken within the interval; nothing after it.
	c.advance(time.Second)
	if err := m.Push(client, a.SubscriptionID, false, 0, payload, subs); err != nil {
		t.Fatal(err)
	}
	if err := m.Push(client, a.SubscriptionID, true, 0, payload, subs); err != nil {
		t.Errorf("terminating push within the interval: %v", err)
	}
	c.advance(time.Second)
	if err := m.Push(client, a.SubscriptionID, false, 0, payload, subs); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("pushing after terminating: %v, want ErrInvalidRequest", err)
	}
}

func TestPushedValues(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := newManager(c)
	subs := []Subscription{subscription(t, "all", map[string]string{"metrics": "*", "interval.ms": "1000"})}
	a, err := m.Subscribe(Client{ClientID: "app", SoftwareName: "apache-kafka-java"}, subs)
	if err != nil {
		t.Fatal(err)
	}
	client := Client{InstanceID: a.InstanceID, ClientID: "app"}
	push := func(metrics ...[]byte) {
		t.Helper()
		if err := m.Push(client, a.SubscriptionID, false, 0, metricsData(metrics...), subs); err != nil {
			t.Fatal(err)
		}
		c.advance(time.Second)
	}
	values := func() map[string]float64 {
		out := map[string]float64{}
		for _, in := range m.Snapshot() {
			if in.Client.ClientID != "app" || in.Client.SoftwareName != "apache-kafka-java" {
				t.Errorf("instance of %+v, want the client that subscribed", in.Client)
			}
			for _, p := range in.Points {
				out[p.Name] = p.Value
			}
		}
		return out
	}
	push(gaugeMetric("lag", doublePoint(5)), sumMetric("sent", true, intPoint(3)), sumMetric("consumed", false, intPoint(10)))
	push(gaugeMetric("lag", doublePoint(2)), sumMetric("sent", true, intPoint(4)), sumMetric("consumed", false, intPoint(25)))
	if got := values(); got["lag"] != 2 || got["sent"] != 7 || got["consumed"] != 25 {
		t.Errorf("after two pushes: %v; want lag 2, sent 3+4, consumed 25", got)
	}
	// A gauge left out of a push is gone; a total stays.
	push(sumMetric("consumed", false, intPoint(30)))
	if got := values(); len(got) != 2 || got["sent"] != 7 || got["consumed"] != 30 {
		t.Errorf("after a push of one total: %v", got)
	}
	// A subscription that changes gives the client a new id to learn.
	subs = []Subscription{subscription(t, "all", map[string]string{"metrics": "*", "interval.ms": "2000"})}
	if err := m.Push(client, a.SubscriptionID, false, 0, metricsData(), subs); !errors.Is(err, ErrUnknownSubscription) {
		t.Errorf("pushing after the subscription changed: %v, want ErrUnknownSubscription", err)
	}
	if b, err := m.Subscribe(client, subs); err != nil || b.SubscriptionID == a.SubscriptionID || b.Interval != 2*time.Second {
		t.Errorf("asking after the subscription changed: %+v, %v", b, err)
	}
	// Forgotten after three intervals (and at least the expiry) unheard.
	c.advance(61 * time.Second)
	if got := m.Snapshot(); len(got) != 0 {
		t.Errorf("a minute after the last request: %d instances kept", len(got))
	}
}

func TestInstanceBounds(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := New(Config{MaxBytes: 1 << 20, MaxInstances: 3, MaxPoints: 4, Now: c.now,
		Decompress: func(_ int8, src []byte, _ int) ([]byte, error) { return src, nil }})
	subs := []Subscription{subscription(t, "all", map[string]string{"metrics": "*", "interval.ms": "1000"})}
	var first Client
	for i := range 4 {
		a, err := m.Subscribe(Client{ClientID: "app"}, subs)
		if err != nil {
			t.Fatal(err)
		}
		cl := Client{InstanceID: a.InstanceID}
		if i == 0 {
			first = cl
		}
		if err := m.Push(cl, a.SubscriptionID, false, 0,
			metricsData(gaugeMetric("a", doublePoint(1)), gaugeMetric("b", doublePoint(1)), gaugeMetric("c", doublePoint(1))), subs); err != nil {
			t.Fatal(err)
		}
		c.advance(time.Millisecond)
	}
	snap := m.Snapshot()
	points := 0
	for _, in := range snap {
		points += len(in.Points)
		if in.Client.InstanceID == first.InstanceID {
			t.Errorf("the instance heard from least recently is kept past MaxInstances")
		}
	}
	if points > 4 {
		t.Errorf("%d values kept over %d instances, at most 4", points, len(snap))
	}
}
