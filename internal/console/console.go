package console

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/ledger/reader"
)

//go:embed static
var staticFiles embed.FS

// Config is what the console reads and may do.
type Config struct {
	// Brokers are the cluster's bootstrap brokers (the broker's own
	// client listener), and ClientOpts what its clients need besides
	// (TLS, SASL).
	Brokers    []string
	ClientOpts []kgo.Opt
	// Actions lets the console reset a group's offsets and delete a group.
	Actions bool
	// SampleEvery is how often group lag and topic end offsets are sampled
	// for the charts and rates; 0 is 10 s.
	SampleEvery time.Duration
	// Timeout bounds the reads of one page.
	Timeout time.Duration
	Logger  *slog.Logger
	// Links, when set, shows the cluster links.
	Links Links
}

// Console serves the pages.
type Console struct {
	cfg     Config
	cl      *kgo.Client
	adm     *kadm.Client
	samples *sampler
	mux     *http.ServeMux
}

// New makes a console of the cluster at cfg.Brokers and starts sampling.
func New(cfg Config) (*Console, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("console: no brokers")
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = 10 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// The admin client caches metadata for MetadataMinAge: a page should
	// show a topic made a moment ago.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.MetadataMinAge(250 * time.Millisecond)},
		cfg.ClientOpts...)...)
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, cl: cl, adm: kadm.NewClient(cl)}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		cl.Close()
		return nil, err
	}
	c.mux = http.NewServeMux()
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /{$}", c.overview)
	c.mux.HandleFunc("GET /topics", c.topics)
	c.mux.HandleFunc("GET /topics/{topic}", c.topic)
	c.mux.HandleFunc("GET /topics/{topic}/records", c.records)
	if cfg.Links != nil {
		c.mux.HandleFunc("GET /links", c.links)
		c.mux.HandleFunc("GET /links/{link}", c.linkPage)
	}
	c.mux.HandleFunc("GET /groups", c.groups)
	c.mux.HandleFunc("GET /groups/{group}", c.group)
	c.mux.HandleFunc("GET /groups/{group}/actions", c.groupActions)
	c.mux.HandleFunc("POST /groups/{group}/reset", c.resetGroup)
	c.mux.HandleFunc("POST /groups/{group}/delete", c.deleteGroup)
	c.samples = startSampler(c.adm, cfg.SampleEvery, cfg.Timeout, cfg.Logger)
	return c, nil
}

// ServeHTTP serves the console's pages.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

// Close stops sampling and the console's client.
func (c *Console) Close() {
	c.samples.stop()
	c.cl.Close()
}

// readLedger is group's hand-offs and commits from the ledger; none when
// the cluster has no ledger (another Kafka, or the ledger off).
func (c *Console) readLedger(ctx context.Context, group string) []ledger.Entry {
	es, err := reader.Read(ctx, c.cfg.Brokers, group, time.Time{}, c.cfg.ClientOpts...)
	if err != nil {
		c.cfg.Logger.Debug("console: reading the hand-off ledger", "group", group, "err", err)
		return nil
	}
	return es
}
