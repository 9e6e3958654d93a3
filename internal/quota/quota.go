package quota

import (
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/lockrank"
)

// Kind is what a quota bounds.
type Kind int

const (
	Produce    Kind = iota // producer_byte_rate: bytes of produce requests a second
	Fetch                  // consumer_byte_rate: bytes of fetch responses a second
	Request                // request_percentage: percent of one thread's time in handlers
	Connection             // connection_creation_rate: new connections a second, per IP
	Mutation               // controller_mutation_rate: partitions created or deleted a second
)

// Keys are Kafka's quota keys of the kinds, by kind.
var Keys = [...]string{Produce: "producer_byte_rate", Fetch: "consumer_byte_rate", Request: "request_percentage",
	Connection: "connection_creation_rate", Mutation: "controller_mutation_rate"}

// Source gives the client quotas and the epoch of their last change
// (cluster.Store).
type Source interface {
	ClientQuotas() ([]cluster.ClientQuota, int64)
	ClientQuotasEpoch() int64
}

// Config is how use is measured: Samples windows of Window each, as
// Kafka's quota.window.num (11) and quota.window.size.seconds (1).
type Config struct {
	Samples int
	Window  time.Duration
}

// DefaultConfig is Kafka's.
var DefaultConfig = Config{Samples: 11, Window: time.Second}

// Manager measures clients' use and answers their throttle times. A nil
// *Manager enforces nothing.
type Manager struct {
	cfg Config
	src Source

	mu      lockrank.Mutex[lockrank.Worker]
	epoch   int64
	table   map[string]float64 // by entity key and quota key: see lookup
	loaded  bool
	sensors map[sensorKey]*rate
	swept   time.Time
	state   atomic.Pointer[loadedState]
}

// New returns a manager over the quotas of src.
func New(src Source, cfg Config) *Manager {
	return &Manager{cfg: cfg, src: src, sensors: map[sensorKey]*rate{}}
}

// sensorKey names whose use is measured together: the user and client id
// of the entity the quota came from (a quota of a user is shared by its
// client ids, a default one is each user's own).
type sensorKey struct {
	kind         Kind
	user, client string
	hasUser      bool
	hasClient    bool
}

// Record counts amount of kind (bytes, or for Request nanoseconds of
// handler time) for the client, and returns how long it must be throttled
// for: 0 while within its quota or without one.
func (m *Manager) Record(kind Kind, user, clientID string, amount float64, now time.Time) time.Duration {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bound, key, ok := m.quotaLocked(kind, user, clientID)
	if !ok {
		return 0
	}
	r := m.sensorLocked(key)
	if kind == Request {
		amount = amount * 100 / float64(time.Second) // percent-seconds
	}
	r.record(amount, now)
	m.sweepLocked(now)
	return r.throttle(bound, now)
}

// sensorLocked is the rate measured for key, made on first use.
func (m *Manager) sensorLocked(key sensorKey) *rate {
	r := m.sensors[key]
	if r == nil {
		r = newRate(m.cfg)
		m.sensors[key] = r
	}
	return r
}

