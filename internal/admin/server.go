package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/model"
)

// Config is what the listener serves.
type Config struct {
	Listen string // host:port
	// Groups are the groups this broker coordinates: the API reads them
	// from the coordinator itself, /metrics exports only them.
	Groups Groups
	// Cluster, when set, reads the groups other brokers coordinate, so
	// that the API answers for every group of the cluster.
	Cluster    ClusterGroups
	Partitions Partitions
	Ledger     Ledger // nil without the hand-off ledger
	Links      Links  // the cluster links' API; nil for none
	Health     Health
	// Connections, when set, exports the open connections and fetch
	// sessions.
	Connections Connections
	// Replicas, when set, exports each local replica's offsets and size.
	Replicas LocalReplicas
	// Telemetry, when set, exports what clients pushed (KIP-714).
	Telemetry ClientTelemetry
	// Shares, when set, exports the share groups' members and their
	// share-partitions' lag and in-flight records.
	Shares  Shares
	Metrics *Metrics
	// Console, when set, serves every path the API and /metrics do not.
	Console http.Handler
	Logger  *slog.Logger
	// Timeout bounds the work of one request (asking other brokers,
	// reading the ledger).
	Timeout time.Duration
}

// Server is the admin HTTP listener.
type Server struct {
	cfg  Config
	ln   net.Listener
	http *http.Server
	done chan struct{}
}

// Start listens on cfg.Listen and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	s := &Server{cfg: cfg, ln: ln, done: make(chan struct{})}
	cfg.Metrics.reg.MustRegister(groupCollector{groups: cfg.Groups, parts: cfg.Partitions, timeout: cfg.Timeout})
	if cfg.Shares != nil {
		cfg.Metrics.reg.MustRegister(shareCollector{cfg.Shares})
	}
	if cfg.Health != nil {
		cfg.Metrics.reg.MustRegister(healthCollector{health: cfg.Health})
	}
	if cfg.Connections != nil {
		cfg.Metrics.reg.MustRegister(connectionsCollector{conns: cfg.Connections})
	}
	if cfg.Replicas != nil {
		cfg.Metrics.reg.MustRegister(replicasCollector{replicas: cfg.Replicas})
	}
	if cfg.Telemetry != nil {
		cfg.Metrics.reg.MustRegister(telemetryCollector{clients: cfg.Telemetry})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/health", s.health)
	mux.HandleFunc("GET /api/groups", s.groups)
	mux.HandleFunc("GET /api/groups/{group}", s.group)
	mux.HandleFunc("GET /api/handoffs", s.handoffs)
	if cfg.Links != nil {
		s.linkRoutes(mux)
		cfg.Metrics.reg.MustRegister(linkCollector{links: cfg.Links})
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Metrics.reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}))
	if cfg.Console != nil {
		mux.Handle("/", cfg.Console)
	}
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug)}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error("admin listener stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is where the listener listens.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the listener, letting requests in progress finish until
// ctx ends.
func (s *Server) Close(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.http.Close()
	}
	<-s.done
	return err
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.Health.Health())
}

// groupSummary is one group of /api/groups.
type groupSummary struct {
	Group      string `json:"group"`
	Type       string `json:"type"`
	State      string `json:"state"`
	Protocol   string `json:"protocol"`
	Generation int32  `json:"generation"`
	Members    int    `json:"members"`
	Lag        int64  `json:"lag"`
	// Error says why the group could not be read (its coordinator did
	// not answer); its figures are then -1.
	Error string `json:"error,omitempty"`
}

func (s *Server) groups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	ids, err := s.groupIDs(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("listing the cluster's groups: %v", err))
		return
	}
	now := time.Now()
	out := []groupSummary{}
	for _, id := range ids {
		v, ok, _, err := s.view(ctx, id)
		switch {
		case err != nil:
			out = append(out, groupSummary{Group: id, Generation: -1, Members: -1, Lag: -1, Error: err.Error()})
		case ok: // a group deleted since it was listed is left out
			out = append(out, groupSummary{Group: v.Group, Type: v.Type, State: v.State, Protocol: v.Protocol,
				Generation: v.Generation, Members: len(v.Members), Lag: totalLag(lagOf(ctx, s.cfg.Partitions, v, now))})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out})
}

// groupIDs is every group of the cluster; without Cluster, those this
// broker coordinates.
func (s *Server) groupIDs(ctx context.Context) ([]string, error) {
	if s.cfg.Cluster != nil {
		return s.cfg.Cluster.List(ctx)
	}
	var ids []string
	for _, v := range s.cfg.Groups.Views() {
		ids = append(ids, v.Group)
	}
	return ids, nil
}

