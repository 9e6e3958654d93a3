package cluster

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
)

// Errors the protocol layer maps to Kafka codes.
var (
	ErrTopicExists       = errors.New("cluster: topic already exists")
	ErrUnknownTopic      = errors.New("cluster: unknown topic")
	ErrInvalidTopic      = errors.New("cluster: invalid topic name")
	ErrInvalidPartitions = errors.New("cluster: invalid number of partitions")
	// ErrProducerIDsExhausted: every producer id has been handed out.
	ErrProducerIDsExhausted = errors.New("cluster: producer ids exhausted")
	// ErrInvalidReplicationFactor: more replicas than brokers can hold.
	ErrInvalidReplicationFactor = errors.New("cluster: invalid replication factor")
	// ErrInvalidReplicaAssignment: an explicit assignment that cannot be.
	ErrInvalidReplicaAssignment = errors.New("cluster: invalid replica assignment")
	// ErrTopicIDTaken: a new topic's id is in use (a random id collided).
	ErrTopicIDTaken = errors.New("cluster: topic id in use")
	// ErrStaleBrokerEpoch: a change names a broker registration that has
	// been replaced.
	ErrStaleBrokerEpoch = errors.New("cluster: stale broker epoch")
	// ErrDuplicateBrokerRegistration: another process of the node id holds
	// a registration that is not fenced (Kafka's
	// DUPLICATE_BROKER_REGISTRATION). Retriable: the active controller
	// fences it once that process is no longer heard from.
	ErrDuplicateBrokerRegistration = errors.New("cluster: another process is registered with this node id")
	// ErrFencedLeaderEpoch: an in-sync set change from a leader that no
	// longer leads at the epoch it names.
	ErrFencedLeaderEpoch = errors.New("cluster: fenced leader epoch")
	// ErrInvalidUpdateVersion: an in-sync set change decided on an older
	// partition epoch.
	ErrInvalidUpdateVersion = errors.New("cluster: partition changed since")
	// ErrIneligibleReplica: an in-sync set change adds a replica that may
	// not join (not live).
	ErrIneligibleReplica = errors.New("cluster: ineligible replica")
	// ErrElectionNotNeeded: the partition is led as asked already.
	ErrElectionNotNeeded = errors.New("cluster: election not needed")
	// ErrPreferredLeaderNotAvailable: the preferred replica cannot lead
	// (not live, or not in sync).
	ErrPreferredLeaderNotAvailable = errors.New("cluster: preferred leader not available")
	// ErrEligibleLeadersNotAvailable: no replica can lead.
	ErrEligibleLeadersNotAvailable = errors.New("cluster: eligible leaders not available")
	// ErrInvalidRequest: a change that is malformed.
	ErrInvalidRequest = errors.New("cluster: invalid request")
	// ErrNoReassignmentInProgress: a cancellation named a partition that
	// is not being reassigned.
	ErrNoReassignmentInProgress = errors.New("cluster: no reassignment in progress")
	// ErrNotAvailable: the metadata log cannot take changes now (no quorum,
	// no leader, shutting down). Retriable; reads still answer.
	ErrNotAvailable = errors.New("cluster: metadata quorum not available")
)

// backend orders and keeps the records of the metadata log: a file on a
// single node, a Raft log in a cluster.
type backend interface {
	// propose appends a record and returns its result once it has applied
	// to this broker's image.
	propose(data []byte) (result, error)
	// controller is the node that orders records now (the quorum's
	// leader), or -1 while there is none.
	controller() int32
	// contact is when this broker last knew it was in touch with the
	// quorum (now, for a file).
	contact() time.Time
	// stopped is closed when the backend stopped on its own (never for a
	// file); failure says why.
	stopped() <-chan struct{}
	failure() error
	close() error
}

// Stopped is closed when the metadata log stopped on its own, after an
// error that Failure returns (its Raft log refused the leader's, say). A
// broker must not go on serving from an image that no longer follows.
func (s *Store) Stopped() <-chan struct{} { return s.be.stopped() }

