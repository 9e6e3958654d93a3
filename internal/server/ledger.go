package server

import (
	"strconv"
	"time"

	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/replica"
)

// ledgerTopic is the hand-off ledger's topic for the ledger's writer
// (ledger.Partitions): created on first use, with one partition per
// registered broker (at most as many as __consumer_offsets) so that each
// broker usually leads one, and the configured retention. Its entries are
// few; more partitions would only cost replication and files.
type ledgerTopic struct{ s *Server }

func (l ledgerTopic) Leading() ([]ledger.Partition, error) {
	t, ok := l.s.cluster.Topic(ledger.Topic)
	if !ok {
		configs := map[string]string{"cleanup.policy": "delete",
			"retention.ms": strconv.FormatInt(l.s.cfg.HandoffLedgerRetention.Milliseconds(), 10)}
		var err error
		n := int32(max(1, min(len(l.s.cluster.Brokers()), int(l.s.cfg.OffsetsTopicPartitions))))
		if t, err = l.s.topics.createInternal(ledger.Topic, n, configs); err != nil {
			return nil, err
		}
	}
	parts := make([]ledger.Partition, t.Partitions)
	for i, p := range l.s.leadingPartitions(t) {
		if p != nil {
			parts[i] = ledgerPartition{p}
		}
	}
	return parts, nil
}

// ledgerPartition is a partition of the ledger topic led here: entries are
// written as the coordinators write, acknowledged by every in-sync
// replica.
type ledgerPartition struct{ p *replica.Partition }

func (l ledgerPartition) Append(batch []byte) (func() error, error) {
	res, wait, err := l.p.AppendInternal(batch)
	if err != nil {
		return nil, err
	}
	return replicatedWait(l.p, wait, res.LastOffset+1, func(err error) error { return err }), nil
}

// handoffLedger gives the group coordinator's hand-offs to the ledger's
// writer (group.Ledger).
type handoffLedger struct{ w *ledger.Writer }

func (l handoffLedger) Handoff(groupID string, h group.Handoff) {
	e := ledger.Entry{Type: ledger.TypeHandoff, Time: h.Time, Group: groupID, Topic: h.Topic, Partition: h.Partition,
		Generation: h.Generation, To: ledgerMember(h.To), Reason: h.Reason, LostAt: timeOrNil(h.LostAt), Committed: h.Committed,
		LastFetched: h.LastFetched, LastSent: h.LastSent, LastFetchedAt: timeOrNil(h.LastFetchedAt),
		FirstFetched: h.FirstFetched, FirstFetchedAt: timeOrNil(h.FirstFetchedAt), LogStart: h.LogStart,
		DuplicateRisk: h.DuplicateRisk(), Skipped: h.Skipped(), Rewound: h.Rewound(), UnownedMs: h.Unowned().Milliseconds()}
	if h.From != (group.Owner{}) {
		from := ledgerMember(h.From)
		e.From = &from
	}
	l.w.Record(e)
}

func (l handoffLedger) CommitNotOwned(groupID string, c group.NotOwnedCommit) {
	committer, offset := ledgerMember(c.Committer), c.Offset
	e := ledger.Entry{Type: ledger.TypeCommitNotOwned, Time: c.Time, Group: groupID, Topic: c.Topic, Partition: c.Partition,
		Generation: c.Generation, Committer: &committer, Offset: &offset}
	if c.Owner != (group.Owner{}) {
		owner := ledgerMember(c.Owner)
		e.Owner = &owner
	}
	l.w.Record(e)
}

// presenceStates are the ledger's names of the steps of a member's
// presence.
var presenceStates = map[group.PresenceState]string{
	group.PresenceLost: ledger.PresenceLost, group.PresenceFetching: ledger.PresenceFetching,
	group.PresenceReturned: ledger.PresenceReturned, group.PresenceRemoved: ledger.PresenceRemoved,
}

func (l handoffLedger) Presence(groupID string, c group.PresenceChange) {
	l.w.Record(ledger.Entry{Type: ledger.TypePresence, Time: c.Time, Group: groupID, To: ledgerMember(c.Member),
		State: presenceStates[c.State], Connection: c.Connection, RemoveAt: timeOrNil(c.RemoveAt)})
}

func ledgerMember(o group.Owner) ledger.Member {
	return ledger.Member{MemberID: o.MemberID, InstanceID: o.InstanceID, ClientID: o.ClientID, Host: o.ClientHost,
		SoftwareName: o.SoftwareName, SoftwareVersion: o.SoftwareVersion}
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
