package group

import (
	"strings"
	"time"

	"github.com/strandlog/strand/internal/model"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// write appends recs to the group's __consumer_offsets partition; fn runs
// under g.mu once they are durable (or failed to be). Caller holds g.mu.
func (g *group) write(recs []model.KeyValue, fn func(base int64, err error)) error {
	w, err := g.c.writerFor(g.id)
	if err != nil {
		return err
	}
	return w.write(recs, g.c.clock.Now().UnixMilli(), func(base int64, err error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		fn(base, err)
	})
}

// writeTxn appends recs as a transactional batch of producer p: appended
// runs (under g.mu, which the caller holds, and the writer's lock) as soon
// as the batch is in the log, fn under g.mu once it is durable (or failed
// to be). Caller holds g.mu.
func (g *group) writeTxn(p model.Producer, recs []model.KeyValue, appended func(base int64), fn func(base int64, err error)) error {
	w, err := g.c.writerFor(g.id)
	if err != nil {
		return err
	}
	return w.writeTxn(p, g, recs, g.c.clock.Now().UnixMilli(), appended, func(base int64, err error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		fn(base, err)
	})
}

// writeMetadata stores the group's state with the members' assignments
// (GroupMetadataValue); fn runs under g.mu once it is durable.
func (g *group) writeMetadata(assignment map[string][]byte, fn func(error)) error {
	rec := model.KeyValue{Key: groupKey(g.id), Value: g.metadataValue(assignment)}
	return g.write([]model.KeyValue{rec}, func(_ int64, err error) { fn(err) })
}

func (cl *classicGroup) metadataValue(assignment map[string][]byte) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType = cl.protocolType
	v.Generation = cl.generation
	v.Protocol = ptr(cl.protocolName)
	v.Leader = ptr(cl.leader)
	v.CurrentStateTimestamp = cl.stateTime.UnixMilli()
	for _, m := range cl.sortedMembers() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		vm.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		vm.Subscription = m.metadata(cl.protocolName)
		if vm.Subscription == nil {
			vm.Subscription = []byte{}
		}
		vm.Assignment = assignment[m.id]
		if vm.Assignment == nil {
			vm.Assignment = []byte{}
		}
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}

// assignments are the members' current assignments.
func (cl *classicGroup) assignments() map[string][]byte {
	a := make(map[string][]byte, len(cl.members))
	for id, m := range cl.members {
		a[id] = m.assignment
	}
	return a
}

// stable records the new generation's assignment in the history: an event,
// and for a consumer group a hand-off for every partition whose owner
// changed (or that had none).
func (g *group) stable() {
	ms := g.sortedMembers()
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.id
	}
	now := g.c.clock.Now()
	g.hist.event(Event{Time: now, Kind: EventStable, Generation: g.generation, Protocol: g.protocolName, Leader: g.leader, Members: ids})
	if g.protocolType != consumerProtocolType {
		return
	}
	for _, m := range ms {
		tps, ok := assignedPartitions(m.assignment)
		if !ok {
			g.c.log.Warn("cannot read a member's assignment; no hand-offs recorded for it", "group", g.id, "member", m.id)
			continue
		}
		to := ownerOf(m)
		for _, tp := range tps {
			g.setOwner(tp, to, m.key, g.generation, now)
		}
	}
}

// setOwner records that to owns tp from now on, and a hand-off in the
// history when that is a change.
func (g *group) setOwner(tp model.TopicPartition, to Owner, key clientKey, generation int32, now time.Time) {
	prev, had := g.owners[tp]
	g.owners[tp] = to
	if had && sameOwner(prev, to) {
		return
	}
	committed := int64(-1)
	if o, ok := g.offsets.committed[tp]; ok {
		committed = o.Offset
	}
	g.hist.handoff(Handoff{Time: now, Generation: generation, Topic: tp.Topic, Partition: tp.Partition,
		From: prev, To: to, Committed: committed}, ownerKey(prev), key, had)
}

// sameOwner: the same member, or the same static instance under a new
// member id.
func sameOwner(a, b Owner) bool {
	return a.MemberID == b.MemberID || a.InstanceID != "" && a.InstanceID == b.InstanceID
}

func ownerKey(o Owner) clientKey {
	return clientKey{host: strings.TrimPrefix(o.ClientHost, "/"), clientID: o.ClientID}
}

// loadOwners sets the owners from a loaded group's assignments, without
// hand-offs: they happened before the restart.
func (g *group) loadOwners() {
	if g.protocolType != consumerProtocolType {
		return
	}
	for _, m := range g.members {
		tps, _ := assignedPartitions(m.assignment)
		for _, tp := range tps {
			g.owners[tp] = ownerOf(m)
		}
	}
}
