package link

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/model"
)

// DefaultTransactionTimeout is how long after a promotion a transaction
// the source left open is aborted, when the link sets no time: the Java
// producer's default transaction.timeout.ms.
const DefaultTransactionTimeout = time.Minute

// ErrNotCaughtUp: a promotion timed out with mirrors still behind.
var ErrNotCaughtUp = errors.New("link: mirrors not caught up")

// Status is a link and how far each of its mirrors is behind.
type Status struct {
	Name  string       `json:"name"`
	Link  cluster.Link `json:"link"` // the source's secrets hidden
	State string       `json:"state"`
	Error string       `json:"error,omitempty"`
	// OffsetSync is the last group-offset sync of this broker's runner
	// (the active controller's does them).
	OffsetSync   *OffsetSync   `json:"offset_sync,omitempty"`
	OffsetSyncAt *time.Time    `json:"offset_sync_at,omitempty"`
	OffsetError  string        `json:"offset_sync_error,omitempty"`
	Topics       []TopicStatus `json:"topics"`
	// PassedThrough are the members of passed-through groups connected to
	// the broker answering, and PassThroughError the last failure to
	// reach the source's coordinator for one (cleared by a success).
	PassedThrough    []PassedMember `json:"passed_through,omitempty"`
	PassThroughError string         `json:"pass_through_error,omitempty"`
}

// PassedMember is a member of a group the link passes through, connected
// here and a member of the group at the source.
type PassedMember struct {
	Group           string   `json:"group"`
	MemberID        string   `json:"member_id"`
	ClientID        string   `json:"client_id"`
	Host            string   `json:"host"`
	SoftwareName    string   `json:"software_name,omitempty"`
	SoftwareVersion string   `json:"software_version,omitempty"`
	Partitions      []string `json:"partitions"` // as the source assigned them
	// Held says, when its connection closed, when it leaves the
	// source's group unless heard from.
	Held string `json:"held,omitempty"`
}

// TopicStatus is one mirror topic of a link.
type TopicStatus struct {
	Topic      string            `json:"topic"`
	TopicID    string            `json:"topic_id"`
	State      string            `json:"state"`
	Reason     string            `json:"reason,omitempty"`
	Partitions []PartitionStatus `json:"partitions"`
}

// PartitionStatus is one mirror partition: the source's end (its high
// watermark), the mirror's, and the lag between them.
type PartitionStatus struct {
	Partition int32 `json:"partition"`
	// SourceEnd is the source's high watermark, -1 when unknown.
	SourceEnd   int64 `json:"source_end"`
	SourceStart int64 `json:"source_start"`
	MirrorEnd   int64 `json:"mirror_end"`
	MirrorStart int64 `json:"mirror_start"`
	LagRecords  int64 `json:"lag_records"`
	// LagBytes is estimated from the size of the records mirrored so far;
	// LagSeconds is how long since the mirror last held all the source
	// had. Both -1 when the broker answering does not lead the partition.
	LagBytes   int64   `json:"lag_bytes"`
	LagSeconds float64 `json:"lag_seconds"`
	Error      string  `json:"error,omitempty"`
	Stopped    string  `json:"stopped,omitempty"`
	// Truncations counts the times this broker cut the mirror to match
	// its source (after an unclean leader election there), and
	// LastTruncation says the last one.
	Truncations    int    `json:"truncations,omitempty"`
	LastTruncation string `json:"last_truncation,omitempty"`
}

