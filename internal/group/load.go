package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/coordinator"
	"github.com/strandlog/strand/internal/model"
)

// loadReadBytes is how much of a partition Load reads at a time.
const loadReadBytes = 1 << 20

// Load rebuilds the groups of every __consumer_offsets partition this
// broker leads (LoadPartition for each), if the topic exists, and starts the
// expiry of stale offsets. Call Load once, before serving (and before the
// transaction coordinator resumes markers: CompleteTxn before Load is lost).
func (c *Coordinator) Load() error {
	parts, err := c.topic.Partitions()
	if err != nil {
		return fmt.Errorf("group: opening __consumer_offsets: %w", err)
	}
	defer func() {
		c.mu.Lock()
		c.expiry = c.clock.AfterFunc(c.cfg.OffsetsRetentionCheck, c.expire)
		c.mu.Unlock()
	}()
	if len(parts) == 0 {
		return nil
	}
	if int32(len(parts)) != c.cfg.OffsetsPartitions {
		c.log.Warn("__consumer_offsets keeps the partition count it was created with",
			"partitions", len(parts), "offsets.topic.num.partitions", c.cfg.OffsetsPartitions)
	}
	for i, p := range parts {
		if p == nil {
			continue // led elsewhere
		}
		if err := c.LoadPartition(int32(i), int32(len(parts)), p); err != nil {
			return err
		}
	}
	return nil
}

