package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/internal/admin"
	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/console"
	"github.com/strandlog/strand/internal/dirlock"
	"github.com/strandlog/strand/internal/fetcher"
	"github.com/strandlog/strand/internal/fetchpos"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/link"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/logging"
	"github.com/strandlog/strand/internal/oauth"
	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/quota"
	"github.com/strandlog/strand/internal/replica"
	"github.com/strandlog/strand/internal/share"
	"github.com/strandlog/strand/internal/telemetry"
	"github.com/strandlog/strand/internal/txn"
)

// Server is one broker.
type Server struct {
	cfg    config.Broker
	logger *slog.Logger

	cluster *cluster.Store
	rec     *reconciler
	peers   *peer.Client
	// statePeers reads and writes the share-group state kept on other
	// brokers, once an acknowledgement: its own connections, so that it
	// neither waits behind peers' requests nor holds them up.
	statePeers *peer.Client
	fetcher    *fetcher.Fetcher
	// links mirrors other clusters (cluster links); linkLocal is its
	// client of this cluster.
	links     *link.Manager
	linkLocal *lazyClient
	// brokerEpoch is this process's registration epoch, which its
	// follower fetches carry.
	brokerEpoch atomic.Int64
	// The replication throttle rates (bytes a second) in force, as the
	// dynamic broker configs set them; reconcile updates them.
	leaderRate, followerRate atomic.Int64
	logs                     *log.Manager
	replicas                 *replica.Manager
	topics                   *topicAdmin
	groups                   *group.Coordinator
	ledger                   *ledger.Writer // nil without the hand-off ledger
	// In a cluster with the ledger: this broker's consumers' reads go to
	// the other coordinators, and theirs come here (internal/fetchpos).
	positions         *fetchPositionsTopic
	positionPublisher *fetchpos.Publisher
	positionFollower  *fetchpos.Follower
	txns              *txn.Coordinator
	broker            *protocol.Broker
	metrics           *admin.Metrics // nil without the admin listener
	admin             *admin.Server
	adminClient       *kgo.Client // the admin API's client of the cluster, through this broker's listener
	console           *console.Console
	warnings          *warnLimiter     // of the warnings about clients' requests
	connsPerIP        map[string]int   // open connections by client host, under mu
	connsPerListener  map[string]int   // open connections by listener name, under mu
	connOverrides     map[string]int32 // max.connections.per.ip.overrides
	requestBytes      *byteBudget      // queued.max.request.bytes
	certs             *certReloader    // the TLS listeners' certificate
	serverTLS         *tls.Config      // the TLS listeners' configuration
	peerOpts          peer.Options     // how peers' inter-broker listeners are spoken to
	self              *selfIdentity    // the broker's own clients' SASL user
	oauth             *oauth.Config    // how OAUTHBEARER tokens are validated; nil without
	loggers           *logging.Levels  // each component's log level

	// dirLocks hold the data directory (and the metadata quorum's) from
	// the start of New to the end of Shutdown (datadir.go).
	dirLocks []*dirlock.Lock

	listeners  []*listener // in the order of cfg.Listeners
	goroutines sync.WaitGroup
	cancel     context.CancelFunc
	ctx        context.Context

	mu    lockrank.Mutex[lockrank.Subsystem]
	conns map[net.Conn]struct{}

	failed chan error // the first error the broker cannot serve past

	shutdownOnce sync.Once
	shutdownErr  error
}

// Failed yields an error when the broker cannot go on (it belongs to
// another cluster): the binary then shuts it down and exits.
func (s *Server) Failed() <-chan error { return s.failed }

func (s *Server) fail(err error) {
	select {
	case s.failed <- err:
	default:
	}
}