// Status reports a link: its source's ends, read now, against the
// mirrors' ends in this cluster.
func (m *Manager) Status(ctx context.Context, name string) (Status, error) {
	l, ok := m.cfg.Store.Link(name)
	if !ok {
		return Status{}, fmt.Errorf("%w: %s", cluster.ErrUnknownLink, name)
	}
	l.Source = l.Source.Redacted()
	st := Status{Name: name, Link: l, State: "active"}
	if l.Paused {
		st.State = "paused"
	}
	r := m.runner(name)
	if r != nil {
		r.mu.Lock()
		switch {
		case r.clientEr != nil:
			st.State, st.Error = "failed", r.clientEr.Error()
		case r.lastErr != nil:
			st.State, st.Error = "source unreachable", r.lastErr.Error()
		}
		if !r.offsetSyncAt.IsZero() {
			sync, at := r.offsetSync, r.offsetSyncAt
			st.OffsetSync, st.OffsetSyncAt = &sync, &at
			if r.offsetSyncErr != nil {
				st.OffsetError = r.offsetSyncErr.Error()
			}
		}
		r.mu.Unlock()
		st.PassedThrough, st.PassThroughError = r.pass.status()
	}
	topics := m.mirrorTopics(name, nil)
	parts := map[string][]int32{}
	for _, t := range topics {
		for i := range t.Partitions {
			parts[t.Name] = append(parts[t.Name], int32(i))
		}
	}
	srcEnds, srcStarts := map[model.TopicPartition]int64{}, map[model.TopicPartition]int64{}
	if r != nil && r.cl != nil && len(parts) > 0 {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		if srcEnds, err = listOffsets(sctx, r.cl, parts, -1, 0); err == nil {
			srcStarts, err = listOffsets(sctx, r.cl, parts, -2, 0)
		}
		cancel()
		if err != nil && st.Error == "" {
			st.Error = "reading the source's offsets: " + err.Error()
		}
	}
	ends, starts, err := m.localOffsets(ctx, parts)
	if err != nil {
		return Status{}, err
	}
	now := m.cfg.Now()
	for _, t := range topics {
		ts := TopicStatus{Topic: t.Name, TopicID: t.ID.String(), State: t.Mirror.State, Reason: t.Mirror.Reason}
		for i := range t.Partitions {
			tp := model.TopicPartition{Topic: t.Name, Partition: int32(i)}
			ps := PartitionStatus{Partition: int32(i), SourceEnd: -1, SourceStart: -1, MirrorEnd: ends[tp], MirrorStart: starts[tp],
				LagBytes: -1, LagSeconds: -1}
			if v, ok := srcEnds[tp]; ok {
				ps.SourceEnd = v
			}
			if v, ok := srcStarts[tp]; ok {
				ps.SourceStart = v
			}
			if r != nil {
				r.localPartition(tp, &ps, now)
			}
			if ps.SourceEnd >= 0 {
				ps.LagRecords = max(0, ps.SourceEnd-ps.MirrorEnd)
			}
			if ps.LagRecords == 0 && ps.LagSeconds > 0 {
				ps.LagSeconds = 0
			}
			ts.Partitions = append(ts.Partitions, ps)
		}
		st.Topics = append(st.Topics, ts)
	}
	return st, nil
}

// localPartition adds what this broker knows of a mirror partition it
// leads: the source's end as last fetched (when not read now), the bytes
// and seconds behind, the last failure.
func (r *runner) localPartition(tp model.TopicPartition, ps *PartitionStatus, now time.Time) {
	r.mu.Lock()
	mp := r.parts[tp]
	r.mu.Unlock()
	if mp == nil {
		return
	}
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if ps.SourceEnd < 0 && mp.sourceHW >= 0 {
		ps.SourceEnd, ps.SourceStart = mp.sourceHW, mp.sourceStart
	}
	end := mp.p.HighWatermark()
	if ps.SourceEnd >= 0 {
		ps.LagBytes = int64(float64(max(0, ps.SourceEnd-end)) * mp.bytesPerRecord)
	}
	ps.LagSeconds = now.Sub(mp.caughtUpAt).Seconds()
	if mp.sourceHW >= 0 && end >= mp.sourceHW {
		ps.LagSeconds = 0
	}
	if mp.err != nil {
		ps.Error = mp.err.Error()
	}
	ps.Stopped = mp.stopped
	ps.Truncations, ps.LastTruncation = mp.truncations, mp.lastTruncation
}

