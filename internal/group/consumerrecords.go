package group

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

// The records a consumer group (KIP-848) keeps in __consumer_offsets, in
// Kafka 4's formats (its group-coordinator message schemas, which kmsg
// does not carry). A key is an int16 record type and the group id (and a
// member id), not flexible; a value is an int16 version, 0, and flexible
// fields ending in tagged fields. A null value deletes the key.
//
//	3 group epoch                 value: epoch
//	4 subscribed topics' metadata value: id, name, partitions, racks
//	5 member metadata             value: instance, rack, client, host,
//	                              subscription, rebalance timeout, assignor,
//	                              classic member's protocols (tag 0)
//	6 target assignment epoch     value: assignment epoch
//	7 a member's target           value: partitions by topic id
//	8 a member's current state    value: epoch, previous epoch, state,
//	                              assigned and revoking partitions
//
// Each topic's partitions in record 8 carry their assignment epochs
// (KIP-1251) in a tagged field, tag 0, aligned with the partitions.
//
// The coordinator writes, for a member, its metadata before its target and
// its current state, and deletes them in the reverse order; the group
// epoch record comes first and is deleted last.
const (
	consumerGroupEpochType    = 3
	consumerTopicsType        = 4
	consumerMemberType        = 5
	consumerTargetEpochType   = 6
	consumerTargetMemberType  = 7
	consumerCurrentMemberType = 8
)

// consumerKey is the key of a consumer group record; member is "" for
// the group's own records.
type consumerKey struct {
	typ    int16
	group  string
	member string
}

func (k consumerKey) encode() []byte {
	b := kbin.AppendInt16(nil, k.typ)
	b = kbin.AppendString(b, k.group)
	if k.hasMember() {
		b = kbin.AppendString(b, k.member)
	}
	return b
}

func (k consumerKey) hasMember() bool {
	return k.typ == consumerMemberType || k.typ == consumerTargetMemberType || k.typ == consumerCurrentMemberType
}

func decodeConsumerKey(b []byte) (consumerKey, error) {
	r := kbin.Reader{Src: b}
	k := consumerKey{typ: r.Int16()}
	k.group = r.String()
	if k.hasMember() {
		k.member = r.String()
	}
	if err := r.Complete(); err != nil {
		return k, fmt.Errorf("consumer group key type %d: %w", k.typ, err)
	}
	return k, nil
}

// consumerRecordValueVersion is the only version of every value.
const consumerRecordValueVersion = 0

var errBadValueVersion = errors.New("unknown value version")

// newValue starts a value: its version; fields follow.
func newValue() []byte { return kbin.AppendInt16(nil, consumerRecordValueVersion) }

// noTags ends a flexible struct that carries no tagged field.
func noTags(b []byte) []byte { return kbin.AppendUvarint(b, 0) }

// valueReader reads a value's version and then its fields.
func valueReader(b []byte) (*kbin.Reader, error) {
	r := &kbin.Reader{Src: b}
	if v := r.Int16(); v != consumerRecordValueVersion {
		return nil, fmt.Errorf("%w %d", errBadValueVersion, v)
	}
	return r, nil
}

// tags reads a struct's tagged fields, calling fn with each known tag's
// data and skipping the others.
func tags(r *kbin.Reader, fn func(tag uint32, data []byte)) {
	n := r.Uvarint()
	for range n {
		tag, size := r.Uvarint(), r.Uvarint()
		data := r.Span(int(size))
		if fn != nil {
			fn(tag, data)
		}
	}
}

func appendCompactStrings(b []byte, ss []string) []byte {
	b = kbin.AppendCompactArrayLen(b, len(ss))
	for _, s := range ss {
		b = kbin.AppendCompactString(b, s)
	}
	return b
}

func readCompactStrings(r *kbin.Reader) []string {
	n := r.CompactArrayLen()
	if n < 0 || !r.Ok() {
		return nil
	}
	out := make([]string, 0, min(int(n), len(r.Src)))
	for range n {
		out = append(out, r.CompactString())
	}
	return out
}

func appendInt32s(b []byte, vs []int32) []byte {
	b = kbin.AppendCompactArrayLen(b, len(vs))
	for _, v := range vs {
		b = kbin.AppendInt32(b, v)
	}
	return b
}

func readInt32s(r *kbin.Reader) []int32 {
	n := r.CompactArrayLen()
	if n < 0 || !r.Ok() {
		return nil
	}
	out := make([]int32, 0, min(int(n), len(r.Src)/4))
	for range n {
		out = append(out, r.Int32())
	}
	return out
}

