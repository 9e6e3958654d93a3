package protocol

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/lockrank"
)

// Fetch sessions (KIP-227). A client's full fetch at session epoch 0 opens
// a session: the broker keeps the partitions it named with their fetch
// state, and answers with the session's id. Its next fetches, at epochs
// 1, 2, ..., name only the partitions whose fetch state changed (and those
// to forget); the broker fetches every partition of the session and
// answers only those with news: records, an error, or a new high
// watermark, last stable offset or log start offset. Epoch -1 closes the
// session. A session unused for fetchSessionIdle, or the least recently
// used when the cache is full, is evicted; its client then gets
// FETCH_SESSION_ID_NOT_FOUND and starts a new one, as with Kafka.

const (
	// maxFetchSessions is max.incremental.fetch.session.cache.slots.
	maxFetchSessions = 1000
	// fetchSessionIdle is how long an unused session is kept.
	fetchSessionIdle = 2 * time.Minute
)

// sessionKey names a partition in a session: by topic id from Fetch v13,
// by name before.
type sessionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// sessionPartition is one partition's state in a session: what the client
// last asked for, and what it was last told.
type sessionPartition struct {
	req               kmsg.FetchRequestTopicPartition
	hw, lso, logStart int64
	answered          bool
}

type fetchSession struct {
	id       int32
	replica  int32 // the follower fetching, -1 for a client
	epoch    int32 // the epoch the next request must carry
	named    int   // the partitions the last request named
	version  int16 // names (v7-12) or ids (v13+)
	order    []sessionKey
	parts    map[sessionKey]*sessionPartition
	lastUsed time.Time
	mu       lockrank.Mutex[lockrank.Leaf] // guards the fields above but id and version, while a request updates or answers
}

type fetchSessionCache struct {
	mu       lockrank.Mutex[lockrank.Leaf]
	next     int32
	sessions map[int32]*fetchSession
}

func (b *Broker) sessionCache() *fetchSessionCache {
	b.sessionsOnce.Do(func() { b.sessions = &fetchSessionCache{sessions: map[int32]*fetchSession{}} })
	return b.sessions
}

// open starts a session, evicting an idle or the least recently used one
// when the cache is full; nil when no id is free.
func (c *fetchSessionCache) open(version int16, replica int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if len(c.sessions) >= maxFetchSessions {
		var oldest *fetchSession
		for _, s := range c.sessions {
			if oldest == nil || s.lastUsed.Before(oldest.lastUsed) {
				oldest = s
			}
		}
		delete(c.sessions, oldest.id)
	}
	for range 3 {
		c.next++
		if c.next <= 0 {
			c.next = 1
		}
		if _, taken := c.sessions[c.next]; !taken {
			s := &fetchSession{id: c.next, replica: replica, version: version, parts: map[sessionKey]*sessionPartition{}, lastUsed: now}
			c.sessions[s.id] = s
			return s
		}
	}
	return nil
}

// FetchSessionStatus describes one fetch session, as Kafka's
// FetchSessionCache metrics count them.
type FetchSessionStatus struct {
	ID      int32
	Replica int32 // the follower fetching, -1 for a client
	Epoch   int32 // the epoch its next fetch carries
	// Partitions is how many partitions it holds; Named how many its last
	// fetch named (all of them at the first, only the changed ones after).
	Partitions, Named int
}

// FetchSessions describes the fetch sessions this broker holds.
func (b *Broker) FetchSessions() []FetchSessionStatus {
	c := b.sessionCache()
	c.mu.Lock()
	sessions := make([]*fetchSession, 0, len(c.sessions))
	for _, s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.mu.Unlock()
	out := make([]FetchSessionStatus, 0, len(sessions))
	for _, s := range sessions {
		s.mu.Lock()
		out = append(out, FetchSessionStatus{ID: s.id, Replica: s.replica, Epoch: s.epoch, Partitions: len(s.parts), Named: s.named})
		s.mu.Unlock()
	}
	return out
}

func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	if s != nil && time.Since(s.lastUsed) > fetchSessionIdle {
		delete(c.sessions, id)
		return nil
	}
	return s
}

func (c *fetchSessionCache) close(id int32) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
}

// sessionFetch is a fetch request resolved against its session: the
// request to serve (every partition of the session) and how to answer.
type sessionFetch struct {
	s       *fetchSession
	full    bool // every partition is answered (the session's first fetch)
	request *kmsg.FetchRequest
}

