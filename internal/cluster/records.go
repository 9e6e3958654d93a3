package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
)

// A record is one change of the metadata, as it stands in the metadata log:
// a kind and its body, in JSON. apply is deterministic: it reads only the
// record and the image, so every broker that applies the same records in the
// same order holds the same image. Whatever depends on chance or on the
// proposer (a new topic id, where placement starts) is chosen before
// proposing and travels in the record. Checks that depend on the state
// (does the topic exist, is the broker registered) are made here, when the
// record applies, not by the proposer, whose view may be stale.
type record struct {
	Kind string          `json:"kind"`
	Body json.RawMessage `json:"body"`
}

// Record kinds.
const (
	kindClusterID        = "cluster-id"
	kindRegisterBroker   = "register-broker"
	kindFenceBroker      = "fence-broker"
	kindUnfenceBroker    = "unfence-broker"
	kindCreateTopic      = "create-topic"
	kindDeleteTopic      = "delete-topic"
	kindCreatePartitions = "create-partitions"
	kindTopicConfigs     = "topic-configs"
	kindBrokerConfigs    = "broker-configs"
	kindNodeConfigs      = "node-configs"
	kindProducerIDs      = "producer-ids"
	kindFeatures         = "features"
)

type clusterIDRecord struct {
	ID string `json:"id"`
}

type registerBrokerRecord struct {
	NodeID      int32  `json:"node_id"`
	Incarnation string `json:"incarnation"`
	Host        string `json:"host"`
	Port        int32  `json:"port"`
	Rack        string `json:"rack,omitempty"`
	// Unfenced registers the broker ready to lead at once: the single-node
	// store does so, being its own controller.
	Unfenced bool `json:"unfenced,omitempty"`
	// Takeover replaces a registration of the node that is not fenced: the
	// single-node store's, whose previous process cannot be alive.
	Takeover bool `json:"takeover,omitempty"`
}

type fenceRecord struct {
	NodeID int32 `json:"node_id"`
	Epoch  int64 `json:"epoch"` // the registration fenced or unfenced
}

type createTopicRecord struct {
	Name       string            `json:"name"`
	ID         TopicID           `json:"id"`
	Partitions int32             `json:"partitions"`
	Factor     int16             `json:"replication_factor"`
	Assignment [][]int32         `json:"assignment,omitempty"` // explicit replicas by partition
	Configs    map[string]string `json:"configs,omitempty"`
	Internal   bool              `json:"internal,omitempty"`
	Seed       uint32            `json:"seed"` // where placement starts
}

type deleteTopicRecord struct {
	Name string `json:"name"`
}

type createPartitionsRecord struct {
	Name       string    `json:"name"`
	Count      int32     `json:"count"`
	Assignment [][]int32 `json:"assignment,omitempty"` // of the new partitions
	Seed       uint32    `json:"seed"`
}

type topicConfigsRecord struct {
	Name    string            `json:"name"`
	Configs map[string]string `json:"configs,omitempty"`
}

type brokerConfigsRecord struct {
	Configs map[string]string `json:"configs,omitempty"`
}

type nodeConfigsRecord struct {
	NodeID  int32             `json:"node_id"`
	Configs map[string]string `json:"configs,omitempty"`
}

type featuresRecord struct {
	Levels map[string]int16 `json:"levels"`
	// IfUnset sets only the features that have no level yet: a new
	// cluster's first broker finalizes its own, and the rest agree.
	IfUnset bool `json:"if_unset,omitempty"`
}

type producerIDsRecord struct {
	NodeID int32 `json:"node_id"`
}

// ProducerIDBlockSize is how many producer ids are reserved at a time: one
// metadata record per block, as Kafka's controller allocates them.
const ProducerIDBlockSize = 1000

func encodeRecord(kind string, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return json.Marshal(record{Kind: kind, Body: b})
}

// result is what applying a record returns to its proposer.
type result struct {
	val any
	err error
}

// errCorruptRecord: a record that does not decode. Every broker skips it
// alike, so images stay equal; the proposer learns of it.
var errCorruptRecord = errors.New("cluster: undecodable metadata record")