// LoadPartition makes this broker the coordinator of the groups of
// __consumer_offsets partition i (of n), which it now leads: the partition
// is replayed from its start to its high watermark, the last record of each
// key winning and tombstones deleting; offsets of transactional batches
// count once a commit marker of their producer follows them, and stay
// pending when no marker does yet. A group stored with members comes back
// Stable with them, each given a full session to heartbeat again (so
// consumers that kept running across a move carry on without a
// rebalance); one without comes back Empty. Requests for the partition's
// groups are COORDINATOR_LOAD_IN_PROGRESS until it is done. Loading a
// partition already served does nothing.
func (c *Coordinator) LoadPartition(i, n int32, p coordinator.Partition) error {
	c.mu.Lock()
	if c.closed || i < 0 || i >= n {
		c.mu.Unlock()
		return ErrNotCoordinator
	}
	if c.writers == nil {
		c.writers = make([]*writer, n)
	}
	if int(i) >= len(c.writers) || c.writers[i] != nil || c.loading[i] {
		c.mu.Unlock()
		return nil
	}
	c.loading[i] = true
	c.mu.Unlock()

	start := time.Now()
	loaded := map[string]*loadedGroup{}
	st := &replayState{loaded: loaded, open: map[int64]map[string]bool{}, others: c.cfg.Others}
	records, err := st.replay(p)
	if err != nil {
		if !errors.Is(err, coordinator.ErrCompressed) {
			c.mu.Lock()
			delete(c.loading, i)
			c.mu.Unlock()
			return fmt.Errorf("group: replaying __consumer_offsets-%d: %w", i, err)
		}
		c.log.Error("skipped unreadable records in __consumer_offsets", "partition", i, "err", err)
	}
	w := newWriter(p)
	c.mu.Lock()
	delete(c.loading, i)
	if c.closed {
		c.mu.Unlock()
		w.close()
		return ErrNotCoordinator
	}
	c.writers[i] = w
	c.mu.Unlock()
	if c.cfg.Others != nil {
		c.cfg.Others.Loaded(i, n, st.otherRecs)
	}
	groups := 0
	for id, lg := range loaded {
		if lg.meta == nil && lg.consumer == nil && len(lg.offsets) == 0 && len(lg.txns) == 0 {
			continue
		}
		g := c.newGroup(id)
		g.mu.Lock()
		g.restore(lg)
		g.mu.Unlock()
		c.mu.Lock()
		c.groups[id] = g
		c.mu.Unlock()
		groups++
		// Transactions still open: their markers come through
		// CompleteTxn.
		for pid := range lg.txns {
			w.indexTxn(pid, g)
		}
	}
	level := slog.LevelInfo
	if groups == 0 {
		level = slog.LevelDebug
	}
	c.log.Log(context.Background(), level, "loaded groups", "partition", i, "groups", groups, "records", records,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// UnloadPartition stops coordinating the groups of __consumer_offsets
// partition i, which this broker no longer leads: their parked requests
// are answered NOT_COORDINATOR, and their state is dropped (the new leader
// loads it from the partition). Writes in flight are reported first.
func (c *Coordinator) UnloadPartition(i int32) {
	c.mu.Lock()
	if i < 0 || int(i) >= len(c.writers) || c.writers[i] == nil {
		c.mu.Unlock()
		return
	}
	w := c.writers[i]
	c.writers[i] = nil
	var gone []*group
	for id, g := range c.groups {
		if model.CoordinatorPartition(id, int32(len(c.writers))) == i {
			gone = append(gone, g)
			delete(c.groups, id)
		}
	}
	n := int32(len(c.writers))
	c.mu.Unlock()
	w.close()
	if c.cfg.Others != nil {
		c.cfg.Others.Unloaded(i, n)
	}
	for _, g := range gone {
		g.mu.Lock()
		g.unload()
		g.mu.Unlock()
	}
	c.log.Info("unloaded groups", "partition", i, "groups", len(gone))
}

// Serves reports whether this broker coordinates the groups of
// __consumer_offsets partition i.
func (c *Coordinator) Serves(i int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return i >= 0 && int(i) < len(c.writers) && c.writers[i] != nil
}

// loadedGroup is what replay found of a group.
type loadedGroup struct {
	meta   *kmsg.GroupMetadataValue // nil: none, or deleted
	metaAt int64                    // log offset of meta
	// consumer is the group's consumer group records; nil: none, or
	// deleted. Whichever of meta and consumer was written last is the
	// group's kind.
	consumer *loadedConsumer
	offsets  map[model.TopicPartition]offset
	// txns: offsets of transactions without a marker (yet), per producer.
	txns map[int64]map[model.TopicPartition]offset
}

// replayState is one partition's replay: the groups found (shared by every
// partition) and, per producer, the groups with offsets pending in its
// transaction on this partition.
type replayState struct {
	loaded map[string]*loadedGroup
	open   map[int64]map[string]bool
	// others owns some record types; their records are kept, in log
	// order, for it.
	others    OtherRecords
	otherRecs []model.KeyValue
}

func (st *replayState) get(id string) *loadedGroup {
	lg := st.loaded[id]
	if lg == nil {
		lg = &loadedGroup{offsets: map[model.TopicPartition]offset{}, txns: map[int64]map[model.TopicPartition]offset{}}
		st.loaded[id] = lg
	}
	return lg
}

// replay applies one partition's records.
func (st *replayState) replay(p coordinator.Partition) (int, error) {
	var errs error
	n, err := coordinator.Replay(p, loadReadBytes, func(r coordinator.Record) {
		var err error
		if r.Control {
			err = st.control(r.ProducerID, r.Key)
		} else {
			err = st.record(r.ProducerID, r.Offset, r.Key, r.Value)
		}
		if err != nil {
			errs = errors.Join(errs, fmt.Errorf("offset %d: %w", r.Offset, err))
		}
	})
	return n, errors.Join(err, errs)
}

// control applies a control record: a transaction marker ends the
// producer's transaction on this partition, a commit applying its offsets
// in log order (Kafka's replayEndTransactionMarker), an abort dropping
// them. Other control records are not the coordinator's.
func (st *replayState) control(producerID int64, key []byte) error {
	typ, ok := controlType(key)
	if !ok {
		return fmt.Errorf("control record key of %d bytes", len(key))
	}
	if typ != controlAbort && typ != controlCommit || producerID < 0 {
		return nil
	}
	for id := range st.open[producerID] {
		lg := st.loaded[id]
		pend := lg.txns[producerID]
		delete(lg.txns, producerID)
		if typ != controlCommit {
			continue
		}
		for tp, o := range pend {
			if cur, ok := lg.offsets[tp]; ok && cur.logOffset > o.logOffset {
				continue // a plain commit written later wins
			}
			lg.offsets[tp] = o
		}
	}
	delete(st.open, producerID)
	return nil
}

// record applies one record; producerID is its batch's if transactional,
// else -1.
func (st *replayState) record(producerID, at int64, key, value []byte) error {
	if len(key) < 2 {
		return fmt.Errorf("key of %d bytes", len(key))
	}
	switch version := int16(key[0])<<8 | int16(key[1]); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("offset commit key: %w", err)
		}
		lg := st.get(k.Group)
		tp := model.TopicPartition{Topic: k.Topic, Partition: k.Partition}
		if value == nil {
			// A tombstone ends the partition's committed offset and
			// those pending in open transactions (Kafka's replay).
			delete(lg.offsets, tp)
			for pid, pend := range lg.txns {
				delete(pend, tp)
				if len(pend) == 0 {
					delete(lg.txns, pid)
				}
			}
			return nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("offset commit value: %w", err)
		}
		o := offset{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTime: v.CommitTimestamp, ExpireTime: -1, logOffset: at}
		if v.Version >= 3 {
			o.LeaderEpoch = v.LeaderEpoch
		}
		if v.Version == 1 {
			o.ExpireTime = v.ExpireTimestamp
		}
		if producerID < 0 {
			lg.offsets[tp] = o
			return nil
		}
		pend := lg.txns[producerID]
		if pend == nil {
			pend = map[model.TopicPartition]offset{}
			lg.txns[producerID] = pend
		}
		pend[tp] = o
		if st.open[producerID] == nil {
			st.open[producerID] = map[string]bool{}
		}
		st.open[producerID][k.Group] = true
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("group metadata key: %w", err)
		}
		lg := st.get(k.Group)
		if value == nil {
			lg.meta = nil
			return nil
		}
		v := new(kmsg.GroupMetadataValue)
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("group metadata value: %w", err)
		}
		lg.meta, lg.metaAt = v, at
	case consumerGroupEpochType, consumerTopicsType, consumerMemberType, consumerTargetEpochType,
		consumerTargetMemberType, consumerCurrentMemberType:
		return st.consumerRecord(at, key, value)
	default:
		if st.others != nil && st.others.Owns(version) {
			st.otherRecs = append(st.otherRecs, model.KeyValue{Key: key, Value: value})
		}
	}
	// Other key versions (streams groups, regular expressions) are not
	// kept.
	return nil
}