// mirrorTopics returns the link's mirror topics, or those of them named.
func (m *Manager) mirrorTopics(link string, names []string) []cluster.Topic {
	var out []cluster.Topic
	for _, t := range m.cfg.Store.Topics() {
		if t.Mirror != nil && t.Mirror.Link == link && (len(names) == 0 || slices.Contains(names, t.Name)) {
			out = append(out, t)
		}
	}
	return out
}

// localOffsets reads this cluster's high watermarks and log starts.
func (m *Manager) localOffsets(ctx context.Context, parts map[string][]int32) (ends, starts map[model.TopicPartition]int64, err error) {
	if len(parts) == 0 {
		return nil, nil, nil
	}
	cl, err := m.cfg.Local()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if ends, err = listOffsets(ctx, cl, parts, -1, 0); err != nil {
		return nil, nil, fmt.Errorf("reading the mirrors' ends: %w", err)
	}
	if starts, err = listOffsets(ctx, cl, parts, -2, 0); err != nil {
		return nil, nil, fmt.Errorf("reading the mirrors' starts: %w", err)
	}
	return ends, starts, nil
}

// PromoteReport says what a promotion or failover did, per topic.
type PromoteReport struct {
	Link     string        `json:"link"`
	Failover bool          `json:"failover"`
	Topics   []TopicStatus `json:"topics"` // as they were when promoted
}

// Promote makes mirror topics (those named, or all of the link's)
// ordinary writable topics. A promotion waits, up to timeout, until each
// partition holds everything the source has committed and no source
// transaction is open on it (the source's last stable offset is its high
// watermark); a failover does not wait nor ask the source, and reports
// the lag each partition had when last known.
func (m *Manager) Promote(ctx context.Context, name string, topics []string, failover bool, timeout time.Duration) (PromoteReport, error) {
	rep := PromoteReport{Link: name, Failover: failover}
	if _, ok := m.cfg.Store.Link(name); !ok {
		return rep, fmt.Errorf("%w: %s", cluster.ErrUnknownLink, name)
	}
	mirrors := m.mirrorTopics(name, topics)
	for _, t := range topics {
		if !slices.ContainsFunc(mirrors, func(x cluster.Topic) bool { return x.Name == t }) {
			return rep, fmt.Errorf("%w: topic %s is not a mirror of link %s", cluster.ErrInvalidLink, t, name)
		}
	}
	if len(mirrors) == 0 {
		return rep, fmt.Errorf("%w: link %s has no mirror topic to promote", cluster.ErrInvalidLink, name)
	}
	if !failover {
		if err := m.waitCaughtUp(ctx, name, mirrors, timeout); err != nil {
			return rep, err
		}
	}
	if l, _ := m.cfg.Store.Link(name); l.SyncGroupOffsets && !failover {
		// A last sync, so that consumers moving now start where they
		// stopped at the source.
		if r := m.runner(name); r != nil && r.cl != nil {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := m.syncGroupOffsets(sctx, l, r.cl)
			cancel()
			if err != nil {
				return rep, fmt.Errorf("the last group-offset sync before promoting: %w", err)
			}
		}
	}
	st, err := m.Status(ctx, name)
	if err != nil && !failover {
		return rep, err
	}
	l, _ := m.cfg.Store.Link(name)
	abortAfter := l.TransactionTimeoutMs
	if abortAfter <= 0 {
		abortAfter = DefaultTransactionTimeout.Milliseconds()
	}
	for _, t := range mirrors {
		if err := m.cfg.Store.PromoteMirror(t.Name, name, m.cfg.Now().UnixMilli(), abortAfter); err != nil {
			return rep, fmt.Errorf("promoting %s: %w", t.Name, err)
		}
		for _, ts := range st.Topics {
			if ts.Topic == t.Name {
				rep.Topics = append(rep.Topics, ts)
			}
		}
		m.logger.Info("mirror topic promoted", "link", name, "topic", t.Name, "failover", failover)
	}
	return rep, nil
}

