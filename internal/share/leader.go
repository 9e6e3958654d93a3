package share

import (
	"errors"
	"slices"

	"github.com/strandlog/strand/internal/lockrank"
)

// Errors of the share sessions, each one of Kafka's codes.
var (
	ErrSessionNotFound     = errors.New("share: no share session")                // SHARE_SESSION_NOT_FOUND
	ErrInvalidSessionEpoch = errors.New("share: wrong share session epoch")       // INVALID_SHARE_SESSION_EPOCH
	ErrSessionLimit        = errors.New("share: the share sessions are too many") // SHARE_SESSION_LIMIT_REACHED
)

// Key names a share-partition: one group's view of one partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// SharePartition is a share-partition with the lock its users hold while
// they read the log for it and change it.
type SharePartition struct {
	Mu lockrank.Mutex[lockrank.SharePartition]
	P  *Partition
	// LeaderEpoch is the partition's leader epoch when the state was
	// read: led again at another, the state is read again, since
	// another leader may have changed it meanwhile.
	LeaderEpoch int32
	// StateEpoch is the state's epoch when it was read: the state
	// started over since (AlterShareGroupOffsets) refuses this leader's
	// writes, and is read again.
	StateEpoch int32
}

// SessionKey names a member's share session.
type SessionKey struct{ Group, Member string }

// Session is a member's share session with this broker (KIP-932): the
// partitions it fetches from here, and the epoch its next request
// carries.
type Session struct {
	Epoch      int32
	Partitions []Key
	conn       string // the connection its last request came on
}

// Leader holds the share-partitions of the partitions this broker leads,
// and the members' share sessions with it.
//
// Locking: mu guards parts and sessions; nothing is taken under it. A
// SharePartition's lock is taken without it.
type Leader struct {
	maxSessions int

	mu       lockrank.Mutex[lockrank.Leaf]
	parts    map[Key]*SharePartition
	sessions map[SessionKey]*Session
	released chan struct{} // closed when records are released, then made anew
}

// NewLeader holds no share-partition; at most maxSessions share sessions
// are open at once (group.share.max.share.sessions).
func NewLeader(maxSessions int) *Leader {
	return &Leader{maxSessions: maxSessions, parts: map[Key]*SharePartition{}, sessions: map[SessionKey]*Session{},
		released: make(chan struct{})}
}

// Released is closed the next time records are released: a share fetch
// that found nothing to acquire waits on it, beside new data and its
// locks' deadlines.
func (l *Leader) Released() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// NotifyReleased wakes the share fetches waiting on Released.
func (l *Leader) NotifyReleased() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.released)
	l.released = make(chan struct{})
}

// Get returns the share-partition of k, or nil when there is none yet.
func (l *Leader) Get(k Key) *SharePartition {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.parts[k]
}

// GetOrAdd returns the share-partition of k, made with p at leaderEpoch
// when there was none, or none at that epoch.
func (l *Leader) GetOrAdd(k Key, p *Partition, leaderEpoch int32) *SharePartition {
	l.mu.Lock()
	defer l.mu.Unlock()
	sp := l.parts[k]
	if sp == nil || sp.LeaderEpoch != leaderEpoch {
		sp = &SharePartition{P: p, LeaderEpoch: leaderEpoch}
		l.parts[k] = sp
	}
	return sp
}

// Keys lists the share-partitions held, of every group.
func (l *Leader) Keys() []Key {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Key, 0, len(l.parts))
	for k := range l.parts {
		out = append(out, k)
	}
	return out
}

// Drop forgets the share-partitions of a partition this broker no longer
// leads, or of a group deleted: which ones, keep says.
func (l *Leader) Drop(keep func(Key) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.parts {
		if !keep(k) {
			delete(l.parts, k)
		}
	}
}

// Session applies a request's share session epoch: 0 opens a session
// (replacing the member's last), -1 names the last request of one, any
// other must be the session's epoch, which then moves on. conn is the
// connection the request came on: the session ends when it closes
// (ConnectionClosed). It returns the session as it is for this request.
func (l *Leader) Session(k SessionKey, epoch int32, conn string) (Session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sessions[k]
	switch {
	case epoch == 0:
		if s == nil && len(l.sessions) >= l.maxSessions {
			return Session{}, ErrSessionLimit
		}
		s = &Session{}
		l.sessions[k] = s
	case s == nil:
		return Session{}, ErrSessionNotFound
	case epoch == -1:
		return Session{Epoch: -1, Partitions: slices.Clone(s.Partitions)}, nil
	case epoch != s.Epoch:
		return Session{}, ErrInvalidSessionEpoch
	}
	s.Epoch, s.conn = next(s.Epoch), conn
	return Session{Epoch: s.Epoch, Partitions: slices.Clone(s.Partitions)}, nil
}

// ConnectionClosed ends the share sessions whose last request came on
// conn, and returns them with their partitions: their members' records
// there go back, as Kafka gives them back when the connection closes.
func (l *Leader) ConnectionClosed(conn string) map[SessionKey][]Key {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out map[SessionKey][]Key
	for k, s := range l.sessions {
		if s.conn == conn {
			if out == nil {
				out = map[SessionKey][]Key{}
			}
			out[k] = s.Partitions
			delete(l.sessions, k)
		}
	}
	return out
}

// next is the epoch after e, wrapping past the largest to 1.
func next(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// SetPartitions changes a session's partitions: add those fetched, then
// forget those named. It returns the session's partitions after. A
// partition both named and forgotten is not kept, as Kafka updates a
// session: a client names one it no longer fetches to acknowledge its
// records there, and forgets it in the same request.
func (l *Leader) SetPartitions(k SessionKey, add, forget []Key) []Key {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sessions[k]
	if s == nil {
		return nil
	}
	for _, p := range add {
		if !slices.Contains(s.Partitions, p) {
			s.Partitions = append(s.Partitions, p)
		}
	}
	s.Partitions = slices.DeleteFunc(s.Partitions, func(p Key) bool { return slices.Contains(forget, p) })
	return slices.Clone(s.Partitions)
}

// CloseSession ends a member's share session, and returns the partitions
// it had: the member's records there go back.
func (l *Leader) CloseSession(k SessionKey) []Key {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sessions[k]
	if s == nil {
		return nil
	}
	delete(l.sessions, k)
	return s.Partitions
}

// SessionCount is how many share sessions are open.
func (l *Leader) SessionCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sessions)
}
