package admin

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/group"
)

// eachCoordinator ends the help of the group metrics: a group's series
// come from its coordinator only, so that scraping every broker counts
// each group once (see doc.go).
const eachCoordinator = " Exported by the group's coordinator only: scrape every broker."

// Metrics is the broker's Prometheus registry and the counters the
// request path and the group coordinator feed. Its methods are safe for
// concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	requests [kmsg.MaxKey + 1]prometheus.Observer

	produced, fetched       *prometheus.CounterVec
	producedRecords         *prometheus.CounterVec
	producedBy, fetchedBy   sync.Map // topic -> prometheus.Counter
	producedRecordsBy       sync.Map // topic -> prometheus.Counter
	fetchedRecords          *prometheus.CounterVec
	fetchedRecordsBy        sync.Map // topic -> prometheus.Counter
	rebalances, handoffs    *prometheus.CounterVec
	duplicateRisk, skipped  *prometheus.CounterVec
	rewound, commitNotOwned *prometheus.CounterVec
	unowned                 *prometheus.HistogramVec
	errors                  *prometheus.CounterVec
	errorsBy                sync.Map // errorKey -> prometheus.Counter
}

// NewMetrics makes the registry, with the Go runtime's and the process's
// collectors.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strand_request_duration_seconds",
		Help:    "Kafka requests served, by API, from when a request was read to when its answer was written.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18), // 0.1 ms to 13 s
	}, []string{"api"})
	for key := range m.requests {
		if name := kmsg.NameForKey(int16(key)); name != "" {
			m.requests[key] = latency.WithLabelValues(name)
		}
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m.produced = counter("strand_produce_bytes_total", "Record batch bytes appended by producers, by topic.", "topic")
	m.fetched = counter("strand_fetch_bytes_total", "Record batch bytes sent to consumers (not to followers), by topic.", "topic")
	m.producedRecords = counter("strand_produce_records_total",
		"Records appended by producers, by topic (Kafka's MessagesInPerSec); a producer's retry of a written batch counts none.", "topic")
	m.fetchedRecords = counter("strand_fetch_records_total",
		"Records sent to consumers (not to followers), by topic: the offsets past each fetch offset, a compacted topic's gaps and transaction markers included.",
		"topic")
	m.rebalances = counter("strand_group_rebalances_total",
		"Rebalances of the groups this broker coordinates: a classic group's new generation, a consumer group's new target assignment."+
			eachCoordinator, "group")
	m.handoffs = counter("strand_group_handoffs_total", "Partitions that changed owner (first assignments included)."+eachCoordinator,
		"group")
	m.duplicateRisk = counter("strand_group_handoff_duplicate_risk_records_total",
		"Records sent to a partition's previous owner past the committed offset, which its new owner is sent again."+eachCoordinator,
		"group")
	m.skipped = counter("strand_group_handoff_skipped_records_total",
		"Records a partition's new owner started past: between the committed offset and its first fetch (a group's first start, with nothing committed, is its offset reset and not counted)."+eachCoordinator, "group")
	m.rewound = counter("strand_group_handoff_rewound_records_total",
		"Records below the committed offset a partition's new owner started at."+eachCoordinator, "group")
	m.commitNotOwned = counter("strand_group_commits_not_owned_total",
		"Commits by a member of partitions it did not own."+eachCoordinator, "group")
	m.unowned = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "strand_group_handoff_unowned_seconds",
		Help: "How long a partition went unread at a hand-off: from its previous owner's last fetch to its new owner's first, " +
			"when both are known." + eachCoordinator,
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14), // 10 ms to 82 s
	}, []string{"group"})
	m.errors = counter("strand_request_errors_total",
		"Error codes in the answers to Kafka requests, by API and error (Kafka's ErrorsPerSec): each partition, topic or resource with an error counts once.",
		"api", "error")
	m.reg.MustRegister(m.unowned, m.errors)
	m.reg.MustRegister(latency, m.produced, m.fetched, m.producedRecords, m.fetchedRecords, m.rebalances, m.handoffs, m.duplicateRisk, m.skipped, m.rewound,
		m.commitNotOwned)
	return m
}

// Request counts one request of API key, served in d.
func (m *Metrics) Request(key int16, d time.Duration) {
	if key >= 0 && int(key) < len(m.requests) && m.requests[key] != nil {
		m.requests[key].Observe(d.Seconds())
	}
}

// Produced counts bytes and records appended to topic (protocol.Meter).
func (m *Metrics) Produced(topic string, bytes int, records int64) {
	counterOf(&m.producedBy, m.produced, topic).Add(float64(bytes))
	counterOf(&m.producedRecordsBy, m.producedRecords, topic).Add(float64(records))
}