// New opens the data directory, recovers every partition and readies the
// broker; Start begins serving. It first takes the data directory's lock
// (and the metadata quorum's directory's, as a quorum member), so a second
// broker on the same directory fails before reading anything; when New
// fails it has closed everything it opened and released the locks.
func New(cfg config.Broker, logger *slog.Logger) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	connOverrides, _ := cfg.ConnectionOverrides() // Validate read them
	if logger == nil {
		logger = slog.Default()
	}
	// Each component's logger gets a level of its own (BROKER_LOGGER).
	logger, loggers := logging.Wrap(logger)
	s := &Server{loggers: loggers, cfg: cfg, logger: logger.With("component", "server"), conns: map[net.Conn]struct{}{}, warnings: newWarnLimiter(time.Now),
		connsPerIP: map[string]int{}, connOverrides: connOverrides, requestBytes: newByteBudget(cfg.QueuedMaxRequestBytes),
		rec: newReconciler(), failed: make(chan error, 1)}
	if s.dirLocks, err = lockDataDir(cfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.closeOpened())
		}
	}()
	if err := s.initSecurity(); err != nil {
		return nil, err
	}
	quorumTLS, dialTLS, err := s.quorumTLS()
	if err != nil {
		return nil, err
	}
	if s.cluster, err = openMetadata(cfg, quorumTLS, dialTLS, logger); err != nil {
		return nil, err
	}
	s.logs, err = log.NewManager(cfg.DataDir, log.ManagerOptions{Logger: logger, RetentionCheck: cfg.RetentionCheck})
	if err != nil {
		return nil, err
	}
	s.replicas = replica.NewManagerWith(s.logs, replica.Options{Logger: logger})
	s.brokerEpoch.Store(-1)
	s.leaderRate.Store(cfg.LeaderThrottleRate)
	s.followerRate.Store(cfg.FollowerThrottleRate)
	s.fetcher = fetcher.New(fetcher.Config{Self: cfg.NodeID, BrokerEpoch: s.brokerEpoch.Load,
		Client: s.newPeerClient(), Throttle: replica.NewThrottle(s.followerRate.Load), Logger: logger})
	s.topics = &topicAdmin{s: s}
	// The ledger and the fetch positions write through their partitions'
	// leaders; transaction markers and remote coordinators ask them too.
	s.peers = s.newPeerClient()
	s.statePeers = s.newPeerClient()
	if cfg.HandoffLedger {
		// Before the links, which record the commits they copy in it.
		s.ledger = ledger.NewWriter(s.ledgerTopic(), logger)
	}
	s.links = s.newLinks(logger)
	if err := s.openPartitions(); err != nil {
		return nil, err
	}
	// The coordinator replays __consumer_offsets before the broker serves.
	// The hand-off ledger (with it, consumers' fetches are observed).
	var observer group.FetchObserver
	gcfg := groupConfig(cfg, logger, clusterTopics{metadata: s.cluster})
	gcfg.GroupTimings = s.groupTimings
	if cfg.AdminListen != "" {
		s.metrics = admin.NewMetrics()
		gcfg.Watch = s.metrics
	}
	if cfg.HandoffLedger {
		gcfg.Ledger = handoffLedger{s.ledger}
		if s.clustered() {
			gcfg.FetchReportDelay = fetchPositionsReportDelay
		}
	}
	// The share groups are kept in __consumer_offsets too: they load and
	// unload with its partitions.
	shares := newShares(cfg, s.cluster, &shareState{topic: s.coordinatorTopic(share.StateTopic, shareStateConfigs,
		cfg.ShareStateTopicReplicationFactor), partitions: cfg.ShareStateTopicPartitions, store: share.NewStore(),
		peers: s.statePeers, self: cfg.NodeID}, logger)
	gcfg.Others = shares.Groups
	s.groups = group.New(gcfg, s.coordinatorTopic(group.OffsetsTopic, offsetsTopicConfigs, cfg.OffsetsTopicReplicationFactor))
	shares.Persist = s.groups.WriteOther
	if cfg.HandoffLedger {
		observer = s.groups
		if s.clustered() {
			s.positions = &fetchPositionsTopic{self: cfg.NodeID, replicationFactor: cfg.OffsetsTopicReplicationFactor,
				metadata: s.cluster, topics: s.topics, replicas: s.replicas, newClient: s.newPeerClient, peers: s.peers}
			s.positionPublisher = fetchpos.NewPublisher(s.groups, s.positions, cfg.NodeID, fetchPositionsInterval, logger)
			observer = s.positionPublisher
		}
	}
	if observer != nil {
		// The links see their passed-through members' fetches too.
		observer = fetchObservers{observer, s.links}
	}
	if err := s.groups.Load(); err != nil {
		return nil, err
	}
	s.broker = &protocol.Broker{Config: cfg, Cluster: s.cluster, Replicas: protocolReplicas{s.replicas}, Topics: s.topics,
		Groups: s.groups, FetchObserver: observer, Peers: s.peers, LeaderThrottle: replica.NewThrottle(s.leaderRate.Load),
		Links: protocolLinks{s.links}, Logger: logger.With("component", "protocol")}
	if s.metrics != nil {
		s.broker.Meter = s.metrics
	}
	s.broker.Loggers = s.loggers
	s.broker.Shares = shares
	s.broker.Telemetry = telemetry.New(telemetry.Config{MaxBytes: int(cfg.TelemetryMaxBytes), Decompress: decompressTelemetry})
	s.broker.Quotas = quota.New(s.cluster, quota.Config{Samples: int(cfg.QuotaWindowNum), Window: cfg.QuotaWindowSize})
	// Then the __transaction_state partitions led here; transactions that
	// were deciding when the broker stopped get their markers (written
	// through the broker, or sent to the partitions' leaders) once their
	// partition is loaded.
	s.txns = s.newTxnCoordinator(logger)
	s.broker.Txns = s.txns
	if err := s.txns.Load(); err != nil {
		return nil, err
	}
	return s, nil
}

