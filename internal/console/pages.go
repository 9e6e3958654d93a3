package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/ledger"
)

func (c *Console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.cfg.Timeout)
}

type overviewData struct {
	Cluster inspect.Cluster
	Health  inspect.Health
	Topics  int
	Groups  int
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	cl, err := inspect.ReadCluster(ctx, c.cl)
	if err != nil {
		c.fail(w, http.StatusBadGateway, err)
		return
	}
	h, err := inspect.ReadHealth(ctx, c.cl)
	if err != nil {
		c.fail(w, http.StatusBadGateway, err)
		return
	}
	d := overviewData{Cluster: cl, Health: h}
	if ts, err := c.adm.ListTopics(ctx); err == nil {
		d.Topics = len(ts)
	}
	if gs, err := inspect.ListGroups(ctx, c.adm); err == nil {
		d.Groups = len(gs)
	}
	c.write(w, "Overview", "overview", func(doc *doc) { viewOverview(doc, d) })
}

type topicRow struct {
	inspect.Topic
	Rate    float64
	HasRate bool
	Records int64
}

func (c *Console) topics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	internal := r.URL.Query().Get("internal") != ""
	var tds kadm.TopicDetails
	var err error
	if internal {
		tds, err = c.adm.ListTopicsWithInternal(ctx)
	} else {
		tds, err = c.adm.ListTopics(ctx)
	}
	if err != nil {
		c.fail(w, http.StatusBadGateway, err)
		return
	}
	names := tds.Names()
	slices.Sort(names)
	var rows []topicRow
	if len(names) > 0 {
		ds, err := inspect.DescribeTopics(ctx, c.adm, names, false)
		if err != nil {
			c.fail(w, http.StatusBadGateway, err)
			return
		}
		for _, d := range ds {
			rows = append(rows, c.topicRow(d))
		}
	}
	c.write(w, "Topics", "topics", func(d *doc) { viewTopics(d, rows, internal) })
}

func (c *Console) topic(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	name := r.PathValue("topic")
	ds, err := inspect.DescribeTopics(ctx, c.adm, []string{name}, false)
	if err != nil {
		c.fail(w, http.StatusNotFound, err)
		return
	}
	row := c.topicRow(ds[0])
	c.write(w, "Topic "+name, "topics", func(d *doc) { viewTopic(d, row) })
}

// topicRow adds to a topic its records (from each partition's start to
// its end) and its rate.
func (c *Console) topicRow(d inspect.Topic) topicRow {
	row := topicRow{Topic: d}
	row.Rate, row.HasRate = c.samples.rate(d.Topic)
	for _, p := range d.Partitions {
		if p.End >= 0 && p.Start >= 0 {
			row.Records += p.End - p.Start
		}
	}
	return row
}

type groupRow struct {
	inspect.ListedGroup
	Members  int
	Lag      int64
	Protocol string
	Err      string
}

func (c *Console) groups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	gs, err := inspect.ListGroups(ctx, c.adm)
	if err != nil {
		c.fail(w, http.StatusBadGateway, err)
		return
	}
	var rows []groupRow
	for _, lg := range gs {
		row := groupRow{ListedGroup: lg}
		if g, err := inspect.ReadGroup(ctx, c.adm, lg.Group); err != nil {
			row.Err = err.Error()
		} else {
			row.Members, row.Lag, row.Protocol = len(g.Members), g.TotalLag, g.Protocol
		}
		rows = append(rows, row)
	}
	c.write(w, "Groups", "groups", func(d *doc) { viewGroups(d, rows) })
}

type groupPage struct {
	inspect.Group
	Owners    map[string]string // member id to client id
	Chart     Chart
	Report    ledger.Report
	HasLedger bool
	Message   string
}

func (c *Console) group(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	id := r.PathValue("group")
	g, err := inspect.ReadGroup(ctx, c.adm, id)
	if err != nil {
		c.fail(w, http.StatusBadGateway, err)
		return
	}
	if !g.Exists() {
		c.fail(w, http.StatusNotFound, fmt.Errorf("group %s: not found", id))
		return
	}
	es := c.readLedger(ctx, id)
	g.AddLedger(es, time.Now())
	d := groupPage{Group: g, Owners: map[string]string{}, Chart: lagChart(c.samples.lagOf(id)), Report: ledger.NewReport(id, es),
		HasLedger: es != nil, Message: r.URL.Query().Get("done")}
	for _, m := range g.Members {
		d.Owners[m.MemberID] = m.ClientID
	}
	c.write(w, "Group "+id, "groups", func(doc *doc) { viewGroup(doc, d, c.cfg.Actions) })
}
