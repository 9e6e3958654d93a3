package ledger

import (
	"fmt"
	"strings"
	"time"
)

// Report is a group's ledger as `strand migrate report --format json` and
// the admin listener show it: its hand-offs, the commits of partitions
// their member did not own, and the totals.
type Report struct {
	Group           string  `json:"group,omitempty"`
	Handoffs        []Entry `json:"handoffs"`
	CommitsNotOwned []Entry `json:"commits_not_owned"`
	Totals          Totals  `json:"totals"`
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
}

// NewReport sorts entries by type and sums them.
func NewReport(group string, entries []Entry) Report {
	r := Report{Group: group, Handoffs: []Entry{}, CommitsNotOwned: []Entry{}}
	for _, e := range entries {
		switch e.Type {
		case TypeHandoff:
			r.Handoffs = append(r.Handoffs, e)
			r.Totals.add(e)
		case TypeCommitNotOwned:
			r.CommitsNotOwned = append(r.CommitsNotOwned, e)
		}
	}
	r.Totals.CommitsNotOwned = len(r.CommitsNotOwned)
	return r
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
