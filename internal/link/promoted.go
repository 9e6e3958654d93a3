package link

import (
	"time"

	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/replica"
)

// Promoted is a partition of a promoted mirror that this broker leads:
// from AbortAt on, the transactions its source left open are aborted.
type Promoted struct {
	Partition *replica.Partition
	AbortAt   time.Time
}

// promotedSweepEvery is how often promoted partitions are looked at.
const promotedSweepEvery = 500 * time.Millisecond

// SetPromoted hands over the promoted partitions this broker leads; the
// reconciler calls it after every metadata change.
func (m *Manager) SetPromoted(parts []Promoted) {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := map[model.TopicPartition]*promotedPart{}
	for _, pr := range parts {
		if cur, ok := m.promoted[pr.Partition.TP]; ok && cur.p == pr.Partition {
			next[pr.Partition.TP] = cur // keeps done
			continue
		}
		next[pr.Partition.TP] = &promotedPart{p: pr.Partition, abortAt: pr.AbortAt}
	}
	m.promoted = next
}

type promotedPart struct {
	p       *replica.Partition
	abortAt time.Time
	done    bool // no orphan transaction is left
}

// sweepPromoted aborts, on promoted partitions past their time, the
// transactions of mirrored producers still open.
func (m *Manager) sweepPromoted() {
	defer m.wg.Done()
	t := time.NewTicker(promotedSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		m.mu.Lock()
		var due []*promotedPart
		now := m.cfg.Now()
		for _, pp := range m.promoted {
			if !pp.done && !now.Before(pp.abortAt) {
				due = append(due, pp)
			}
		}
		m.mu.Unlock()
		if len(due) == 0 {
			continue
		}
		limit := m.cfg.Store.MirroredProducerIDs()
		for _, pp := range due {
			n, wait, err := pp.p.AbortOrphanTransactions(limit)
			if err == nil {
				err = wait()
			}
			if err != nil {
				m.logger.Warn("aborting the source's open transactions on a promoted partition failed",
					"partition", pp.p.TP.String(), "err", err)
				continue
			}
			if n > 0 {
				m.logger.Info("aborted the transactions the source left open on a promoted partition",
					"partition", pp.p.TP.String(), "transactions", n)
			}
			m.mu.Lock()
			pp.done = true
			m.mu.Unlock()
		}
	}
}
