package cluster

import (
	"github.com/strandlog/strand/internal/model"

	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
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
	kindClusterID         = "cluster-id"
	kindRegisterBroker    = "register-broker"
	kindFenceBroker       = "fence-broker"
	kindUnfenceBroker     = "unfence-broker"
	kindCreateTopic       = "create-topic"
	kindDeleteTopic       = "delete-topic"
	kindCreatePartitions  = "create-partitions"
	kindTopicConfigs      = "topic-configs"
	kindBrokerConfigs     = "broker-configs"
	kindGroupConfigs      = "group-configs"
	kindClientMetrics     = "client-metrics"
	kindNodeConfigs       = "node-configs"
	kindProducerIDs       = "producer-ids"
	kindFeatures          = "features"
	kindAlterPartition    = "alter-partition"
	kindElectLeader       = "elect-leader"
	kindReassignPartition = "reassign-partition"
	kindScramCredentials  = "scram-credentials"
	kindACLs              = "acls"
	kindClientQuotas      = "client-quotas"
	kindLink              = "link"
	kindDeleteLink        = "delete-link"
	kindMirrorState       = "mirror-state"
	kindProducerIDsAbove  = "producer-ids-above"
)

type clusterIDRecord struct {
	ID string `json:"id"`
}

type registerBrokerRecord struct {
	NodeID      int32      `json:"node_id"`
	Incarnation string     `json:"incarnation"`
	Host        string     `json:"host"`
	Port        int32      `json:"port"`
	Endpoints   []Endpoint `json:"endpoints,omitempty"`
	Rack        string     `json:"rack,omitempty"`
	// Unfenced registers the broker ready to lead at once: the single-node
	// store does so, being its own controller.
	Unfenced bool `json:"unfenced,omitempty"`
	// Takeover replaces a registration of the node that is not fenced: the
	// single-node store's, whose previous process cannot be alive.
	Takeover bool `json:"takeover,omitempty"`
}

// alterPartitionRecord is a leader's change of a partition's in-sync set
// (Kafka's AlterPartition), decided on the view its epochs name.
type alterPartitionRecord struct {
	Topic          string  `json:"topic"`
	TopicID        TopicID `json:"topic_id"`
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	ISR            []int32 `json:"isr"`
}

// reassignRecord starts, replaces or (with no target) cancels a
// partition's reassignment.
type reassignRecord struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Target    []int32 `json:"target"`
}

// electLeaderRecord asks for a partition's preferred replica to lead
// (Kafka's preferred election), or, Unclean, for any live replica to lead
// a partition that has no leader.
type electLeaderRecord struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Unclean   bool   `json:"unclean,omitempty"`
}

