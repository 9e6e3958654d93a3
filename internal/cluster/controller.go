package cluster

import (
	"log/slog"
	"sync"
	"time"
)

// controller is the active controller's liveness duty, run on every
// broker and acting only on the quorum's leader: it fences a broker it has
// not heard from for the session timeout (what it leads moves or goes
// offline), and unfences a registered broker once it is heard from and its
// log has reached its own registration (it is caught up with the
// metadata). What it decides goes through the log like any change, so a
// new leader starts from the same image; it judges contact afresh, giving
// every broker a full session timeout from its own start as leader.
type controller struct {
	s       *Store
	be      *raftBackend
	timeout time.Duration
	logger  *slog.Logger

	stopOnce sync.Once
	done     chan struct{}
	wg       sync.WaitGroup
}

func startController(s *Store, be *raftBackend, timeout time.Duration, logger *slog.Logger) *controller {
	c := &controller{s: s, be: be, timeout: timeout, logger: logger, done: make(chan struct{})}
	c.wg.Go(c.run)
	return c
}

func (c *controller) stop() {
	c.stopOnce.Do(func() { close(c.done) })
	c.wg.Wait()
}

func (c *controller) run() {
	tick := time.NewTicker(min(c.timeout/4, 250*time.Millisecond))
	defer tick.Stop()
	var leadingSince time.Time
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		st := c.be.node.Status()
		if st.Leader == 0 || st.Leader != st.ID {
			leadingSince = time.Time{}
			continue
		}
		now := time.Now()
		if leadingSince.IsZero() {
			leadingSince = now
		}
		contact := map[int32]time.Time{nodeID(st.ID): now}
		match := map[int32]uint64{nodeID(st.ID): st.Applied}
		for id, ps := range st.Peers {
			t := ps.LastContact
			if t.Before(leadingSince) {
				t = leadingSince
			}
			contact[nodeID(id)], match[nodeID(id)] = t, ps.Match
		}
		for _, b := range c.s.Brokers() {
			seen, member := contact[b.NodeID]
			alive := member && now.Sub(seen) < c.timeout
			var err error
			switch {
			case !b.Fenced && !alive:
				c.logger.Info("fencing a broker not heard from", "broker", b.NodeID, "epoch", b.Epoch,
					"silent", now.Sub(seen).Round(time.Millisecond))
				err = c.s.FenceBroker(b.NodeID, b.Epoch)
			case b.Fenced && alive && match[b.NodeID] >= uint64(b.Epoch):
				c.logger.Info("unfencing a caught-up broker", "broker", b.NodeID, "epoch", b.Epoch)
				err = c.s.UnfenceBroker(b.NodeID, b.Epoch)
			}
			if err != nil {
				c.logger.Warn("liveness change not made", "broker", b.NodeID, "err", err)
			}
		}
	}
}
