package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/strandlog/strand/internal/cluster"
	clusterlink "github.com/strandlog/strand/internal/link"
)

// Links reads the cluster links for the console (the broker's link
// manager).
type Links interface {
	List() []cluster.Link
	Status(ctx context.Context, name string) (clusterlink.Status, error)
}

type linkRow struct {
	clusterlink.Status
	Partitions int
	Lag        int64
	LagSeconds float64
	Stopped    int
}

func summarize(st clusterlink.Status) linkRow {
	row := linkRow{Status: st}
	for _, t := range st.Topics {
		for _, p := range t.Partitions {
			row.Partitions++
			row.Lag += p.LagRecords
			row.LagSeconds = max(row.LagSeconds, p.LagSeconds)
			if p.Stopped != "" || t.State == cluster.MirrorStopped {
				row.Stopped++
			}
		}
	}
	return row
}

func (c *Console) links(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	var rows []linkRow
	for _, l := range c.cfg.Links.List() {
		st, err := c.cfg.Links.Status(ctx, l.Name)
		if err != nil {
			st = clusterlink.Status{Name: l.Name, Link: l, State: "unknown", Error: err.Error()}
		}
		rows = append(rows, summarize(st))
	}
	c.write(w, "Links", "links", func(d *doc) { viewLinks(d, rows) })
}

func (c *Console) linkPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	name := r.PathValue("link")
	st, err := c.cfg.Links.Status(ctx, name)
	if errors.Is(err, cluster.ErrUnknownLink) {
		c.fail(w, http.StatusNotFound, fmt.Errorf("link %s: not found", name))
		return
	}
	if err != nil {
		c.fail(w, http.StatusBadGateway, err)
		return
	}
	c.write(w, "Link "+name, "links", func(d *doc) { viewLink(d, summarize(st)) })
}

func viewLinks(d *doc, rows []linkRow) {
	d.h(`<h1>Cluster links</h1>
<table id="link-table">
<tr><th>Link</th><th>State</th><th>Source</th><th class="num">Mirror partitions</th><th class="num">Lag</th><th class="num">Lag (s)</th></tr>
`)
	for _, r := range rows {
		d.h(`<tr data-link="%s"><td><a href="%s">%s</a></td><td class="state">%s</td><td>%s</td><td class="num">%d</td><td class="num lag">%d</td><td class="num">%.1f</td></tr>`+"\n",
			r.Name, link("links", r.Name), r.Name, r.State, strings.Join(r.Link.Source.BootstrapServers, ","), r.Partitions, r.Lag, r.LagSeconds)
		if r.Error != "" {
			d.h(`<tr><td colspan="6" class="bad">%s</td></tr>`, r.Error)
		}
	}
	if len(rows) == 0 {
		d.h(`<tr><td colspan="6" class="muted">No cluster links. Create one with strand link create.</td></tr>`)
	}
	d.h("</table>\n")
}

func viewLink(d *doc, r linkRow) {
	d.h("<h1>Link %s</h1>\n", r.Name)
	if r.Error != "" {
		d.h(`<p class="bad" id="link-error">%s</p>`, r.Error)
	}
	d.h(`<div class="cards">`)
	d.card("State", "state", "", r.State)
	d.card("Source", "", "", strings.Join(r.Link.Source.BootstrapServers, ","))
	d.card("Topics", "", "", strings.Join(r.Link.Topics.Include, " "))
	d.card("Lag", "total-lag", "", r.Lag)
	d.card("Stopped", "stopped", string(when(r.Stopped > 0, "bad")), r.Stopped)
	d.h(`</div>
<h2>Mirror partitions</h2>
<table id="mirror-table">
<tr><th>Topic</th><th class="num">Partition</th><th>State</th><th class="num">Source end</th><th class="num">Mirror end</th><th class="num">Lag</th><th class="num">Lag (s)</th><th>Note</th></tr>
`)
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			note := t.Reason
			switch {
			case p.Stopped != "":
				note = p.Stopped
			case p.Error != "":
				note = p.Error
			}
			secs := "-"
			if p.LagSeconds >= 0 {
				secs = fmt.Sprintf("%.1f", p.LagSeconds)
			}
			d.h(`<tr><td><a href="%s">%s</a></td><td class="num">%d</td><td>%s</td><td class="num">%s</td><td class="num">%d</td><td class="num lag">%d</td><td class="num">%s</td><td>%s</td></tr>`+"\n",
				link("topics", t.Topic), t.Topic, p.Partition, t.State, offsetLabel(p.SourceEnd), p.MirrorEnd, p.LagRecords, secs, orDash(note))
		}
	}
	d.h("</table>\n")
}
