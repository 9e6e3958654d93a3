package group

import (
	"maps"
	"slices"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// A consumer group's state reaches __consumer_offsets as Kafka's records
// (consumerrecords.go). Changes are made in memory under the group's lock
// and then flushed: the records that differ from what the group last wrote
// go out as one batch, and a heartbeat is answered once that batch is
// durable. What to compare is narrowed by marking: a member whose state may
// have changed is marked dirty; the group's own records are cheap and are
// always compared.

// touch marks member id's records for the next flush.
func (cg *consumerGroup) touch(id string) {
	cg.dirty[id] = true
}

// touchAll marks every member, as a new target assignment does.
func (cg *consumerGroup) touchAll() {
	for id := range cg.members {
		cg.dirty[id] = true
	}
}

// recordsDiffer says whether m's records would differ from before's: a
// stable member's heartbeat changes none, and then nothing is encoded.
func recordsDiffer(before, m *consumerMember) bool {
	return before.epoch != m.epoch || before.prevEpoch != m.prevEpoch || before.state != m.state ||
		!sameEpochs(before.assigned, m.assigned) || !sameEpochs(before.revoking, m.revoking) ||
		before.instanceID != m.instanceID || before.rackID != m.rackID || before.clientID != m.clientID ||
		before.clientHost != m.clientHost || before.rebalanceTimeout != m.rebalanceTimeout ||
		before.assignor != m.assignor || before.topicRegex != m.topicRegex ||
		!slices.Equal(before.topicNames, m.topicNames)
}

// sameEpochs: the same partitions at the same assignment epochs.
func sameEpochs(a, b partitionEpochs) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !maps.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

// recordsToFlush lists the records that changed since the last flush, in
// the order replay needs them, and notes them as written.
func (cg *consumerGroup) recordsToFlush(groupID string) []model.KeyValue {
	var out []model.KeyValue
	put := func(k consumerKey, v []byte) {
		key := string(k.encode())
		old, had := cg.stored[key]
		switch {
		case v == nil && !had:
			return
		case v != nil && had && string(old) == string(v):
			return
		}
		if v == nil {
			delete(cg.stored, key)
		} else {
			cg.stored[key] = v
		}
		out = append(out, model.KeyValue{Key: []byte(key), Value: v})
	}
	if cg.dropClassic {
		out = append(out, model.KeyValue{Key: groupKey(groupID)})
		cg.dropClassic = false
	}
	if !cg.flushed.valid || cg.flushed.epoch != cg.epoch {
		put(consumerKey{typ: consumerGroupEpochType, group: groupID}, epochValue(cg.epoch))
	}
	if cg.topicsDirty {
		names := slices.Sorted(maps.Keys(cg.topics))
		put(consumerKey{typ: consumerTopicsType, group: groupID}, topicsValue(cg.topics, names))
		cg.topicsDirty = false
	}
	var dirty []string
	if len(cg.dirty) > 0 {
		dirty = slices.Sorted(maps.Keys(cg.dirty))
	}
	for _, id := range dirty {
		meta := consumerKey{typ: consumerMemberType, group: groupID, member: id}
		target := consumerKey{typ: consumerTargetMemberType, group: groupID, member: id}
		current := consumerKey{typ: consumerCurrentMemberType, group: groupID, member: id}
		m, ok := cg.members[id]
		if !ok {
			put(current, nil)
			put(target, nil)
			put(meta, nil)
			continue
		}
		put(meta, m.metadataValue().encode())
		put(target, targetValue(cg.target[id]))
		cv := currentValue{epoch: m.epoch, prevEpoch: m.prevEpoch, state: m.state, assigned: m.assigned, revoking: m.revoking}
		put(current, cv.encode())
	}
	clear(cg.dirty)
	if !cg.flushed.valid || cg.flushed.assignmentEpoch != cg.assignmentEpoch {
		put(consumerKey{typ: consumerTargetEpochType, group: groupID}, epochValue(cg.assignmentEpoch))
	}
	cg.flushed.epoch, cg.flushed.assignmentEpoch, cg.flushed.valid = cg.epoch, cg.assignmentEpoch, true
	return out
}

// tombstones deletes every record the group wrote, members first and the
// group epoch last, as Kafka deletes a consumer group.
func (cg *consumerGroup) tombstones() []model.KeyValue {
	var members, group []model.KeyValue
	order := map[int16]int{consumerCurrentMemberType: 0, consumerTargetMemberType: 1, consumerMemberType: 2,
		consumerTargetEpochType: 3, consumerTopicsType: 4, consumerGroupEpochType: 5}
	keys := slices.Collect(maps.Keys(cg.stored))
	decoded := make(map[string]consumerKey, len(keys))
	for _, k := range keys {
		decoded[k], _ = decodeConsumerKey([]byte(k))
	}
	slices.SortFunc(keys, func(a, b string) int {
		ka, kb := decoded[a], decoded[b]
		if d := order[ka.typ] - order[kb.typ]; d != 0 {
			return d
		}
		if ka.member < kb.member {
			return -1
		}
		if ka.member > kb.member {
			return 1
		}
		return 0
	})
	for _, k := range keys {
		kv := model.KeyValue{Key: []byte(k)}
		if decoded[k].hasMember() {
			members = append(members, kv)
		} else {
			group = append(group, kv)
		}
	}
	clear(cg.stored)
	cg.flushed.valid = false
	return append(members, group...)
}

func (m *consumerMember) metadataValue() *memberValue {
	v := &memberValue{clientID: m.clientID, clientHost: m.clientHost, topicNames: m.topicNames,
		rebalanceTimeoutMs: int32(m.rebalanceTimeout.Milliseconds())}
	if v.topicNames == nil {
		v.topicNames = []string{}
	}
	if m.instanceID != "" {
		v.instanceID = ptr(m.instanceID)
	}
	if m.rackID != "" {
		v.rackID = ptr(m.rackID)
	}
	if m.topicRegex != "" {
		v.topicRegex = ptr(m.topicRegex)
	}
	if m.assignor != "" {
		v.serverAssignor = ptr(m.assignor)
	}
	if m.classic != nil {
		v.classic = &classicMemberMetadata{sessionTimeoutMs: int32(m.classic.sessionTimeout.Milliseconds()), protocols: m.classic.protocols}
	}
	return v
}

// flushConsumer writes what changed in the consumer group; done (if not
// nil) runs under g.mu once it is durable, at once when nothing changed.
// Caller holds g.mu.
func (g *group) flushConsumer(done func(error)) {
	var recs []model.KeyValue
	if g.modern != nil {
		recs = g.modern.recordsToFlush(g.id)
	}
	g.writeConsumer(recs, done)
}

func (g *group) writeConsumer(recs []model.KeyValue, done func(error)) {
	if done == nil {
		done = func(err error) {
			if err != nil {
				g.c.log.Warn("writing a consumer group's state failed", "group", g.id, "err", err)
			}
		}
	}
	if len(recs) == 0 {
		done(nil)
		return
	}
	if err := g.write(recs, func(_ int64, err error) { done(err) }); err != nil {
		done(err)
	}
}

// loadedConsumer is what replay found of a consumer group.
type loadedConsumer struct {
	at              int64 // log offset of its latest record
	epoch           int32
	assignmentEpoch int32
	topics          map[string]TopicInfo
	members         map[string]*loadedConsumerMember
}

type loadedConsumerMember struct {
	meta    *memberValue
	target  map[[16]byte][]int32
	current *currentValue
}

func (lc *loadedConsumer) member(id string) *loadedConsumerMember {
	lm := lc.members[id]
	if lm == nil {
		lm = &loadedConsumerMember{}
		lc.members[id] = lm
	}
	return lm
}

// consumerRecord applies one consumer group record of replay.
func (st *replayState) consumerRecord(at int64, key, value []byte) error {
	k, err := decodeConsumerKey(key)
	if err != nil {
		return err
	}
	lg := st.get(k.group)
	if lg.consumer == nil {
		if value == nil {
			return nil
		}
		lg.consumer = &loadedConsumer{members: map[string]*loadedConsumerMember{}, topics: map[string]TopicInfo{}}
	}
	lc := lg.consumer
	lc.at = at
	switch k.typ {
	case consumerGroupEpochType:
		if value == nil {
			lg.consumer = nil // the group is deleted
			return nil
		}
		lc.epoch, err = decodeEpochValue(value)
	case consumerTargetEpochType:
		if value != nil {
			lc.assignmentEpoch, err = decodeEpochValue(value)
		}
	case consumerTopicsType:
		if value != nil {
			lc.topics, err = decodeTopicsValue(value)
		} else {
			lc.topics = map[string]TopicInfo{}
		}
	case consumerMemberType:
		if value == nil {
			delete(lc.members, k.member)
			return nil
		}
		lc.member(k.member).meta, err = decodeMemberValue(value)
	case consumerTargetMemberType:
		if value == nil {
			if lm := lc.members[k.member]; lm != nil {
				lm.target = nil
			}
			return nil
		}
		lc.member(k.member).target, err = decodeTargetValue(value)
	case consumerCurrentMemberType:
		if value == nil {
			if lm := lc.members[k.member]; lm != nil {
				lm.current = nil
			}
			return nil
		}
		lc.member(k.member).current, err = decodeCurrentValue(value)
	}
	return err
}

// restoreConsumer sets the group's consumer group state from replay: its
// members come back at their epochs with what they held, each given a full
// session to heartbeat again, so that consumers that kept running across a
// restart or a coordinator move carry on without a rebalance. Caller holds
// g.mu.
func (g *group) restoreConsumer(lc *loadedConsumer) {
	cg := newConsumerGroup()
	g.modern, g.protocolType = cg, consumerProtocolType
	cg.epoch, cg.assignmentEpoch = lc.epoch, lc.assignmentEpoch
	cg.topics = lc.topics
	for name, t := range cg.topics {
		cg.names[t.ID] = name
	}
	for id, lm := range lc.members {
		if lm.meta == nil {
			continue // a member whose metadata was deleted has left
		}
		v := lm.meta
		m := &consumerMember{id: id, clientID: v.clientID, clientHost: v.clientHost,
			topicNames: v.topicNames, rebalanceTimeout: time.Duration(v.rebalanceTimeoutMs) * time.Millisecond,
			assigned: partitionEpochs{}, revoking: partitionEpochs{}}
		if len(m.topicNames) == 0 {
			m.topicNames = nil
		}
		if v.instanceID != nil {
			m.instanceID = *v.instanceID
			cg.static[m.instanceID] = id
		}
		if v.rackID != nil {
			m.rackID = *v.rackID
		}
		if v.topicRegex != nil {
			m.topicRegex = *v.topicRegex
		}
		if v.serverAssignor != nil {
			m.assignor = *v.serverAssignor
		}
		if v.classic != nil {
			m.classic = &classicState{sessionTimeout: time.Duration(v.classic.sessionTimeoutMs) * time.Millisecond, protocols: v.classic.protocols}
		}
		if cur := lm.current; cur != nil {
			m.epoch, m.prevEpoch, m.state = cur.epoch, cur.prevEpoch, cur.state
			m.assigned, m.revoking = cur.assigned, cur.revoking
		}
		if lm.target != nil {
			cg.target[id] = lm.target
		}
		cg.members[id] = m
		cg.setOwned(m, nil)
		m.key = ownerKey(Owner{ClientID: m.clientID, ClientHost: m.clientHost})
		g.c.fetchers.add(m.key, g)
	}
	// What the group wrote is what it would write now: nothing to flush.
	cg.topicsDirty = true
	cg.touchAll()
	cg.recordsToFlush(g.id)
	if g.c.topics != nil {
		cg.resolveRegexes(g.c.topics.Names())
	}
	now := g.c.clock.Now()
	for _, m := range cg.members {
		g.scheduleConsumerSession(m)
		g.trackRebalanceTimeout(m)
		to := m.owner()
		for id, ps := range m.assigned {
			if name, ok := cg.names[id]; ok {
				for p := range ps {
					g.owners[model.TopicPartition{Topic: name, Partition: p}] = to
				}
			}
		}
	}
	g.hist.event(Event{Time: now, Kind: EventLoaded, Generation: cg.epoch, Protocol: "consumer"})
}