// Failure is why the metadata log stopped on its own, once Stopped is
// closed.
func (s *Store) Failure() error { return s.be.failure() }

// Store is a broker's view of the cluster metadata: the image of the
// metadata log as of the last record applied here, and the way to append
// records to that log. Reads answer from the image at once; changes are
// proposed as records and return once applied here, with the outcome of
// the checks made when the record applied.
type Store struct {
	node int32 // this broker
	// incarnation names this process: its registrations carry it, and a
	// registration of the node with another one is another process's.
	incarnation string
	registered  atomic.Bool // a registration of this process has applied
	be          backend

	mu      lockrank.RWMutex[lockrank.Metadata]
	im      image
	version int64 // bumped on every applied record; metadata caches compare it

	changed chan struct{} // a token after each apply: see Changes

	// The block of producer ids being handed out: [pidNext, pidEnd).
	pidMu           lockrank.Mutex[lockrank.ProducerIDs]
	pidNext, pidEnd int64
}

func newStore(node int32) *Store {
	var inc TopicID
	rand.Read(inc[:])
	s := &Store{node: node, incarnation: inc.String(), changed: make(chan struct{}, 1)}
	s.im.index()
	return s
}

// applyLocked applies one record to the image. s.mu must be held.
func (s *Store) applyLocked(index uint64, data []byte) result {
	res := s.im.apply(index, data)
	s.version++
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return res
}

// Changes yields a token whenever records have applied since the last one
// was taken: the broker then compares what it serves with the image.
func (s *Store) Changes() <-chan struct{} { return s.changed }

// Close stops the metadata log.
func (s *Store) Close() error { return s.be.close() }

func (s *Store) propose(kind string, body any) (any, error) {
	data, err := encodeRecord(kind, body)
	if err != nil {
		return nil, err
	}
	res, err := s.be.propose(data)
	if err != nil {
		return nil, err
	}
	return res.val, res.err
}

// Controller is the active controller's node id, or -1 while there is none.
func (s *Store) Controller() int32 { return s.be.controller() }

// QuorumContact is when this broker last knew it was in touch with the
// metadata quorum: leading it, or hearing from its leader. A broker out of
// touch for the session timeout may have been fenced, its partitions led
// elsewhere, without its knowing.
func (s *Store) QuorumContact() time.Time { return s.be.contact() }

// NodeID is the broker this view belongs to.
func (s *Store) NodeID() int32 { return s.node }

// ClusterID is the cluster's id, fixed when the cluster was made.
func (s *Store) ClusterID() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.im.ClusterID
}

// Applied is the index of the last change applied to this broker's image.
func (s *Store) Applied() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(s.im.Applied)
}

// Version changes whenever the metadata does.
func (s *Store) Version() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.version
}

// Topic returns the topic called name.
func (s *Store) Topic(name string) (Topic, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.im.byName[name]
	if !ok {
		return Topic{}, false
	}
	return t.clone(), true
}

// TopicByID returns the topic with id.
func (s *Store) TopicByID(id TopicID) (Topic, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.im.byID[id]
	if !ok {
		return Topic{}, false
	}
	return t.clone(), true
}

// Topics returns every topic, sorted by name.
func (s *Store) Topics() []Topic {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Topic, 0, len(s.im.Topics))
	for _, t := range s.im.Topics {
		out = append(out, t.clone())
	}
	slices.SortFunc(out, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Partition returns the state of one partition.
func (s *Store) Partition(topic string, partition int32) (Partition, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.im.byName[topic]
	if !ok || partition < 0 || int(partition) >= len(t.States) {
		return Partition{}, false
	}
	return t.States[partition].clone(), true
}

// Brokers returns every registered broker, by node id.
func (s *Store) Brokers() []Broker {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.im.Brokers)
}

// Broker returns the registration of node.
func (s *Store) Broker(node int32) (Broker, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := s.im.broker(node)
	if b == nil {
		return Broker{}, false
	}
	return *b, true
}

// LiveBrokers counts the unfenced brokers: those topics can be placed on.
func (s *Store) LiveBrokers() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.im.live())
}

