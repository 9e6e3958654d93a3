package telemetry

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
)

// Client is what a broker knows of a client instance: the id it was
// given and the properties subscriptions match on (KIP-714's selectors).
type Client struct {
	InstanceID      [16]byte
	ClientID        string
	SoftwareName    string
	SoftwareVersion string
	SourceAddress   string
	SourcePort      string
}

// InstanceIDString is the instance id as Kafka prints a Uuid.
func (c Client) InstanceIDString() string { return uuidString(c.InstanceID) }

// selector returns the client's value for a match selector.
func (c Client) selector(name string) string {
	switch name {
	case "client_instance_id":
		return c.InstanceIDString()
	case "client_id":
		return c.ClientID
	case "client_software_name":
		return c.SoftwareName
	case "client_software_version":
		return c.SoftwareVersion
	case "client_source_address":
		return c.SourceAddress
	case "client_source_port":
		return c.SourcePort
	}
	return ""
}

// Subscription is one client metrics subscription (a CLIENT_METRICS
// config resource): the metric name prefixes the clients it matches push,
// and how often.
type Subscription struct {
	Name     string
	Metrics  []string
	Interval time.Duration
	match    map[string]*regexp.Regexp // selector -> pattern the whole value must match
}

// DefaultInterval is how often a client pushes when no subscription
// names an interval (interval.ms's default).
const DefaultInterval = 5 * time.Minute

// allMetrics in a subscription's metrics asks for every metric.
const allMetrics = "*"

// ParseSubscription reads a subscription's configs (already checked when
// they were set): metrics, interval.ms and match.
func ParseSubscription(name string, configs map[string]string) (Subscription, error) {
	s := Subscription{Name: name, Interval: DefaultInterval, match: map[string]*regexp.Regexp{}}
	for m := range strings.SplitSeq(configs["metrics"], ",") {
		if m = strings.TrimSpace(m); m != "" {
			s.Metrics = append(s.Metrics, m)
		}
	}
	if v := strings.TrimSpace(configs["interval.ms"]); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil {
			return s, fmt.Errorf("subscription %s: interval.ms %q: %w", name, v, err)
		}
		s.Interval = time.Duration(ms) * time.Millisecond
	}
	for pair := range strings.SplitSeq(configs["match"], ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		sel, expr, _ := strings.Cut(pair, "=")
		re, err := regexp.Compile("^(?:" + expr + ")$")
		if err != nil {
			return s, fmt.Errorf("subscription %s: match %q: %w", name, pair, err)
		}
		s.match[strings.TrimSpace(sel)] = re
	}
	return s, nil
}

// matches reports whether every selector of the subscription matches the
// client (a subscription without any matches every client).
func (s Subscription) matches(c Client) bool {
	for sel, re := range s.match {
		if !re.MatchString(c.selector(sel)) {
			return false
		}
	}
	return true
}

// The refusals, each answered with Kafka's error code for it.
var (
	ErrInvalidRequest         = errors.New("telemetry: invalid request")          // INVALID_REQUEST
	ErrThrottled              = errors.New("telemetry: before the push interval") // THROTTLING_QUOTA_EXCEEDED
	ErrUnknownSubscription    = errors.New("telemetry: unknown subscription id")  // UNKNOWN_SUBSCRIPTION_ID
	ErrUnsupportedCompression = errors.New("telemetry: unknown compression type") // UNSUPPORTED_COMPRESSION_TYPE
	ErrTooLarge               = errors.New("telemetry: larger than the maximum")  // TELEMETRY_TOO_LARGE
)

