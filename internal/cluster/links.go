package cluster

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Errors of cluster links.
var (
	ErrLinkExists  = errors.New("cluster: link already exists")
	ErrUnknownLink = errors.New("cluster: unknown link")
	ErrInvalidLink = errors.New("cluster: invalid link")
	// ErrLinkInUse: the link still has mirror topics that are not
	// promoted.
	ErrLinkInUse = errors.New("cluster: link has mirror topics")
	// ErrMirrorTopic: a change a mirror topic takes only from its link.
	ErrMirrorTopic = errors.New("cluster: the topic is a mirror")
)

// Link is a cluster link: another Kafka cluster whose topics this cluster
// mirrors, offset for offset (internal/link does the mirroring). It lives
// in the metadata so that every broker knows it and it survives restarts
// and controller changes.
type Link struct {
	Name   string     `json:"name"`
	Source LinkSource `json:"source"`
	// Topics and Groups choose what is mirrored: source topics (and
	// groups) whose name matches an include pattern and no exclude
	// pattern. Patterns are regular expressions matched against the whole
	// name.
	Topics Filter `json:"topics"`
	Groups Filter `json:"groups,omitempty"`
	// SyncTopicConfigs copies the source topics' config overrides.
	SyncTopicConfigs bool `json:"sync_topic_configs,omitempty"`
	// SyncACLs copies the source's ACLs of the mirror topics and of the
	// groups Groups matches.
	SyncACLs bool `json:"sync_acls,omitempty"`
	// SyncGroupOffsets copies committed offsets of the groups Groups
	// matches, every OffsetSyncIntervalMs, while they have no members here.
	SyncGroupOffsets     bool  `json:"sync_group_offsets,omitempty"`
	OffsetSyncIntervalMs int64 `json:"offset_sync_interval_ms,omitempty"`
	// ReverseOffsetSync copies this cluster's commits of matched groups
	// back to the source while the group has no members there.
	ReverseOffsetSync bool `json:"reverse_offset_sync,omitempty"`
	// GroupPassThrough makes the groups Groups matches live on the
	// source while their consumers move: the group requests of their
	// members connected here are forwarded to the source's coordinator,
	// so members on both clusters are one group (package link,
	// passthrough.go).
	GroupPassThrough bool `json:"group_pass_through,omitempty"`
	// PromotedGroups are groups that moved home (strand link
	// promote-group): this cluster coordinates them, the link neither
	// passes them through nor copies their offsets any more.
	PromotedGroups []string `json:"promoted_groups,omitempty"`
	// AutoPromoteGroups promotes a passed-through group by itself once
	// every member it has on the source is one connected to this cluster.
	AutoPromoteGroups bool `json:"auto_promote_groups,omitempty"`
	// TransactionTimeoutMs is how long after a promotion a transaction
	// the source left open on a promoted partition is aborted (Kafka's
	// coordinator aborts after the producer's transaction.timeout.ms);
	// 60 s when 0.
	TransactionTimeoutMs int64 `json:"transaction_timeout_ms,omitempty"`
	// MaxBytesPerSec caps what the link fetches, per broker; 0 is no cap.
	MaxBytesPerSec int64 `json:"max_bytes_per_sec,omitempty"`
	Paused         bool  `json:"paused,omitempty"`
	// CreatedAtMs is when the link was created (chosen by the proposer).
	CreatedAtMs int64 `json:"created_at_ms"`
}

// LinkSource is how to reach the source cluster: its bootstrap servers
// and client security, as a Kafka client's settings name them.
type LinkSource struct {
	BootstrapServers []string `json:"bootstrap_servers"`
	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	SecurityProtocol string `json:"security_protocol,omitempty"`
	// CACertPEM trusts the source's certificates (SSL); none uses the
	// system's roots. CertPEM and KeyPEM are this cluster's client
	// certificate (mutual TLS).
	CACertPEM     string `json:"ca_cert_pem,omitempty"`
	CertPEM       string `json:"cert_pem,omitempty"`
	KeyPEM        string `json:"key_pem,omitempty"`
	SASLMechanism string `json:"sasl_mechanism,omitempty"` // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
	SASLUsername  string `json:"sasl_username,omitempty"`
	SASLPassword  string `json:"sasl_password,omitempty"`
}

