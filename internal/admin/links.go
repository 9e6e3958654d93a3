package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/link"
)

// Links is what the admin API does with cluster links (the link manager
// and the metadata behind it).
type Links interface {
	List() []cluster.Link
	Create(ctx context.Context, l cluster.Link) (cluster.Link, error)
	SetPaused(name string, paused bool) error
	Alter(name string, patch []byte) (cluster.Link, error)
	Delete(name string) error
	Status(ctx context.Context, name string) (link.Status, error)
	Promote(ctx context.Context, name string, topics []string, failover bool, timeout time.Duration) (link.PromoteReport, error)
	PromoteGroup(ctx context.Context, name, group string) (link.GroupPromotion, error)
	Lag() []link.PartitionLag
}

// The links API: the routes strand link calls.
//
//	GET    /api/links                   every link (secrets hidden)
//	POST   /api/links                   create one (a cluster.Link in JSON)
//	GET    /api/links/{name}            its status, per mirror partition
//	PATCH  /api/links/{name}            change its settings (JSON of the fields to change)
//	DELETE /api/links/{name}            delete it (no mirror topic left)
//	POST   /api/links/{name}/pause      stop following the source
//	POST   /api/links/{name}/resume     follow it again
//	POST   /api/links/{name}/promote    {"topics": [...], "timeout_ms": n}
//	POST   /api/links/{name}/failover   {"topics": [...]}
//	POST   /api/links/{name}/promote-group {"group": "..."}: a group passed through moves home
func (s *Server) linkRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/links", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"links": s.cfg.Links.List()})
	})
	mux.HandleFunc("POST /api/links", func(w http.ResponseWriter, r *http.Request) {
		var l cluster.Link
		if err := decodeBody(r, &l); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		out, err := s.cfg.Links.Create(r.Context(), l)
		if err != nil {
			writeLinkError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, out)
	})
	mux.HandleFunc("GET /api/links/{name}", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
		defer cancel()
		st, err := s.cfg.Links.Status(ctx, r.PathValue("name"))
		if err != nil {
			writeLinkError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("PATCH /api/links/{name}", func(w http.ResponseWriter, r *http.Request) {
		patch, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		out, err := s.cfg.Links.Alter(r.PathValue("name"), patch)
		if err != nil {
			writeLinkError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("DELETE /api/links/{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := s.cfg.Links.Delete(r.PathValue("name")); err != nil {
			writeLinkError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("name")})
	})
	for _, action := range []string{"pause", "resume"} {
		mux.HandleFunc("POST /api/links/{name}/"+action, func(w http.ResponseWriter, r *http.Request) {
			if err := s.cfg.Links.SetPaused(r.PathValue("name"), action == "pause"); err != nil {
				writeLinkError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, map[string]string{"link": r.PathValue("name"), "state": map[bool]string{true: "paused", false: "active"}[action == "pause"]})
		})
	}
	for _, action := range []string{"promote", "failover"} {
		mux.HandleFunc("POST /api/links/{name}/"+action, func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Topics    []string `json:"topics"`
				TimeoutMs int64    `json:"timeout_ms"`
			}
			if err := decodeBody(r, &body); err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			timeout := 60 * time.Second
			if body.TimeoutMs > 0 {
				timeout = time.Duration(body.TimeoutMs) * time.Millisecond
			}
			rep, err := s.cfg.Links.Promote(r.Context(), r.PathValue("name"), body.Topics, action == "failover", timeout)
			if err != nil {
				writeLinkError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, rep)
		})
	}
	mux.HandleFunc("POST /api/links/{name}/promote-group", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Group string `json:"group"`
		}
		if err := decodeBody(r, &body); err != nil || body.Group == "" {
			writeError(w, http.StatusBadRequest, "the body names no group: {\"group\": \"...\"}")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
		defer cancel()
		rep, err := s.cfg.Links.PromoteGroup(ctx, r.PathValue("name"), body.Group)
		if err != nil {
			writeLinkError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, rep)
	})
}

// decodeBody reads a JSON body; an empty one leaves v as it is.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// writeLinkError answers a link operation's failure with the status it
// calls for.
func writeLinkError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, cluster.ErrUnknownLink):
		status = http.StatusNotFound
	case errors.Is(err, cluster.ErrLinkExists), errors.Is(err, cluster.ErrLinkInUse), errors.Is(err, link.ErrNotCaughtUp),
		errors.Is(err, link.ErrGroupOnSource):
		status = http.StatusConflict
	case errors.Is(err, cluster.ErrInvalidLink), errors.Is(err, link.ErrSourceIsSelf):
		status = http.StatusBadRequest
	}
	writeError(w, status, strings.TrimPrefix(err.Error(), "cluster: "))
}

// linkCollector exports, at each scrape, the mirror partitions this
// broker leads: their lag behind the source.
type linkCollector struct{ links Links }

const eachLeader = " Each broker reports the mirror partitions it leads: scrape every broker."

var (
	linkLagDesc = prometheus.NewDesc("strand_link_lag_records",
		"Records the source partition holds that its mirror does not yet."+eachLeader, []string{"link", "topic", "partition"}, nil)
	linkLagSecondsDesc = prometheus.NewDesc("strand_link_lag_seconds",
		"Seconds since the mirror last held all its source partition had; 0 when caught up."+eachLeader,
		[]string{"link", "topic", "partition"}, nil)
	linkLagBytesDesc = prometheus.NewDesc("strand_link_lag_bytes",
		"Bytes behind the source, estimated from the size of the records mirrored so far."+eachLeader,
		[]string{"link", "topic", "partition"}, nil)
	linkFailingDesc = prometheus.NewDesc("strand_link_partition_failing",
		"1 when the mirror partition's last fetch or append failed, or it stopped."+eachLeader,
		[]string{"link", "topic", "partition"}, nil)
)

func (c linkCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- linkLagDesc
	ch <- linkLagSecondsDesc
	ch <- linkLagBytesDesc
	ch <- linkFailingDesc
}

func (c linkCollector) Collect(ch chan<- prometheus.Metric) {
	for _, pl := range c.links.Lag() {
		labels := []string{pl.Link, pl.Topic, itoa(pl.Partition)}
		ch <- prometheus.MustNewConstMetric(linkLagDesc, prometheus.GaugeValue, float64(pl.LagRecords), labels...)
		ch <- prometheus.MustNewConstMetric(linkLagSecondsDesc, prometheus.GaugeValue, pl.LagSeconds, labels...)
		ch <- prometheus.MustNewConstMetric(linkLagBytesDesc, prometheus.GaugeValue, float64(pl.LagBytes), labels...)
		failing := 0.0
		if pl.Failing || pl.Stopped {
			failing = 1
		}
		ch <- prometheus.MustNewConstMetric(linkFailingDesc, prometheus.GaugeValue, failing, labels...)
	}
}
