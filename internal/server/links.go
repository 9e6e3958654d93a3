package server

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/link"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/protocol"
)

// newLinks makes the cluster links' manager: mirror topics change through
// linkMirrors, and its reads of this cluster's offsets go through the
// broker's own listener, as a client's would.
func (s *Server) newLinks(logger *slog.Logger) *link.Manager {
	s.linkLocal = &lazyClient{make: func() (*kgo.Client, error) {
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.selfAddr()), kgo.ClientID(link.LocalClientID)},
			s.selfClientOpts()...)...)
	}}
	cfg := link.Config{Self: s.cfg.NodeID, Store: s.cluster, Mirrors: linkMirrors{defaultReplicationFactor: s.cfg.DefaultReplicationFactor, metadata: s.cluster, topics: s.topics}, Local: s.linkLocal.get,
		Logger: logger, MetadataInterval: s.cfg.LinkMetadataInterval, DisconnectGrace: s.cfg.GroupMemberDisconnectGrace,
		DisconnectGraceStatic: s.cfg.GroupMemberDisconnectGraceStatic}
	if s.ledger != nil {
		cfg.Ledger = s.ledger.Record
	}
	return link.New(cfg)
}

// protocolLinks is the links as the protocol asks them (protocol.Links).
type protocolLinks struct{ m *link.Manager }

// PassesThrough: the links' own client of this cluster reads and commits
// the groups' offsets here.
func (l protocolLinks) PassesThrough(group, clientID string) bool {
	return clientID != link.LocalClientID && l.m.PassesThrough(group)
}

func (l protocolLinks) ForwardGroup(ctx context.Context, gr protocol.GroupRequest) (kmsg.Response, error) {
	return l.m.ForwardGroup(ctx, link.GroupRequest(gr))
}

func (l protocolLinks) SourceHighWatermark(tp model.TopicPartition) (int64, bool) {
	return l.m.SourceHighWatermark(tp)
}

// closeLinks stops the links' work and their client of this cluster.
func (s *Server) closeLinks() {
	if s.links != nil {
		s.links.Close()
	}
	if s.linkLocal != nil {
		s.linkLocal.close()
	}
}

// lazyClient is a client made on first use, closed once.
type lazyClient struct {
	make func() (*kgo.Client, error)
	mu   lockrank.Mutex[lockrank.Leaf]
	cl   *kgo.Client
}

func (c *lazyClient) get() (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl == nil {
		cl, err := c.make()
		if err != nil {
			return nil, err
		}
		c.cl = cl
	}
	return c.cl, nil
}

func (c *lazyClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl != nil {
		c.cl.Close()
		c.cl = nil
	}
}

// linkMirrors creates and changes mirror topics for the links, with the
// configs this broker supports. It does not reconcile: the reconciler
// follows every metadata change (Store.Changes), and it stops links' work
// while it runs, which must never wait for that work.
type linkMirrors struct {
	defaultReplicationFactor int16
	metadata                 *cluster.Store
	topics                   *topicAdmin
}

// supported keeps the source's topic configs that Strand has and takes:
// a source may set configs of a newer or another Kafka.
func (a linkMirrors) supported(configs map[string]string) map[string]string {
	out := map[string]string{}
	defaults := a.topics.defaults()
	for k, v := range configs {
		if _, err := config.TopicConfig(defaults, map[string]string{k: v}); err == nil {
			out[k] = v
		}
	}
	return out
}

func (a linkMirrors) CreateMirror(name string, id cluster.TopicID, partitions int32, linkName string, configs map[string]string) error {
	factor := max(1, min(a.defaultReplicationFactor, int16(a.metadata.LiveBrokers())))
	spec := cluster.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: factor, Configs: a.supported(configs), ID: id,
		Mirror: &cluster.TopicMirror{Link: linkName, State: cluster.MirrorActive}}
	a.topics.mu.Lock()
	defer a.topics.mu.Unlock()
	_, err := a.metadata.CreateTopic(spec)
	return err
}

func (a linkMirrors) GrowMirror(name string, partitions int32) error {
	a.topics.mu.Lock()
	defer a.topics.mu.Unlock()
	return a.metadata.SetPartitions(name, partitions, nil)
}

func (a linkMirrors) SetMirrorConfigs(name string, configs map[string]string) error {
	want := a.supported(configs)
	t, ok := a.metadata.Topic(name)
	if !ok {
		return fmt.Errorf("%w: %s", cluster.ErrUnknownTopic, name)
	}
	if maps.Equal(t.Configs, want) {
		return nil
	}
	a.topics.mu.Lock()
	defer a.topics.mu.Unlock()
	return a.metadata.SetTopicConfigs(name, want)
}

// adminLinks is the admin API's view of the links.
type adminLinks struct {
	links    *link.Manager
	metadata *cluster.Store
	logger   *slog.Logger
}

func (s *Server) adminLinks() adminLinks {
	return adminLinks{links: s.links, metadata: s.cluster, logger: s.logger}
}

func (a adminLinks) List() []cluster.Link { return a.links.List() }

func (a adminLinks) Create(ctx context.Context, l cluster.Link) (cluster.Link, error) {
	out, err := a.links.Create(ctx, a.metadata, l)
	if err == nil {
		a.logger.Info("cluster link created", "link", l.Name, "source", strings.Join(l.Source.BootstrapServers, ","))
	}
	return out, err
}

func (a adminLinks) SetPaused(name string, paused bool) error {
	return a.links.SetPaused(a.metadata, name, paused)
}

func (a adminLinks) Lag() []link.PartitionLag { return a.links.Lag() }

func (a adminLinks) Alter(name string, patch []byte) (cluster.Link, error) {
	l, err := a.links.Alter(a.metadata, name, patch)
	if err == nil {
		a.logger.Info("cluster link altered", "link", name)
	}
	return l, err
}

func (a adminLinks) Delete(name string) error { return a.metadata.DeleteLink(name) }

func (a adminLinks) Status(ctx context.Context, name string) (link.Status, error) {
	return a.links.Status(ctx, name)
}

func (a adminLinks) Promote(ctx context.Context, name string, topics []string, failover bool, timeout time.Duration) (link.PromoteReport, error) {
	return a.links.Promote(ctx, name, topics, failover, timeout)
}

func (a adminLinks) PromoteGroup(ctx context.Context, name, group string) (link.GroupPromotion, error) {
	return a.links.PromoteGroup(ctx, a.metadata, name, group)
}

// fetchObservers tells each observer of consumers' fetches.
type fetchObservers []group.FetchObserver

func (os fetchObservers) Fetched(clientAddr, clientID string, arrived, answered time.Time, reports []group.FetchReport) {
	for _, o := range os {
		o.Fetched(clientAddr, clientID, arrived, answered, reports)
	}
}
