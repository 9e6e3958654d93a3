package console

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/ledger"
)

func nodes(ns []int32) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

func utc(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }

func msLabel(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

func viewOverview(d *doc, o overviewData) {
	h := o.Health
	d.h("<h1>Cluster %s</h1>\n<div class=\"cards\">", o.Cluster.ClusterID)
	health, class := "degraded", "bad"
	if h.Healthy {
		health, class = "healthy", "ok"
	}
	d.card("Health", "health", class, health)
	down := len(o.Cluster.Brokers) - o.Cluster.Live()
	d.card("Brokers", "brokers", "", o.Cluster.Live())
	d.card("Brokers down", "brokers-down", string(when(down > 0, "bad")), down)
	d.card("Controller", "controller", "", o.Cluster.Controller)
	d.card("Topics", "topics", "", o.Topics)
	d.card("Groups", "groups", "", o.Groups)
	d.card("Partitions", "partitions", "", h.Partitions)
	d.card("Offline", "offline", string(when(len(h.OfflinePartitions) > 0, "bad")), len(h.OfflinePartitions))
	d.card("Under-replicated", "under-replicated", string(when(len(h.UnderReplicatedPartitions) > 0, "bad")), len(h.UnderReplicatedPartitions))
	d.h("</div>\n<h2>Brokers</h2>\n<table id=\"broker-table\">\n<tr><th>Node</th><th>Host</th><th>Port</th><th>Rack</th><th>Status</th>" +
		"<th class=\"num\">Partitions</th><th class=\"num\">Leads</th><th>Role</th></tr>\n")
	for _, b := range o.Cluster.Brokers {
		port := "-"
		if b.Port > 0 {
			port = fmt.Sprint(b.Port)
		}
		d.h("<tr id=\"broker-%d\"><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td class=\"status %s\">%s</td>"+
			"<td class=\"num\">%d</td><td class=\"num\">%d</td><td>%s</td></tr>\n", b.NodeID, b.NodeID, orDash(b.Host), port,
			orDash(b.Rack), when(b.Down(), "bad"), b.Status, len(b.Partitions), b.Leads,
			when(b.NodeID == o.Cluster.Controller, "controller"))
	}
	d.h("</table>\n")
	if down > 0 {
		d.h("<h2>Brokers down</h2>\n<table id=\"down-brokers\">\n<tr><th>Node</th><th>Partitions it holds</th></tr>\n")
		for _, b := range o.Cluster.Brokers {
			if b.Down() {
				d.h("<tr><td class=\"bad\">%d</td><td class=\"partitions\">%s</td></tr>\n", b.NodeID,
					orDash(strings.Join(b.Partitions, ", ")))
			}
		}
		d.h("</table>\n")
	}
	if len(h.OfflinePartitions)+len(h.UnderReplicatedPartitions) > 0 {
		d.h("<h2>Partitions needing attention</h2>\n<table>")
		for _, p := range h.OfflinePartitions {
			d.h(`<tr><td class="bad">offline</td><td>%s</td></tr>`, p)
		}
		for _, p := range h.UnderReplicatedPartitions {
			d.h(`<tr><td class="bad">under-replicated</td><td>%s</td></tr>`, p)
		}
		d.h("</table>\n")
	}
	if len(o.Cluster.Features) > 0 {
		var fs []string
		for _, k := range slices.Sorted(maps.Keys(o.Cluster.Features)) {
			fs = append(fs, fmt.Sprintf("%s=%d", k, o.Cluster.Features[k]))
		}
		d.h("<h2>Features</h2><p class=\"muted\">%s</p>\n", strings.Join(fs, " "))
	}
}

func viewTopics(d *doc, rows []topicRow, internal bool) {
	d.h("<h1>Topics</h1>\n<p class=\"muted\">")
	if internal {
		d.h(`<a href="/topics">Hide internal topics</a>`)
	} else {
		d.h(`<a href="/topics?internal=1">Show internal topics</a>`)
	}
	d.h(`</p>
<table id="topic-table">
<tr><th>Topic</th><th class="num">Partitions</th><th class="num">Replicas</th><th class="num">Records</th><th class="num">Size</th><th class="num">Records/s</th></tr>
`)
	for _, r := range rows {
		replicas := 0
		if len(r.Partitions) > 0 {
			replicas = len(r.Partitions[0].Replicas)
		}
		d.h(`<tr data-topic="%s"><td><a href="%s">%s</a>%s</td><td class="num">%d</td><td class="num">%d</td>`, r.Topic.Topic,
			link("topics", r.Topic.Topic), r.Topic.Topic, when(r.Internal, ` <span class="muted">internal</span>`), len(r.Partitions), replicas)
		d.h(`<td class="num records">%d</td><td class="num size">%s</td><td class="num">%s</td></tr>`+"\n", r.Records,
			inspect.SizeLabel(r.SizeBytes), rateLabel(r))
	}
	if len(rows) == 0 {
		d.h(`<tr><td colspan="6" class="muted">No topics.</td></tr>`)
	}
	d.h("</table>\n")
}

func rateLabel(r topicRow) string {
	if !r.HasRate {
		return "-"
	}
	return fmt.Sprintf("%.1f", r.Rate)
}

func viewTopic(d *doc, r topicPage) {
	d.h("<h1>Topic %s</h1>\n<div class=\"cards\">", r.Topic.Topic)
	d.card("Partitions", "", "", len(r.Partitions))
	d.card("Records", "records", "", r.Records)
	d.card("Size", "size", "", inspect.SizeLabel(r.SizeBytes))
	d.card("Records/s", "rate", "", rateLabel(r.topicRow))
	d.h(`</div>
<p><a href="%s" id="browse">Browse records</a></p>
<h2>Partitions</h2>
<table id="partition-table">
<tr><th class="num">Partition</th><th class="num">Leader</th><th class="num">Epoch</th><th>Replicas</th><th>In-sync</th><th class="num">Start</th><th class="num">End</th><th class="num">Size</th><th></th></tr>
`, link("topics", r.Topic.Topic, "records"))
	for _, p := range r.Partitions {
		d.h(`<tr data-partition="%d"><td class="num">%d</td><td class="num leader">%d</td><td class="num">%d</td><td class="replicas">%s</td><td class="isr%s">%s</td>`,
			p.Partition, p.Partition, p.Leader, p.LeaderEpoch, nodes(p.Replicas), when(len(p.ISR) < len(p.Replicas), " bad"), nodes(p.ISR))
		d.h(`<td class="num">%s</td><td class="num end">%s</td><td class="num">%s</td><td><a href="%s?partition=%d">records</a>`,
			offsetLabel(p.Start), offsetLabel(p.End), inspect.SizeLabel(p.SizeBytes), link("topics", r.Topic.Topic, "records"), p.Partition)
		if p.Error != "" {
			d.h(` <span class="bad">%s</span>`, p.Error)
		}
		d.h("</td></tr>\n")
	}
	d.h(`</table>
<h2>Groups reading it</h2>
<table id="topic-group-table">
<tr><th>Group</th><th>State</th><th class="num">Partitions committed</th><th class="num">Lag</th></tr>
`)
	for _, g := range r.Groups {
		d.h(`<tr data-group="%s"><td><a href="%s">%s</a></td><td>%s</td><td class="num">%d</td><td class="num lag">%d</td></tr>`+"\n",
			g.Group, link("groups", g.Group), g.Group, g.State, g.Partitions, g.Lag)
	}
	if len(r.Groups) == 0 {
		d.h(`<tr><td colspan="4" class="muted">No group has committed offsets of this topic.</td></tr>`)
	}
	d.h(`</table>
<h2>Configs</h2>
<p class="muted">Every config of the topic with where its value comes from: the topic's own, a broker's, or the default.</p>
<table id="config-table"><tr><th>Name</th><th>Value</th><th>Source</th></tr>
`)
	for _, c := range r.Configs {
		d.h(`<tr data-config="%s"%s><td>%s</td><td class="value">%s</td><td class="source">%s</td></tr>`+"\n", c.Name,
			when(c.Source == "topic", ` class="set"`), c.Name, c.Value, c.Source)
	}
	d.h("</table>\n")
}

func viewRecords(d *doc, q browseQuery, got browsed) {
	d.h(`<h1>Records of <a href="%s">%s</a></h1>
<form class="inline" method="get" id="browse-form">
  <label>Partition <select name="partition">`, link("topics", q.Topic), q.Topic)
	for p := range q.Partitions {
		d.h(`<option value="%d"%s>%d</option>`, p, when(p == q.Partition, " selected"), p)
	}
	d.h(`</select></label>
  <label>From offset (N, +N, -N) <input name="offset" value="%s" size="10" placeholder="start"></label>
  <label>or from time <input name="time" value="%s" size="22" placeholder="2026-12-01T10:00:00Z"></label>
  <label>Records <input name="limit" value="%d" size="5"></label>
  <label>Holding <input name="q" value="%s" size="16" placeholder="key, value or header"></label>
  <label>Show as <select name="as">`, q.Offset, q.Time, q.Limit, q.Search)
	for _, as := range []string{"text", "json", "hex"} {
		d.h(`<option%s>%s</option>`, when(as == q.As, " selected"), as)
	}
	d.h(`</select></label>
  <button type="submit">Show</button>
</form>
`)
	// Pages: the same query from another offset.
	page := func(from int64) string {
		v := url.Values{"partition": {fmt.Sprint(q.Partition)}, "offset": {fmt.Sprint(from)}, "limit": {fmt.Sprint(q.Limit)}, "as": {q.As}}
		if q.Search != "" {
			v.Set("q", q.Search)
		}
		return link("topics", q.Topic, "records") + "?" + v.Encode()
	}
	latest := url.Values{"partition": {fmt.Sprint(q.Partition)}, "offset": {fmt.Sprint(-q.Limit)}, "limit": {fmt.Sprint(q.Limit)}, "as": {q.As}}
	d.h(`<p class="muted" id="record-pages">Offsets %d to %d in the partition. `, q.Start, q.End)
	if q.From > q.Start && q.Search == "" {
		d.h(`<a href="%s" id="earlier">earlier</a> · `, page(max(q.Start, q.From-int64(q.Limit))))
	}
	if got.Next < q.End {
		d.h(`<a href="%s" id="later">later</a> · `, page(got.Next))
	}
	d.h(`<a href="%s" id="latest">latest %d</a></p>`+"\n", link("topics", q.Topic, "records")+"?"+latest.Encode(), q.Limit)
	if q.Search != "" {
		d.h(`<p id="search-progress">Searched %d records (offsets %d to %d) for %q: %d found`, got.Scanned, q.From, got.Next-1, q.Search,
			len(got.Records))
		if got.Next < q.End {
			d.h(`; <a href="%s" id="search-on">search on from %d</a>`, page(got.Next), got.Next)
		} else {
			d.h(`; the end of the partition`)
		}
		d.h(".</p>\n")
	}
	d.h(`<table id="record-table">
<tr><th class="num">Offset</th><th>Time (UTC)</th><th>Key</th><th>Value</th><th>Headers</th></tr>
`)
	for _, r := range got.Records {
		d.h(`<tr><td class="num offset">%d</td><td>%s</td><td><pre class="key">%s</pre></td><td><pre class="value">%s</pre></td><td class="headers">`,
			r.Offset, utc(r.Timestamp), r.Key, r.Value)
		for _, h := range r.Headers {
			d.h("<pre>%s: %s</pre>", h.Key, h.Value)
		}
		d.h("</td></tr>\n")
	}
	if len(got.Records) == 0 {
		d.h(`<tr><td colspan="5" class="muted">No records there.</td></tr>`)
	}
	d.h("</table>\n")
}

func viewGroups(d *doc, rows []groupRow) {
	d.h(`<h1>Groups</h1>
<table id="group-table">
<tr><th>Group</th><th>Type</th><th>State</th><th>Protocol</th><th class="num">Members</th><th class="num">Lag</th></tr>
`)
	for _, r := range rows {
		typ := r.Type
		if typ == "" {
			typ = "classic"
		}
		d.h(`<tr data-group="%s"><td><a href="%s">%s</a></td><td>%s</td><td>%s</td><td>%s</td><td class="num members">%d</td><td class="num lag">%d</td></tr>`+"\n",
			r.Group, link("groups", r.Group), r.Group, typ, r.State, orDash(r.Protocol), r.Members, r.Lag)
		if r.Err != "" {
			d.h(`<tr><td colspan="6" class="bad">%s</td></tr>`, r.Err)
		}
	}
	if len(rows) == 0 {
		d.h(`<tr><td colspan="6" class="muted">No groups.</td></tr>`)
	}
	d.h("</table>\n")
}

func viewGroup(d *doc, g groupPage, actions bool) {
	d.h("<h1>Group %s</h1>\n", g.Group.Group)
	if g.Message != "" {
		d.h(`<p class="note" id="message">%s</p>`, g.Message)
	}
	d.h(`<div class="cards">`)
	d.card("State", "state", "", g.State)
	d.card("Type", "", "", g.Type)
	d.card("Protocol", "", "", orDash(g.Protocol))
	d.card("Members", "members", "", len(g.Members))
	d.card("Lag", "total-lag", "", g.TotalLag)
	most := -1.0
	for _, s := range g.LagSeconds {
		most = max(most, s)
	}
	d.card("Lag (s)", "lag-seconds", "", secondsLabel(most, most >= 0))
	d.h(`</div>
<h2>Versions</h2>
<p class="muted">A member's version is its client software and version (client.software.name and client.software.version).</p>
<table id="version-table">
<tr><th>Version</th><th class="num">Members</th><th class="num">Partitions</th><th class="num">Lag</th><th class="num">Lag (s)</th></tr>
`)
	for _, v := range g.Versions {
		d.h(`<tr data-version="%s"><td>%s</td><td class="num members">%d</td><td class="num partitions">%d</td><td class="num lag">%d</td><td class="num seconds">%s</td></tr>`+"\n",
			v.Version, v.Version, v.Members, v.Partitions, v.Lag, secondsLabel(v.LagSeconds, true))
	}
	if len(g.Versions) == 0 {
		d.h(`<tr><td colspan="5" class="muted">No members.</td></tr>`)
	}
	d.h(`</table>
<h2>Members</h2>
<table id="member-table">
<tr><th>Member</th><th>Client id</th><th>Client software</th><th>Host</th><th>Instance</th><th>Partitions</th><th>Status</th></tr>
`)
	for _, m := range g.Members {
		owned := make([]string, len(m.Owned))
		for i, p := range m.Owned {
			owned[i] = p.String()
		}
		d.h(`<tr><td>%s</td><td>%s</td><td class="software">%s</td><td>%s</td><td>%s</td><td>%s</td><td class="status">%s</td></tr>`+"\n",
			m.MemberID, m.ClientID, orDash(m.Software), m.Host, orDash(m.InstanceID), strings.Join(owned, " "), orDash(m.Status))
	}
	if len(g.Members) == 0 {
		d.h(`<tr><td colspan="7" class="muted">No members: the group is not reading.</td></tr>`)
	}
	from := "Committed"
	if g.Group.Type == "share" {
		from = "Start" // a share-partition's start offset, not a commit
	}
	d.h(`</table>
<h2>Lag per partition</h2>
<table id="lag-table">
<tr><th>Topic</th><th class="num">Partition</th><th class="num">%s</th><th class="num">End</th><th class="num">Lag</th><th class="num">Lag (s)</th><th>Owner</th></tr>
`, from)
	for _, p := range g.Partitions {
		s, ok := g.LagSeconds[inspect.Partition{Topic: p.Topic, Partition: p.Partition}]
		d.h(`<tr data-partition="%s-%d"><td>%s</td><td class="num">%d</td><td class="num">%s</td><td class="num">%s</td><td class="num lag">%s</td><td class="num seconds">%s</td><td>%s</td></tr>`+"\n",
			p.Topic, p.Partition, p.Topic, p.Partition, offsetLabel(p.Committed), offsetLabel(p.End), offsetLabel(p.Lag),
			secondsLabel(s, ok), orDash(g.Owners[p.MemberID]))
	}
	by := func(name string) markup {
		if g.View.By == name {
			return markup("<b>" + name + "</b>")
		}
		return markup(fmt.Sprintf(`<a href="%s" id="by-%s">%s</a>`, escape(g.View.query(func(v *groupView) { v.By = name })), name, name))
	}
	d.h("</table>\n<h2>Lag over time</h2>\n<p class=\"muted\">By %s · %s. Dashed lines are rebalances.</p>\n", by("partition"), by("version"))
	viewChart(d, g.Chart)
	viewHandoffs(d, g)
	if actions {
		d.h(`<p><a href="%s" id="actions">Reset offsets or delete the group</a></p>`+"\n", link("groups", g.Group.Group, "actions"))
	}
}

// viewGroupActions is the page of a group's actions: apart from the
// group's page, which reloads itself, so that a form being filled in is
// never reloaded away.
func viewGroupActions(d *doc, group string) {
	path := link("groups", group)
	d.h(`<h1>Actions on group <a href="%s">%s</a></h1>
<p class="muted">Only for a group without members. Type the group's name to confirm.</p>
<form class="inline" method="post" action="%s/reset" id="reset-form">
  <label>Reset offsets to <select name="to"><option>earliest</option><option>latest</option></select></label>
  <label>Topic (all when empty) <input name="topic" size="16"></label>
  <label>Confirm <input name="confirm" size="16" placeholder="%s"></label>
  <button type="submit" class="danger">Reset offsets</button>
</form>
<form class="inline" method="post" action="%s/delete" id="delete-form">
  <label>Confirm <input name="confirm" size="16" placeholder="%s"></label>
  <button type="submit" class="danger">Delete group</button>
</form>
`, path, group, path, group, path, group)
}

func viewChart(d *doc, c Chart) {
	if c.Points == 0 {
		d.h("<p class=\"muted\">No samples yet.</p>\n")
		return
	}
	d.h(`<svg class="chart" id="lag-chart" viewBox="-40 -10 %d %d" role="img" aria-label="lag over time">
  <line x1="0" y1="%d" x2="%d" y2="%d" stroke="#d0d5dd"/>
  <line x1="0" y1="0" x2="0" y2="%d" stroke="#d0d5dd"/>
  <text x="-6" y="8" font-size="10" text-anchor="end">%d</text>
  <text x="-6" y="%d" font-size="10" text-anchor="end">0</text>
  <text x="%d" y="%d" font-size="10" text-anchor="end">now</text>
  <text x="0" y="%d" font-size="10">%s ago</text>
`, c.Width+50, c.Height+30, c.Height, c.Width, c.Height, c.Height, c.Max, c.Height, c.Width, c.Height+14, c.Height+14,
		c.Span.Round(time.Second).String())
	for _, m := range c.Marks {
		d.h(`  <line class="mark" x1="%.1f" y1="0" x2="%.1f" y2="%d"><title>%s: %s</title></line>`+"\n", m.X, m.X, c.Height,
			m.At.UTC().Format("15:04:05"), m.Label)
	}
	for _, s := range c.Series {
		d.h(`  <polyline class="%s" points="%s"><title>%s: %d</title></polyline>`+"\n", s.Class, s.Points, s.Name, s.Last)
	}
	d.h("</svg>\n<p class=\"legend\">")
	for _, s := range c.Series {
		d.h(`<span class="%s"><i></i>%s (%d)</span>`, s.Class, s.Name, s.Last)
	}
	d.h("</p>\n<p class=\"muted\">%d samples.</p>\n", c.Points)
}

func viewHandoffs(d *doc, g groupPage) {
	d.h("<h2>Hand-offs</h2>\n")
	if !g.HasLedger {
		d.h("<p class=\"muted\">No hand-off ledger on this cluster.</p>\n")
		return
	}
	t := g.Report.Totals
	d.h(`<p id="handoff-totals">%d hand-offs: duplicate risk %d, skipped <span%s>%d</span>, rewound %d, longest unowned %s`,
		t.Handoffs, t.DuplicateRisk, when(t.Skipped > 0, ` class="bad"`), t.Skipped, t.Rewound, msLabel(t.LongestUnowned))
	if t.FirstStarts > 0 {
		d.h(`; %d first starts (nothing committed: the consumer's auto.offset.reset chose where, past %d records)`, t.FirstStarts, t.FirstStartsPast)
	}
	if t.CommitsNotOwned > 0 {
		d.h(`, <span class="bad">%d commits of partitions their member did not own</span>`, t.CommitsNotOwned)
	}
	d.h(".</p>\n")
	if len(g.Report.Versions) > 0 {
		d.h(`<table id="pair-table">
<tr><th>Between versions</th><th class="num">Partitions</th><th class="num">Hand-offs</th><th class="num">Duplicate risk</th><th class="num">Skipped</th><th class="num">Rewound</th><th class="num">Longest unowned</th></tr>
`)
		for _, p := range g.Report.Versions {
			label := p.From + " → " + p.To
			switch {
			case p.Reshuffle():
				label = "within " + p.From
			case p.Rollback:
				label = "rollback " + label
			}
			d.h(`<tr><td class="pair">%s</td><td class="num">%d</td><td class="num">%d</td><td class="num dup">%d</td><td class="num%s">%d</td><td class="num">%d</td><td class="num">%s</td></tr>`+"\n",
				label, p.Partitions, p.Handoffs, p.DuplicateRisk, when(p.Skipped > 0, " bad"), p.Skipped, p.Rewound, msLabel(p.LongestUnowned))
		}
		d.h("</table>\n")
	}
	listed, pages := g.View.listed(g.Report)
	page := min(g.View.Page, pages)
	d.h(`<p class="muted" id="handoff-filter">Show: `)
	for _, f := range [][2]string{{"", "with a move"}, {"any", "with a risk"}, {"duplicate", "duplicates"}, {"skipped", "skipped"},
		{"rewound", "rewound"}, {"all", "all, first starts too"}} {
		if f[0] == g.View.Risk {
			d.h(`<b>%s</b> · `, f[1])
			continue
		}
		d.h(`<a href="%s" data-risk="%s">%s</a> · `, g.View.query(func(v *groupView) { v.Risk, v.Page = f[0], 1 }), f[0], f[1])
	}
	d.h(`newest first, page <span id="handoff-page">%d</span> of %d`, page, pages)
	if page > 1 {
		d.h(` · <a href="%s" id="newer">newer</a>`, g.View.query(func(v *groupView) { v.Page = page - 1 }))
	}
	if page < pages {
		d.h(` · <a href="%s" id="older">older</a>`, g.View.query(func(v *groupView) { v.Page = page + 1 }))
	}
	d.h(`</p>
<table id="handoff-table">
<tr><th>Time (UTC)</th><th>Partition</th><th>From</th><th>To</th><th>Why</th><th class="num">Committed</th><th class="num">First fetched</th><th class="num">Duplicate risk</th><th class="num">Skipped</th><th class="num">Unowned</th></tr>
`)
	for _, e := range listed {
		from := markup(`<span class="muted">first assignment</span>`)
		if e.FirstStart() {
			from = markup(`<span class="muted">first start</span>`)
		} else if e.From != nil {
			from = memberCell(*e.From)
		}
		d.h(`<tr><td>%s</td><td>%s-%d</td><td class="from">%s</td><td class="to">%s</td><td>%s</td>`, utc(e.Time), e.Topic, e.Partition, from,
			memberCell(e.To), orDash(e.Reason))
		d.h(`<td class="num">%s</td><td class="num">%s</td><td class="num">%s</td><td class="num%s">%s</td><td class="num">%s</td></tr>`+"\n",
			offsetLabel(e.Committed), offsetLabel(e.FirstFetched), offsetLabel(e.DuplicateRisk), when(e.Skipped > 0 && !e.FirstStart(), " bad"),
			offsetLabel(e.Skipped), msLabel(e.UnownedMs))
	}
	if len(listed) == 0 {
		d.h(`<tr><td colspan="10" class="muted">No hand-offs recorded.</td></tr>`)
	}
	d.h("</table>\n")
}

// memberCell names a member of a hand-off by its client id and version,
// so that members sharing a client id are told apart.
func memberCell(m ledger.Member) markup {
	if m.MemberID == "" && m.ClientID == "" && m.Host != "" {
		return markup("a member at " + escape(m.Host))
	}
	return markup(escape(m.ClientID) + ` <span class="version">` + escape(m.Version()) + `</span>`)
}