// view is group as this broker holds it when it coordinates it (local),
// else as its coordinator answers for it; false when there is no such
// group.
func (s *Server) view(ctx context.Context, id string) (v group.View, ok, local bool, err error) {
	if v, ok := s.cfg.Groups.View(id); ok {
		return v, true, true, nil
	}
	if s.cfg.Cluster == nil {
		return group.View{}, false, false, nil
	}
	v, ok, err = s.cfg.Cluster.Read(ctx, id)
	return v, ok, false, err
}

// groupDetail is /api/groups/{group}.
type groupDetail struct {
	Group        string         `json:"group"`
	Type         string         `json:"type"`
	State        string         `json:"state"`
	ProtocolType string         `json:"protocol_type"`
	Protocol     string         `json:"protocol"`
	Generation   int32          `json:"generation"`
	Members      []memberDetail `json:"members"`
	Partitions   []PartitionLag `json:"partitions"`
	Lag          int64          `json:"lag"`
}

type memberDetail struct {
	MemberID        string          `json:"member_id"`
	InstanceID      string          `json:"instance_id,omitempty"`
	ClientID        string          `json:"client_id"`
	ClientHost      string          `json:"client_host"`
	SoftwareName    string          `json:"software_name,omitempty"`
	SoftwareVersion string          `json:"software_version,omitempty"`
	Protocol        string          `json:"protocol"`
	Assignment      []topicAssigned `json:"assignment"`
}

type topicAssigned struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

func (s *Server) group(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("group")
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	v, ok, local, err := s.view(ctx, id)
	switch {
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("reading group %q from its coordinator: %v", id, err))
		return
	case !ok:
		writeError(w, http.StatusNotFound, fmt.Sprintf("group %q not found", id))
		return
	case !local:
		s.addSoftware(ctx, &v)
	}
	d := groupDetail{Group: v.Group, Type: v.Type, State: v.State, ProtocolType: v.ProtocolType, Protocol: v.Protocol,
		Generation: v.Generation, Members: []memberDetail{}, Partitions: lagOf(ctx, s.cfg.Partitions, v, time.Now())}
	d.Lag = totalLag(d.Partitions)
	for _, m := range v.Members {
		d.Members = append(d.Members, memberDetail{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID,
			ClientHost: m.ClientHost, SoftwareName: m.SoftwareName, SoftwareVersion: m.SoftwareVersion, Protocol: m.Protocol,
			Assignment: byTopic(m.Assignment)})
	}
	writeJSON(w, http.StatusOK, d)
}

// addSoftware gives the members of a group read from its coordinator the
// client software the hand-off ledger recorded for them (the coordinator
// learned it from their ApiVersions, which the Kafka protocol does not
// pass on).
func (s *Server) addSoftware(ctx context.Context, v *group.View) {
	if s.cfg.Ledger == nil {
		return
	}
	entries, err := s.cfg.Ledger.Read(ctx, v.Group, time.Time{})
	if err != nil {
		s.cfg.Logger.Debug("reading the hand-off ledger for the members' software", "group", v.Group, "err", err)
		return
	}
	software := map[string]group.Owner{}
	for _, e := range entries {
		if e.Type == ledger.TypeHandoff && e.To.SoftwareName != "" {
			software[e.To.MemberID] = group.Owner{SoftwareName: e.To.SoftwareName, SoftwareVersion: e.To.SoftwareVersion}
		}
	}
	for i, m := range v.Members {
		if o, ok := software[m.MemberID]; ok {
			v.Members[i].SoftwareName, v.Members[i].SoftwareVersion = o.SoftwareName, o.SoftwareVersion
		}
	}
}

// byTopic groups sorted partitions by topic.
func byTopic(tps []model.TopicPartition) []topicAssigned {
	out := []topicAssigned{}
	for _, tp := range tps {
		if len(out) == 0 || out[len(out)-1].Topic != tp.Topic {
			out = append(out, topicAssigned{Topic: tp.Topic})
		}
		last := &out[len(out)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return out
}

// handoffs serves the ledger as `strand migrate report --format json`
// prints it, filtered by group, since (RFC 3339 or a duration back from
// now) and risk (duplicate, skipped, rewound or any).
func (s *Server) handoffs(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ledger == nil {
		writeError(w, http.StatusNotFound, "the hand-off ledger is off (group.handoff.ledger.enable)")
		return
	}
	q := r.URL.Query()
	since, err := ledger.ParseSince(q.Get("since"), time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	risk := q.Get("risk")
	if risk != "" && !slices.Contains(ledger.Risks, risk) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("risk %q: one of %v", risk, ledger.Risks))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	entries, err := s.cfg.Ledger.Read(ctx, q.Get("group"), since)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	entries = slices.DeleteFunc(entries, func(e ledger.Entry) bool { return !e.Risky(risk) })
	writeJSON(w, http.StatusOK, ledger.NewReport(q.Get("group"), entries))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

var _ group.Watcher = (*Metrics)(nil)
