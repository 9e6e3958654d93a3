package link

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
)

// A passed-through group moves home once every member it has on the source
// is one connected here: PromoteGroup copies its offsets from the source a
// last time, records it in the link as promoted (from then on this
// cluster coordinates it, and the link neither passes it through nor
// copies its offsets), and takes the members connected here out of the
// source's group. Their next group request here is answered by this
// cluster's coordinator, which does not know them (UNKNOWN_MEMBER_ID), so
// they join it, and resume from the offsets copied, which the source's
// are. Until then the group can go back to the source whole.

// GroupPromotion is what PromoteGroup did.
type GroupPromotion struct {
	Link  string `json:"link"`
	Group string `json:"group"`
	// Members is how many members connected here left the source's group
	// to join this cluster's.
	Members int `json:"members"`
	// Committed is how many partitions' commits the last copy moved here.
	Committed int `json:"committed"`
}

// ErrGroupOnSource: a group asked to move home still has members on the
// source that are not connected here.
var ErrGroupOnSource = errors.New("link: the group has members on the source")

// PromoteGroup makes this cluster the coordinator of a group the link
// passes through; the members it has on the source must all be connected
// to this broker (in a cluster, the group's coordinator here).
func (m *Manager) PromoteGroup(ctx context.Context, store linkAlterer, name, group string) (GroupPromotion, error) {
	res := GroupPromotion{Link: name, Group: group}
	l, ok := m.cfg.Store.Link(name)
	if !ok {
		return res, fmt.Errorf("%w: %s", cluster.ErrUnknownLink, name)
	}
	match, err := l.Groups.Compile()
	if err != nil {
		return res, err
	}
	switch {
	case !l.GroupPassThrough:
		return res, fmt.Errorf("%w: link %s passes no group through (--group-pass-through)", cluster.ErrInvalidLink, name)
	case !match(group):
		return res, fmt.Errorf("%w: link %s's group filter does not match %s", cluster.ErrInvalidLink, name, group)
	case l.Promoted(group):
		return res, nil // done before
	}
	r := m.runner(name)
	if r == nil || r.cl == nil {
		return res, fmt.Errorf("link %s does not run on this broker (paused, or its source client failed)", name)
	}
	onSource, err := sourceGroupMembers(ctx, r.cl, group)
	if err != nil {
		return res, fmt.Errorf("describing group %s at the source: %w", group, err)
	}
	here := r.pass.memberIDs(group)
	var elsewhere []string
	for _, mem := range onSource {
		if !slices.Contains(here, mem.id) {
			elsewhere = append(elsewhere, mem.String())
		}
	}
	if len(elsewhere) > 0 {
		return res, fmt.Errorf("%w: %d of its %d members at the source are not connected to this broker (%s): "+
			"stop or move them first (in a cluster, ask the admin listener of the group's coordinator here)",
			ErrGroupOnSource, len(elsewhere), len(onSource), strings.Join(elsewhere, ", "))
	}
	// The last copy, while the members still commit at the source and
	// here alike.
	sync, err := m.syncGroupOffsets(ctx, l, r.cl, group)
	if err != nil {
		return res, err
	}
	res.Committed = sync.Committed
	l.PromotedGroups = append(l.PromotedGroups, group)
	if err := store.AlterLink(l); err != nil {
		return res, err
	}
	// Served here from the moment this broker's runner has it.
	for deadline := time.Now().Add(10 * time.Second); !r.current().Promoted(group); {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return res, fmt.Errorf("link %s: the promotion of group %s was recorded but this broker has not applied it yet", name, group)
		}
		time.Sleep(10 * time.Millisecond)
	}
	res.Members = r.pass.leaveGroup(ctx, r, group)
	m.logger.Info("group moved home from the link's source", "link", name, "group", group, "members", res.Members,
		"committed", res.Committed)
	return res, nil
}

// autoPromote moves home, on a link that promotes groups by itself, each
// passed-through group all of whose members at the source are connected
// here. A group with a member left there stays passed through: that is no
// error.
func (r *runner) autoPromote() {
	l := r.current()
	if !l.AutoPromoteGroups || !l.GroupPassThrough || r.cl == nil {
		return
	}
	for _, group := range r.pass.groups() {
		ctx, cancel := context.WithTimeout(r.ctx, 15*time.Second)
		res, err := r.m.PromoteGroup(ctx, r.m.cfg.Store, l.Name, group)
		cancel()
		switch {
		case errors.Is(err, ErrGroupOnSource):
		case err != nil:
			r.warnOnce("auto-promote:"+group+err.Error(), "moving a group home failed", "group", group, "err", err)
		case res.Members > 0:
			r.logger.Info("moved a group home by itself: no member of it was left on the source", "group", group)
		}
	}
}

// groups returns the groups with members connected here.
func (p *passThrough) groups() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for key := range p.members {
		if !slices.Contains(out, key.group) {
			out = append(out, key.group)
		}
	}
	slices.Sort(out)
	return out
}

// linkAlterer records a link's new settings.
type linkAlterer interface{ AlterLink(l cluster.Link) error }

// memberIDs returns the ids of a group's members connected here.
func (p *passThrough) memberIDs(group string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for key := range p.members {
		if key.group == group {
			ids = append(ids, key.member)
		}
	}
	return ids
}

// leaveGroup takes every member of a group connected here out of the
// source's group, and returns how many there were.
func (p *passThrough) leaveGroup(ctx context.Context, r *runner, group string) int {
	p.mu.Lock()
	var keys []memberKey
	var pms []*passMember
	for key, pm := range p.members {
		if key.group == group {
			keys, pms = append(keys, key), append(pms, pm)
			delete(p.members, key)
			if pm.grace != nil {
				pm.grace.Stop()
			}
		}
	}
	p.mu.Unlock()
	for i, pm := range pms {
		if err := leaveSource(ctx, pm, keys[i]); err != nil {
			r.logger.Warn("a member of a group moved home did not leave the source's group: it stays there until its session ends",
				"group", group, "member", keys[i].member, "err", err)
		}
		pm.cl.Close()
	}
	return len(pms)
}

// sourceMember is a member of a group at the source.
type sourceMember struct{ id, clientID, host string }

func (s sourceMember) String() string { return fmt.Sprintf("%s of %s at %s", s.id, s.clientID, s.host) }

// sourceGroupMembers describes a group at the source: a consumer group
// (KIP-848) or a classic one.
func sourceGroupMembers(ctx context.Context, cl *kgo.Client, group string) ([]sourceMember, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 {
		var out []sourceMember
		for _, mem := range resp.Groups[0].Members {
			out = append(out, sourceMember{id: mem.MemberID, clientID: mem.ClientID, host: mem.ClientHost})
		}
		return out, nil
	}
	// Not a consumer group (GROUP_ID_NOT_FOUND), or a source without
	// them: a classic group.
	described, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	d := described[group]
	if d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
		return nil, d.Err
	}
	var out []sourceMember
	for _, mem := range d.Members {
		out = append(out, sourceMember{id: mem.MemberID, clientID: mem.ClientID, host: mem.ClientHost})
	}
	return out, nil
}
