package share

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/strandlog/strand/internal/model"
)

// A share group is kept in __consumer_offsets, beside the classic and
// consumer groups, in Kafka's schemas (the group coordinator's
// ShareGroup*Key and Value, key types 10 to 15). Strand writes two: the
// group's epoch (ShareGroupMetadata) and the topics its share-partitions
// have state of (ShareGroupStatePartitionMetadata's initialized topics).
// The members are kept in memory: after the coordinator moves they join
// again, as a member the coordinator does not know does.
const (
	firstGroupRecordType int16 = 10
	groupMetadataType    int16 = 11
	statePartitionsType  int16 = 15
	lastGroupRecordType  int16 = 15
)

// OwnsRecord reports whether __consumer_offsets records of a key type are
// a share group's.
func OwnsRecord(keyType int16) bool {
	return keyType >= firstGroupRecordType && keyType <= lastGroupRecordType
}

func groupRecordKey(typ int16, group string) []byte {
	return kbin.AppendString(kbin.AppendInt16(nil, typ), group)
}

// groupRecords are the records that keep g: its epoch, and its topics
// with their ids and partitions as the cluster has them now.
func (c *Coordinator) groupRecords(g *group) []model.KeyValue {
	meta := kbin.AppendInt16(nil, 0)
	meta = kbin.AppendInt32(meta, g.epoch)
	meta = kbin.AppendInt64(meta, 0) // the topics' metadata hash: Strand keeps none
	meta = kbin.AppendUvarint(meta, 0)

	names := slices.Sorted(maps.Keys(g.everSubscribed))
	known := c.topics(names)
	parts := kbin.AppendInt16(nil, 0)
	parts = kbin.AppendCompactArrayLen(parts, 0) // initializing: none, state is made at first read
	parts = kbin.AppendCompactArrayLen(parts, len(known))
	for _, name := range names {
		t, ok := known[name]
		if !ok {
			continue
		}
		parts = append(parts, t.ID[:]...)
		parts = kbin.AppendCompactString(parts, name)
		parts = kbin.AppendCompactArrayLen(parts, int(t.Partitions))
		for p := range t.Partitions {
			parts = kbin.AppendInt32(parts, p)
		}
		parts = kbin.AppendUvarint(parts, 0)
	}
	parts = kbin.AppendCompactArrayLen(parts, 0) // deleting: none
	parts = kbin.AppendUvarint(parts, 0)
	return []model.KeyValue{
		{Key: groupRecordKey(groupMetadataType, g.name), Value: meta},
		{Key: groupRecordKey(statePartitionsType, g.name), Value: parts},
	}
}

// writtenAs is what the group's records say, to tell when they must be
// written again: its topics (the epoch alone changes with every member).
func writtenAs(g *group) string {
	return strings.Join(slices.Sorted(maps.Keys(g.everSubscribed)), "\x00")
}

// Records returns the records that keep the group in __consumer_offsets
// when they say more than those last written (always, with force), and
// the function that records them written once they are durable; nil when
// there is nothing to write.
func (c *Coordinator) Records(name string, force bool) ([]model.KeyValue, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil {
		return nil, nil
	}
	as := writtenAs(g)
	if !force && g.written && g.writtenAs == as {
		return nil, nil
	}
	recs := c.groupRecords(g)
	return recs, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.groups[name] == g {
			g.written, g.writtenAs = true, as
		}
	}
}

// Tombstones are the records that delete a group from __consumer_offsets.
func Tombstones(name string) []model.KeyValue {
	return []model.KeyValue{{Key: groupRecordKey(statePartitionsType, name)}, {Key: groupRecordKey(groupMetadataType, name)}}
}

// loadedGroup is what the records of a group said.
type loadedGroup struct {
	epoch  int32
	topics []string
}

// decodeGroupRecords replays a partition's share group records, the last
// of each key winning and tombstones deleting.
func decodeGroupRecords(recs []model.KeyValue) (map[string]*loadedGroup, error) {
	out := map[string]*loadedGroup{}
	var errs []error
	for _, rec := range recs {
		r := kbin.Reader{Src: rec.Key}
		typ, name := r.Int16(), r.String()
		if err := r.Complete(); err != nil {
			errs = append(errs, fmt.Errorf("share group key: %w", err))
			continue
		}
		if typ != groupMetadataType && typ != statePartitionsType {
			continue // members and assignments: Strand keeps them in memory
		}
		lg := out[name]
		if rec.Value == nil {
			if typ == groupMetadataType {
				delete(out, name)
			} else if lg != nil {
				lg.topics = nil
			}
			continue
		}
		if lg == nil {
			lg = &loadedGroup{}
			out[name] = lg
		}
		v := kbin.Reader{Src: rec.Value}
		v.Int16() // the value's version: 0 is the only one
		if typ == groupMetadataType {
			lg.epoch = v.Int32()
			continue
		}
		lg.topics = nil
		for range 2 { // initializing, then initialized topics
			n := v.CompactArrayLen()
			for i := int32(0); i < n && v.Ok(); i++ {
				v.Span(16)
				lg.topics = append(lg.topics, v.CompactString())
				for np := v.CompactArrayLen(); np > 0 && v.Ok(); np-- {
					v.Int32()
				}
				skipTags(&v)
			}
		}
		if !v.Ok() {
			errs = append(errs, fmt.Errorf("share group %s: a state partitions value cut short", name))
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%d unreadable share group records, the first: %w", len(errs), errs[0])
	}
	return out, nil
}

// Loaded restores the share groups of __consumer_offsets partition i (of
// n) from its records (group.OtherRecords): each with its epoch and the
// topics of its offsets, and no member yet. A group made meanwhile by a
// member's heartbeat keeps its members and gains what was written.
func (c *Coordinator) Loaded(i, n int32, recs []model.KeyValue) {
	loaded, err := decodeGroupRecords(recs)
	if err != nil {
		c.log.Error("skipped unreadable share group records in __consumer_offsets", "partition", i, "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, lg := range loaded {
		if model.CoordinatorPartition(name, n) != i {
			continue
		}
		g := c.groups[name]
		if g == nil {
			g = &group{name: name, members: map[string]*member{}}
			c.groups[name] = g
		}
		g.epoch = max(g.epoch, lg.epoch)
		if g.everSubscribed == nil {
			g.everSubscribed = map[string]bool{}
		}
		for _, t := range lg.topics {
			g.everSubscribed[t] = true
		}
		if len(g.members) == 0 {
			g.written, g.writtenAs = true, writtenAs(g)
		}
	}
}

// Unloaded drops the share groups of __consumer_offsets partition i (of
// n): another broker coordinates them now (group.OtherRecords).
func (c *Coordinator) Unloaded(i, n int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.groups {
		if model.CoordinatorPartition(name, n) == i {
			delete(c.groups, name)
		}
	}
}

// Owns is OwnsRecord (group.OtherRecords).
func (c *Coordinator) Owns(keyType int16) bool { return OwnsRecord(keyType) }