// Connect counts a new connection from ip and reports whether it stays
// within the IP's connection_creation_rate (the IP's own, else the
// default IP's, each IP measured apart, as Kafka's KIP-612).
func (m *Manager) Connect(ip string, now time.Time) bool {
	if !m.Active() {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loadLocked()
	for _, e := range []cluster.QuotaEntityPart{{Type: "ip", Name: ip}, {Type: "ip", Default: true}} {
		bound, ok := m.table[entityKey([]cluster.QuotaEntityPart{e})+"\x00"+Keys[Connection]]
		if !ok {
			continue
		}
		r := m.sensorLocked(sensorKey{kind: Connection, user: ip})
		if r.throttle(bound, now) > 0 {
			return false // refused connections are not counted
		}
		r.record(1, now)
		return true
	}
	return true
}

// Owed is how long the client must wait before it may use more of kind:
// 0 while its use so far is within its quota. A fetch asks before it
// answers, and a client over its quota is answered empty (as Kafka does)
// without counting what it was not sent.
func (m *Manager) Owed(kind Kind, user, clientID string, now time.Time) time.Duration {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bound, key, ok := m.quotaLocked(kind, user, clientID)
	if !ok {
		return 0
	}
	if r := m.sensors[key]; r != nil {
		return r.throttle(bound, now)
	}
	return 0
}

// Active reports whether any quota is set: without, nothing need be
// measured.
func (m *Manager) Active() bool {
	if m == nil {
		return false
	}
	// Every request asks: the metadata is looked at every 100 ms at most,
	// so a quota set applies within that.
	now := time.Now().UnixNano()
	s := m.state.Load()
	if s != nil && now-s.checked < int64(100*time.Millisecond) {
		return s.active
	}
	if s != nil && s.epoch == m.src.ClientQuotasEpoch() {
		m.state.Store(&loadedState{epoch: s.epoch, active: s.active, checked: now})
		return s.active
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loadLocked()
	return len(m.table) > 0
}

// Changed tells the manager the quotas changed here, so that Active looks
// at once rather than within 100 ms.
func (m *Manager) Changed() {
	if m != nil {
		m.state.Store(nil)
	}
}

// Bound is the client's quota of kind, if it has one.
func (m *Manager) Bound(kind Kind, user, clientID string) (float64, bool) {
	if m == nil {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, _, ok := m.quotaLocked(kind, user, clientID)
	return b, ok
}

// quotaLocked resolves the client's quota of kind in Kafka's order: the
// user and client id, the user and the default client id, the user, the
// default user and the client id, the default user and default client id,
// the default user, the client id, the default client id.
func (m *Manager) quotaLocked(kind Kind, user, clientID string) (float64, sensorKey, bool) {
	m.loadLocked()
	if len(m.table) == 0 {
		return 0, sensorKey{}, false
	}
	u, dU := cluster.QuotaEntityPart{Type: "user", Name: user}, cluster.QuotaEntityPart{Type: "user", Default: true}
	c, dC := cluster.QuotaEntityPart{Type: "client-id", Name: clientID}, cluster.QuotaEntityPart{Type: "client-id", Default: true}
	for _, e := range [][]cluster.QuotaEntityPart{{c, u}, {dC, u}, {u}, {c, dU}, {dC, dU}, {dU}, {c}, {dC}} {
		if v, ok := m.table[entityKey(e)+"\x00"+Keys[kind]]; ok {
			k := sensorKey{kind: kind}
			for _, p := range e {
				if p.Type == "user" {
					k.user, k.hasUser = user, true
				} else {
					k.client, k.hasClient = clientID, true
				}
			}
			return v, k, true
		}
	}
	return 0, sensorKey{}, false
}

// loadLocked reads the quotas again when they changed.
func (m *Manager) loadLocked() {
	if epoch := m.src.ClientQuotasEpoch(); m.loaded && epoch == m.epoch {
		return
	}
	quotas, epoch := m.src.ClientQuotas()
	m.table, m.epoch, m.loaded = map[string]float64{}, epoch, true
	for _, q := range quotas {
		for k, v := range q.Values {
			m.table[entityKey(q.Entity)+"\x00"+k] = v
		}
	}
	m.state.Store(&loadedState{epoch: epoch, active: len(m.table) > 0, checked: time.Now().UnixNano()})
}

// loadedState is what Active reads without the lock.
type loadedState struct {
	epoch   int64
	active  bool
	checked int64 // unix nanoseconds
}

// entityKey names an entity whose parts are sorted by type.
func entityKey(parts []cluster.QuotaEntityPart) string {
	parts = slices.Clone(parts)
	slices.SortFunc(parts, func(a, b cluster.QuotaEntityPart) int {
		if a.Type < b.Type {
			return -1
		}
		if a.Type > b.Type {
			return 1
		}
		return 0
	})
	s := ""
	for _, p := range parts {
		if p.Default {
			s += p.Type + "\x01default;"
		} else {
			s += p.Type + "=" + p.Name + ";"
		}
	}
	return s
}

// sweepLocked drops the sensors not used for an hour, at most once a
// minute, as Kafka expires its quota sensors.
func (m *Manager) sweepLocked(now time.Time) {
	if now.Sub(m.swept) < time.Minute {
		return
	}
	m.swept = now
	for k, r := range m.sensors {
		if now.Sub(r.last) > time.Hour {
			delete(m.sensors, k)
		}
	}
}

// rate is Kafka's sampled rate: the sum of the last samples windows over
// the time they cover, counted as at least samples-1 whole windows.
type rate struct {
	cfg     Config
	starts  []time.Time
	amounts []float64
	cur     int
	last    time.Time
}

func newRate(cfg Config) *rate {
	return &rate{cfg: cfg, starts: make([]time.Time, cfg.Samples), amounts: make([]float64, cfg.Samples)}
}

func (r *rate) record(amount float64, now time.Time) {
	r.last = now
	if r.starts[r.cur].IsZero() || now.Sub(r.starts[r.cur]) >= r.cfg.Window {
		r.cur = (r.cur + 1) % len(r.starts)
		r.starts[r.cur], r.amounts[r.cur] = now, 0
	}
	r.amounts[r.cur] += amount
}

// value is the rate a second and the time it is measured over: the last
// samples windows, the oldest counted for the part of it still inside
// them (so the rate slides rather than drops a whole window at once), and
// at least samples-1 windows, as Kafka counts a new client's.
func (r *rate) value(now time.Time) (float64, time.Duration) {
	span := time.Duration(len(r.starts)) * r.cfg.Window
	from := now.Add(-span)
	total := 0.0
	var oldest time.Time
	for i, st := range r.starts {
		end := st.Add(r.cfg.Window)
		if st.IsZero() || !end.After(from) {
			continue // expired
		}
		share := 1.0
		if st.Before(from) {
			share = float64(end.Sub(from)) / float64(r.cfg.Window)
		}
		total += r.amounts[i] * share
		if oldest.IsZero() || st.Before(oldest) {
			oldest = st
		}
	}
	elapsed := min(now.Sub(oldest), span)
	if floor := time.Duration(len(r.starts)-1) * r.cfg.Window; elapsed < floor {
		elapsed = floor
	}
	return total / elapsed.Seconds(), elapsed
}

// throttle is how long the client must wait for its rate to come back to
// bound, at most the whole measured span.
func (r *rate) throttle(bound float64, now time.Time) time.Duration {
	v, window := r.value(now)
	if v <= bound || bound <= 0 {
		return 0
	}
	t := time.Duration((v - bound) / bound * float64(window))
	return min(t, time.Duration(len(r.starts))*r.cfg.Window, time.Duration(math.MaxInt32)*time.Millisecond)
}
