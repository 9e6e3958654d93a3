package cluster

import (
	"github.com/strandlog/strand/internal/model"

	"encoding/base64"
	"maps"
	"slices"
	"strings"
)

// TopicID is Kafka's topic UUID.
type TopicID [16]byte

func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// NoLeader is a partition's leader while none of its replicas can lead.
const NoLeader int32 = -1

// Partition is one partition's placement and leadership, as Kafka's
// PartitionRecord holds it.
type Partition struct {
	Replicas []int32 `json:"replicas"`
	ISR      []int32 `json:"isr"`
	// Leader is a node id, or NoLeader.
	Leader      int32 `json:"leader"`
	LeaderEpoch int32 `json:"leader_epoch"`
	// PartitionEpoch grows with every change of the record: it fences
	// in-sync set changes decided on an older view.
	PartitionEpoch int32 `json:"partition_epoch"`
	// UncleanElections counts the times a replica out of the in-sync set
	// was made leader (unclean.leader.election.enable).
	UncleanElections int32 `json:"unclean_elections,omitempty"`
	// Adding and Removing are the replicas a reassignment in progress
	// adds and removes (AlterPartitionReassignments). Meanwhile Replicas
	// is the target followed by those being removed.
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
}

func (p Partition) clone() Partition {
	p.Replicas, p.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
	p.Adding, p.Removing = slices.Clone(p.Adding), slices.Clone(p.Removing)
	return p
}

// Reassigning reports whether a reassignment of the partition is in
// progress.
func (p Partition) Reassigning() bool { return len(p.Adding) > 0 || len(p.Removing) > 0 }

// Target is the replicas the partition is reassigned to, or its replicas
// when no reassignment is in progress.
func (p Partition) Target() []int32 {
	return slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool { return slices.Contains(p.Removing, r) })
}

// HasReplica reports whether node holds a replica of the partition.
func (p Partition) HasReplica(node int32) bool { return slices.Contains(p.Replicas, node) }

// Topic is one topic's metadata.
type Topic struct {
	Name       string            `json:"name"`
	ID         TopicID           `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"` // overrides of the broker defaults
	Internal   bool              `json:"internal,omitempty"`
	// States holds each partition's placement, by partition number; its
	// length is Partitions.
	States []Partition `json:"states,omitempty"`
	// Mirror, when set, makes the topic a read-only mirror of a cluster
	// link's source topic of the same name and id.
	Mirror *TopicMirror `json:"mirror,omitempty"`
	// Promoted marks a former mirror (see TopicPromotion).
	Promoted *TopicPromotion `json:"promoted,omitempty"`
}

func (t Topic) clone() Topic {
	t.Configs = maps.Clone(t.Configs)
	t.Mirror = t.Mirror.clone()
	if t.Promoted != nil {
		pr := *t.Promoted
		t.Promoted = &pr
	}
	t.States = slices.Clone(t.States)
	for i := range t.States {
		t.States[i] = t.States[i].clone()
	}
	return t
}

// Broker is one registered broker.
type Broker struct {
	NodeID int32 `json:"node_id"`
	// Host and Port are the inter-broker listener's address: where peers
	// connect. Endpoints are every listener's, by name (Kafka's broker
	// registration endpoints); none in a registration that named none.
	Host      string     `json:"host"`
	Port      int32      `json:"port"`
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	Rack      string     `json:"rack,omitempty"`
	// Incarnation is the registering process's random id: a restart
	// registers again with a new one.
	Incarnation string `json:"incarnation,omitempty"`
	// Epoch is the index of the registration in the metadata log (Kafka's
	// broker epoch): it tells a stale process of the same node apart.
	Epoch int64 `json:"epoch"`
	// Fenced brokers lead nothing; a registered broker starts fenced and is
	// unfenced by the controller once it is alive and caught up.
	Fenced bool `json:"fenced,omitempty"`
	// ShuttingDown: the broker fenced itself before stopping (controlled
	// shutdown); only a new registration unfences it.
	ShuttingDown bool `json:"shutting_down,omitempty"`
}

// Endpoint is where one of a broker's listeners takes connections.
type Endpoint struct {
	Listener string `json:"listener"`
	Host     string `json:"host"`
	Port     int32  `json:"port"`
}