// restore sets a new group from what replay found. Caller holds g.mu.
func (g *group) restore(lg *loadedGroup) {
	g.offsets.committed = lg.offsets
	g.offsets.pending = lg.txns
	if lc := lg.consumer; lc != nil && (lg.meta == nil || lc.at > lg.metaAt) {
		g.restoreConsumer(lc)
		return
	}
	v := lg.meta
	if v == nil {
		return // a group that only has offsets: Empty
	}
	g.protocolType, g.generation = v.ProtocolType, v.Generation
	if v.Protocol != nil {
		g.protocolName = *v.Protocol
	}
	if v.CurrentStateTimestamp >= 0 {
		g.stateTime = time.UnixMilli(v.CurrentStateTimestamp)
	} else {
		g.stateTime = time.Time{}
	}
	for _, vm := range v.Members {
		rebalance := vm.RebalanceTimeoutMillis
		if rebalance < 0 {
			rebalance = vm.SessionTimeoutMillis
		}
		k := ownerKey(Owner{ClientID: vm.ClientID, ClientHost: vm.ClientHost})
		m := &member{
			id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost, key: k,
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(rebalance) * time.Millisecond,
			protocolType:     v.ProtocolType,
			protocols:        []Protocol{{Name: g.protocolName, Metadata: vm.Subscription}},
			assignment:       vm.Assignment,
		}
		g.add(m)
	}
	if v.Leader != nil {
		if _, ok := g.members[*v.Leader]; ok {
			g.leader = *v.Leader
		}
	}
	if len(g.members) > 0 {
		g.state = stateStable
		for _, m := range g.members {
			g.scheduleHeartbeat(m, m.sessionTimeout)
		}
	}
	g.subscribed = g.computeSubscribed()
	g.loadOwners()
	g.hist.event(Event{Time: g.c.clock.Now(), Kind: EventLoaded, Generation: g.generation,
		Protocol: g.protocolName, Leader: g.leader})
	if len(g.members) > g.c.cfg.MaxSize {
		g.prepareRebalance(fmt.Sprintf("loaded with %d members, over group.max.size %d", len(g.members), g.c.cfg.MaxSize))
	}
}