// epochValue is the value of records 3 and 6: one epoch.
func epochValue(epoch int32) []byte {
	return noTags(kbin.AppendInt32(newValue(), epoch))
}

func decodeEpochValue(b []byte) (int32, error) {
	r, err := valueReader(b)
	if err != nil {
		return 0, err
	}
	e := r.Int32()
	tags(r, nil)
	return e, r.Complete()
}

// topicsValue is record 4: the subscribed topics' metadata the target was
// computed from.
func topicsValue(topics map[string]TopicInfo, names []string) []byte {
	b := kbin.AppendCompactArrayLen(newValue(), len(names))
	for _, name := range names {
		t := topics[name]
		b = kbin.AppendUuid(b, t.ID)
		b = kbin.AppendCompactString(b, name)
		b = kbin.AppendInt32(b, t.Partitions)
		b = kbin.AppendCompactArrayLen(b, len(t.Racks))
		for p, racks := range t.Racks {
			b = kbin.AppendInt32(b, int32(p))
			b = appendCompactStrings(b, racks)
			b = noTags(b)
		}
		b = noTags(b)
	}
	return noTags(b)
}

func decodeTopicsValue(b []byte) (map[string]TopicInfo, error) {
	r, err := valueReader(b)
	if err != nil {
		return nil, err
	}
	out := map[string]TopicInfo{}
	n := r.CompactArrayLen()
	for i := int32(0); i < n && r.Ok(); i++ {
		var t TopicInfo
		t.ID = r.Uuid()
		name := r.CompactString()
		t.Partitions = r.Int32()
		np := r.CompactArrayLen()
		if np > 0 && np == t.Partitions {
			t.Racks = make([][]string, np)
		}
		for j := int32(0); j < np && r.Ok(); j++ {
			p := r.Int32()
			racks := readCompactStrings(r)
			if p >= 0 && int(p) < len(t.Racks) {
				t.Racks[p] = racks
			}
			tags(r, nil)
		}
		tags(r, nil)
		out[name] = t
	}
	tags(r, nil)
	return out, r.Complete()
}

// classicMemberMetadata is what a member of the classic protocol in a
// consumer group joined with.
type classicMemberMetadata struct {
	sessionTimeoutMs int32
	protocols        []Protocol
}

// memberValue is record 5.
type memberValue struct {
	instanceID, rackID *string
	clientID           string
	clientHost         string
	topicNames         []string
	topicRegex         *string
	rebalanceTimeoutMs int32
	serverAssignor     *string
	classic            *classicMemberMetadata
}

func (v *memberValue) encode() []byte {
	b := kbin.AppendCompactNullableString(newValue(), v.instanceID)
	b = kbin.AppendCompactNullableString(b, v.rackID)
	b = kbin.AppendCompactString(b, v.clientID)
	b = kbin.AppendCompactString(b, v.clientHost)
	b = appendCompactStrings(b, v.topicNames)
	b = kbin.AppendCompactNullableString(b, v.topicRegex)
	b = kbin.AppendInt32(b, v.rebalanceTimeoutMs)
	b = kbin.AppendCompactNullableString(b, v.serverAssignor)
	if v.classic == nil {
		return noTags(b)
	}
	// A nullable struct starts with its presence, 1 (0 is null).
	c := kbin.AppendUvarint(nil, 1)
	c = kbin.AppendInt32(c, v.classic.sessionTimeoutMs)
	c = kbin.AppendCompactArrayLen(c, len(v.classic.protocols))
	for _, p := range v.classic.protocols {
		c = kbin.AppendCompactString(c, p.Name)
		c = kbin.AppendCompactBytes(c, p.Metadata)
		c = noTags(c)
	}
	return appendTag0(b, noTags(c))
}

// appendTag0 ends a struct with one tagged field, tag 0, holding data.
func appendTag0(b, data []byte) []byte {
	b = kbin.AppendUvarint(b, 1)
	b = kbin.AppendUvarint(b, 0)
	b = kbin.AppendUvarint(b, uint32(len(data)))
	return append(b, data...)
}