// ValidateTopicName applies Kafka's rules: 1 to 249 characters of
// [a-zA-Z0-9._-], and not "." or "..". Its error says which rule the name
// breaks, in Kafka's words (Topic.validate), which CreateTopics answers
// with.
func ValidateTopicName(name string) error {
	var why string
	switch {
	case name == "":
		why = "the empty string is not allowed"
	case name == "." || name == "..":
		why = fmt.Sprintf("'%s' is not allowed", name)
	case len(name) > maxTopicNameLength:
		why = fmt.Sprintf("the length of '%s' is longer than the max allowed length %d", name, maxTopicNameLength)
	default:
		for _, c := range name {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
			if !ok {
				why = fmt.Sprintf("'%s' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-' (%q)", name, c)
				break
			}
		}
	}
	if why == "" {
		return nil
	}
	return &topicNameError{why: why}
}

// maxTopicNameLength is Kafka's: a partition's directory, its name with
// "-" and a partition number, stays within 255 bytes.
const maxTopicNameLength = 249

// topicNameError is an invalid topic name (ErrInvalidTopic) and why.
type topicNameError struct{ why string }

func (e *topicNameError) Error() string { return "Topic name is invalid: " + e.why }
func (e *topicNameError) Unwrap() error { return ErrInvalidTopic }

// CollidingTopic returns an existing topic whose name differs from name only
// by '.' against '_' (Kafka refuses such pairs, since metric names would
// collide).
func (s *Store) CollidingTopic(name string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.im.collidingTopic(name)
}

// TopicSpec is a topic to create.
type TopicSpec struct {
	Name       string
	Partitions int32
	// ReplicationFactor is the replicas per partition; ignored when
	// Assignment is set.
	ReplicationFactor int16
	// Assignment, when set, names each partition's replicas (the first one
	// preferred as leader).
	Assignment [][]int32
	Configs    map[string]string
	Internal   bool
	// ID, when set, is the topic's id (a mirror takes its source's);
	// otherwise a new one is chosen.
	ID TopicID
	// Mirror makes the topic a mirror of a cluster link.
	Mirror *TopicMirror
}

// CheckTopic runs the checks CreateTopic makes against the current image,
// without creating anything (CreateTopics with validateOnly).
func (s *Store) CheckTopic(spec TopicSpec) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	probe := image{Brokers: s.im.Brokers}
	probe.index()
	res := probe.createTopic(spec.record(TopicID{1}, 0))
	if res.err == nil {
		_, exists := s.im.byName[spec.Name]
		other, collides := s.im.collidingTopic(spec.Name)
		switch {
		case exists:
			res.err = fmt.Errorf("%w: %s", ErrTopicExists, spec.Name)
		case collides:
			res.err = fmt.Errorf("%w: topic '%s' collides with existing topic: %s", ErrInvalidTopic, spec.Name, other)
		}
	}
	return res.err
}

func (spec TopicSpec) record(id TopicID, seed uint32) createTopicRecord {
	return createTopicRecord{Name: spec.Name, ID: id, Partitions: spec.Partitions, Factor: spec.ReplicationFactor,
		Assignment: spec.Assignment, Configs: spec.Configs, Internal: spec.Internal, Seed: seed, Mirror: spec.Mirror}
}

// CreateTopic adds a topic with a new id, its partitions placed on the
// live brokers.
func (s *Store) CreateTopic(spec TopicSpec) (Topic, error) {
	if err := ValidateTopicName(spec.Name); err != nil {
		return Topic{}, err
	}
	id := spec.ID
	if id == (TopicID{}) {
		rand.Read(id[:])
	}
	v, err := s.propose(kindCreateTopic, spec.record(id, randomSeed()))
	if err != nil {
		return Topic{}, err
	}
	return v.(Topic), nil
}

func randomSeed() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:])
}

// DeleteTopic removes a topic and returns what it was.
func (s *Store) DeleteTopic(name string) (Topic, error) {
	v, err := s.propose(kindDeleteTopic, deleteTopicRecord{Name: name})
	if err != nil {
		return Topic{}, err
	}
	return v.(Topic), nil
}