// apply applies one record at index to im and returns the proposer's
// result. A record that fails its checks changes nothing.
func (im *image) apply(index uint64, data []byte) result {
	im.Applied = index
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return result{err: fmt.Errorf("%w: %v", errCorruptRecord, err)}
	}
	res := im.applyKind(index, rec)
	im.index()
	return res
}

func decode[T any](body json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("%w: %v", errCorruptRecord, err)
	}
	return v, nil
}

func (im *image) applyKind(index uint64, rec record) result {
	switch rec.Kind {
	case kindClusterID:
		r, err := decode[clusterIDRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		if im.ClusterID == "" {
			im.ClusterID = r.ID
		}
		return result{val: im.ClusterID}
	case kindRegisterBroker:
		r, err := decode[registerBrokerRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		return im.registerBroker(index, r)
	case kindFenceBroker, kindUnfenceBroker:
		r, err := decode[fenceRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		b := im.broker(r.NodeID)
		if b == nil || b.Epoch != r.Epoch {
			return result{err: fmt.Errorf("%w: broker %d epoch %d", ErrStaleBrokerEpoch, r.NodeID, r.Epoch)}
		}
		if rec.Kind == kindFenceBroker {
			im.fence(b)
		} else {
			im.unfence(b)
		}
		return result{}
	case kindCreateTopic:
		r, err := decode[createTopicRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		return im.createTopic(r)
	case kindDeleteTopic:
		r, err := decode[deleteTopicRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		t, ok := im.byName[r.Name]
		if !ok {
			return result{err: fmt.Errorf("%w: %s", ErrUnknownTopic, r.Name)}
		}
		gone := t.clone()
		im.Topics = slices.DeleteFunc(im.Topics, func(x Topic) bool { return x.Name == r.Name })
		return result{val: gone}
	case kindCreatePartitions:
		r, err := decode[createPartitionsRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		return im.createPartitions(r)
	case kindTopicConfigs:
		r, err := decode[topicConfigsRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		t, ok := im.byName[r.Name]
		if !ok {
			return result{err: fmt.Errorf("%w: %s", ErrUnknownTopic, r.Name)}
		}
		t.Configs = maps.Clone(r.Configs)
		return result{}
	case kindBrokerConfigs:
		r, err := decode[brokerConfigsRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		im.BrokerConfigs = maps.Clone(r.Configs)
		return result{}
	case kindNodeConfigs:
		r, err := decode[nodeConfigsRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		if len(r.Configs) == 0 {
			delete(im.NodeConfigs, r.NodeID)
			return result{}
		}
		if im.NodeConfigs == nil {
			im.NodeConfigs = map[int32]map[string]string{}
		}
		im.NodeConfigs[r.NodeID] = maps.Clone(r.Configs)
		return result{}
	case kindFeatures:
		r, err := decode[featuresRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		changed := false
		for name, level := range r.Levels {
			if cur, ok := im.Features[name]; ok && (r.IfUnset || cur == level) {
				continue
			}
			if im.Features == nil {
				im.Features = map[string]int16{}
			}
			im.Features[name], changed = level, true
		}
		if changed {
			im.FeaturesEpoch = int64(index)
		}
		return result{}
	case kindProducerIDs:
		start := im.ProducerIDBlockEnd
		if start > math.MaxInt64-ProducerIDBlockSize {
			return result{err: ErrProducerIDsExhausted}
		}
		im.ProducerIDBlockEnd = start + ProducerIDBlockSize
		return result{val: start}
	}
	return result{err: fmt.Errorf("%w: unknown kind %q", errCorruptRecord, rec.Kind)}
}

func (im *image) registerBroker(index uint64, r registerBrokerRecord) result {
	nb := Broker{NodeID: r.NodeID, Host: r.Host, Port: r.Port, Rack: r.Rack, Incarnation: r.Incarnation,
		Epoch: int64(index), Fenced: !r.Unfenced}
	if b := im.broker(r.NodeID); b != nil {
		// Another process of the node may register only once the old one's
		// registration is fenced: the active controller decides it is
		// gone (Kafka's rule). The same process may register again.
		if !b.Fenced && b.Incarnation != r.Incarnation && !r.Takeover {
			return result{err: ErrDuplicateBrokerRegistration}
		}
		// A new registration replaces the old one. Unless it is ready at
		// once, what the old process led is given up first.
		if nb.Fenced {
			im.fence(b)
		}
		*b = nb
		return result{val: nb}
	}
	i, _ := slices.BinarySearchFunc(im.Brokers, r.NodeID, func(b Broker, n int32) int { return int(b.NodeID) - int(n) })
	im.Brokers = slices.Insert(im.Brokers, i, nb)
	return result{val: nb}
}

// fence stops b leading: each partition it leads moves to another live
// in-sync replica or, with none, has no leader until b returns (it stays
// in the in-sync set, so that it is the one to lead again).
func (im *image) fence(b *Broker) {
	b.Fenced = true
	for ti := range im.Topics {
		for pi := range im.Topics[ti].States {
			p := &im.Topics[ti].States[pi]
			if p.Leader != b.NodeID {
				continue
			}
			p.Leader = NoLeader
			for _, r := range p.ISR {
				if r != b.NodeID && im.isLive(r) {
					p.Leader = r
					break
				}
			}
			if p.Leader != NoLeader && len(p.ISR) > 1 {
				p.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == b.NodeID })
			}
			p.LeaderEpoch++
			p.PartitionEpoch++
		}
	}
}

// unfence lets b lead again: it takes every leaderless partition whose
// in-sync set names it.
func (im *image) unfence(b *Broker) {
	b.Fenced = false
	for ti := range im.Topics {
		for pi := range im.Topics[ti].States {
			p := &im.Topics[ti].States[pi]
			if p.Leader == NoLeader && slices.Contains(p.ISR, b.NodeID) {
				p.Leader = b.NodeID
				p.LeaderEpoch++
				p.PartitionEpoch++
			}
		}
	}
}

func (im *image) isLive(node int32) bool {
	b := im.broker(node)
	return b != nil && !b.Fenced
}

func (im *image) createTopic(r createTopicRecord) result {
	if err := ValidateTopicName(r.Name); err != nil {
		return result{err: err}
	}
	if r.Partitions <= 0 {
		return result{err: fmt.Errorf("%w: %d", ErrInvalidPartitions, r.Partitions)}
	}
	if _, ok := im.byName[r.Name]; ok {
		return result{err: fmt.Errorf("%w: %s", ErrTopicExists, r.Name)}
	}
	if other, ok := im.collidingTopic(r.Name); ok {
		return result{err: fmt.Errorf("%w: topic '%s' collides with existing topic: %s", ErrInvalidTopic, r.Name, other)}
	}
	if _, ok := im.byID[r.ID]; ok || r.ID == (TopicID{}) {
		return result{err: fmt.Errorf("%w: topic id %s", ErrTopicIDTaken, r.ID)}
	}
	states, err := im.place(r.Partitions, 0, r.Factor, r.Assignment, r.Seed)
	if err != nil {
		return result{err: err}
	}
	t := Topic{Name: r.Name, ID: r.ID, Partitions: r.Partitions, Configs: maps.Clone(r.Configs),
		Internal: r.Internal, States: states}
	im.Topics = append(im.Topics, t)
	return result{val: t.clone()}
}

func (im *image) createPartitions(r createPartitionsRecord) result {
	t, ok := im.byName[r.Name]
	if !ok {
		return result{err: fmt.Errorf("%w: %s", ErrUnknownTopic, r.Name)}
	}
	if r.Count <= t.Partitions {
		return result{err: fmt.Errorf("%w: topic %s has %d partitions; the count can only grow",
			ErrInvalidPartitions, r.Name, t.Partitions)}
	}
	factor := int16(1)
	if len(t.States) > 0 {
		factor = int16(len(t.States[0].Replicas))
	}
	states, err := im.place(r.Count-t.Partitions, t.Partitions, factor, r.Assignment, r.Seed)
	if err != nil {
		return result{err: err}
	}
	t.States = append(t.States, states...)
	t.Partitions = r.Count
	return result{}
}