// waitCaughtUp waits until every partition of the topics holds the
// source's high watermark, and the source has no transaction open on it.
func (m *Manager) waitCaughtUp(ctx context.Context, name string, topics []cluster.Topic, timeout time.Duration) error {
	r := m.runner(name)
	if r == nil || r.cl == nil {
		return fmt.Errorf("%w: link %s is paused or cannot reach its source: promote needs the source (failover does not)",
			ErrNotCaughtUp, name)
	}
	parts := map[string][]int32{}
	for _, t := range topics {
		for i := range t.Partitions {
			parts[t.Name] = append(parts[t.Name], int32(i))
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		behind, err := m.behind(ctx, r.cl, parts)
		if err == nil && len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("%w: %v", ErrNotCaughtUp, err)
			}
			return fmt.Errorf("%w after %s: %s", ErrNotCaughtUp, timeout, strings.Join(behind, "; "))
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// behind lists the partitions that do not yet hold all the source has
// committed, or on which a source transaction is open.
func (m *Manager) behind(ctx context.Context, src *kgo.Client, parts map[string][]int32) ([]string, error) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	hws, err := listOffsets(sctx, src, parts, -1, 0)
	if err != nil {
		return nil, fmt.Errorf("reading the source's ends: %w", err)
	}
	lsos, err := listOffsets(sctx, src, parts, -1, 1)
	if err != nil {
		return nil, fmt.Errorf("reading the source's last stable offsets: %w", err)
	}
	ends, _, err := m.localOffsets(ctx, parts)
	if err != nil {
		return nil, err
	}
	var out []string
	for tp, hw := range hws {
		switch {
		case ends[tp] < hw:
			out = append(out, fmt.Sprintf("%s at %d of %d", tp, ends[tp], hw))
		case lsos[tp] < hw:
			out = append(out, fmt.Sprintf("%s has a source transaction open from offset %d", tp, lsos[tp]))
		}
	}
	slices.Sort(out)
	return out, nil
}

// PartitionLag is what this broker knows of a mirror partition it leads,
// for /metrics.
type PartitionLag struct {
	Link       string
	Topic      string
	Partition  int32
	LagRecords int64   // the source's high watermark as last fetched, less the mirror's
	LagSeconds float64 // since the mirror last held all the source had
	LagBytes   int64   // estimated from the records mirrored so far
	Stopped    bool
	Failing    bool // the last fetch or append failed
}

// Lag reports the mirror partitions this broker leads; each broker
// reports its own, so a scrape of every broker counts each once.
func (m *Manager) Lag() []PartitionLag {
	m.mu.Lock()
	rs := make([]*runner, 0, len(m.runners))
	for _, r := range m.runners {
		rs = append(rs, r)
	}
	m.mu.Unlock()
	now := m.cfg.Now()
	var out []PartitionLag
	for _, r := range rs {
		r.mu.Lock()
		name := r.link.Name
		parts := make([]*mirrorPart, 0, len(r.parts))
		for _, mp := range r.parts {
			parts = append(parts, mp)
		}
		r.mu.Unlock()
		for _, mp := range parts {
			end := mp.p.HighWatermark()
			mp.mu.Lock()
			pl := PartitionLag{Link: name, Topic: mp.p.TP.Topic, Partition: mp.p.TP.Partition,
				Stopped: mp.stopped != "", Failing: mp.err != nil}
			if mp.sourceHW >= 0 {
				pl.LagRecords = max(0, mp.sourceHW-end)
				pl.LagBytes = int64(float64(pl.LagRecords) * mp.bytesPerRecord)
			}
			if pl.LagRecords > 0 || mp.sourceHW < 0 {
				pl.LagSeconds = now.Sub(mp.caughtUpAt).Seconds()
			}
			mp.mu.Unlock()
			out = append(out, pl)
		}
	}
	return out
}
