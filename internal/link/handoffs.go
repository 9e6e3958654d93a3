package link

import (
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/model"
)

// Hand-offs across clusters. While a group is passed through, its
// rebalances happen at the source, and this cluster's coordinator records
// none of them. The link records in the hand-off ledger those that a
// member connected here takes part in, from what it sees of that member:
// the assignments the source answers it (SyncGroup, or a consumer group's
// heartbeat), the committed offsets it reads and writes through here, and
// its fetches of the mirrors (the broker's fetch observer).
//
//   - A partition the source assigns a member here: the committed offset the
//     member read, and its first fetch, hence what it skipped or read
//     again. Who had it before is a member at the source (From names the
//     source only), whose progress no broker here sees: the duplicate risk
//     is unknown (-1).
//   - A partition a member here loses (revoked, it left, or its connection
//     closed and the grace passed): its last commit and the end of what it
//     was sent, hence the duplicate risk, the records the next owner at the
//     source reads again. Where that owner starts is unknown (-1).
//
// The entries carry the link and its source. A member's fetches are told
// apart from its siblings' by its host and client id and the partitions
// it owns, as the coordinator tells native members apart; they are seen on
// the broker that leads the mirror partition, so in a cluster the entries
// of partitions led elsewhere lack the fetch offsets.

// ownership is a partition a member connected here owns in the source's
// group, and what it did with it through this broker.
type ownership struct {
	since      time.Time
	generation int32
	// resumed is the committed offset the member read when it got the
	// partition; committed its last commit of it since. -1: none.
	resumed, committed int64
	// firstFetched is its first fetch offset, lastFetched its highest,
	// lastSent the end of what it was last sent; -1 until it fetches.
	firstFetched          int64
	firstAt               time.Time
	lastFetched, lastSent int64
	lastAt                time.Time
	recorded              bool // its arrival is in the ledger
}

func newOwnership(now time.Time, generation int32) *ownership {
	return &ownership{since: now, generation: generation, resumed: -1, committed: -1, firstFetched: -1, lastFetched: -1,
		lastSent: -1}
}

// observe updates the members' partitions from a forwarded request's
// answer and records the hand-offs it completes.
func (p *passThrough) observe(r *runner, gr GroupRequest, resp kmsg.Response) {
	now := r.m.cfg.Now()
	var entries []ledger.Entry
	p.mu.Lock()
	switch resp := resp.(type) {
	case *kmsg.SyncGroupResponse:
		req := gr.Req.(*kmsg.SyncGroupRequest)
		if pm := p.members[memberKey{gr.Group, req.MemberID}]; pm != nil && resp.ErrorCode == 0 {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(resp.MemberAssignment); err == nil {
				var tps []model.TopicPartition
				for _, t := range a.Topics {
					for _, part := range t.Partitions {
						tps = append(tps, model.TopicPartition{Topic: t.Topic, Partition: part})
					}
				}
				entries = p.assignedLocked(r, memberKey{gr.Group, req.MemberID}, pm, tps, req.Generation, now)
			}
		}
	case *kmsg.ConsumerGroupHeartbeatResponse:
		if resp.ErrorCode == 0 && resp.Assignment != nil && resp.MemberID != nil {
			key := memberKey{gr.Group, *resp.MemberID}
			if pm := p.members[key]; pm != nil {
				var tps []model.TopicPartition
				for _, t := range resp.Assignment.Topics {
					topic, ok := r.m.topicName(t.TopicID)
					if !ok {
						continue
					}
					for _, part := range t.Partitions {
						tps = append(tps, model.TopicPartition{Topic: topic, Partition: part})
					}
				}
				entries = p.assignedLocked(r, key, pm, tps, resp.MemberEpoch, now)
			}
		}
	case *kmsg.OffsetCommitResponse:
		req := gr.Req.(*kmsg.OffsetCommitRequest)
		pm := p.members[memberKey{gr.Group, req.MemberID}]
		if pm == nil {
			break
		}
		sent := map[model.TopicPartition]int64{}
		for _, t := range req.Topics {
			for _, part := range t.Partitions {
				sent[model.TopicPartition{Topic: t.Topic, Partition: part.Partition}] = part.Offset
			}
		}
		for _, t := range resp.Topics {
			for _, part := range t.Partitions {
				tp := model.TopicPartition{Topic: t.Topic, Partition: part.Partition}
				if o := pm.owned[tp]; o != nil && part.ErrorCode == 0 {
					o.committed = sent[tp]
				}
			}
		}
	case *kmsg.OffsetFetchResponse:
		// The committed offsets a member reads on its group connection
		// are where it resumes the partitions it just got.
		for key, pm := range p.members {
			if key.group != gr.Group || pm.conn != gr.Conn {
				continue
			}
			for _, g := range resp.Groups {
				for _, t := range g.Topics {
					for _, part := range t.Partitions {
						tp := model.TopicPartition{Topic: t.Topic, Partition: part.Partition}
						if o := pm.owned[tp]; o != nil && !o.recorded && o.firstFetched < 0 && part.ErrorCode == 0 {
							o.resumed = part.Offset
						}
					}
				}
			}
		}
	}
	p.mu.Unlock()
	r.record(entries)
}