// SetPartitions raises a topic's partition count; assignment, when set,
// names the new partitions' replicas.
func (s *Store) SetPartitions(name string, count int32, assignment [][]int32) error {
	_, err := s.propose(kindCreatePartitions, createPartitionsRecord{Name: name, Count: count,
		Assignment: assignment, Seed: randomSeed()})
	return err
}

// SetTopicConfigs replaces a topic's config overrides.
func (s *Store) SetTopicConfigs(name string, configs map[string]string) error {
	_, err := s.propose(kindTopicConfigs, topicConfigsRecord{Name: name, Configs: configs})
	return err
}

// BrokerConfigs returns the dynamic broker config overrides.
func (s *Store) BrokerConfigs() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.im.BrokerConfigs)
}

// SetBrokerConfigs replaces the dynamic broker config overrides.
func (s *Store) SetBrokerConfigs(configs map[string]string) error {
	_, err := s.propose(kindBrokerConfigs, brokerConfigsRecord{Configs: configs})
	return err
}

// NodeConfigs returns the dynamic config overrides of broker node.
func (s *Store) NodeConfigs(node int32) map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.im.NodeConfigs[node])
}

// SetNodeConfigs replaces the dynamic config overrides of broker node.
func (s *Store) SetNodeConfigs(node int32, configs map[string]string) error {
	_, err := s.propose(kindNodeConfigs, nodeConfigsRecord{NodeID: node, Configs: configs})
	return err
}

// GroupConfigs returns the configs set for a consumer group.
func (s *Store) GroupConfigs(group string) map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.im.GroupConfigs[group])
}

// GroupConfig returns one config set for a consumer group, without
// copying the group's configs (the coordinator asks on every heartbeat).
func (s *Store) GroupConfig(group, name string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.im.GroupConfigs[group][name]
	return v, ok
}

// SetGroupConfigs replaces the configs set for a consumer group.
func (s *Store) SetGroupConfigs(group string, configs map[string]string) error {
	_, err := s.propose(kindGroupConfigs, groupConfigsRecord{Group: group, Configs: configs})
	return err
}

// ClientMetrics returns a client metrics subscription's configs, nil for
// none.
func (s *Store) ClientMetrics(name string) map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.im.ClientMetrics[name])
}

// ClientMetricsNames lists the client metrics subscriptions, sorted.
func (s *Store) ClientMetricsNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.im.ClientMetrics))
}

// GroupsWithConfigs lists the groups that have configs set, sorted.
func (s *Store) GroupsWithConfigs() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.im.GroupConfigs))
}

// SetClientMetrics replaces a client metrics subscription's configs; none
// removes it.
func (s *Store) SetClientMetrics(name string, configs map[string]string) error {
	_, err := s.propose(kindClientMetrics, clientMetricsRecord{Name: name, Configs: configs})
	return err
}

// NextProducerID returns a producer id never handed out before, by any
// broker of this run or an earlier one (InitProducerId). Ids are reserved a
// block at a time through the metadata log, so a crash skips the rest of a
// block but never repeats an id.
func (s *Store) NextProducerID() (int64, error) {
	s.pidMu.Lock()
	defer s.pidMu.Unlock()
	s.mu.RLock()
	reserved := s.im.ProducerIDsReserved
	s.mu.RUnlock()
	if s.pidNext >= s.pidEnd || s.pidNext < reserved {
		// A block taken before ids were reserved for a link's mirrors
		// may overlap them: it is dropped.
		v, err := s.propose(kindProducerIDs, producerIDsRecord{NodeID: s.node})
		if err != nil {
			return -1, fmt.Errorf("cluster: reserving producer ids: %w", err)
		}
		start := v.(int64)
		s.pidNext, s.pidEnd = start, start+ProducerIDBlockSize
	}
	id := s.pidNext
	s.pidNext++
	return id, nil
}

