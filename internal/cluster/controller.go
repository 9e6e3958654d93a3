package cluster

import (
	"errors"
	"github.com/strandlog/strand/internal/cluster/raft"
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
//
// Contact is judged per process: a registration is alive while the
// process that made it (its incarnation) is heard from, not while any
// process of that node id is. So a restarted broker does not keep its
// dead predecessor's registration alive, and once another process of the
// node speaks, the silence of the registered one counts after a short
// grace rather than a whole session.
type controller struct {
	s         *Store
	be        *raftBackend
	timeout   time.Duration
	rebalance time.Duration // preferred-leader balancing interval; <= 0: off
	logger    *slog.Logger

	stopOnce sync.Once
	done     chan struct{}
	wg       sync.WaitGroup
}

func startController(s *Store, be *raftBackend, timeout, rebalance time.Duration, logger *slog.Logger) *controller {
	c := &controller{s: s, be: be, timeout: timeout, rebalance: rebalance, logger: logger, done: make(chan struct{})}
	c.wg.Go(c.run)
	return c
}

func (c *controller) stop() {
	c.stopOnce.Do(func() { close(c.done) })
	c.wg.Wait()
}

// imbalanceRatio is leader.imbalance.per.broker.percentage: a broker
// that does not lead more than this share of the partitions it is
// preferred for gets them back.
const imbalanceRatio = 0.10

// balanceLeaders gives partitions back to their preferred replicas, as
// Kafka's auto.leader.rebalance.enable does, so that leadership spreads
// again after failovers.
func (c *controller) balanceLeaders() {
	for _, tp := range c.s.ImbalancedPartitions(imbalanceRatio) {
		st, err := c.s.ElectLeader(tp.Topic, tp.Partition, false)
		switch {
		case err == nil:
			c.logger.Info("preferred replica leads again", "topic", tp.Topic, "partition", tp.Partition,
				"leader", st.Leader, "leader_epoch", st.LeaderEpoch)
		case !errors.Is(err, ErrElectionNotNeeded) && !errors.Is(err, ErrPreferredLeaderNotAvailable):
			c.logger.Warn("preferred leader election not made", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			return
		}
	}
}

// restartGrace is how long a registered process may be silent while
// another process of its node id is heard from: about ten heartbeats, so a
// live process is never taken for a restarted one.
const restartGrace = time.Second

// refusedGrace is how long connections to a peer must be refused, with no
// word from it since, before its process counts as gone: a few attempts
// (the transport retries after 20, 40, 80 ms).
const refusedGrace = 200 * time.Millisecond

// heard reports whether the process inc of a peer counts as alive now.
// Before this controller has led for a session timeout, a process not yet
// heard from gets the benefit of the doubt. A peer whose address refuses
// connections has no process listening there: it died (kill -9, a crash)
// and is fenced at once rather than after the session timeout, so that
// its partitions move in a fraction of a second. A peer that is stalled
// or cut off refuses nothing, and has its session timeout.
func (c *controller) heard(ps raft.PeerStatus, inc string, leadingSince, now time.Time) bool {
	seen, ok := ps.Heard[inc]
	if !ok || seen.Before(leadingSince) {
		seen = leadingSince
	}
	if now.Sub(seen) >= c.timeout {
		return false
	}
	if !ps.Refused.IsZero() && now.Sub(ps.Refused) >= refusedGrace && !ps.Heard[inc].After(ps.Refused) {
		return false
	}
	for other, t := range ps.Heard {
		if other != inc && t.After(seen) && now.Sub(seen) >= min(restartGrace, c.timeout) {
			return false // another process of the node speaks instead
		}
	}
	return true
}

func (c *controller) run() {
	// A fine tick: a dead broker is fenced within 50 ms of its session
	// expiring, and its partitions move as soon.
	tick := time.NewTicker(min(c.timeout/4, 50*time.Millisecond))
	defer tick.Stop()
	var leadingSince, lastBalance time.Time
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
			leadingSince, lastBalance = now, now
		}
		if c.rebalance > 0 && now.Sub(lastBalance) >= c.rebalance {
			lastBalance = now
			c.balanceLeaders()
		}
		self := nodeID(st.ID)
		match := map[int32]uint64{self: st.Applied}
		for id, ps := range st.Peers {
			match[nodeID(id)] = ps.Match
		}
		for _, b := range c.s.Brokers() {
			alive := b.NodeID == self && b.Incarnation == c.s.incarnation
			seen := leadingSince
			if ps, member := st.Peers[raftID(b.NodeID)]; member {
				alive = c.heard(ps, b.Incarnation, leadingSince, now)
				if t := ps.Heard[b.Incarnation]; t.After(seen) {
					seen = t
				}
			}
			var err error
			switch {
			case !b.Fenced && !alive:
				c.logger.Info("fencing a broker not heard from", "broker", b.NodeID, "epoch", b.Epoch,
					"silent", now.Sub(seen).Round(time.Millisecond))
				err = c.s.FenceBroker(b.NodeID, b.Epoch)
			case b.Fenced && !b.ShuttingDown && alive && match[b.NodeID] >= uint64(b.Epoch):
				c.logger.Info("unfencing a caught-up broker", "broker", b.NodeID, "epoch", b.Epoch)
				err = c.s.UnfenceBroker(b.NodeID, b.Epoch)
			}
			if err != nil {
				c.logger.Warn("liveness change not made", "broker", b.NodeID, "err", err)
			}
		}
	}
}
