package server

import (
	"time"

	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/protocol"
)

// warnEvery is how often one warning about one client host is logged: a
// client that sends the same bad request over and over, on one connection
// or on many, cannot flood the log.
const warnEvery = 10 * time.Second

// maxWarnKeys bounds the warnings remembered.
const maxWarnKeys = 4096

// warnLimiter decides which warnings about clients are logged, counting
// those it leaves out.
type warnLimiter struct {
	now  func() time.Time
	mu   lockrank.Mutex[lockrank.Leaf]
	seen map[warnKey]*warnSeen
}

type warnKey struct{ msg, host string }

type warnSeen struct {
	at         time.Time
	suppressed int
}

func newWarnLimiter(now func() time.Time) *warnLimiter {
	return &warnLimiter{now: now, seen: map[warnKey]*warnSeen{}}
}

// allow says whether the warning msg about a client at host is logged
// now, and how many like it were left out since the last one logged.
func (l *warnLimiter) allow(msg, host string) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, k := l.now(), warnKey{msg, host}
	s, ok := l.seen[k]
	if ok && now.Sub(s.at) < warnEvery {
		s.suppressed++
		return false, 0
	}
	left := 0
	if ok {
		left = s.suppressed
	} else if len(l.seen) >= maxWarnKeys {
		clear(l.seen) // forgetting only lets more lines through
	}
	l.seen[k] = &warnSeen{at: now}
	return true, left
}

// warn logs a warning about the connection's client, naming it by
// address, client id and software, unless one like it about its host was
// logged in the last warnEvery.
func (c *conn) warn(clientID string, sw protocol.Software, msg string, args ...any) {
	ok, left := c.srv.warnings.allow(msg, hostOf(c.remote))
	if !ok {
		return
	}
	if clientID != "" {
		args = append(args, "client_id", clientID)
	}
	if sw.Name != "" {
		args = append(args, "software", sw.Name+" "+sw.Version)
	}
	if left > 0 {
		args = append(args, "suppressed", left)
	}
	c.logger.Warn(msg, args...)
}