// RegisterBroker registers this broker's process (a new incarnation on
// every start) and returns the registration with its broker epoch. While
// another process of the node holds a live registration it fails with
// ErrDuplicateBrokerRegistration. A single node's store is the only
// process of its node, so it replaces whatever its last run registered.
// host and port are the inter-broker listener's; endpoints are every
// listener's.
func (s *Store) RegisterBroker(host string, port int32, rack string, unfenced bool, endpoints ...Endpoint) (Broker, error) {
	_, clustered := s.Quorum()
	v, err := s.propose(kindRegisterBroker, registerBrokerRecord{NodeID: s.node, Incarnation: s.incarnation,
		Host: host, Port: port, Endpoints: endpoints, Rack: rack, Unfenced: unfenced, Takeover: !clustered})
	if err != nil {
		return Broker{}, err
	}
	s.registered.Store(true)
	return v.(Broker), nil
}

// Incarnation names this process among the processes that ever ran as
// this node.
func (s *Store) Incarnation() string { return s.incarnation }

// Superseded reports whether another process of this node has registered
// since this one did: this process is stale, and the registration that
// replaced it is returned. Before this process registers it is false.
func (s *Store) Superseded() (Broker, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := s.im.broker(s.node)
	if b == nil || !s.registered.Load() || b.Incarnation == s.incarnation {
		return Broker{}, false
	}
	return *b, true
}

// AlterPartition proposes a new in-sync set for a partition this broker
// leads, on the view its leader and partition epochs name, and returns the
// partition as changed.
func (s *Store) AlterPartition(topic string, id TopicID, partition, leaderEpoch, partitionEpoch int32, isr []int32) (Partition, error) {
	v, err := s.propose(kindAlterPartition, alterPartitionRecord{Topic: topic, TopicID: id, Partition: partition,
		Leader: s.node, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: isr})
	if err != nil {
		return Partition{}, err
	}
	return v.(Partition), nil
}

// ElectLeader makes a partition's preferred replica its leader or, with
// unclean, gives a leaderless partition any live replica as leader, and
// returns the partition as changed.
func (s *Store) ElectLeader(topic string, partition int32, unclean bool) (Partition, error) {
	v, err := s.propose(kindElectLeader, electLeaderRecord{Topic: topic, Partition: partition, Unclean: unclean})
	if err != nil {
		return Partition{}, err
	}
	return v.(Partition), nil
}

// ReassignPartition starts moving a partition onto target (its replicas
// in preference order), replacing a reassignment in progress; with a nil
// target it cancels the one in progress, back to the replicas it started
// from. The added replicas copy the partition and, once every replica of
// the target is in sync, the partition is left with the target alone (a
// new leader elected if the old one is not in it). It returns the
// partition as changed.
func (s *Store) ReassignPartition(topic string, partition int32, target []int32) (Partition, error) {
	v, err := s.propose(kindReassignPartition, reassignRecord{Topic: topic, Partition: partition, Target: target})
	if err != nil {
		return Partition{}, err
	}
	return v.(Partition), nil
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ImbalancedPartitions lists, for Kafka's leader balancing, the partitions
// whose preferred replica could lead but does not, of the brokers that do
// not lead more than maxRatio of the partitions they are preferred for.
func (s *Store) ImbalancedPartitions(maxRatio float64) []TopicPartition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	preferred := map[int32]int{}
	movable := map[int32][]TopicPartition{}
	for _, t := range s.im.Topics {
		for i, p := range t.States {
			pref := p.Replicas[0]
			preferred[pref]++
			if p.Leader != pref && slices.Contains(p.ISR, pref) && s.im.isLive(pref) {
				movable[pref] = append(movable[pref], TopicPartition{t.Name, int32(i)})
			}
		}
	}
	var out []TopicPartition
	for b, tps := range movable {
		if float64(len(tps)) > maxRatio*float64(preferred[b]) {
			out = append(out, tps...)
		}
	}
	return out
}

// FenceBroker stops the registration epoch of node from leading.
func (s *Store) FenceBroker(node int32, epoch int64) error {
	_, err := s.propose(kindFenceBroker, fenceRecord{NodeID: node, Epoch: epoch})
	return err
}