// Config bounds what a broker keeps of its clients' telemetry.
type Config struct {
	// MaxBytes is telemetry.max.bytes: the largest push, compressed and
	// decompressed, the broker accepts.
	MaxBytes int
	// Expiry is the least time an instance is kept after its last request
	// (three push intervals when that is longer).
	Expiry time.Duration
	// MaxInstances and MaxPoints bound the instances and the values kept
	// over all of them: past MaxInstances the instance heard from least
	// recently is forgotten, past MaxPoints a push keeps what fits.
	MaxInstances, MaxPoints int
	// Decompress undoes a push's compression (Kafka's codec ids) into at
	// most limit bytes; past them it fails with an error that wraps
	// ErrTooLarge, having decompressed no more.
	Decompress func(codec int8, src []byte, limit int) ([]byte, error)
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Manager keeps the client instances one broker serves and the values
// they pushed last. Its methods are safe for concurrent use.
type Manager struct {
	cfg Config

	mu        lockrank.Mutex[lockrank.Leaf]
	instances map[[16]byte]*instance
	points    int       // values kept over all instances
	swept     time.Time // when expired instances were last dropped
}

type instance struct {
	client         Client
	subscriptionID int32
	metrics        []string
	interval       time.Duration
	lastGet        time.Time
	lastPush       time.Time
	lastErr        error // the last refusal, nil after an answer without error
	terminating    bool
	seen           time.Time
	values         map[string]Point // series -> the value last pushed
}

// New returns a manager with cfg's bounds.
func New(cfg Config) *Manager {
	if cfg.Expiry <= 0 {
		cfg.Expiry = time.Minute
	}
	if cfg.MaxInstances <= 0 {
		cfg.MaxInstances = 16384
	}
	if cfg.MaxPoints <= 0 {
		cfg.MaxPoints = 200_000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Manager{cfg: cfg, instances: map[[16]byte]*instance{}}
}

// Answer is what GetTelemetrySubscriptions tells a client.
type Answer struct {
	InstanceID     [16]byte
	SubscriptionID int32
	Metrics        []string // prefixes to push; "*" for all, none for nothing
	Interval       time.Duration
	MaxBytes       int
}

// Subscribe answers a client's GetTelemetrySubscriptions: c.InstanceID is
// the id it has (zero for none yet, when it is given one) and subs the
// subscriptions in force. A client asking again before its push interval
// is throttled, unless its last push was refused for its subscription or
// compression, which it is asking to put right.
func (m *Manager) Subscribe(c Client, subs []Subscription) (Answer, error) {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.InstanceID == [16]byte{} {
		c.InstanceID = m.newInstanceID()
	}
	in := m.instance(c, subs, now)
	if now.Sub(maxTime(in.lastGet, in.lastPush)) < in.interval &&
		!errors.Is(in.lastErr, ErrUnknownSubscription) && !errors.Is(in.lastErr, ErrUnsupportedCompression) {
		return Answer{InstanceID: c.InstanceID}, fmt.Errorf("%w: client %s asked again within %v", ErrThrottled, c.InstanceIDString(), in.interval)
	}
	in.lastGet, in.lastErr = now, nil
	return Answer{InstanceID: c.InstanceID, SubscriptionID: in.subscriptionID, Metrics: slices.Clone(in.metrics),
		Interval: in.interval, MaxBytes: m.cfg.MaxBytes}, nil
}

// Push takes a client's PushTelemetry: the OTLP metrics it pushed under
// subscriptionID, compressed with codec. The checks are Kafka's, in its
// order; a client that said it was terminating may push nothing more.
func (m *Manager) Push(c Client, subscriptionID int32, terminating bool, codec int8, payload []byte, subs []Subscription) error {
	if c.InstanceID == [16]byte{} {
		return fmt.Errorf("%w: no client instance id", ErrInvalidRequest)
	}
	now := m.cfg.Now()
	m.mu.Lock()
	in := m.instance(c, subs, now)
	err := m.checkPush(in, subscriptionID, terminating, codec, len(payload), now)
	in.terminating = in.terminating || terminating
	in.lastErr = err
	m.mu.Unlock()
	if err != nil || len(payload) == 0 {
		return err
	}
	// Decompress and decode outside the lock: other clients go on.
	data, err := m.cfg.Decompress(codec, payload, m.cfg.MaxBytes)
	switch {
	case err == nil && len(data) > m.cfg.MaxBytes:
		err = fmt.Errorf("%w: %d bytes decompressed, at most %d", ErrTooLarge, len(data), m.cfg.MaxBytes)
	case errors.Is(err, ErrTooLarge):
	case err != nil:
		err = fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var points []Point
	if err == nil {
		points, err = Decode(data, m.cfg.MaxPoints)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		in.lastErr = err
		return err
	}
	if m.instances[c.InstanceID] == in {
		m.store(in, points)
	}
	return nil
}

func (m *Manager) checkPush(in *instance, subscriptionID int32, terminating bool, codec int8, size int, now time.Time) error {
	id := in.client.InstanceIDString()
	if in.terminating {
		return fmt.Errorf("%w: client %s said it was terminating", ErrInvalidRequest, id)
	}
	// A push right after the client learnt its subscription is taken
	// early: clients jitter their interval between half and one and a
	// half of it.
	if !in.lastGet.After(in.lastPush) && now.Sub(in.lastPush) < in.interval && !terminating {
		return fmt.Errorf("%w: client %s pushed again within %v", ErrThrottled, id, in.interval)
	}
	in.lastPush = now
	if subscriptionID != in.subscriptionID {
		return fmt.Errorf("%w: client %s pushed for subscription %d", ErrUnknownSubscription, id, subscriptionID)
	}
	if codec < 0 || codec > 4 {
		return fmt.Errorf("%w: %d from client %s", ErrUnsupportedCompression, codec, id)
	}
	if size > m.cfg.MaxBytes {
		return fmt.Errorf("%w: %d bytes from client %s, at most %d", ErrTooLarge, size, id, m.cfg.MaxBytes)
	}
	return nil
}

// store keeps a push's values as the instance's latest: gauges and
// cumulative totals replace what was there, a delta is added to the total
// so far. Totals the push left out are kept.
func (m *Manager) store(in *instance, points []Point) {
	next := make(map[string]Point, len(points))
	for k, p := range in.values {
		if p.Kind == Counter {
			next[k] = p
		}
	}
	for _, p := range points {
		k := p.series()
		if p.Delta {
			p.Value += in.values[k].Value
			p.Delta = false
		}
		if _, ok := next[k]; !ok && m.points-len(in.values)+len(next) >= m.cfg.MaxPoints {
			continue
		}
		next[k] = p
	}
	m.points += len(next) - len(in.values)
	in.values = next
}

// instance returns the client's instance, made (or remade, when the
// subscriptions that match it changed) with its subscription. Must be
// called with mu held.
func (m *Manager) instance(c Client, subs []Subscription, now time.Time) *instance {
	m.sweep(now)
	in := m.instances[c.InstanceID]
	if in == nil {
		if len(m.instances) >= m.cfg.MaxInstances {
			m.evictOldest()
		}
		in = &instance{client: c}
		m.instances[c.InstanceID] = in
	}
	metrics, interval := subscribed(in.client, subs)
	if id := subscriptionID(metrics, interval, c.InstanceID); in.metrics == nil || id != in.subscriptionID {
		// A new subscription starts the instance's timing afresh, so the
		// client learns of it at once.
		in.subscriptionID, in.metrics, in.interval = id, metrics, interval
		in.lastGet, in.lastPush, in.lastErr = time.Time{}, time.Time{}, nil
	}
	in.seen = now
	return in
}

// subscribed merges the subscriptions that match c: the union of their
// metrics ("*" alone when one asks for all) and the shortest interval.
func subscribed(c Client, subs []Subscription) ([]string, time.Duration) {
	metrics, interval := []string{}, DefaultInterval
	for _, s := range subs {
		if !s.matches(c) {
			continue
		}
		metrics = append(metrics, s.Metrics...)
		interval = min(interval, s.Interval)
	}
	if slices.Contains(metrics, allMetrics) {
		return []string{allMetrics}, interval
	}
	slices.Sort(metrics)
	return slices.Compact(metrics), interval
}

// subscriptionID names a subscription for one client instance: a checksum
// of its metrics and interval, mixed with the instance id so that ids are
// not shared between clients. The same subscription gets the same id on
// every broker and after a restart.
func subscriptionID(metrics []string, interval time.Duration, instanceID [16]byte) int32 {
	sum := crc32.Checksum(fmt.Appendf(nil, "%v%d", metrics, interval.Milliseconds()), crc32.MakeTable(crc32.Castagnoli))
	h := fnv.New32a()
	h.Write(instanceID[:])
	return int32(sum ^ h.Sum32())
}

// sweep drops instances not heard from within their expiry, at most once
// a second. Must be called with mu held.
func (m *Manager) sweep(now time.Time) {
	if now.Sub(m.swept) < time.Second {
		return
	}
	m.swept = now
	for id, in := range m.instances {
		if now.Sub(in.seen) > max(m.cfg.Expiry, 3*in.interval) {
			m.drop(id)
		}
	}
}

func (m *Manager) evictOldest() {
	var oldest *instance
	for _, in := range m.instances {
		if oldest == nil || in.seen.Before(oldest.seen) {
			oldest = in
		}
	}
	if oldest != nil {
		m.drop(oldest.client.InstanceID)
	}
}

func (m *Manager) drop(id [16]byte) {
	m.points -= len(m.instances[id].values)
	delete(m.instances, id)
}

func (m *Manager) newInstanceID() [16]byte {
	for {
		var id [16]byte
		rand.Read(id[:])
		// Kafka leaves out ids printed with a leading "-", which its
		// tools would read as an option.
		if _, taken := m.instances[id]; !taken && id != [16]byte{} && uuidString(id)[0] != '-' {
			return id
		}
	}
}

// Instance is a client instance's latest values, for export.
type Instance struct {
	Client Client
	Points []Point
}

// Snapshot returns every live instance that pushed values, sorted by
// instance id, each with its values sorted by name and attributes.
func (m *Manager) Snapshot() []Instance {
	now := m.cfg.Now()
	m.mu.Lock()
	m.sweep(now)
	var out []Instance
	for _, in := range m.instances {
		if len(in.values) == 0 {
			continue
		}
		keys := slices.Sorted(maps.Keys(in.values))
		points := make([]Point, 0, len(keys))
		for _, k := range keys {
			points = append(points, in.values[k])
		}
		out = append(out, Instance{Client: in.client, Points: points})
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Instance) int {
		return strings.Compare(a.Client.InstanceIDString(), b.Client.InstanceIDString())
	})
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// uuidString prints an id as Kafka prints a Uuid: URL-safe base64 without
// padding.
func uuidString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }
