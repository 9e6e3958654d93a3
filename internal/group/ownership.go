package group

import (
	"fmt"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// Commits for partitions the committing member does not own: a member
// that commits a partition after it moved on (kafkajs#1046) can rewind
// the new owner's position, which then reads records again. Such commits
// are always reported (a history event and an entry in the ledger); with
// Config.StrictCommitOwnership they are refused, partition by partition,
// with ILLEGAL_GENERATION (classic groups: the member rejoins) or
// STALE_MEMBER_EPOCH (consumer groups: the member heartbeats first).

// NotOwnedCommit is a member's commit for a partition it does not own.
type NotOwnedCommit struct {
	Time       time.Time
	Generation int32 // the generation or member epoch the commit named
	Topic      string
	Partition  int32
	Offset     int64
	Committer  Owner
	Owner      Owner // the partition's owner; zero when nobody owns it
}

// checkOwnership reports the offsets of c that its member does not own
// and, when ownership is strict, refuses them in errs. Commits without a
// member are not checked. Caller holds g.mu.
func (g *group) checkOwnership(c commitCheck, offsets []CommitOffset, errs []error) {
	if c.memberID == "" {
		return
	}
	committer, owns, refusal, ok := g.ownershipOf(c.memberID)
	if !ok {
		return
	}
	now := g.c.clock.Now()
	var names []string
	for i, o := range offsets {
		tp := model.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		if errs[i] != nil || owns(tp) {
			continue
		}
		names = append(names, tp.String())
		nc := NotOwnedCommit{Time: now, Generation: c.generation, Topic: tp.Topic, Partition: tp.Partition, Offset: o.Offset,
			Committer: committer, Owner: g.owners[tp]}
		if nc.Owner.MemberID == c.memberID {
			nc.Owner = Owner{}
		}
		if g.c.cfg.Ledger != nil {
			g.c.cfg.Ledger.CommitNotOwned(g.id, nc)
		}
		if g.c.cfg.StrictCommitOwnership {
			errs[i] = fmt.Errorf("%w: member %s does not own %s", refusal, c.memberID, tp)
		}
	}
	if len(names) == 0 {
		return
	}
	g.c.log.Info("a member committed offsets of partitions it does not own", "group", g.id, "member", c.memberID,
		"partitions", names, "refused", g.c.cfg.StrictCommitOwnership)
	g.hist.event(Event{Time: now, Kind: EventCommitNotOwned, Generation: c.generation, Member: committer,
		Reason: "committed " + strings.Join(names, ", ")})
}

// ownershipOf is how a commit's ownership is judged for member id: the
// member as the history names it, whether it owns a partition, and the
// error a refused commit gets; false when it cannot be told (an unknown
// member, a classic group whose assignments do not parse).
func (g *group) ownershipOf(id string) (Owner, func(model.TopicPartition) bool, error, bool) {
	if cg := g.modern; cg != nil {
		m, ok := cg.members[id]
		if !ok {
			return Owner{}, nil, nil, false
		}
		return m.owner(), func(tp model.TopicPartition) bool {
			t, ok := cg.topics[tp.Topic]
			return ok && (m.assigned.has(t.ID, tp.Partition) || m.revoking.has(t.ID, tp.Partition))
		}, ErrStaleMemberEpoch, true
	}
	m, ok := g.members[id]
	if !ok || g.protocolType != consumerProtocolType {
		return Owner{}, nil, nil, false
	}
	assigned, ok := assignedPartitions(m.assignment)
	if !ok {
		return Owner{}, nil, nil, false
	}
	mine := make(map[model.TopicPartition]bool, len(assigned))
	for _, tp := range assigned {
		mine[tp] = true
	}
	owner := ownerOf(m)
	return owner, func(tp model.TopicPartition) bool {
		// What its assignment gives it, or what it held until the
		// assignment that moves it (cooperative: revoked, not yet given
		// to another member).
		o, held := g.owners[tp]
		return mine[tp] || held && sameOwner(o, owner)
	}, ErrIllegalGeneration, true
}