// assignedLocked sets a member's partitions to tps: those it lost are
// hand-offs to the source's members, recorded now; those it got are
// recorded once it fetches them. p.mu is held.
func (p *passThrough) assignedLocked(r *runner, key memberKey, pm *passMember, tps []model.TopicPartition,
	generation int32, now time.Time) []ledger.Entry {
	if pm.owned == nil {
		pm.owned = map[model.TopicPartition]*ownership{}
	}
	keep := map[model.TopicPartition]bool{}
	for _, tp := range tps {
		keep[tp] = true
		if pm.owned[tp] == nil {
			pm.owned[tp] = newOwnership(now, generation)
		}
	}
	var entries []ledger.Entry
	for tp, o := range pm.owned {
		if !keep[tp] {
			entries = append(entries, r.lostEntry(key, pm, tp, o, "revoked", now))
			delete(pm.owned, tp)
		}
	}
	return entries
}

// lostLocked records that a member lost every partition it owned (it
// left, or was taken out of the source's group). p.mu is held.
func (p *passThrough) lostLocked(r *runner, key memberKey, pm *passMember, reason string) []ledger.Entry {
	if r.m.cfg.Ledger == nil {
		return nil
	}
	now := r.m.cfg.Now()
	var entries []ledger.Entry
	for tp, o := range pm.owned {
		entries = append(entries, r.lostEntry(key, pm, tp, o, reason, now))
	}
	pm.owned = nil
	return entries
}

// fetched notes the fetches of a client of this broker: the first and
// the last of each partition its members here own.
func (p *passThrough) fetched(r *runner, host, clientID string, arrived, answered time.Time, reports []group.FetchReport) {
	var entries []ledger.Entry
	p.mu.Lock()
	for key, pm := range p.members {
		if pm.clientID != clientID || pm.host != host || len(pm.owned) == 0 {
			continue
		}
		for _, rep := range reports {
			o := pm.owned[model.TopicPartition{Topic: rep.Topic, Partition: rep.Partition}]
			if o == nil {
				continue
			}
			if o.firstFetched < 0 {
				o.firstFetched, o.firstAt = rep.Offset, arrived
			}
			o.lastFetched, o.lastSent, o.lastAt = max(o.lastFetched, rep.Offset), max(o.lastSent, rep.SentEnd), answered
			if !o.recorded {
				o.recorded = true
				entries = append(entries, r.gotEntry(key, pm, model.TopicPartition{Topic: rep.Topic, Partition: rep.Partition}, o, rep.LogStart))
			}
		}
	}
	p.mu.Unlock()
	r.record(entries)
}