type fenceRecord struct {
	NodeID int32 `json:"node_id"`
	Epoch  int64 `json:"epoch"` // the registration fenced or unfenced
	// Shutdown fences a broker at its own request, before it stops
	// (Kafka's controlled shutdown): it stays fenced until it registers
	// again.
	Shutdown bool `json:"shutdown,omitempty"`
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
	// Mirror makes the topic a mirror of the link it names.
	Mirror *TopicMirror `json:"mirror,omitempty"`
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

type groupConfigsRecord struct {
	Group   string            `json:"group"`
	Configs map[string]string `json:"configs,omitempty"`
}

type clientMetricsRecord struct {
	Name    string            `json:"name"`
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

// scramCredentialsRecord changes users' SCRAM credentials: the
// deletions, then the upsertions. A deletion of a credential that is not
// there changes nothing.
type scramCredentialsRecord struct {
	Upsertions []ScramCredentialChange `json:"upsertions,omitempty"`
	Deletions  []ScramCredentialChange `json:"deletions,omitempty"`
}

// aclsRecord changes the access control lists: the deletions, then the
// creations. Both name whole bindings; deleting one that is not there, or
// creating one that is, changes nothing.
type aclsRecord struct {
	Creations []model.ACLBinding `json:"creations,omitempty"`
	Deletions []model.ACLBinding `json:"deletions,omitempty"`
}

// clientQuotasRecord changes client quotas: for each entity, the values
// set and the keys removed. An entity left with no value is dropped.
type clientQuotasRecord struct {
	Changes []ClientQuotaChange `json:"changes"`
}

// QuotaEntityPart is one part of what a client quota applies to: a user,
// a client id or an IP (Type, as Kafka names them), by Name, or the
// default of that type (Default, and no name).
type QuotaEntityPart struct {
	Type    string `json:"type"`
	Name    string `json:"name,omitempty"`
	Default bool   `json:"default,omitempty"`
}

// ClientQuota is the quota values (by Kafka's keys: producer_byte_rate,
// consumer_byte_rate, request_percentage, ...) of one entity, whose parts
// are sorted by type.
type ClientQuota struct {
	Entity []QuotaEntityPart  `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// ClientQuotaChange sets and removes quota values of one entity.
type ClientQuotaChange struct {
	Entity []QuotaEntityPart  `json:"entity"`
	Set    map[string]float64 `json:"set,omitempty"`
	Remove []string           `json:"remove,omitempty"`
}

// ScramCredential is what is kept of a user's password for one SCRAM
// mechanism (internal/scram derives it): never the password.
type ScramCredential struct {
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
	Iterations int32  `json:"iterations"`
}

// ScramCredentialChange names a user's credential for one mechanism (Kafka's
// number for it: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512), with the credential when
// it is set.
type ScramCredentialChange struct {
	User       string          `json:"user"`
	Mechanism  int8            `json:"mechanism"`
	Credential ScramCredential `json:"credential,omitzero"`
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
		switch {
		case rec.Kind == kindFenceBroker:
			im.fence(b)
			b.ShuttingDown = b.ShuttingDown || r.Shutdown
		case b.ShuttingDown:
			return result{err: fmt.Errorf("%w: broker %d is shutting down", ErrStaleBrokerEpoch, r.NodeID)}
		default:
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
	case kindGroupConfigs:
		r, err := decode[groupConfigsRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		putConfigs(&im.GroupConfigs, r.Group, r.Configs)
		return result{}
	case kindClientMetrics:
		r, err := decode[clientMetricsRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		putConfigs(&im.ClientMetrics, r.Name, r.Configs)
		return result{}
	case kindNodeConfigs:
		r, err := decode[nodeConfigsRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		putConfigs(&im.NodeConfigs, r.NodeID, r.Configs)
		return result{}
	case kindScramCredentials:
		r, err := decode[scramCredentialsRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		for _, d := range r.Deletions {
			if creds := im.ScramCredentials[d.User]; creds != nil {
				delete(creds, d.Mechanism)
				if len(creds) == 0 {
					delete(im.ScramCredentials, d.User)
				}
			}
		}
		for _, u := range r.Upsertions {
			if im.ScramCredentials == nil {
				im.ScramCredentials = map[string]map[int8]ScramCredential{}
			}
			if im.ScramCredentials[u.User] == nil {
				im.ScramCredentials[u.User] = map[int8]ScramCredential{}
			}
			im.ScramCredentials[u.User][u.Mechanism] = u.Credential
		}
		return result{}
	case kindClientQuotas:
		r, err := decode[clientQuotasRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		for _, c := range r.Changes {
			i := slices.IndexFunc(im.ClientQuotas, func(q ClientQuota) bool { return slices.Equal(q.Entity, c.Entity) })
			if i < 0 {
				if len(c.Set) == 0 {
					continue
				}
				im.ClientQuotas = append(im.ClientQuotas, ClientQuota{Entity: c.Entity, Values: map[string]float64{}})
				i = len(im.ClientQuotas) - 1
			}
			q := &im.ClientQuotas[i]
			for _, k := range c.Remove {
				delete(q.Values, k)
			}
			maps.Copy(q.Values, c.Set)
			if len(q.Values) == 0 {
				im.ClientQuotas = slices.Delete(im.ClientQuotas, i, i+1)
			}
		}
		im.ClientQuotasEpoch = int64(index)
		return result{}
	case kindACLs:
		r, err := decode[aclsRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		before := len(im.ACLs)
		im.ACLs = slices.DeleteFunc(im.ACLs, func(b model.ACLBinding) bool { return slices.Contains(r.Deletions, b) })
		changed := len(im.ACLs) != before
		for _, b := range r.Creations {
			if !slices.Contains(im.ACLs, b) {
				im.ACLs = append(im.ACLs, b)
				changed = true
			}
		}
		if changed {
			im.ACLsEpoch = int64(index)
		}
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
	case kindElectLeader:
		r, err := decode[electLeaderRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		return im.electLeaderByRequest(r)
	case kindAlterPartition:
		r, err := decode[alterPartitionRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		return im.alterPartition(r)
	case kindReassignPartition:
		r, err := decode[reassignRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		return im.reassign(r)
	case kindLink:
		r, err := decode[linkRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		return im.applyLink(r)
	case kindDeleteLink:
		r, err := decode[deleteLinkRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		return im.deleteLink(r)
	case kindMirrorState:
		r, err := decode[mirrorStateRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		return im.setMirrorState(r)
	case kindProducerIDsAbove:
		r, err := decode[producerIDsAboveRecord](rec.Body)
		if err != nil {
			return result{err: err}
		}
		return im.reserveProducerIDs(r)
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
	nb := Broker{NodeID: r.NodeID, Host: r.Host, Port: r.Port, Endpoints: r.Endpoints, Rack: r.Rack, Incarnation: r.Incarnation,
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

// fence stops b leading and takes it out of every in-sync set: each
// partition it leads moves to another live in-sync replica (the earliest in
// the replica list, so the preferred leader first) or, with none, has no
// leader until b returns. The last member of an in-sync set stays in it
// (KIP-966's last eligible leader), so that it is the one to lead again and
// nothing acknowledged is lost to an unclean choice.
func (im *image) fence(b *Broker) {
	b.Fenced = true
	for ti := range im.Topics {
		for pi := range im.Topics[ti].States {
			p := &im.Topics[ti].States[pi]
			if !slices.Contains(p.ISR, b.NodeID) {
				continue
			}
			leading := p.Leader == b.NodeID
			if leading {
				p.Leader = im.electLeader(p, b.NodeID)
				p.LeaderEpoch++
				if p.Leader == NoLeader && strings.EqualFold(im.Topics[ti].Configs[uncleanElectionConfig], "true") {
					if im.electUnclean(p, b.NodeID) {
						continue
					}
				}
			}
			shrink := len(p.ISR) > 1 && (!leading || p.Leader != NoLeader)
			if shrink {
				p.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == b.NodeID })
			}
			if leading || shrink {
				p.PartitionEpoch++
			}
		}
	}
}

// electLeader picks the new leader of p: the first replica in the replica
// list that is in sync, live, and not excluded; NoLeader if none is.
func (im *image) electLeader(p *Partition, excluded int32) int32 {
	for _, r := range p.Replicas {
		if r != excluded && slices.Contains(p.ISR, r) && im.isLive(r) {
			return r
		}
	}
	return NoLeader
}

// unfence lets b lead again: it takes every leaderless partition whose
// in-sync set names it, and, where the topic allows unclean elections,
// every leaderless partition it holds a replica of.
func (im *image) unfence(b *Broker) {
	b.Fenced = false
	for ti := range im.Topics {
		for pi := range im.Topics[ti].States {
			p := &im.Topics[ti].States[pi]
			switch {
			case p.Leader != NoLeader || !p.HasReplica(b.NodeID):
			case slices.Contains(p.ISR, b.NodeID):
				p.Leader = b.NodeID
				p.LeaderEpoch++
				p.PartitionEpoch++
			case strings.EqualFold(im.Topics[ti].Configs[uncleanElectionConfig], "true"):
				if im.electUnclean(p, -1) {
					p.LeaderEpoch++
				}
			}
		}
	}
}

// uncleanElectionConfig is the topic config (Kafka's name) that lets an
// out-of-sync replica lead.
const uncleanElectionConfig = "unclean.leader.election.enable"

// electUnclean makes the first live replica (other than excluded) lead
// partition p, which no in-sync replica can lead, as its only in-sync
// member: what it lacks of the old leader's log is lost, so it is counted.
func (im *image) electUnclean(p *Partition, excluded int32) bool {
	for _, r := range p.Replicas {
		if r != excluded && im.isLive(r) {
			p.Leader, p.ISR = r, []int32{r}
			p.PartitionEpoch++
			p.UncleanElections++
			return true
		}
	}
	return false
}

// alterPartition applies a leader's new in-sync set. It is refused unless
// the proposer still leads at the epoch it names and the partition has not
// changed since (the partition epoch), and a member it adds must be a live
// replica: what was decided on a stale view never applies.
func (im *image) alterPartition(r alterPartitionRecord) result {
	t := im.byName[r.Topic]
	if t == nil || t.ID != r.TopicID || r.Partition < 0 || int(r.Partition) >= len(t.States) {
		return result{err: fmt.Errorf("%w: %s-%d", ErrUnknownTopic, r.Topic, r.Partition)}
	}
	p := &t.States[r.Partition]
	switch {
	case p.Leader != r.Leader || p.LeaderEpoch != r.LeaderEpoch:
		return result{err: fmt.Errorf("%w: %s-%d is led by %d at epoch %d", ErrFencedLeaderEpoch,
			r.Topic, r.Partition, p.Leader, p.LeaderEpoch)}
	case p.PartitionEpoch != r.PartitionEpoch:
		return result{err: fmt.Errorf("%w: %s-%d is at partition epoch %d, not %d", ErrInvalidUpdateVersion,
			r.Topic, r.Partition, p.PartitionEpoch, r.PartitionEpoch)}
	case !slices.Contains(r.ISR, r.Leader):
		return result{err: fmt.Errorf("%w: the in-sync set %v leaves out its leader %d", ErrInvalidRequest, r.ISR, r.Leader)}
	}
	for i, n := range r.ISR {
		if !p.HasReplica(n) || slices.Contains(r.ISR[:i], n) {
			return result{err: fmt.Errorf("%w: %d is not a replica of %s-%d, or named twice", ErrInvalidRequest, n, r.Topic, r.Partition)}
		}
		if !slices.Contains(p.ISR, n) && !im.isLive(n) {
			return result{err: fmt.Errorf("%w: broker %d is not live", ErrIneligibleReplica, n)}
		}
	}
	// The in-sync set keeps the replica list's order: elections go by it.
	isr := make([]int32, 0, len(r.ISR))
	for _, n := range p.Replicas {
		if slices.Contains(r.ISR, n) {
			isr = append(isr, n)
		}
	}
	p.ISR = isr
	p.PartitionEpoch++
	im.completeReassignment(p)
	return result{val: p.clone()}
}

// reassign applies a reassignment record (Kafka's rules for
// AlterPartitionReassignments): the target has at least one replica,
// none twice, each a registered broker. A new target replaces one in
// progress, from the replicas that one started from.
func (im *image) reassign(r reassignRecord) result {
	t := im.byName[r.Topic]
	if t == nil || r.Partition < 0 || int(r.Partition) >= len(t.States) {
		return result{err: fmt.Errorf("%w: %s-%d", ErrUnknownTopic, r.Topic, r.Partition)}
	}
	p := &t.States[r.Partition]
	// The replicas before any reassignment in progress (Kafka's revert:
	// the replicas but those being added).
	original := slices.DeleteFunc(slices.Clone(p.Replicas), func(n int32) bool { return slices.Contains(p.Adding, n) })
	target := r.Target
	if target == nil {
		if !p.Reassigning() {
			return result{err: fmt.Errorf("%w: %s-%d", ErrNoReassignmentInProgress, r.Topic, r.Partition)}
		}
		target = original
	}
	if len(target) == 0 {
		return result{err: fmt.Errorf("%w: an empty replica list for %s-%d", ErrInvalidReplicaAssignment, r.Topic, r.Partition)}
	}
	for i, n := range target {
		if slices.Contains(target[:i], n) {
			return result{err: fmt.Errorf("%w: broker %d named twice for %s-%d", ErrInvalidReplicaAssignment, n, r.Topic, r.Partition)}
		}
		if im.broker(n) == nil {
			return result{err: fmt.Errorf("%w: broker %d is not registered", ErrInvalidReplicaAssignment, n)}
		}
	}
	p.Adding = slices.DeleteFunc(slices.Clone(target), func(n int32) bool { return slices.Contains(original, n) })
	p.Removing = slices.DeleteFunc(slices.Clone(original), func(n int32) bool { return slices.Contains(target, n) })
	p.Replicas = append(slices.Clone(target), p.Removing...)
	p.ISR = slices.DeleteFunc(p.ISR, func(n int32) bool { return !slices.Contains(p.Replicas, n) })
	if !slices.Contains(p.Replicas, p.Leader) {
		p.Leader = im.electLeader(p, NoLeader)
		p.LeaderEpoch++
	}
	p.PartitionEpoch++
	im.completeReassignment(p)
	return result{val: p.clone()}
}

// completeReassignment ends p's reassignment once every replica of its
// target is in sync: the removed replicas leave the replica list and the
// in-sync set, and if the leader is one of them, the target's first
// in-sync live replica leads. Until then the removed replicas keep their
// part, so that nothing acknowledged depends on a replica still copying.
func (im *image) completeReassignment(p *Partition) {
	if !p.Reassigning() {
		return
	}
	target := p.Target()
	for _, n := range target {
		if !slices.Contains(p.ISR, n) {
			return
		}
	}
	p.Replicas, p.Adding, p.Removing = target, nil, nil
	p.ISR = slices.DeleteFunc(slices.Clone(target), func(n int32) bool { return !slices.Contains(p.ISR, n) })
	if !slices.Contains(target, p.Leader) {
		p.Leader = im.electLeader(p, NoLeader)
		p.LeaderEpoch++
	}
}

// electLeaderByRequest applies an election asked for through ElectLeaders
// or by the controller's preferred-leader balancing.
func (im *image) electLeaderByRequest(r electLeaderRecord) result {
	t := im.byName[r.Topic]
	if t == nil || r.Partition < 0 || int(r.Partition) >= len(t.States) {
		return result{err: fmt.Errorf("%w: %s-%d", ErrUnknownTopic, r.Topic, r.Partition)}
	}
	p := &t.States[r.Partition]
	if r.Unclean {
		if p.Leader != NoLeader {
			return result{err: fmt.Errorf("%w: %s-%d is led by %d", ErrElectionNotNeeded, r.Topic, r.Partition, p.Leader)}
		}
		if p.Leader = im.electLeader(p, NoLeader); p.Leader != NoLeader {
			p.LeaderEpoch++
			p.PartitionEpoch++
			return result{val: p.clone()}
		}
		if !im.electUnclean(p, NoLeader) {
			return result{err: fmt.Errorf("%w: no replica of %s-%d is live", ErrEligibleLeadersNotAvailable, r.Topic, r.Partition)}
		}
		p.LeaderEpoch++
		return result{val: p.clone()}
	}
	preferred := p.Replicas[0]
	switch {
	case p.Leader == preferred:
		return result{err: fmt.Errorf("%w: %s-%d is led by its preferred replica %d", ErrElectionNotNeeded, r.Topic, r.Partition, preferred)}
	case !slices.Contains(p.ISR, preferred) || !im.isLive(preferred):
		return result{err: fmt.Errorf("%w: the preferred replica %d of %s-%d is not live and in sync", ErrPreferredLeaderNotAvailable,
			preferred, r.Topic, r.Partition)}
	}
	p.Leader = preferred
	p.LeaderEpoch++
	p.PartitionEpoch++
	return result{val: p.clone()}
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
	if r.Mirror != nil && im.link(r.Mirror.Link) == nil {
		return result{err: fmt.Errorf("%w: %s", ErrUnknownLink, r.Mirror.Link)}
	}
	states, err := im.place(r.Partitions, 0, r.Factor, r.Assignment, r.Seed)
	if err != nil {
		return result{err: err}
	}
	t := Topic{Name: r.Name, ID: r.ID, Partitions: r.Partitions, Configs: maps.Clone(r.Configs),
		Internal: r.Internal, States: states, Mirror: r.Mirror.clone()}
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

// putConfigs sets the configs of one resource (a broker, a group) in m,
// none removing its entry.
func putConfigs[K comparable](m *map[K]map[string]string, k K, configs map[string]string) {
	if len(configs) == 0 {
		delete(*m, k)
		return
	}
	if *m == nil {
		*m = map[K]map[string]string{}
	}
	(*m)[k] = maps.Clone(configs)
}
