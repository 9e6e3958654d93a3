package console

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/ledger"
)

// What a group's page shows beside the group itself: each version's
// members, partitions and lag, the lag of each partition in seconds, the
// chart split by partition or by version with the rebalances marked, and
// the hand-offs filtered and paged.

// handoffsPerPage bounds the hand-offs one page lists.
const handoffsPerPage = 50

// versionRow is one version of the group's code: a client software and
// version, as the hand-off ledger learnt it of each member.
type versionRow struct {
	Version    string
	Members    int
	Partitions int
	Lag        int64
	LagSeconds float64 // the most of its partitions; -1 when unknown
}

// groupView is how the page was asked for: which hand-offs (risk, page),
// the chart's split, and how often it refreshes.
type groupView struct {
	Risk    string // "" for every hand-off but first starts, "all", or a ledger risk
	Page    int    // from 1, newest first
	By      string // "partition" or "version"
	Refresh int    // seconds; 0 for none
}

func parseGroupView(q url.Values) groupView {
	v := groupView{Risk: q.Get("risk"), Page: 1, By: "partition", Refresh: defaultRefresh}
	if v.Risk != "all" && !slices.Contains(ledger.Risks, v.Risk) {
		v.Risk = ""
	}
	if p, err := strconv.Atoi(q.Get("page")); err == nil && p > 0 {
		v.Page = p
	}
	if q.Get("by") == "version" {
		v.By = "version"
	}
	v.Refresh = refreshOf(q)
	return v
}

// query is the page's own query with changes, for its links.
func (v groupView) query(change func(*groupView)) string {
	c := v
	change(&c)
	q := url.Values{}
	if c.Risk != "" {
		q.Set("risk", c.Risk)
	}
	if c.Page > 1 {
		q.Set("page", strconv.Itoa(c.Page))
	}
	if c.By != "partition" {
		q.Set("by", c.By)
	}
	if c.Refresh != defaultRefresh {
		q.Set("refresh", strconv.Itoa(c.Refresh))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// listed is the hand-offs the view lists, newest first, and the pages
// there are.
func (v groupView) listed(r ledger.Report) ([]ledger.Entry, int) {
	var es []ledger.Entry
	for _, e := range slices.Backward(r.Handoffs) {
		switch {
		case v.Risk == "all":
		case v.Risk == "":
			if e.FirstStart() {
				continue
			}
		case !e.Risky(v.Risk):
			continue
		}
		es = append(es, e)
	}
	pages := max(1, (len(es)+handoffsPerPage-1)/handoffsPerPage)
	page := min(v.Page, pages)
	return es[min(len(es), (page-1)*handoffsPerPage):min(len(es), page*handoffsPerPage)], pages
}

// versionOf is a member's version as the page names it.
func versionOf(m inspect.Member) string { return cmp.Or(m.Software, "unknown") }

// versions sums the group's members, partitions and lag by version.
func versions(g inspect.Group, lagSeconds map[inspect.Partition]float64) []versionRow {
	rows := map[string]*versionRow{}
	row := func(v string) *versionRow {
		if rows[v] == nil {
			rows[v] = &versionRow{Version: v, LagSeconds: -1}
		}
		return rows[v]
	}
	owner := map[string]string{}
	for _, m := range g.Members {
		r := row(versionOf(m))
		r.Members++
		r.Partitions += len(m.Owned)
		owner[m.MemberID] = r.Version
	}
	for _, p := range g.Partitions {
		v, ok := owner[p.MemberID]
		if !ok {
			continue
		}
		r := row(v)
		r.Lag += max(p.Lag, 0)
		if s, ok := lagSeconds[inspect.Partition{Topic: p.Topic, Partition: p.Partition}]; ok {
			r.LagSeconds = max(r.LagSeconds, s)
		}
	}
	out := make([]versionRow, 0, len(rows))
	for _, k := range slices.Sorted(maps.Keys(rows)) {
		out = append(out, *rows[k])
	}
	return out
}

// secondsLabel is a lag in seconds, "-" when unknown.
func secondsLabel(s float64, ok bool) string {
	if !ok || s < 0 {
		return "-"
	}
	if s < 10 {
		return fmt.Sprintf("%.1f", s)
	}
	return fmt.Sprintf("%.0f", s)
}

// chartMarks are the rebalances the ledger saw in the chart's span: one
// mark per generation, at its first hand-off, naming how many
// partitions moved and between which versions.
func chartMarks(r ledger.Report) []Mark {
	type gen struct {
		at    time.Time
		moves int
		pairs map[string]bool
	}
	gens := map[int32]*gen{}
	for _, e := range r.Handoffs {
		g := gens[e.Generation]
		if g == nil {
			g = &gen{at: e.Time, pairs: map[string]bool{}}
			gens[e.Generation] = g
		}
		g.moves++
		from := "nobody"
		if e.FirstStart() {
			from = "first start"
		} else if e.From != nil {
			from = e.From.Version()
		}
		g.pairs[from+" → "+e.To.Version()] = true
	}
	var out []Mark
	for _, id := range slices.Sorted(maps.Keys(gens)) {
		g := gens[id]
		out = append(out, Mark{At: g.at, Label: fmt.Sprintf("generation %d: %d partitions moved (%s)", id, g.moves,
			strings.Join(slices.Sorted(maps.Keys(g.pairs)), ", "))})
	}
	return out
}