// gotEntry is the hand-off of a partition from the source's members to a
// member here, once it fetched it.
func (r *runner) gotEntry(key memberKey, pm *passMember, tp model.TopicPartition, o *ownership, logStart int64) ledger.Entry {
	l := r.current()
	e := ledger.Entry{Type: ledger.TypeHandoff, Time: o.since, Group: key.group, Topic: tp.Topic, Partition: tp.Partition,
		Generation: o.generation, From: &ledger.Member{Host: sourceName(l)}, To: pm.ledgerMember(key.member),
		Reason: "passed-through", Committed: o.resumed, LastFetched: -1, LastSent: -1, FirstFetched: o.firstFetched,
		FirstFetchedAt: &o.firstAt, LogStart: logStart, DuplicateRisk: -1, Link: l.Name, Source: sourceName(l),
		UnownedMs: -1}
	if o.resumed >= 0 {
		e.Skipped = max(0, o.firstFetched-o.resumed)
		e.Rewound = max(0, o.resumed-o.firstFetched)
	}
	return e
}

// lostEntry is the hand-off of a partition from a member here back to the
// source's members.
func (r *runner) lostEntry(key memberKey, pm *passMember, tp model.TopicPartition, o *ownership, reason string, now time.Time) ledger.Entry {
	l := r.current()
	from := pm.ledgerMember(key.member)
	committed := o.committed
	if committed < 0 {
		committed = o.resumed
	}
	e := ledger.Entry{Type: ledger.TypeHandoff, Time: now, Group: key.group, Topic: tp.Topic, Partition: tp.Partition,
		Generation: -1, From: &from, To: ledger.Member{Host: sourceName(l)}, Reason: reason, LostAt: &now,
		Committed: committed, LastFetched: o.lastFetched, LastSent: o.lastSent, FirstFetched: -1, LogStart: -1,
		DuplicateRisk: -1, Skipped: -1, Rewound: -1, Link: l.Name, Source: sourceName(l), UnownedMs: -1}
	if !o.lastAt.IsZero() {
		e.LastFetchedAt = &o.lastAt
	}
	if committed >= 0 && o.lastSent >= 0 {
		e.DuplicateRisk = max(0, o.lastSent-committed)
	}
	return e
}

// record writes hand-off entries to the ledger, if the broker keeps one.
func (r *runner) record(entries []ledger.Entry) {
	if r.m.cfg.Ledger == nil {
		return
	}
	for _, e := range entries {
		r.m.cfg.Ledger(e)
	}
}

// ledgerMember names a member here in an entry.
func (pm *passMember) ledgerMember(id string) ledger.Member {
	m := ledger.Member{MemberID: id, ClientID: pm.clientID, Host: pm.host, SoftwareName: pm.software[0],
		SoftwareVersion: pm.software[1]}
	if pm.instanceID != nil {
		m.InstanceID = *pm.instanceID
	}
	return m
}

// sourceName names the link's source in entries: its bootstrap servers.
func sourceName(l cluster.Link) string { return strings.Join(l.Source.BootstrapServers, ",") }

// hostOf is a connection address's host, as fetches are told apart by.
func hostOf(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// Fetched is the broker's fetch observer's report of a consumer's fetch
// (group.FetchObserver): the link notes the fetches of the members of
// passed-through groups connected here.
func (m *Manager) Fetched(clientAddr, clientID string, arrived, answered time.Time, reports []group.FetchReport) {
	if m.cfg.Ledger == nil {
		return
	}
	host := hostOf(clientAddr)
	for _, r := range m.runnerList() {
		r.pass.fetched(r, host, clientID, arrived, answered, reports)
	}
}

// topicName is the name of this cluster's topic of an id (a mirror has
// its source topic's id).
func (m *Manager) topicName(id [16]byte) (string, bool) {
	t, ok := m.cfg.Store.TopicByID(cluster.TopicID(id))
	return t.Name, ok
}