func decodeMemberValue(b []byte) (*memberValue, error) {
	r, err := valueReader(b)
	if err != nil {
		return nil, err
	}
	v := &memberValue{}
	v.instanceID = r.CompactNullableString()
	v.rackID = r.CompactNullableString()
	v.clientID = r.CompactString()
	v.clientHost = r.CompactString()
	v.topicNames = readCompactStrings(r)
	v.topicRegex = r.CompactNullableString()
	v.rebalanceTimeoutMs = r.Int32()
	v.serverAssignor = r.CompactNullableString()
	var classicErr error
	tags(r, func(tag uint32, data []byte) {
		if tag != 0 {
			return
		}
		cr := kbin.Reader{Src: data}
		if cr.Uvarint() == 0 {
			return // null
		}
		c := &classicMemberMetadata{sessionTimeoutMs: cr.Int32()}
		n := cr.CompactArrayLen()
		for i := int32(0); i < n && cr.Ok(); i++ {
			p := Protocol{Name: cr.CompactString(), Metadata: cr.CompactBytes()}
			tags(&cr, nil)
			c.protocols = append(c.protocols, p)
		}
		tags(&cr, nil)
		if classicErr = cr.Complete(); classicErr == nil {
			v.classic = c
		}
	})
	return v, errors.Join(r.Complete(), classicErr)
}

// appendTopicPartitions writes partitions by topic id, sorted; with
// epochs, each topic's assignment epochs follow in tag 0.
func appendTopicPartitions(b []byte, ps partitionEpochs, epochs bool) []byte {
	ids := sortedIDs(ps)
	b = kbin.AppendCompactArrayLen(b, len(ids))
	for _, id := range ids {
		parts := slices.Sorted(maps.Keys(ps[id]))
		b = kbin.AppendUuid(b, id)
		b = appendInt32s(b, parts)
		if !epochs {
			b = noTags(b)
			continue
		}
		es := make([]int32, len(parts))
		for i, p := range parts {
			es[i] = ps[id][p]
		}
		b = appendTag0(b, appendInt32s(nil, es))
	}
	return b
}

// readTopicPartitions reads what appendTopicPartitions wrote; partitions
// without epochs are held from epoch def.
func readTopicPartitions(r *kbin.Reader, def int32) partitionEpochs {
	out := partitionEpochs{}
	n := r.CompactArrayLen()
	for i := int32(0); i < n && r.Ok(); i++ {
		id := r.Uuid()
		parts := readInt32s(r)
		var es []int32
		tags(r, func(tag uint32, data []byte) {
			if tag == 0 {
				er := kbin.Reader{Src: data}
				es = readInt32s(&er)
			}
		})
		ps := out[id]
		if ps == nil {
			ps = map[int32]int32{}
			out[id] = ps
		}
		for j, p := range parts {
			e := def
			if len(es) == len(parts) {
				e = es[j]
			}
			ps[p] = e
		}
	}
	return out
}

// targetValue is record 7: a member's target assignment.
func targetValue(t map[[16]byte][]int32) []byte {
	ps := partitionEpochs{}
	for id, parts := range t {
		m := make(map[int32]int32, len(parts))
		for _, p := range parts {
			m[p] = 0
		}
		ps[id] = m
	}
	return noTags(appendTopicPartitions(newValue(), ps, false))
}

func decodeTargetValue(b []byte) (map[[16]byte][]int32, error) {
	r, err := valueReader(b)
	if err != nil {
		return nil, err
	}
	ps := readTopicPartitions(r, 0)
	tags(r, nil)
	out := make(map[[16]byte][]int32, len(ps))
	for id, parts := range ps {
		out[id] = slices.Sorted(maps.Keys(parts))
	}
	return out, r.Complete()
}

// currentValue is record 8: a member's epochs, state and partitions.
type currentValue struct {
	epoch, prevEpoch int32
	state            memberState
	assigned         partitionEpochs
	revoking         partitionEpochs
}

func (v *currentValue) encode() []byte {
	b := kbin.AppendInt32(newValue(), v.epoch)
	b = kbin.AppendInt32(b, v.prevEpoch)
	b = kbin.AppendInt8(b, int8(v.state))
	b = appendTopicPartitions(b, v.assigned, true)
	b = appendTopicPartitions(b, v.revoking, true)
	return noTags(b)
}

func decodeCurrentValue(b []byte) (*currentValue, error) {
	r, err := valueReader(b)
	if err != nil {
		return nil, err
	}
	v := &currentValue{}
	v.epoch = r.Int32()
	v.prevEpoch = r.Int32()
	v.state = memberState(r.Int8())
	v.assigned = readTopicPartitions(r, v.epoch)
	v.revoking = readTopicPartitions(r, v.epoch)
	tags(r, nil)
	return v, r.Complete()
}

func sortedIDs(ps partitionEpochs) [][16]byte {
	ids := slices.Collect(maps.Keys(ps))
	slices.SortFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	return ids
}