// Redacted returns the source with its secrets (the client key and the
// SASL password) replaced, as Kafka hides sensitive configs: what any API
// or log shows.
func (s LinkSource) Redacted() LinkSource {
	s.BootstrapServers = slices.Clone(s.BootstrapServers)
	if s.KeyPEM != "" {
		s.KeyPEM = "(hidden)"
	}
	if s.SASLPassword != "" {
		s.SASLPassword = "(hidden)"
	}
	return s
}

// Filter picks names by regular expressions, each matched against the
// whole name: a name is picked when an include matches and no exclude
// does.
type Filter struct {
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

// Compile checks the filter's patterns and returns its matcher.
func (f Filter) Compile() (func(string) bool, error) {
	compile := func(pats []string) ([]*regexp.Regexp, error) {
		var res []*regexp.Regexp
		for _, p := range pats {
			re, err := regexp.Compile("^(?:" + p + ")$")
			if err != nil {
				return nil, fmt.Errorf("pattern %q: %w", p, err)
			}
			res = append(res, re)
		}
		return res, nil
	}
	inc, err := compile(f.Include)
	if err != nil {
		return nil, err
	}
	exc, err := compile(f.Exclude)
	if err != nil {
		return nil, err
	}
	return func(name string) bool {
		matches := func(res []*regexp.Regexp) bool {
			return slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(name) })
		}
		return matches(inc) && !matches(exc)
	}, nil
}

func (l Link) clone() Link {
	l.Source.BootstrapServers = slices.Clone(l.Source.BootstrapServers)
	l.Topics = Filter{Include: slices.Clone(l.Topics.Include), Exclude: slices.Clone(l.Topics.Exclude)}
	l.Groups = Filter{Include: slices.Clone(l.Groups.Include), Exclude: slices.Clone(l.Groups.Exclude)}
	return l
}

// Validate checks what a link needs to work: a name, a source and
// filters that compile.
func (l Link) Validate() error {
	if err := validateLinkName(l.Name); err != nil {
		return err
	}
	if len(l.Source.BootstrapServers) == 0 {
		return fmt.Errorf("%w: link %s names no source bootstrap servers", ErrInvalidLink, l.Name)
	}
	for _, b := range l.Source.BootstrapServers {
		if i := strings.LastIndexByte(b, ':'); i <= 0 || i == len(b)-1 {
			return fmt.Errorf("%w: source bootstrap server %q is not host:port", ErrInvalidLink, b)
		}
	}
	switch strings.ToUpper(l.Source.SecurityProtocol) {
	case "", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
	default:
		return fmt.Errorf("%w: unknown security protocol %q (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)",
			ErrInvalidLink, l.Source.SecurityProtocol)
	}
	if strings.HasPrefix(strings.ToUpper(l.Source.SecurityProtocol), "SASL") {
		switch l.Source.SASLMechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			return fmt.Errorf("%w: SASL mechanism %q (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", ErrInvalidLink, l.Source.SASLMechanism)
		}
	}
	if len(l.Topics.Include) == 0 {
		return fmt.Errorf("%w: link %s mirrors no topics (give a topic pattern)", ErrInvalidLink, l.Name)
	}
	if _, err := l.Topics.Compile(); err != nil {
		return fmt.Errorf("%w: topic filter: %v", ErrInvalidLink, err)
	}
	if _, err := l.Groups.Compile(); err != nil {
		return fmt.Errorf("%w: group filter: %v", ErrInvalidLink, err)
	}
	if l.GroupPassThrough && len(l.Groups.Include) == 0 {
		return fmt.Errorf("%w: link %s passes groups through but names none (give a group pattern)", ErrInvalidLink, l.Name)
	}
	if l.OffsetSyncIntervalMs < 0 || l.MaxBytesPerSec < 0 {
		return fmt.Errorf("%w: negative interval or rate", ErrInvalidLink)
	}
	return nil
}