// closeOpened closes what New opened, in the reverse order, each part
// once and only if it was opened, and releases the directory locks last:
// the end of Shutdown, and of a New that failed part way.
func (s *Server) closeOpened() error {
	// Transactions first: completing one writes markers, which the group
	// coordinator applies to its offsets.
	if s.txns != nil {
		s.txns.Close()
	}
	if s.groups != nil {
		s.groups.Close()
	}
	s.closeLedger() // its last entries, while the replicas still serve
	s.closeLinks()
	if s.fetcher != nil {
		s.fetcher.Close()
	}
	// Producer-state snapshots first, so the next start need not rebuild
	// them from the log.
	var errs []error
	if s.peers != nil {
		errs = append(errs, s.peers.Close())
	}
	if s.statePeers != nil {
		errs = append(errs, s.statePeers.Close())
	}
	if s.replicas != nil {
		errs = append(errs, s.replicas.Close())
	}
	if s.logs != nil {
		errs = append(errs, s.logs.Close())
	}
	if s.cluster != nil {
		errs = append(errs, s.cluster.Close())
	}
	for _, l := range slices.Backward(s.dirLocks) {
		errs = append(errs, l.Release())
	}
	s.dirLocks = nil
	return errors.Join(errs...)
}

func (s *Server) closeLedger() {
	if s.positionPublisher != nil {
		s.positionPublisher.Close()
		s.positionPublisher = nil
	}
	if s.positionFollower != nil {
		s.positionFollower.Close()
		s.positionFollower = nil
	}
	if s.positions != nil {
		s.positions.close()
	}
	if s.ledger != nil {
		s.ledger.Close()
	}
}

// resolvePeer is a broker's client listener, as registered.
func (s *Server) resolvePeer(node int32) (string, bool) {
	b, ok := s.cluster.Broker(node)
	return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), ok && b.Port > 0
}

// openPartitions serves every partition the metadata places here, and
// removes the data of topics whose deletion a crash interrupted.
func (s *Server) openPartitions() error {
	if _, err := config.ApplyDynamic(s.cfg, s.cluster.BrokerConfigs(), s.cluster.NodeConfigs(s.cfg.NodeID)); err != nil {
		return fmt.Errorf("dynamic broker configs: %w", err)
	}
	if s.clustered() {
		// Removals wait for the image to catch up (see reconciler).
		return s.reconcile()
	}
	s.rec.caughtUp.Store(true)
	if err := s.reconcile(); err != nil {
		return err
	}
	return s.removeOrphans()
}

// Start listens and serves until Shutdown.
func (s *Server) Start() error {
	if err := s.listen(); err != nil {
		return err
	}
	host, port, endpoints := s.endpoints()
	if !s.clustered() {
		if err := s.ensureInterBrokerUser(); err != nil {
			s.closeListeners()
			return err
		}
		if b, ok := s.cluster.Broker(s.cfg.NodeID); !ok || b.Host != host || b.Port != port || !slices.Equal(b.Endpoints, endpoints) {
			if _, err := s.cluster.RegisterBroker(host, port, s.cfg.Rack, true, endpoints...); err != nil {
				s.closeListeners()
				return fmt.Errorf("registering broker %d: %w", s.cfg.NodeID, err)
			}
		}
	}
	if err := s.startAdmin(); err != nil {
		s.closeListeners()
		return err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.goroutines.Go(s.followMetadata)
	if s.clustered() {
		s.goroutines.Go(s.maintainInSyncSets)
		s.goroutines.Go(s.watchQuorumContact)
	}
	if s.positions != nil {
		s.positionFollower = fetchpos.NewFollower(s.positions, s.cfg.NodeID, s.groups.FetchedElsewhere, s.logger)
	}
	if !s.clustered() {
		s.acceptAll()
		return nil
	}
	// A cluster member takes clients once it has caught up with the
	// metadata log (its registration applied): before, its image may name
	// it leader of what has moved on. Connections wait in the backlog
	// meanwhile, as Kafka's broker keeps its listener closed until then.
	s.goroutines.Go(func() {
		if s.register(host, port, endpoints) {
			s.acceptAll()
		}
	})
	return nil
}

// Groups is the group coordinator (for tests and, later, the admin API:
// rebalance history).
func (s *Server) Groups() *group.Coordinator { return s.groups }

// FetchSessions describes the fetch sessions this broker holds for its
// clients and followers.
func (s *Server) FetchSessions() []protocol.FetchSessionStatus { return s.broker.FetchSessions() }

// Connections counts the open client connections by listener name, every
// listener named.
func (s *Server) Connections() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, l := range s.listeners {
		out[l.cfg.Name] = s.connsPerListener[l.cfg.Name]
	}
	return out
}