// Endpoint returns where the broker's listener takes connections: a
// client is told of the brokers on the listener it came through, as in
// Kafka. A registration without endpoints has one listener, at Host and
// Port.
func (b Broker) Endpoint(listener string) (Endpoint, bool) {
	if len(b.Endpoints) == 0 || listener == "" {
		return Endpoint{Listener: listener, Host: b.Host, Port: b.Port}, true
	}
	for _, e := range b.Endpoints {
		if strings.EqualFold(e.Listener, listener) {
			return e, true
		}
	}
	return Endpoint{}, false
}

// image is the cluster metadata as of one point of the metadata log. Every
// change is a record applied by apply (records.go), in log order, on every
// broker alike, so two images that applied the same records are equal.
type image struct {
	ClusterID     string            `json:"cluster_id"`
	Topics        []Topic           `json:"topics"`
	Brokers       []Broker          `json:"brokers,omitempty"` // sorted by node id
	BrokerConfigs map[string]string `json:"broker_configs,omitempty"`
	// NodeConfigs are the dynamic configs set for one broker, by node id;
	// they win over BrokerConfigs (the cluster-wide defaults).
	NodeConfigs map[int32]map[string]string `json:"node_configs,omitempty"`
	// GroupConfigs are the configs set for a consumer group (Kafka's GROUP
	// config resource), by group id.
	GroupConfigs map[string]map[string]string `json:"group_configs,omitempty"`
	// ClientMetrics are the client metrics subscriptions (KIP-714's
	// CLIENT_METRICS config resources), by name.
	ClientMetrics map[string]map[string]string `json:"client_metrics,omitempty"`
	// ProducerIDBlockEnd is the high-water mark of allocated producer ids:
	// every id below it may have been handed out, none at or above it has.
	ProducerIDBlockEnd int64 `json:"producer_id_block_end,omitempty"`
	// Features are the finalized feature levels (KIP-584), by name, and
	// FeaturesEpoch the index of the record that last changed them.
	Features      map[string]int16 `json:"features,omitempty"`
	FeaturesEpoch int64            `json:"features_epoch,omitempty"`
	// ScramCredentials are the users' SCRAM credentials, by user and
	// mechanism: salts and keys, never passwords.
	ScramCredentials map[string]map[int8]ScramCredential `json:"scram_credentials,omitempty"`
	// ACLs are the access control lists, in the order they were created,
	// and ACLsEpoch the index of the record that last changed them.
	ACLs      []model.ACLBinding `json:"acls,omitempty"`
	ACLsEpoch int64              `json:"acls_epoch,omitempty"`
	// ClientQuotas are the client quotas set, by entity, and
	// ClientQuotasEpoch the index of the record that last changed them.
	ClientQuotas      []ClientQuota `json:"client_quotas,omitempty"`
	ClientQuotasEpoch int64         `json:"client_quotas_epoch,omitempty"`
	// ProducerIDsReserved: the ids below it are reserved for the
	// producers of mirrored partitions (ReserveProducerIDs).
	ProducerIDsReserved int64 `json:"producer_ids_reserved,omitempty"`
	// Links are the cluster links, in the order they were created.
	Links []Link `json:"links,omitempty"`
	// Applied is the index of the last record applied.
	Applied uint64 `json:"applied,omitempty"`

	// Indexes over Topics, rebuilt by index.
	byName map[string]*Topic
	byID   map[TopicID]*Topic
}

func (im *image) index() {
	im.byName = make(map[string]*Topic, len(im.Topics))
	im.byID = make(map[TopicID]*Topic, len(im.Topics))
	for i := range im.Topics {
		t := &im.Topics[i]
		im.byName[t.Name] = t
		im.byID[t.ID] = t
	}
}

// broker returns the registration of node, or nil.
func (im *image) broker(node int32) *Broker {
	i, ok := slices.BinarySearchFunc(im.Brokers, node, func(b Broker, n int32) int { return int(b.NodeID) - int(n) })
	if !ok {
		return nil
	}
	return &im.Brokers[i]
}

// live returns the node ids of the unfenced brokers, sorted.
func (im *image) live() []int32 {
	var ids []int32
	for _, b := range im.Brokers {
		if !b.Fenced {
			ids = append(ids, b.NodeID)
		}
	}
	return ids
}

func (im *image) collidingTopic(name string) (string, bool) {
	if !strings.ContainsAny(name, "._") {
		return "", false
	}
	unified := strings.ReplaceAll(name, ".", "_")
	var found []string
	for other := range im.byName {
		if other != name && strings.ReplaceAll(other, ".", "_") == unified {
			found = append(found, other)
		}
	}
	if len(found) == 0 {
		return "", false
	}
	return slices.Min(found), true
}