// beginSession applies a request's session fields. It returns the request
// to serve and the session, or an error code for the whole response.
func (b *Broker) beginSession(req *kmsg.FetchRequest) (*sessionFetch, int16) {
	cache := b.sessionCache()
	switch {
	case req.SessionEpoch == -1:
		if req.SessionID != 0 {
			cache.close(req.SessionID)
		}
		return &sessionFetch{request: req, full: true}, 0
	case req.SessionEpoch == 0:
		if req.SessionID != 0 {
			cache.close(req.SessionID)
		}
		s := cache.open(req.Version, fetchingReplica(req))
		if s == nil {
			return &sessionFetch{request: req, full: true}, 0
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.update(req)
		return &sessionFetch{s: s, full: true, request: s.request(req)}, 0
	}
	s := cache.get(req.SessionID)
	if s == nil {
		return nil, kerr.FetchSessionIDNotFound.Code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.SessionEpoch != s.epoch || (req.Version >= 13) != (s.version >= 13) {
		return nil, kerr.InvalidFetchSessionEpoch.Code
	}
	s.update(req)
	return &sessionFetch{s: s, request: s.request(req)}, 0
}

func keyOf(version int16, topic string, id [16]byte, partition int32) sessionKey {
	if version >= 13 {
		return sessionKey{topicID: id, partition: partition}
	}
	return sessionKey{topic: topic, partition: partition}
}

// update adds and changes the partitions a request names, forgets those it
// forgets, and moves the session to its next epoch. s.mu is held.
func (s *fetchSession) update(req *kmsg.FetchRequest) {
	s.named = 0
	for _, rt := range req.Topics {
		s.named += len(rt.Partitions)
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := keyOf(req.Version, ft.Topic, ft.TopicID, p)
			if _, ok := s.parts[k]; ok {
				delete(s.parts, k)
				for i, o := range s.order {
					if o == k {
						s.order = append(s.order[:i], s.order[i+1:]...)
						break
					}
				}
			}
		}
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := keyOf(req.Version, rt.Topic, rt.TopicID, rp.Partition)
			if sp, ok := s.parts[k]; ok {
				sp.req = rp
				continue
			}
			s.parts[k] = &sessionPartition{req: rp}
			s.order = append(s.order, k)
		}
	}
	s.epoch++
	if s.epoch <= 0 {
		s.epoch = 1
	}
	s.lastUsed = time.Now()
}

// request is req with every partition of the session, in the order they
// joined, grouped by topic. s.mu is held.
func (s *fetchSession) request(req *kmsg.FetchRequest) *kmsg.FetchRequest {
	full := *req
	full.Topics = nil
	full.ForgottenTopics = nil
	index := map[sessionKey]int{} // topic (partition -1) -> index in full.Topics
	for _, k := range s.order {
		tk := sessionKey{topic: k.topic, topicID: k.topicID, partition: -1}
		i, ok := index[tk]
		if !ok {
			i = len(full.Topics)
			index[tk] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = k.topic, k.topicID
			full.Topics = append(full.Topics, rt)
		}
		full.Topics[i].Partitions = append(full.Topics[i].Partitions, s.parts[k].req)
	}
	return &full
}

// finish answers from res: with the session's id, and, for an incremental
// fetch, only the partitions with news. It records what each partition was
// told and releases the session.
func (f *sessionFetch) finish(res *fetchResult) *Response {
	resp := res.resp
	if f.s == nil {
		return res.response()
	}
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	resp.SessionID = f.s.id
	var topics []kmsg.FetchResponseTopic
	var served []sessionKey
	for _, rt := range resp.Topics {
		kept := rt.Partitions[:0]
		for _, rp := range rt.Partitions {
			k := keyOf(f.request.Version, rt.Topic, rt.TopicID, rp.Partition)
			sp := f.s.parts[k]
			if len(rp.RecordBatches) > 0 {
				served = append(served, k)
			}
			news := f.full || sp == nil || !sp.answered || len(rp.RecordBatches) > 0 || rp.ErrorCode != 0 ||
				rp.HighWatermark != sp.hw || rp.LastStableOffset != sp.lso || rp.LogStartOffset != sp.logStart
			if sp != nil {
				sp.hw, sp.lso, sp.logStart, sp.answered = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset, true
			}
			if news {
				kept = append(kept, rp)
			}
		}
		if len(kept) > 0 {
			rt.Partitions = kept
			topics = append(topics, rt)
		}
	}
	resp.Topics = topics
	f.s.rotate(served)
	return res.response()
}

// rotate moves the partitions just served records to the end of the
// session's order, as Kafka does, so that when a response fills up the
// partitions after them are read first next time rather than starved.
// s.mu is held.
func (s *fetchSession) rotate(served []sessionKey) {
	if len(served) == 0 || len(served) == len(s.order) {
		return
	}
	moved := map[sessionKey]bool{}
	for _, k := range served {
		moved[k] = true
	}
	kept := s.order[:0:0]
	for _, k := range s.order {
		if !moved[k] {
			kept = append(kept, k)
		}
	}
	for _, k := range s.order {
		if moved[k] {
			kept = append(kept, k)
		}
	}
	s.order = kept
}