// Metadata is this broker's view of the cluster metadata.
func (s *Server) Metadata() *cluster.Store { return s.cluster }

// Addr is the address the first listener listens on.
func (s *Server) Addr() net.Addr { return s.listeners[0].ln.Addr() }

// ListenerAddr is the address the listener called name listens on.
func (s *Server) ListenerAddr(name string) (net.Addr, bool) {
	for _, l := range s.listeners {
		if strings.EqualFold(l.cfg.Name, name) {
			return l.ln.Addr(), true
		}
	}
	return nil, false
}

// acceptAll takes connections on every listener.
func (s *Server) acceptAll() {
	for _, l := range s.listeners {
		s.goroutines.Go(func() { s.acceptLoop(l) })
	}
}

// setSendBuffer sets a connection's SO_SNDBUF (socket.send.buffer.bytes;
// -1 leaves the system's autotuning). A consumer reading 10 KiB records
// costs the broker a fifth less CPU with 256 KiB than with the autotuned
// megabytes: what sendfile queues stays in the caches.
func setSendBuffer(nc net.Conn, bytes int32) {
	if bytes <= 0 {
		return
	}
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(int(bytes)) // a hint: the connection works without it
	}
}

func (s *Server) acceptLoop(l *listener) {
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.logger.Error("accept failed", "err", err)
			}
			return
		}
		setSendBuffer(nc, s.cfg.SocketSendBufferBytes)
		host := hostOf(nc.RemoteAddr().String())
		s.mu.Lock()
		if s.conns == nil { // shutting down
			s.mu.Unlock()
			nc.Close()
			return
		}
		why := s.overConnectionLimit(host)
		if why == "" && !s.broker.Quotas.Connect(host, time.Now()) {
			why = "connection_creation_rate quota reached for " + host
		}
		if why != "" {
			s.mu.Unlock()
			nc.Close()
			if ok, left := s.warnings.allow("closing a new connection: "+why, host); ok {
				args := []any{"client", nc.RemoteAddr().String()}
				if left > 0 {
					args = append(args, "suppressed", left)
				}
				s.logger.Warn("closing a new connection: "+why, args...)
			}
			continue
		}
		s.conns[nc] = struct{}{}
		s.connsPerIP[host]++
		if s.connsPerListener == nil {
			s.connsPerListener = map[string]int{}
		}
		s.connsPerListener[l.cfg.Name]++
		s.mu.Unlock()
		s.goroutines.Go(func() {
			s.serveConn(s.ctx, nc, l)
			s.mu.Lock()
			delete(s.conns, nc)
			if s.connsPerIP[host]--; s.connsPerIP[host] <= 0 {
				delete(s.connsPerIP, host)
			}
			s.connsPerListener[l.cfg.Name]--
			s.mu.Unlock()
		})
	}
}

// overConnectionLimit says which bound a new connection from host would
// pass (max.connections, max.connections.per.ip or its override for the
// host), "" for none. s.mu is held.
func (s *Server) overConnectionLimit(host string) string {
	if max := s.cfg.MaxConnections; max > 0 && len(s.conns) >= int(max) {
		return fmt.Sprintf("max.connections (%d) reached", max)
	}
	max, ok := s.connOverrides[host]
	if !ok {
		max = s.cfg.MaxConnectionsPerIP
	}
	if (ok || max > 0) && s.connsPerIP[host] >= int(max) {
		return fmt.Sprintf("max.connections.per.ip (%d) reached for %s", max, host)
	}
	return ""
}

// hostOf is an address without its port.
func hostOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

// Shutdown stops accepting, stops reading new requests, answers parked
// fetches and group requests at once, lets the requests in flight finish
// (up to ctx's deadline, then connections are closed), stops the group
// coordinator once its writes are durable, syncs and closes every log, and
// releases the data directory. It is safe after a Start that failed (which
// closed what it had opened) and after another Shutdown (it returns the
// first one's result).
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	started := len(s.listeners) > 0
	if started && s.clustered() {
		s.controlledShutdown()
	}
	s.stopAdmin(ctx)
	if started {
		for _, l := range s.listeners {
			l.ln.Close()
		}
		s.mu.Lock()
		conns := s.conns
		s.conns = nil
		s.mu.Unlock()
		// Long polls answer now with what they have. Cancelled before the
		// deadlines are set: a reader that arms its idle deadline after
		// this sees it and keeps the shutdown's.
		s.cancel()
		for nc := range conns {
			// Readers stop at their next read; writers drain what was read.
			nc.SetReadDeadline(time.Now())
		}
		done := make(chan struct{})
		go func() { s.goroutines.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			for nc := range conns {
				nc.Close()
			}
			<-done
		}
	}
	return s.closeOpened()
}
