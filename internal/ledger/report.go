package ledger

import (
	"fmt"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/model"
)

// Report is a group's ledger as `strand migrate report --format json` and
// the admin listener show it: its hand-offs, the commits of partitions
// their member did not own, and the totals.
type Report struct {
	Group           string  `json:"group,omitempty"`
	Handoffs        []Entry `json:"handoffs"`
	CommitsNotOwned []Entry `json:"commits_not_owned"`
	// Moves are the partitions the group moved from another cluster
	// through a cluster link.
	Moves  []Move `json:"moves"`
	Totals Totals `json:"totals"`
}

// Move is a partition a group moved from a link's source cluster to this
// one: its last commit there (copied by the link) against where it
// started here.
type Move struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Link      string `json:"link"`
	Source    string `json:"source"`
	// SourceCommitted is the group's last commit at the source, copied
	// at CopiedAt; SourceMembers the members it had there then.
	SourceCommitted int64     `json:"source_committed"`
	CopiedAt        time.Time `json:"copied_at"`
	SourceMembers   int       `json:"source_members"`
	// FirstFetched is where its first owner here started, at
	// FirstFetchedAt.
	FirstFetched   int64     `json:"first_fetched"`
	FirstFetchedAt time.Time `json:"first_fetched_at"`
	// Skipped: records between the source's commit and where it started
	// here, read on neither side. Rewound: how far below the source's
	// commit it started (read twice). DuplicateRisk: records the
	// source's consumers may have processed past their last commit: 0
	// when the group had no member at the source at its last copy (its
	// consumers had stopped, their commits final), -1 (unknown) when it
	// still had some: no broker sees a Kafka consumer's position.
	Skipped       int64 `json:"skipped"`
	Rewound       int64 `json:"rewound"`
	DuplicateRisk int64 `json:"duplicate_risk"`
}

// Totals sums a report's hand-offs.
type Totals struct {
	Handoffs        int   `json:"handoffs"`
	DuplicateRisk   int64 `json:"duplicate_risk"`
	Skipped         int64 `json:"skipped"`
	SkippedHandoffs int   `json:"skipped_handoffs"`
	Rewound         int64 `json:"rewound"`
	LongestUnowned  int64 `json:"longest_unowned_ms"`
	CommitsNotOwned int   `json:"commits_not_owned"`
	// Moves from other clusters: their count, and the records they
	// skipped and rewound, counted against the source's commits (the
	// hand-offs' figures count against the commits here).
	Moves        int   `json:"moves"`
	MovesSkipped int64 `json:"moves_skipped"`
	MovesRewound int64 `json:"moves_rewound"`
}

// NewReport sorts entries by type and sums them.
func NewReport(group string, entries []Entry) Report {
	r := Report{Group: group, Handoffs: []Entry{}, CommitsNotOwned: []Entry{}, Moves: []Move{}}
	// The last link commit of each partition not yet followed by a first
	// assignment here: the move that assignment completes.
	copied := map[model.TopicPartition]Entry{}
	for _, e := range entries {
		tp := model.TopicPartition{Topic: e.Topic, Partition: e.Partition}
		switch e.Type {
		case TypeHandoff:
			r.Handoffs = append(r.Handoffs, e)
			r.Totals.add(e)
			if c, ok := copied[tp]; ok && e.From == nil && e.FirstFetched >= 0 {
				m := newMove(c, e)
				r.Moves = append(r.Moves, m)
				r.Totals.addMove(m)
				delete(copied, tp)
			}
		case TypeCommitNotOwned:
			r.CommitsNotOwned = append(r.CommitsNotOwned, e)
		case TypeLinkCommit:
			if e.SourceOffset != nil {
				copied[tp] = e
			}
		}
	}
	r.Totals.CommitsNotOwned = len(r.CommitsNotOwned)
	return r
}

func newMove(c, h Entry) Move {
	m := Move{Topic: h.Topic, Partition: h.Partition, Link: c.Link, Source: c.Source, SourceCommitted: *c.SourceOffset,
		CopiedAt: c.Time, FirstFetched: h.FirstFetched, DuplicateRisk: -1}
	if h.FirstFetchedAt != nil {
		m.FirstFetchedAt = *h.FirstFetchedAt
	}
	if c.SourceMembers != nil {
		m.SourceMembers = *c.SourceMembers
		if m.SourceMembers == 0 {
			m.DuplicateRisk = 0
		}
	}
	m.Skipped = max(0, m.FirstFetched-m.SourceCommitted)
	m.Rewound = max(0, m.SourceCommitted-m.FirstFetched)
	return m
}

func (t *Totals) addMove(m Move) {
	t.Moves++
	// The hand-off here counted what it skipped against the commit
	// here; a move counts it against the source's commit.
	t.MovesSkipped += m.Skipped
	t.MovesRewound += m.Rewound
}

func (t *Totals) add(e Entry) {
	t.Handoffs++
	t.DuplicateRisk += max(e.DuplicateRisk, 0)
	if e.Skipped > 0 {
		t.Skipped += e.Skipped
		t.SkippedHandoffs++
	}
	t.Rewound += max(e.Rewound, 0)
	t.LongestUnowned = max(t.LongestUnowned, e.UnownedMs)
}

// Risky says whether e is of the risk named: duplicate, skipped, rewound,
// any (one of these) or "" (every entry). A commit of a partition its
// member did not own counts as a risk of every kind but skipped.
func (e Entry) Risky(risk string) bool {
	notOwned := e.Type == TypeCommitNotOwned
	switch risk {
	case "":
		return true
	case "duplicate":
		return e.DuplicateRisk > 0 || notOwned
	case "skipped":
		return e.Skipped > 0
	case "rewound":
		return e.Rewound > 0 || notOwned
	case "any":
		return e.DuplicateRisk > 0 || e.Skipped > 0 || e.Rewound > 0 || notOwned
	}
	return false
}

// Risks are the names Risky knows.
var Risks = []string{"duplicate", "skipped", "rewound", "any"}

// ParseSince reads a since filter: empty for everything, an RFC 3339
// time, or a duration back from now.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("since %q: a time (RFC 3339) or a positive duration", s)
	}
	return now.Add(-d), nil
}

// Software is the member's client software and version as one label
// (franz-go 1.22.3), "" when the broker did not learn it.
func (m Member) Software() string {
	return strings.TrimSpace(m.SoftwareName + " " + m.SoftwareVersion)
}

// SoftwareByMember is the client software each member runs, by member id,
// as the entries name it: the broker learns it from a client's
// ApiVersions and the ledger keeps it, while DescribeGroups does not carry
// it. Entries are read in order, so a later one wins.
func SoftwareByMember(es []Entry) map[string]string {
	out := map[string]string{}
	for _, e := range es {
		for _, m := range []*Member{e.From, &e.To, e.Committer, e.Owner} {
			if m != nil && m.MemberID != "" && m.Software() != "" {
				out[m.MemberID] = m.Software()
			}
		}
	}
	return out
}
