package cluster

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Errors the protocol layer maps to Kafka codes.
var (
	ErrTopicExists       = errors.New("cluster: topic already exists")
	ErrUnknownTopic      = errors.New("cluster: unknown topic")
	ErrInvalidTopic      = errors.New("cluster: invalid topic name")
	ErrInvalidPartitions = errors.New("cluster: invalid number of partitions")
	// ErrProducerIDsExhausted: every producer id has been handed out.
	ErrProducerIDsExhausted = errors.New("cluster: producer ids exhausted")
)

// TopicID is Kafka's topic UUID.
type TopicID [16]byte

func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// Topic is one topic's metadata.
type Topic struct {
	Name       string            `json:"name"`
	ID         TopicID           `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"` // overrides of the broker defaults
	Internal   bool              `json:"internal,omitempty"`
}

func (t Topic) clone() Topic {
	t.Configs = maps.Clone(t.Configs)
	return t
}

// Broker is one broker's address.
type Broker struct {
	NodeID int32
	Host   string
	Port   int32
}

type state struct {
	ClusterID     string            `json:"cluster_id"`
	Topics        []Topic           `json:"topics"`
	BrokerConfigs map[string]string `json:"broker_configs,omitempty"`
	// NodeConfigs are the dynamic configs set for one broker, by node id;
	// they win over BrokerConfigs (the cluster-wide defaults).
	NodeConfigs map[int32]map[string]string `json:"node_configs,omitempty"`
	// ProducerIDBlockEnd is the high-water mark of allocated producer ids:
	// every id below it may have been handed out, none at or above it has.
	ProducerIDBlockEnd int64 `json:"producer_id_block_end,omitempty"`
}

// Store is the metadata of a single-node cluster, kept in one file.
type Store struct {
	path string

	mu      sync.Mutex
	st      state
	byName  map[string]*Topic
	byID    map[TopicID]*Topic
	version int64 // bumped on every change; metadata caches compare it

	// The block of producer ids being handed out: [pidNext, pidEnd), below
	// the persisted st.ProducerIDBlockEnd.
	pidNext, pidEnd int64
}

const fileName = "cluster-metadata.json"

// Open loads the metadata kept in dir, or starts a new cluster with a fresh
// id.
func Open(dir string) (*Store, error) {
	s := &Store{path: filepath.Join(dir, fileName)}
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		var id TopicID
		rand.Read(id[:])
		s.st.ClusterID = id.String()
		s.index()
		return s, s.save()
	case err != nil:
		return nil, err
	}
	if err := json.Unmarshal(b, &s.st); err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	s.index()
	return s, nil
}

func (s *Store) index() {
	s.byName = map[string]*Topic{}
	s.byID = map[TopicID]*Topic{}
	for i := range s.st.Topics {
		t := &s.st.Topics[i]
		s.byName[t.Name] = t
		s.byID[t.ID] = t
	}
	s.version++
}

// save writes the state atomically and durably: a change is acknowledged
// only once it would survive a crash.
func (s *Store) save() error {
	b, err := json.MarshalIndent(s.st, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(s.path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ClusterID is the cluster's id, fixed when the data directory was created.
func (s *Store) ClusterID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.ClusterID
}

// Version changes whenever the metadata does.
func (s *Store) Version() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Topic returns the topic called name.
func (s *Store) Topic(name string) (Topic, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byName[name]
	if !ok {
		return Topic{}, false
	}
	return t.clone(), true
}

// TopicByID returns the topic with id.
func (s *Store) TopicByID(id TopicID) (Topic, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byID[id]
	if !ok {
		return Topic{}, false
	}
	return t.clone(), true
}

// Topics returns every topic, sorted by name.
func (s *Store) Topics() []Topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Topic, 0, len(s.st.Topics))
	for _, t := range s.st.Topics {
		out = append(out, t.clone())
	}
	slices.SortFunc(out, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ValidateTopicName applies Kafka's rules: 1 to 249 characters of
// [a-zA-Z0-9._-], and not "." or "..".
func ValidateTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q contains %q", ErrInvalidTopic, name, c)
		}
	}
	return nil
}

