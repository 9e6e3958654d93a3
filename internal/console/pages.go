package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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
	c.writeLive(w, "Overview", "overview", refreshOf(r.URL.Query()), func(doc *doc) { viewOverview(doc, d) })
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
	c.writeLive(w, "Topics", "topics", refreshOf(r.URL.Query()), func(d *doc) { viewTopics(d, rows, internal) })
}

func (c *Console) topic(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	name := r.PathValue("topic")
	ds, err := inspect.DescribeTopics(ctx, c.adm, []string{name}, true)
	if err != nil {
		c.fail(w, http.StatusNotFound, err)
		return
	}
	page := topicPage{topicRow: c.topicRow(ds[0]), Configs: topicConfigs(ds[0])}
	ends := map[int32]int64{}
	for _, p := range ds[0].Partitions {
		ends[p.Partition] = p.End
	}
	page.Groups = c.topicGroups(ctx, name, ends)
	c.writeLive(w, "Topic "+name, "topics", refreshOf(r.URL.Query()), func(d *doc) { viewTopic(d, page) })
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

// topicPage is a topic with the groups that read it and its configs.
type topicPage struct {
	topicRow
	Groups  []topicGroup
	Configs []topicConfig
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
	c.writeLive(w, "Groups", "groups", refreshOf(r.URL.Query()), func(d *doc) { viewGroups(d, rows) })
}

type groupPage struct {
	inspect.Group
	Owners     map[string]string // member id to client id and version
	Versions   []versionRow
	LagSeconds map[inspect.Partition]float64
	Chart      Chart
	Report     ledger.Report
	HasLedger  bool
	Message    string
	View       groupView
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
	view := parseGroupView(r.URL.Query())
	d := groupPage{Group: g, Owners: map[string]string{}, Report: ledger.NewReport(id, es), HasLedger: es != nil,
		Message: r.URL.Query().Get("done"), View: view, LagSeconds: inspect.LagSeconds(ctx, g, append([]kgo.Opt{kgo.SeedBrokers(c.cfg.Brokers...)}, c.cfg.ClientOpts...)...)}
	d.Versions = versions(g, d.LagSeconds)
	var byVersion map[inspect.Partition]string
	if view.By == "version" {
		byVersion = map[inspect.Partition]string{}
	}
	for _, m := range g.Members {
		d.Owners[m.MemberID] = m.ClientID + " · " + versionOf(m)
		for _, p := range m.Owned {
			if byVersion != nil {
				byVersion[inspect.Partition{Topic: p.Topic, Partition: p.Partition}] = versionOf(m)
			}
		}
	}
	d.Chart = lagChart(c.samples.lagOf(id), chartMarks(d.Report), byVersion)
	refresh := view.Refresh
	if d.Message != "" {
		refresh = 0 // the result of an action stays on screen
	}
	c.writeLive(w, "Group "+id, "groups", refresh, func(doc *doc) { viewGroup(doc, d, c.cfg.Actions) })
}