// Promoted reports whether a group moved home from the link's source.
func (l Link) Promoted(group string) bool { return slices.Contains(l.PromotedGroups, group) }

// validateLinkName allows what a topic name allows.
func validateLinkName(name string) error {
	if err := ValidateTopicName(name); err != nil {
		return fmt.Errorf("%w: name %q: %v", ErrInvalidLink, name, err)
	}
	return nil
}

// Mirror states of a topic.
const (
	// MirrorActive: the link copies the source topic into it.
	MirrorActive = "mirroring"
	// MirrorStopped: the link no longer copies it (its source topic is
	// gone, or the source truncated below what it holds); it stays
	// read-only until promoted.
	MirrorStopped = "stopped"
)

// TopicMirror marks a topic as a mirror: read-only, written only by its
// link, until it is promoted to an ordinary topic.
type TopicMirror struct {
	Link  string `json:"link"`
	State string `json:"state"`
	// Reason says why a stopped mirror stopped.
	Reason string `json:"reason,omitempty"`
}

// TopicPromotion marks a topic promoted from a mirror: transactions its
// source left open on it are aborted from AtMs + AbortOpenAfterMs on, since
// no coordinator here knows them.
type TopicPromotion struct {
	Link             string `json:"link"`
	AtMs             int64  `json:"at_ms"`
	AbortOpenAfterMs int64  `json:"abort_open_after_ms"`
}

// linkRecord creates a link, or replaces one (Create false).
type linkRecord struct {
	Link   Link `json:"link"`
	Create bool `json:"create,omitempty"`
}

type deleteLinkRecord struct {
	Name string `json:"name"`
}

// mirrorStateRecord changes a mirror topic's state; an empty State
// promotes it to an ordinary topic.
type mirrorStateRecord struct {
	Topic  string `json:"topic"`
	Link   string `json:"link"`
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Promotion, with State "", marks the topic promoted.
	Promotion *TopicPromotion `json:"promotion,omitempty"`
}

// producerIDsAboveRecord reserves every producer id up to and including
// Above: ids a mirrored partition carries from its source are never handed
// out here.
type producerIDsAboveRecord struct {
	Above int64 `json:"above"`
}

func (im *image) link(name string) *Link {
	i := slices.IndexFunc(im.Links, func(l Link) bool { return l.Name == name })
	if i < 0 {
		return nil
	}
	return &im.Links[i]
}

func (im *image) applyLink(r linkRecord) result {
	if err := r.Link.Validate(); err != nil {
		return result{err: err}
	}
	l := im.link(r.Link.Name)
	switch {
	case r.Create && l != nil:
		return result{err: fmt.Errorf("%w: %s", ErrLinkExists, r.Link.Name)}
	case !r.Create && l == nil:
		return result{err: fmt.Errorf("%w: %s", ErrUnknownLink, r.Link.Name)}
	case l != nil:
		created := l.CreatedAtMs
		*l = r.Link.clone()
		l.CreatedAtMs = created
	default:
		im.Links = append(im.Links, r.Link.clone())
	}
	return result{val: r.Link.clone()}
}

func (im *image) deleteLink(r deleteLinkRecord) result {
	if im.link(r.Name) == nil {
		return result{err: fmt.Errorf("%w: %s", ErrUnknownLink, r.Name)}
	}
	var mirrors []string
	for _, t := range im.Topics {
		if t.Mirror != nil && t.Mirror.Link == r.Name {
			mirrors = append(mirrors, t.Name)
		}
	}
	if len(mirrors) > 0 {
		return result{err: fmt.Errorf("%w: link %s still mirrors %s: promote or fail them over, or delete them, first",
			ErrLinkInUse, r.Name, strings.Join(mirrors, ", "))}
	}
	im.Links = slices.DeleteFunc(im.Links, func(l Link) bool { return l.Name == r.Name })
	return result{}
}

