package ledger

import (
	"fmt"
	"strconv"
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
	Moves []Move `json:"moves"`
	// Versions sums the hand-offs by the versions they went between
	// (first starts apart), in the order each pair first happened.
	Versions []VersionPair `json:"versions"`
	Totals   Totals        `json:"totals"`
}

// VersionPair sums the hand-offs from members of one version (their
// client software and version, client.software.name and .version) to
// members of another, or between members of one version (a reshuffle).
type VersionPair struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Rollback: the pair goes back to a version hand-offs had left
	// earlier in the report (the way back of a canary).
	Rollback        bool      `json:"rollback"`
	First           time.Time `json:"first"`
	Handoffs        int       `json:"handoffs"`
	Partitions      int       `json:"partitions"`
	DuplicateRisk   int64     `json:"duplicate_risk"`
	Skipped         int64     `json:"skipped"`
	SkippedHandoffs int       `json:"skipped_handoffs"`
	Rewound         int64     `json:"rewound"`
	LongestUnowned  int64     `json:"longest_unowned_ms"`
}

// Reshuffle says whether the pair's hand-offs stayed within one version.
func (p VersionPair) Reshuffle() bool { return p.From == p.To }

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

// Totals sums a report's hand-offs. A group's first start on a partition
// (FirstStart) counts as a hand-off, but what it started past is the
// consumer's offset reset, counted apart from what hand-offs skipped.
type Totals struct {
	Handoffs        int   `json:"handoffs"`
	DuplicateRisk   int64 `json:"duplicate_risk"`
	Skipped         int64 `json:"skipped"`
	SkippedHandoffs int   `json:"skipped_handoffs"`
	FirstStarts     int   `json:"first_starts"`
	// FirstStartsPast is the records first starts began past (a reset to
	// the end: auto.offset.reset=latest).
	FirstStartsPast int64 `json:"first_starts_past"`
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
	r.Versions = versionPairs(r.Handoffs)
	return r
}

// FirstStart says whether a hand-off is a group's first start on its
// partition: nobody owned it before and nothing was committed, so where
// the owner started is its offset reset's choice, not a hand-off's.
func (e Entry) FirstStart() bool { return e.Type == TypeHandoff && e.From == nil && e.Committed < 0 }

// Version is a member's version as the report groups hand-offs by: its
// client software and version, "unknown" when the broker did not learn
// them, "source cluster" for a member of a link's source.
func (m Member) Version() string {
	if m.MemberID == "" && m.ClientID == "" && m.Host != "" {
		return "source cluster"
	}
	if sw := m.Software(); sw != "" {
		return sw
	}
	return "unknown"
}

// versionPairs sums hand-offs by the versions they went between; first
// starts are left out (Totals counts them).
func versionPairs(handoffs []Entry) []VersionPair {
	type key struct{ from, to string }
	var out []VersionPair
	index := map[key]int{}
	partitions := map[key]map[model.TopicPartition]bool{}
	for _, e := range handoffs {
		if e.FirstStart() {
			continue
		}
		from := "nobody"
		if e.From != nil {
			from = e.From.Version()
		}
		k := key{from, e.To.Version()}
		i, ok := index[k]
		if !ok {
			_, back := index[key{k.to, k.from}]
			i = len(out)
			index[k] = i
			partitions[k] = map[model.TopicPartition]bool{}
			out = append(out, VersionPair{From: k.from, To: k.to, Rollback: back && k.from != k.to, First: e.Time})
		}
		p := &out[i]
		p.Handoffs++
		partitions[k][model.TopicPartition{Topic: e.Topic, Partition: e.Partition}] = true
		p.Partitions = len(partitions[k])
		p.DuplicateRisk += max(e.DuplicateRisk, 0)
		if e.Skipped > 0 {
			p.Skipped += e.Skipped
			p.SkippedHandoffs++
		}
		p.Rewound += max(e.Rewound, 0)
		p.LongestUnowned = max(p.LongestUnowned, e.UnownedMs)
	}
	return out
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
	if e.FirstStart() {
		t.FirstStarts++
		t.FirstStartsPast += max(e.Skipped, 0)
	} else if e.Skipped > 0 {
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
		return e.Skipped > 0 && !e.FirstStart()
	case "rewound":
		return e.Rewound > 0 || notOwned
	case "any":
		return e.DuplicateRisk > 0 || e.Skipped > 0 && !e.FirstStart() || e.Rewound > 0 || notOwned
	}
	return false
}

// Risks are the names Risky knows.
var Risks = []string{"duplicate", "skipped", "rewound", "any"}

// TimeLayout is how reports print times (in the local zone, named once
// in their header); ParseSince reads them back.
const TimeLayout = "2006-01-02 15:04:05.000"

// sinceLayouts are the times ParseSince takes besides RFC 3339: the
// report's own, shorter ones, dates, and each with a zone offset; without
// one, the local zone.
var sinceLayouts = func() []string {
	var out []string
	for _, l := range []string{TimeLayout, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05.000",
		"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		out = append(out, l, l+"Z07:00", l+" Z07:00", l+" -0700", l+" MST")
	}
	return append(out, "2006-01-02")
}()

// clockLayouts are times of day: the last such time, today or
// yesterday.
var clockLayouts = []string{"15:04:05.000", "15:04:05", "15:04"}

// ParseSince reads a since filter: empty for everything; a time as the
// report prints it (2026-12-05 20:47:03.123, local), RFC 3339, either
// with a zone (Z, +01:00, -0700, UTC); a date (local midnight); a time of
// day (its last occurrence); or a duration back from now (90s, 30m, 2h,
// 1d, 1d12h).
func ParseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, l := range sinceLayouts {
		if t, err := time.ParseInLocation(l, s, now.Location()); err == nil {
			return t, nil
		}
	}
	for _, l := range clockLayouts {
		if c, err := time.ParseInLocation(l, s, now.Location()); err == nil {
			y, m, d := now.Date()
			t := time.Date(y, m, d, c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), now.Location())
			if t.After(now) {
				t = t.AddDate(0, 0, -1)
			}
			return t, nil
		}
	}
	if d, err := parseDays(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("since %q: a time (%s, or RFC 3339), a date (2006-01-02), a time of day (15:04), "+
		"or a duration back from now (30m, 2h, 1d)", s, TimeLayout)
}

// parseDays reads a Go duration that may start with whole days (1d12h).
func parseDays(s string) (time.Duration, error) {
	days, rest, ok := strings.Cut(s, "d")
	if !ok {
		return time.ParseDuration(s)
	}
	n, err := strconv.Atoi(days)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("days %q", days)
	}
	d := time.Duration(n) * 24 * time.Hour
	if rest == "" {
		return d, nil
	}
	more, err := time.ParseDuration(rest)
	return d + more, err
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
