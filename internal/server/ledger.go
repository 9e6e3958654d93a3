package server

import (
	"strconv"
	"time"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/ledger"
)

// ledgerTopic is the hand-off ledger's topic for the ledger's writer
// (ledger.Partitions): created on first use, with one partition per
// registered broker (at most as many as __consumer_offsets), and the
// configured retention. Its entries are few; more partitions would only
// cost replication and files. A group's entries go to the group's
// partition, through its leader when that is another broker.
type ledgerTopic struct {
	topic      coordinatorTopic
	partitions func() int32
	writable   func(cluster.Topic) []ledger.Appender
}

func (s *Server) ledgerTopic() ledgerTopic {
	configs := map[string]string{"cleanup.policy": "delete",
		"retention.ms": strconv.FormatInt(s.cfg.HandoffLedgerRetention.Milliseconds(), 10)}
	return ledgerTopic{topic: s.coordinatorTopic(ledger.Topic, configs, s.cfg.OffsetsTopicReplicationFactor),
		partitions: func() int32 { return int32(max(1, min(len(s.cluster.Brokers()), int(s.cfg.OffsetsTopicPartitions)))) },
		writable:   s.writable}
}

func (l ledgerTopic) Writable() ([]ledger.Appender, error) {
	t, _, err := l.topic.create(l.partitions())
	if err != nil {
		return nil, err
	}
	return l.writable(t), nil
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