func (im *image) setMirrorState(r mirrorStateRecord) result {
	t, ok := im.byName[r.Topic]
	if !ok {
		return result{err: fmt.Errorf("%w: %s", ErrUnknownTopic, r.Topic)}
	}
	if t.Mirror == nil || t.Mirror.Link != r.Link {
		return result{err: fmt.Errorf("%w: topic %s is not a mirror of link %s", ErrInvalidLink, r.Topic, r.Link)}
	}
	switch r.State {
	case "":
		t.Mirror = nil
		if r.Promotion != nil {
			pr := *r.Promotion
			t.Promoted = &pr
		}
	case MirrorActive, MirrorStopped:
		t.Mirror = &TopicMirror{Link: r.Link, State: r.State, Reason: r.Reason}
	default:
		return result{err: fmt.Errorf("%w: mirror state %q", ErrInvalidLink, r.State)}
	}
	return result{}
}

// Links returns the cluster links, in the order they were created.
func (s *Store) Links() []Link {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Link, len(s.im.Links))
	for i, l := range s.im.Links {
		out[i] = l.clone()
	}
	return out
}

// Link returns the link named name.
func (s *Store) Link(name string) (Link, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if l := s.im.link(name); l != nil {
		return l.clone(), true
	}
	return Link{}, false
}

// CreateLink adds a link.
func (s *Store) CreateLink(l Link) (Link, error) {
	if err := l.Validate(); err != nil {
		return Link{}, err
	}
	v, err := s.propose(kindLink, linkRecord{Link: l, Create: true})
	if err != nil {
		return Link{}, err
	}
	return v.(Link), nil
}

// AlterLink replaces a link's settings (its creation time stays).
func (s *Store) AlterLink(l Link) error {
	if err := l.Validate(); err != nil {
		return err
	}
	_, err := s.propose(kindLink, linkRecord{Link: l})
	return err
}

// DeleteLink removes a link that mirrors no topic any more.
func (s *Store) DeleteLink(name string) error {
	_, err := s.propose(kindDeleteLink, deleteLinkRecord{Name: name})
	return err
}

// SetMirrorState changes a mirror topic's state; state "" promotes it to
// an ordinary, writable topic.
func (s *Store) SetMirrorState(topic, link, state, reason string) error {
	_, err := s.propose(kindMirrorState, mirrorStateRecord{Topic: topic, Link: link, State: state, Reason: reason})
	return err
}

// PromoteMirror makes a mirror topic an ordinary, writable topic, marked
// promoted at atMs: transactions its source left open are aborted
// abortAfterMs later.
func (s *Store) PromoteMirror(topic, link string, atMs, abortAfterMs int64) error {
	_, err := s.propose(kindMirrorState, mirrorStateRecord{Topic: topic, Link: link,
		Promotion: &TopicPromotion{Link: link, AtMs: atMs, AbortOpenAfterMs: abortAfterMs}})
	return err
}

// MirroredProducerIDs is the largest producer id reserved for mirrored
// producers, -1 while none is.
func (s *Store) MirroredProducerIDs() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.im.ProducerIDsReserved - 1
}

// ReserveProducerIDs makes sure no producer id up to and including above
// is ever handed out here.
func (s *Store) ReserveProducerIDs(above int64) error {
	s.mu.RLock()
	done := s.im.ProducerIDsReserved > above
	s.mu.RUnlock()
	if done {
		return nil
	}
	_, err := s.propose(kindProducerIDsAbove, producerIDsAboveRecord{Above: above})
	return err
}

func (im *image) reserveProducerIDs(r producerIDsAboveRecord) result {
	if r.Above < 0 || r.Above > math.MaxInt64-ProducerIDBlockSize {
		return result{err: fmt.Errorf("%w: producer ids above %d", ErrInvalidRequest, r.Above)}
	}
	im.ProducerIDsReserved = max(im.ProducerIDsReserved, r.Above+1)
	im.ProducerIDBlockEnd = max(im.ProducerIDBlockEnd, r.Above+1)
	return result{}
}

// clone copies a topic's mirror mark.
func (m *TopicMirror) clone() *TopicMirror {
	if m == nil {
		return nil
	}
	c := *m
	return &c
}
