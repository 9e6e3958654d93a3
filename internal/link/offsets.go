package link

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/model"
)

// Group offsets. For the groups the link's group filter matches, the
// source's committed offsets of the link's active mirror topics are
// committed here every interval, while the group has no member here and
// only where they are ahead of the commits here (a group that has run
// here is never moved back): offsets are the same on both sides, so
// nothing is translated. With ReverseOffsetSync, the commits here that
// are ahead of the source's are copied back to the source while the group
// has no member there, so that consumers can go back. A commit
// is never ahead of the mirror's high watermark, so a consumer that
// starts here never lands past what the mirror holds. The source's
// commit carries a leader epoch of the source's partition, which means
// nothing here (the mirror has its own epochs): the commit here has none
// (-1), so a consumer starting here does not check its position against
// another cluster's epochs.

// defaultOffsetSyncInterval is used when the link sets none.
const defaultOffsetSyncInterval = 5 * time.Second

func offsetSyncInterval(l cluster.Link) time.Duration {
	if l.OffsetSyncIntervalMs > 0 {
		return time.Duration(l.OffsetSyncIntervalMs) * time.Millisecond
	}
	return defaultOffsetSyncInterval
}

// OffsetSync is what one group-offset sync did.
type OffsetSync struct {
	Groups    int `json:"groups"`    // groups the filter matched at the source
	Skipped   int `json:"skipped"`   // of them, with members here
	Committed int `json:"committed"` // partitions whose commit changed here
	Capped    int `json:"capped"`    // of them, held back at the mirror's end
	// CopiedBack counts the partitions whose commit here was copied back
	// to the source (ReverseOffsetSync).
	CopiedBack int `json:"copied_back,omitempty"`
}

