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

// Group offsets. For the groups the link's group filter matches (but
// those promoted, which live here now), the
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
// active mirror topics from the source; only those of the groups named in
// only when given (a group moving home).
func (m *Manager) syncGroupOffsets(ctx context.Context, l cluster.Link, src *kgo.Client, only ...string) (OffsetSync, error) {
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
	groups := only
	if len(only) == 0 {
		listed, err := sadm.ListGroups(ctx)
		if err != nil {
			return res, fmt.Errorf("listing the source's groups: %w", err)
		}
		for _, g := range listed.Groups() {
			if match(g) && !l.Promoted(g) {
				groups = append(groups, g)
			}
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
	gs := &groupSync{m: m, ctx: ctx, link: l, source: strings.Join(l.Source.BootstrapServers, ","), src: src, sadm: sadm,
		ladm: ladm, mirrors: mirrors, parts: parts, ends: ends, groups: groups, res: &res}
	if l.ReverseOffsetSync {
		// Copying back needs to know that a group has no member there.
		if gs.srcMembers, err = sadm.DescribeGroups(ctx, groups...); err != nil {
			return res, fmt.Errorf("describing the groups at the source: %w", err)
		}
	}
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
		} else if err := gs.copyForward(g, committed, current); err != nil {
			return res, err
		}
		if l.ReverseOffsetSync && len(gs.srcMembers[g].Members) == 0 {
			if err := gs.copyBack(g, committed, current); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// groupSync is one group-offset sync: both sides as it reads them.
type groupSync struct {
	m          *Manager
	ctx        context.Context
	link       cluster.Link
	source     string // the source's bootstrap servers, for the ledger
	src        *kgo.Client
	sadm, ladm *kadm.Client
	mirrors    map[string]int32 // the link's active mirror topics, and their partitions
	parts      map[string][]int32
	ends       map[model.TopicPartition]int64 // the mirrors' high watermarks
	groups     []string
	res        *OffsetSync
	// What the ledger records of the source, read once per sync and only
	// if something is copied: its partitions' ends and its groups'
	// members.
	srcRead    bool
	srcEnds    map[model.TopicPartition]int64
	srcMembers kadm.DescribedGroups
}

// readSource reads the source's ends and members for the ledger, once.
func (s *groupSync) readSource() {
	if s.srcRead {
		return
	}
	s.srcRead = true
	s.srcEnds, _ = listOffsets(s.ctx, s.src, s.parts, -1, 0)
	if s.srcMembers == nil {
		s.srcMembers, _ = s.sadm.DescribeGroups(s.ctx, s.groups...)
	}
}

// copyForward commits here the source's commits of group g that are ahead
// of the ones here (a group is never moved back: once it has run here,
// its own commits win), capped at the mirrors' ends, and records each in
// the ledger.
func (s *groupSync) copyForward(g string, committed, current kadm.OffsetResponses) error {
	commit := kadm.Offsets{}
	sourceAt := map[model.TopicPartition]int64{}
	committed.Each(func(o kadm.OffsetResponse) {
		if _, ok := s.mirrors[o.Topic]; !ok || o.At < 0 {
			return
		}
		tp := model.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		at := o.At
		if end, ok := s.ends[tp]; !ok || at > end {
			at = end // never past what the mirror holds
			s.res.Capped++
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
	resp, err := s.ladm.CommitOffsets(s.ctx, g, commit)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("committing group %s here: %w", g, err)
	}
	commit.Each(func(kadm.Offset) { s.res.Committed++ })
	if s.m.cfg.Ledger == nil {
		return nil
	}
	s.readSource()
	members := len(s.srcMembers[g].Members)
	now := s.m.cfg.Now()
	commit.Each(func(o kadm.Offset) {
		tp := model.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		e := ledger.Entry{V: ledger.Version, Type: ledger.TypeLinkCommit, Time: now, Group: g, Topic: o.Topic,
			Partition: o.Partition, Committed: -1, LastFetched: -1, LastSent: -1, FirstFetched: -1, LogStart: -1,
			DuplicateRisk: -1, Skipped: -1, Rewound: -1, Link: s.link.Name, Source: s.source,
			Offset: ptr(o.At), SourceOffset: ptr(sourceAt[tp]), SourceMembers: &members}
		if end, ok := s.srcEnds[tp]; ok {
			e.SourceEnd = ptr(end)
		}
		s.m.cfg.Ledger(e)
	})
	return nil
}

// copyBack commits at the source the commits here of group g that are
// ahead of the source's, for the link's mirror topics, so that consumers
// that moved here can go back at the exact offset. The caller checked that
// the group has no member at the source (which would refuse the commit).
func (s *groupSync) copyBack(g string, committed, current kadm.OffsetResponses) error {
	back := kadm.Offsets{}
	current.Each(func(o kadm.OffsetResponse) {
		if _, ok := s.mirrors[o.Topic]; !ok || o.At < 0 {
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
	resp, err := s.sadm.CommitOffsets(s.ctx, g, back)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("committing group %s back at the source: %w", g, err)
	}
	back.Each(func(kadm.Offset) { s.res.CopiedBack++ })
	return nil
}

func ptr[T any](v T) *T { return &v }

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