// Fetched counts bytes and records of topic sent to consumers
// (protocol.Meter).
func (m *Metrics) Fetched(topic string, bytes, records int64) {
	counterOf(&m.fetchedBy, m.fetched, topic).Add(float64(bytes))
	if records > 0 {
		counterOf(&m.fetchedRecordsBy, m.fetchedRecords, topic).Add(float64(records))
	}
}

// counterOf resolves a topic's series once: the label lookup hashes and
// locks, the cached counter only adds.
func counterOf(cache *sync.Map, vec *prometheus.CounterVec, topic string) prometheus.Counter {
	if c, ok := cache.Load(topic); ok {
		return c.(prometheus.Counter)
	}
	c, _ := cache.LoadOrStore(topic, vec.WithLabelValues(topic))
	return c.(prometheus.Counter)
}

// Forget drops a deleted topic's series.
func (m *Metrics) Forget(topic string) {
	m.producedBy.Delete(topic)
	m.fetchedBy.Delete(topic)
	m.producedRecordsBy.Delete(topic)
	m.fetchedRecordsBy.Delete(topic)
	m.produced.DeleteLabelValues(topic)
	m.fetched.DeleteLabelValues(topic)
	m.producedRecords.DeleteLabelValues(topic)
	m.fetchedRecords.DeleteLabelValues(topic)
}

// Event counts a group's rebalances and commits of partitions not owned
// (group.Watcher).
func (m *Metrics) Event(groupID string, e group.Event) {
	switch e.Kind {
	case group.EventGeneration, group.EventAssignment:
		m.rebalances.WithLabelValues(groupID).Inc()
	case group.EventCommitNotOwned:
		m.commitNotOwned.WithLabelValues(groupID).Inc()
	}
}

// Handoff counts a hand-off and what it risked, once its figures are
// known (group.Watcher).
func (m *Metrics) Handoff(groupID string, h group.Handoff) {
	m.handoffs.WithLabelValues(groupID).Inc()
	if n := h.DuplicateRisk(); n > 0 {
		m.duplicateRisk.WithLabelValues(groupID).Add(float64(n))
	}
	// A first start's records past the log start are its offset reset's,
	// not a hand-off's loss (the report gives them apart).
	if n := h.Skipped(); n > 0 && !h.FirstStart() {
		m.skipped.WithLabelValues(groupID).Add(float64(n))
	}
	if n := h.Rewound(); n > 0 {
		m.rewound.WithLabelValues(groupID).Add(float64(n))
	}
	if !h.LastFetchedAt.IsZero() && !h.FirstFetchedAt.IsZero() {
		m.unowned.WithLabelValues(groupID).Observe(h.Unowned().Seconds())
	}
}

// groupCollector exports, at each scrape, every group this broker
// coordinates: its members, and the lag of each committed partition,
// empty groups included (a stalled group with no members shows).
type groupCollector struct {
	groups  Groups
	parts   Partitions
	timeout time.Duration
}

var (
	groupMembersDesc = prometheus.NewDesc("strand_group_members", "Members of a group this broker coordinates."+eachCoordinator,
		[]string{"group", "type", "state"}, nil)
	groupLagDesc = prometheus.NewDesc("strand_group_lag",
		"Records between a group's committed offset and the high watermark."+eachCoordinator,
		[]string{"group", "topic", "partition"}, nil)
	groupLagSecondsDesc = prometheus.NewDesc("strand_group_lag_seconds",
		"How long ago the first record past a group's committed offset was written; 0 without lag."+eachCoordinator,
		[]string{"group", "topic", "partition"}, nil)
)

func (c groupCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupMembersDesc
	ch <- groupLagDesc
	ch <- groupLagSecondsDesc
}

func (c groupCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	now := time.Now()
	for _, v := range c.groups.Views() {
		ch <- prometheus.MustNewConstMetric(groupMembersDesc, prometheus.GaugeValue, float64(len(v.Members)), v.Group, v.Type, v.State)
		for _, pl := range lagOf(ctx, c.parts, v, now) {
			if pl.Lag < 0 {
				continue
			}
			p := itoa(pl.Partition)
			ch <- prometheus.MustNewConstMetric(groupLagDesc, prometheus.GaugeValue, float64(pl.Lag), v.Group, pl.Topic, p)
			if pl.LagSeconds >= 0 {
				ch <- prometheus.MustNewConstMetric(groupLagSecondsDesc, prometheus.GaugeValue, pl.LagSeconds, v.Group, pl.Topic, p)
			}
		}
	}
}

// healthCollector exports, at each scrape, the partition and controller
// figures Kafka operators alert on, with Kafka's meanings: per broker,
// what it leads and of that what is under-replicated or under
// min.insync.replicas; from the active controller alone, the offline
// partitions and the brokers down (so that a sum over brokers counts each
// once).
type healthCollector struct{ health Health }