// ShutdownBroker fences this broker's registration at its own request
// before it stops (controlled shutdown): what it leads moves to in-sync
// followers at once, and the controller leaves it fenced.
func (s *Store) ShutdownBroker(epoch int64) error {
	_, err := s.propose(kindFenceBroker, fenceRecord{NodeID: s.node, Epoch: epoch, Shutdown: true})
	return err
}

// UnfenceBroker lets the registration epoch of node lead.
func (s *Store) UnfenceBroker(node int32, epoch int64) error {
	_, err := s.propose(kindUnfenceBroker, fenceRecord{NodeID: node, Epoch: epoch})
	return err
}

// ScramCredentials are the users' SCRAM credentials, by user and
// mechanism.
func (s *Store) ScramCredentials() map[string]map[int8]ScramCredential {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]map[int8]ScramCredential, len(s.im.ScramCredentials))
	for u, creds := range s.im.ScramCredentials {
		out[u] = maps.Clone(creds)
	}
	return out
}

// AlterScramCredentials deletes and sets users' SCRAM credentials in one
// metadata record.
func (s *Store) AlterScramCredentials(upsertions, deletions []ScramCredentialChange) error {
	_, err := s.propose(kindScramCredentials, scramCredentialsRecord{Upsertions: upsertions, Deletions: deletions})
	return err
}

// ACLs returns the access control lists and the epoch of their last
// change: the same epoch means the same lists.
func (s *Store) ACLs() ([]model.ACLBinding, int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.im.ACLs), s.im.ACLsEpoch
}

// ACLsEpoch is the epoch of the last change to the access control lists.
func (s *Store) ACLsEpoch() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.im.ACLsEpoch
}

// AlterACLs deletes and creates access control entries in one metadata
// record.
func (s *Store) AlterACLs(creations, deletions []model.ACLBinding) error {
	_, err := s.propose(kindACLs, aclsRecord{Creations: creations, Deletions: deletions})
	return err
}

// ClientQuotas returns the client quotas and the epoch of their last
// change.
func (s *Store) ClientQuotas() ([]ClientQuota, int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ClientQuota, len(s.im.ClientQuotas))
	for i, q := range s.im.ClientQuotas {
		out[i] = ClientQuota{Entity: slices.Clone(q.Entity), Values: maps.Clone(q.Values)}
	}
	return out, s.im.ClientQuotasEpoch
}

// ClientQuotasEpoch is the epoch of the last change to the client quotas.
func (s *Store) ClientQuotasEpoch() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.im.ClientQuotasEpoch
}

// AlterClientQuotas applies quota changes in one metadata record.
func (s *Store) AlterClientQuotas(changes []ClientQuotaChange) error {
	_, err := s.propose(kindClientQuotas, clientQuotasRecord{Changes: changes})
	return err
}

// FeatureLevel returns a finalized feature's level and the epoch of the
// last feature change.
func (s *Store) FeatureLevel(name string) (level int16, epoch int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	level, ok = s.im.Features[name]
	return level, s.im.FeaturesEpoch, ok
}

// SetFeatures finalizes feature levels; with ifUnset only those that have
// no level yet.
func (s *Store) SetFeatures(levels map[string]int16, ifUnset bool) error {
	_, err := s.propose(kindFeatures, featuresRecord{Levels: levels, IfUnset: ifUnset})
	return err
}

// EncodedSize is the size of the image as a snapshot encodes it.
func (s *Store) EncodedSize() (int, error) {
	b, err := s.snapshot()
	return len(b), err
}

// snapshot encodes the image.
func (s *Store) snapshot() ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return json.Marshal(&s.im)
}

// restore replaces the image with a snapshot's.
func (s *Store) restore(data []byte) error {
	var im image
	if err := json.Unmarshal(data, &im); err != nil {
		return fmt.Errorf("cluster: metadata snapshot: %w", err)
	}
	im.index()
	s.mu.Lock()
	s.im = im
	s.version++
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return nil
}