// CreateTopic adds a topic with a new id.
func (s *Store) CreateTopic(name string, partitions int32, configs map[string]string, internal bool) (Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return Topic{}, err
	}
	if partitions <= 0 {
		return Topic{}, fmt.Errorf("%w: %d", ErrInvalidPartitions, partitions)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byName[name]; ok {
		return Topic{}, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	if other, ok := s.collidingLocked(name); ok {
		return Topic{}, fmt.Errorf("%w: topic '%s' collides with existing topic: %s", ErrInvalidTopic, name, other)
	}
	t := Topic{Name: name, Partitions: partitions, Configs: maps.Clone(configs), Internal: internal}
	for t.ID == (TopicID{}) || s.byID[t.ID] != nil {
		rand.Read(t.ID[:])
	}
	return t, s.change(func() { s.st.Topics = append(s.st.Topics, t) })
}

// CollidingTopic returns an existing topic whose name differs from name only
// by '.' against '_' (Kafka refuses such pairs, since metric names would
// collide).
func (s *Store) CollidingTopic(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.collidingLocked(name)
}

func (s *Store) collidingLocked(name string) (string, bool) {
	if !strings.ContainsAny(name, "._") {
		return "", false
	}
	unified := strings.ReplaceAll(name, ".", "_")
	var found []string
	for other := range s.byName {
		if other != name && strings.ReplaceAll(other, ".", "_") == unified {
			found = append(found, other)
		}
	}
	if len(found) == 0 {
		return "", false
	}
	return slices.Min(found), true
}

// change applies fn to the state and saves it, undoing fn if the save fails.
func (s *Store) change(fn func()) error {
	before, err := json.Marshal(s.st)
	if err != nil {
		return err
	}
	fn()
	s.index()
	if err := s.save(); err != nil {
		s.st = state{}
		_ = json.Unmarshal(before, &s.st)
		s.index()
		return err
	}
	return nil
}

// DeleteTopic removes a topic and returns what it was.
func (s *Store) DeleteTopic(name string) (Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byName[name]
	if !ok {
		return Topic{}, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	gone := t.clone()
	return gone, s.change(func() {
		s.st.Topics = slices.DeleteFunc(s.st.Topics, func(x Topic) bool { return x.Name == name })
	})
}

// SetPartitions raises a topic's partition count.
func (s *Store) SetPartitions(name string, count int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	if count <= t.Partitions {
		return fmt.Errorf("%w: topic %s has %d partitions; the count can only grow", ErrInvalidPartitions, name, t.Partitions)
	}
	return s.change(func() { s.byName[name].Partitions = count })
}

// SetTopicConfigs replaces a topic's config overrides.
func (s *Store) SetTopicConfigs(name string, configs map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byName[name]; !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	return s.change(func() { s.byName[name].Configs = maps.Clone(configs) })
}

// BrokerConfigs returns the dynamic broker config overrides.
func (s *Store) BrokerConfigs() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.st.BrokerConfigs)
}

// SetBrokerConfigs replaces the dynamic broker config overrides.
func (s *Store) SetBrokerConfigs(configs map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.change(func() { s.st.BrokerConfigs = maps.Clone(configs) })
}

// ProducerIDBlockSize is how many producer ids are reserved at a time: one
// durable metadata write per block, as Kafka's controller allocates them.
const ProducerIDBlockSize = 1000

// NextProducerID returns a producer id never handed out before, by this run
// or an earlier one (InitProducerId). Ids are reserved a block at a time: the
// end of the block is saved durably before any id of it is used, so a crash
// skips the rest of a block but never repeats an id.
func (s *Store) NextProducerID() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pidNext >= s.pidEnd {
		start := s.st.ProducerIDBlockEnd
		if start > math.MaxInt64-ProducerIDBlockSize {
			return -1, ErrProducerIDsExhausted
		}
		end := start + ProducerIDBlockSize
		s.st.ProducerIDBlockEnd = end
		if err := s.save(); err != nil {
			s.st.ProducerIDBlockEnd = start
			return -1, fmt.Errorf("cluster: reserving producer ids: %w", err)
		}
		s.pidNext, s.pidEnd = start, end
	}
	id := s.pidNext
	s.pidNext++
	return id, nil
}

// NodeConfigs returns the dynamic config overrides of broker node.
func (s *Store) NodeConfigs(node int32) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.st.NodeConfigs[node])
}

// SetNodeConfigs replaces the dynamic config overrides of broker node.
func (s *Store) SetNodeConfigs(node int32, configs map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.change(func() {
		if len(configs) == 0 {
			delete(s.st.NodeConfigs, node)
			return
		}
		if s.st.NodeConfigs == nil {
			s.st.NodeConfigs = map[int32]map[string]string{}
		}
		s.st.NodeConfigs[node] = maps.Clone(configs)
	})
}