var (
	activeControllerDesc = prometheus.NewDesc("strand_active_controller",
		"1 on the active controller (the metadata quorum's leader), 0 on the other brokers (Kafka's ActiveControllerCount).", nil, nil)
	leaderPartitionsDesc = prometheus.NewDesc("strand_leader_partitions",
		"Partitions this broker leads (Kafka's LeaderCount).", nil, nil)
	underReplicatedDesc = prometheus.NewDesc("strand_under_replicated_partitions",
		"Partitions this broker leads with fewer in-sync replicas than replicas (Kafka's UnderReplicatedPartitions).", nil, nil)
	underMinISRDesc = prometheus.NewDesc("strand_under_min_isr_partitions",
		"Partitions this broker leads with fewer in-sync replicas than min.insync.replicas: acks=all writes fail (Kafka's UnderMinIsrPartitionCount).",
		nil, nil)
	offlinePartitionsDesc = prometheus.NewDesc("strand_offline_partitions",
		"Partitions without a leader, in the whole cluster (Kafka's OfflinePartitionsCount). Exported by the active controller only.", nil, nil)
	fencedBrokersDesc = prometheus.NewDesc("strand_fenced_brokers",
		"Registered brokers that are down (fenced). Exported by the active controller only.", nil, nil)
)

func (c healthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{activeControllerDesc, leaderPartitionsDesc, underReplicatedDesc, underMinISRDesc,
		offlinePartitionsDesc, fencedBrokersDesc} {
		ch <- d
	}
}

func (c healthCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.health.Health()
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	active := 0
	if r.Controller == r.NodeID {
		active = 1
	}
	gauge(activeControllerDesc, active)
	gauge(leaderPartitionsDesc, r.Led.Partitions)
	gauge(underReplicatedDesc, r.Led.UnderReplicated)
	gauge(underMinISRDesc, r.Led.UnderMinISR)
	if active == 1 {
		gauge(offlinePartitionsDesc, r.OfflinePartitions)
		gauge(fencedBrokersDesc, len(r.DownBrokers))
	}
}

// connectionsCollector exports the open connections by listener and the
// fetch sessions kept.
type connectionsCollector struct{ conns Connections }

var (
	connectionsDesc = prometheus.NewDesc("strand_connections",
		"Open client connections, by listener (Kafka's connection-count).", []string{"listener"}, nil)
	fetchSessionsDesc = prometheus.NewDesc("strand_fetch_sessions",
		"Fetch sessions kept (KIP-227; Kafka's NumIncrementalFetchSessions), of consumers and of followers.",
		[]string{"kind"}, nil)
)

func (c connectionsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connectionsDesc
	ch <- fetchSessionsDesc
}

func (c connectionsCollector) Collect(ch chan<- prometheus.Metric) {
	for name, n := range c.conns.Connections() {
		ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(n), name)
	}
	consumers, followers := c.conns.FetchSessions()
	ch <- prometheus.MustNewConstMetric(fetchSessionsDesc, prometheus.GaugeValue, float64(consumers), "consumer")
	ch <- prometheus.MustNewConstMetric(fetchSessionsDesc, prometheus.GaugeValue, float64(followers), "follower")
}

// replicasCollector exports each replica this broker holds: its log's
// start and end offsets, its high watermark and its size, as Kafka's
// kafka.log:type=Log metrics give them.
type replicasCollector struct{ replicas LocalReplicas }

var (
	replicaLabels      = []string{"topic", "partition", "role"}
	logStartOffsetDesc = prometheus.NewDesc("strand_log_start_offset", "A replica's first offset (Kafka's LogStartOffset).", replicaLabels, nil)
	logEndOffsetDesc   = prometheus.NewDesc("strand_log_end_offset", "A replica's next offset (Kafka's LogEndOffset).", replicaLabels, nil)
	highWatermarkDesc  = prometheus.NewDesc("strand_high_watermark", "A replica's high watermark: what consumers may read.", replicaLabels, nil)
	logSizeDesc        = prometheus.NewDesc("strand_log_size_bytes", "A replica's log size on disk (Kafka's Size).", replicaLabels, nil)
)

func (c replicasCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{logStartOffsetDesc, logEndOffsetDesc, highWatermarkDesc, logSizeDesc} {
		ch <- d
	}
}

func (c replicasCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.replicas.LocalReplicas() {
		role := "follower"
		if r.Leader {
			role = "leader"
		}
		labels := []string{r.Topic, itoa(r.Partition), role}
		for _, m := range []struct {
			d *prometheus.Desc
			v int64
		}{{logStartOffsetDesc, r.LogStart}, {logEndOffsetDesc, r.LogEnd}, {highWatermarkDesc, r.HighWatermark}, {logSizeDesc, r.SizeBytes}} {
			ch <- prometheus.MustNewConstMetric(m.d, prometheus.GaugeValue, float64(m.v), labels...)
		}
	}
}