// syncGroupOffsets copies the matched groups' commits of the link's
// active mirror topics from the source.
func (m *Manager) syncGroupOffsets(ctx context.Context, l cluster.Link, src *kgo.Client) (OffsetSync, error) {
	var res OffsetSync
	match, err := l.Groups.Compile()
	if err != nil || len(l.Groups.Include) == 0 {
		return res, err
	}
	mirrors := map[string]int32{}
	for _, t := range m.mirrorTopics(l.Name, nil) {
		if t.Mirror.State == cluster.MirrorActive {
			mirrors[t.Name] = t.Partitions
		}
	}
	if len(mirrors) == 0 {
		return res, nil
	}
	local, err := m.cfg.Local()
	if err != nil {
		return res, err
	}
	sadm, ladm := kadm.NewClient(src), kadm.NewClient(local)
	listed, err := sadm.ListGroups(ctx)
	if err != nil {
		return res, fmt.Errorf("listing the source's groups: %w", err)
	}
	var groups []string
	for _, g := range listed.Groups() {
		if match(g) {
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	res.Groups = len(groups)
	if len(groups) == 0 {
		return res, nil
	}
	described, err := ladm.DescribeGroups(ctx, groups...)
	if err != nil {
		return res, fmt.Errorf("describing the groups here: %w", err)
	}
	parts := map[string][]int32{}
	for t, n := range mirrors {
		for p := range n {
			parts[t] = append(parts[t], p)
		}
	}
	ends, _, err := m.localOffsets(ctx, parts)
	if err != nil {
		return res, err
	}
	// For the ledger, read once per sync and only if something is copied:
	// the source partitions' ends and the groups' members there.
	var (
		srcEnds    map[model.TopicPartition]int64
		srcMembers kadm.DescribedGroups
	)
	sourceState := func() {
		if srcEnds != nil || m.cfg.Ledger == nil {
			return
		}
		srcEnds, _ = listOffsets(ctx, src, parts, -1, 0)
		srcMembers, _ = sadm.DescribeGroups(ctx, groups...)
		if srcEnds == nil {
			srcEnds = map[model.TopicPartition]int64{}
		}
	}
	if l.ReverseOffsetSync && srcMembers == nil {
		if srcMembers, err = sadm.DescribeGroups(ctx, groups...); err != nil {
			return res, fmt.Errorf("describing the groups at the source: %w", err)
		}
	}
	source := strings.Join(l.Source.BootstrapServers, ",")
	for _, g := range groups {
		here := described[g]
		if len(here.Members) > 0 && !l.ReverseOffsetSync {
			res.Skipped++
			continue // its consumers run here now: their commits win
		}
		committed, err := sadm.FetchOffsets(ctx, g)
		if err == nil {
			err = committed.Error()
		}
		if err != nil {
			return res, fmt.Errorf("reading group %s at the source: %w", g, err)
		}
		current, err := ladm.FetchOffsets(ctx, g)
		if err == nil {
			err = current.Error()
		}
		if err != nil {
			return res, fmt.Errorf("reading group %s here: %w", g, err)
		}
		if len(here.Members) > 0 {
			res.Skipped++
		} else if err := m.copyForward(ctx, l, source, g, committed, current, mirrors, ends, sourceState, &srcEnds, &srcMembers, &res); err != nil {
			return res, err
		}
		if l.ReverseOffsetSync && len(srcMembers[g].Members) == 0 {
			if err := copyBack(ctx, sadm, g, committed, current, mirrors, &res); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

func ptr[T any](v T) *T { return &v }

// copyForward commits here the source's commits of group g that are ahead
// of the ones here (a group is never moved back: once it has run here,
// its own commits win), capped at the mirrors' ends, and records each in
// the ledger.
func (m *Manager) copyForward(ctx context.Context, l cluster.Link, source, g string, committed, current kadm.OffsetResponses,
	mirrors map[string]int32, ends map[model.TopicPartition]int64, sourceState func(),
	srcEnds *map[model.TopicPartition]int64, srcMembers *kadm.DescribedGroups, res *OffsetSync) error {
	commit := kadm.Offsets{}
	sourceAt := map[model.TopicPartition]int64{}
	committed.Each(func(o kadm.OffsetResponse) {
		if _, ok := mirrors[o.Topic]; !ok || o.At < 0 {
			return
		}
		tp := model.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		at := o.At
		if end, ok := ends[tp]; !ok || at > end {
			at = end // never past what the mirror holds
			res.Capped++
		}
		if cur, ok := current.Lookup(o.Topic, o.Partition); ok && cur.Err == nil && cur.At >= 0 &&
			(cur.At > at || cur.At == at && cur.Metadata == o.Metadata) {
			return
		}
		commit.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: at, LeaderEpoch: -1, Metadata: o.Metadata})
		sourceAt[tp] = o.At
	})
	if len(commit) == 0 {
		return nil
	}
	local, err := m.cfg.Local()
	if err != nil {
		return err
	}
	resp, err := kadm.NewClient(local).CommitOffsets(ctx, g, commit)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("committing group %s here: %w", g, err)
	}
	commit.Each(func(kadm.Offset) { res.Committed++ })
	if m.cfg.Ledger == nil {
		return nil
	}
	sourceState()
	members := len((*srcMembers)[g].Members)
	now := m.cfg.Now()
	commit.Each(func(o kadm.Offset) {
		tp := model.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		e := ledger.Entry{V: ledger.Version, Type: ledger.TypeLinkCommit, Time: now, Group: g, Topic: o.Topic,
			Partition: o.Partition, Committed: -1, LastFetched: -1, LastSent: -1, FirstFetched: -1, LogStart: -1,
			DuplicateRisk: -1, Skipped: -1, Rewound: -1, Link: l.Name, Source: source,
			Offset: ptr(o.At), SourceOffset: ptr(sourceAt[tp]), SourceMembers: &members}
		if end, ok := (*srcEnds)[tp]; ok {
			e.SourceEnd = ptr(end)
		}
		m.cfg.Ledger(e)
	})
	return nil
}

// copyBack commits at the source the commits here of group g that are
// ahead of the source's, for the link's mirror topics, so that consumers
// that moved here can go back at the exact offset. The caller checked that
// the group has no member at the source (which would refuse the commit).
func copyBack(ctx context.Context, sadm *kadm.Client, g string, committed, current kadm.OffsetResponses,
	mirrors map[string]int32, res *OffsetSync) error {
	back := kadm.Offsets{}
	current.Each(func(o kadm.OffsetResponse) {
		if _, ok := mirrors[o.Topic]; !ok || o.At < 0 {
			return
		}
		if src, ok := committed.Lookup(o.Topic, o.Partition); ok && src.Err == nil && src.At >= o.At {
			return
		}
		back.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.At, LeaderEpoch: -1, Metadata: o.Metadata})
	})
	if len(back) == 0 {
		return nil
	}
	resp, err := sadm.CommitOffsets(ctx, g, back)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("committing group %s back at the source: %w", g, err)
	}
	back.Each(func(kadm.Offset) { res.CopiedBack++ })
	return nil
}

// syncOffsetsLoop copies group offsets every interval while this broker
// is the active controller and the link asks for it.
func (r *runner) syncOffsetsLoop() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		l := r.link
		r.mu.Unlock()
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(offsetSyncInterval(l)):
		}
		if !l.SyncGroupOffsets || !r.m.isController() {
			continue
		}
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
		res, err := r.m.syncGroupOffsets(ctx, l, r.cl)
		cancel()
		r.mu.Lock()
		r.offsetSync, r.offsetSyncErr, r.offsetSyncAt = res, err, r.m.cfg.Now()
		r.mu.Unlock()
		if err != nil && r.ctx.Err() == nil {
			r.warnOnce("offsets:"+err.Error(), "copying group offsets from the source failed", "err", err)
		}
	}
}
