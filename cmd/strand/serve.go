package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/log"
	"github.com/strandlog/strand/internal/server"
)

func serveCommand() *cobra.Command {
	cfg := config.Defaults()
	var (
		configFile    string
		retentionMs   int64
		segmentMs     int64
		fsync         string
		fsyncInterval int64
		logLevel      string
		logFormat     string
		cpuProfile    string
		listeners     string
		advertised    string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a broker",
		Long: `Run a broker. Every flag can also be given as an environment variable
STRAND_<FLAG> (upper case, dashes as underscores) or as a "flag = value" line in
the --config file; a flag on the command line wins over the environment, which
wins over the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnvAndFile(cmd.Flags(), configFile); err != nil {
				return err
			}
			if err := applyListeners(&cfg, listeners, advertised); err != nil {
				return err
			}
			cfg.Log.RetentionTime = msDuration(retentionMs)
			cfg.Log.SegmentTime = msDuration(segmentMs)
			p, err := log.ParseFlushPolicy(fsync)
			if err != nil {
				return err
			}
			cfg.Log.FlushPolicy, cfg.Log.FlushInterval = p, msDuration(fsyncInterval)
			logger, err := newLogger(os.Stderr, logLevel, logFormat)
			if err != nil {
				return err
			}
			if cpuProfile != "" {
				// Profiles until shutdown; strand bench suite --cpuprofile uses it.
				pf, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			return serve(cfg, logger)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "file of `flag = value` lines")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for the partitions and metadata")
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "host:port to accept Kafka clients on")
	f.StringVar(&cfg.AdminListen, "admin-listen", cfg.AdminListen, "host:port of the admin HTTP listener (web console at /, JSON API under /api, Prometheus metrics at /metrics); empty turns it off")
	f.BoolVar(&cfg.AdminConsole, "admin-console", cfg.AdminConsole, "serve the web console on the admin listener (admin.console.enable)")
	f.BoolVar(&cfg.AdminConsoleActions, "admin-console-actions", cfg.AdminConsoleActions, "let the web console reset a group's offsets and delete a group, each after a confirmation (admin.console.actions.enable)")
	f.DurationVar(&cfg.AdminConsoleSample, "admin-console-sample-interval", cfg.AdminConsoleSample, "how often the web console samples group lag and topic end offsets for its charts and rates (admin.console.sample.interval.ms)")
	f.StringVar(&cfg.Advertise, "advertise", cfg.Advertise, "host:port clients are told to connect to (default: the listen address)")
	f.StringVar(&listeners, "listeners", "", "Kafka's listeners: NAME://host:port,... with CONTROLLER:// the metadata quorum's listener and the other the clients' (overrides --listen)")
	f.StringVar(&advertised, "advertised-listeners", "", "Kafka's advertised.listeners: NAME://host:port for the clients' listener (overrides --advertise)")
	f.Int32Var(&cfg.NodeID, "node-id", cfg.NodeID, "this broker's id")
	f.StringVar(&cfg.QuorumVoters, "controller-quorum-voters", cfg.QuorumVoters, "the metadata quorum's voters, id@host:port,... of their CONTROLLER listeners; empty for a single node")
	f.StringVar(&cfg.ClusterID, "cluster-id", cfg.ClusterID, "the cluster's id: a new cluster takes it, a data directory of another cluster is refused (default: generated)")
	f.StringVar(&cfg.Rack, "rack", cfg.Rack, "this broker's rack (broker.rack): replicas spread over racks")
	f.DurationVar(&cfg.BrokerSessionTimeout, "broker-session-timeout", cfg.BrokerSessionTimeout, "a broker the active controller has not heard from for this long is fenced (broker.session.timeout.ms)")
	f.Int16Var(&cfg.DefaultReplicationFactor, "default-replication-factor", cfg.DefaultReplicationFactor, "replicas of topics created without a factor (default.replication.factor)")
	f.Int16Var(&cfg.OffsetsTopicReplicationFactor, "offsets-topic-replication-factor", cfg.OffsetsTopicReplicationFactor, "replicas of __consumer_offsets, fewer while fewer brokers are live (offsets.topic.replication.factor)")
	f.Int16Var(&cfg.TransactionStateReplicationFactor, "transaction-state-replication-factor", cfg.TransactionStateReplicationFactor, "replicas of __transaction_state, fewer while fewer brokers are live (transaction.state.log.replication.factor)")
	f.BoolVar(&cfg.AutoLeaderRebalance, "auto-leader-rebalance", cfg.AutoLeaderRebalance, "give partitions back to their preferred replicas (auto.leader.rebalance.enable)")
	f.DurationVar(&cfg.LeaderImbalanceCheck, "leader-imbalance-check-interval", cfg.LeaderImbalanceCheck, "how often leadership is balanced (leader.imbalance.check.interval.seconds)")
	f.DurationVar(&cfg.ReplicaLagTime, "replica-lag-time", cfg.ReplicaLagTime, "a follower not caught up for this long leaves the in-sync set (replica.lag.time.max.ms)")
	f.Int32Var(&cfg.DefaultPartitions, "default-partitions", cfg.DefaultPartitions, "partitions of auto-created topics (num.partitions)")
	f.BoolVar(&cfg.AutoCreateTopics, "auto-create-topics", cfg.AutoCreateTopics, "create unknown topics on first use (auto.create.topics.enable)")
	f.Int32Var(&cfg.MaxRequestBytes, "max-request-size", cfg.MaxRequestBytes, "largest request frame accepted (socket.request.max.bytes)")
	f.Int64Var(&retentionMs, "retention-ms", cfg.Log.RetentionTime.Milliseconds(), "topic default retention.ms; -1 for unlimited")
	f.Int64Var(&cfg.Log.RetentionBytes, "retention-bytes", cfg.Log.RetentionBytes, "topic default retention.bytes; -1 for unlimited")
	f.Int64Var(&cfg.Log.SegmentBytes, "segment-bytes", cfg.Log.SegmentBytes, "topic default segment.bytes")
	f.Int64Var(&segmentMs, "segment-ms", cfg.Log.SegmentTime.Milliseconds(), "topic default segment.ms")
	f.IntVar(&cfg.Log.MaxMessageBytes, "max-message-bytes", cfg.Log.MaxMessageBytes, "topic default max.message.bytes")
	f.StringVar(&fsync, "fsync", cfg.Log.FlushPolicy.String(), "when writes reach the disk: every-append (before acknowledging), interval, or never (left to the OS)")
	f.Int64Var(&fsyncInterval, "fsync-interval-ms", cfg.Log.FlushInterval.Milliseconds(), "with --fsync=interval, how often")
	f.DurationVar(&cfg.RetentionCheck, "retention-check-interval", cfg.RetentionCheck, "how often retention runs")
	f.DurationVar(&cfg.GroupInitialRebalanceDelay, "group-initial-rebalance-delay", cfg.GroupInitialRebalanceDelay, "how long a new group's first rebalance waits for more members (group.initial.rebalance.delay.ms)")
	f.DurationVar(&cfg.GroupMinSessionTimeout, "group-min-session-timeout", cfg.GroupMinSessionTimeout, "shortest session timeout a group member may ask for (group.min.session.timeout.ms)")
	f.DurationVar(&cfg.GroupMaxSessionTimeout, "group-max-session-timeout", cfg.GroupMaxSessionTimeout, "longest session timeout a group member may ask for (group.max.session.timeout.ms)")
	f.Int32Var(&cfg.GroupMaxSize, "group-max-size", cfg.GroupMaxSize, "most members a group may have (group.max.size)")
	f.DurationVar(&cfg.GroupConsumerSessionTimeout, "group-consumer-session-timeout", cfg.GroupConsumerSessionTimeout, "how long a consumer group member may go without a heartbeat (group.consumer.session.timeout.ms)")
	f.DurationVar(&cfg.GroupConsumerHeartbeatInterval, "group-consumer-heartbeat-interval", cfg.GroupConsumerHeartbeatInterval, "how often consumer group members heartbeat (group.consumer.heartbeat.interval.ms)")
	f.DurationVar(&cfg.GroupConsumerMinSessionTimeout, "group-consumer-min-session-timeout", cfg.GroupConsumerMinSessionTimeout, "lower bound of the consumer group session timeout (group.consumer.min.session.timeout.ms)")
	f.DurationVar(&cfg.GroupConsumerMaxSessionTimeout, "group-consumer-max-session-timeout", cfg.GroupConsumerMaxSessionTimeout, "upper bound of the consumer group session timeout (group.consumer.max.session.timeout.ms)")
	f.DurationVar(&cfg.GroupConsumerMinHeartbeatInterval, "group-consumer-min-heartbeat-interval", cfg.GroupConsumerMinHeartbeatInterval, "lower bound of the consumer group heartbeat interval (group.consumer.min.heartbeat.interval.ms)")
	f.DurationVar(&cfg.GroupConsumerMaxHeartbeatInterval, "group-consumer-max-heartbeat-interval", cfg.GroupConsumerMaxHeartbeatInterval, "upper bound of the consumer group heartbeat interval (group.consumer.max.heartbeat.interval.ms)")
	f.Int32Var(&cfg.GroupConsumerMaxSize, "group-consumer-max-size", cfg.GroupConsumerMaxSize, "most members a consumer group may have (group.consumer.max.size)")
	f.StringVar(&cfg.GroupConsumerMigrationPolicy, "group-consumer-migration-policy", cfg.GroupConsumerMigrationPolicy, "whether a live group may move between the classic and the consumer protocol: bidirectional, upgrade, downgrade or disabled (group.consumer.migration.policy)")
	f.DurationVar(&cfg.GroupMemberDisconnectGrace, "group-member-disconnect-grace", cfg.GroupMemberDisconnectGrace, "how long a group member whose connection closed without a LeaveGroup keeps its place; 0 until its session times out, as in Kafka (group.member.disconnect.grace.ms)")
	f.BoolVar(&cfg.GroupMemberDisconnectGraceStatic, "group-member-disconnect-grace-static", cfg.GroupMemberDisconnectGraceStatic, "apply the disconnect grace to static members (group.instance.id) too (group.member.disconnect.grace.static.enable)")
	f.BoolVar(&cfg.GroupCommitOwnershipStrict, "group-commit-ownership-strict", cfg.GroupCommitOwnershipStrict, "refuse a member's commit of a partition it does not own; it is reported in the hand-off ledger either way (group.commit.ownership.strict)")
	f.BoolVar(&cfg.HandoffLedger, "handoff-ledger", cfg.HandoffLedger, "record every partition hand-off of every group, with what it risked, in __strand_handoffs (group.handoff.ledger.enable)")
	f.DurationVar(&cfg.HandoffLedgerRetention, "handoff-ledger-retention", cfg.HandoffLedgerRetention, "how long __strand_handoffs keeps its entries (group.handoff.ledger.retention.ms)")
	f.StringSliceVar(&cfg.GroupConsumerAssignors, "group-consumer-assignors", cfg.GroupConsumerAssignors, "server-side assignors of consumer groups, the first the default (group.consumer.assignors)")
	f.Int32Var(&cfg.OffsetsTopicPartitions, "offsets-topic-partitions", cfg.OffsetsTopicPartitions, "partitions of __consumer_offsets when it is created (offsets.topic.num.partitions)")
	f.DurationVar(&cfg.OffsetsRetention, "offsets-retention", cfg.OffsetsRetention, "how long an empty group's committed offsets are kept (offsets.retention.minutes)")
	f.DurationVar(&cfg.OffsetsRetentionCheck, "offsets-retention-check-interval", cfg.OffsetsRetentionCheck, "how often stale offsets are looked for (offsets.retention.check.interval.ms)")
	f.Int32Var(&cfg.OffsetMetadataMaxBytes, "offset-metadata-max-bytes", cfg.OffsetMetadataMaxBytes, "longest metadata an offset commit may carry (offset.metadata.max.bytes)")
	f.Int16Var(&cfg.TransactionVersion, "transaction-version", cfg.TransactionVersion, "finalized transaction.version feature: 2 for KIP-890's transaction protocol, 1 or 0 for the older flow")
	f.Int32Var(&cfg.TransactionStatePartitions, "transaction-state-partitions", cfg.TransactionStatePartitions, "partitions of __transaction_state when it is created (transaction.state.log.num.partitions)")
	f.DurationVar(&cfg.TransactionMaxTimeout, "transaction-max-timeout", cfg.TransactionMaxTimeout, "longest transaction timeout a producer may ask for (transaction.max.timeout.ms)")
	f.DurationVar(&cfg.TransactionalIDExpiration, "transactional-id-expiration", cfg.TransactionalIDExpiration, "how long an idle transactional id is kept (transactional.id.expiration.ms)")
	f.DurationVar(&cfg.TransactionAbortCheck, "transaction-abort-check-interval", cfg.TransactionAbortCheck, "how often timed-out transactions are looked for (transaction.abort.timed.out.transaction.cleanup.interval.ms)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "text", "text (key=value) or json, one object per line")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile to this file until shutdown")
	f.MarkHidden("cpuprofile")
	return cmd
}

// applyListeners reads Kafka's listener syntax into the listen and
// controller addresses: the listener named CONTROLLER takes the metadata
// quorum's traffic, the other one the clients'.
func applyListeners(cfg *config.Broker, listeners, advertised string) error {
	parse := func(list, flag string) (client, controller string, err error) {
		for _, l := range strings.Split(list, ",") {
			l = strings.TrimSpace(l)
			if l == "" {
				continue
			}
			name, addr, ok := strings.Cut(l, "://")
			if !ok || addr == "" {
				return "", "", fmt.Errorf("--%s: %q is not NAME://host:port", flag, l)
			}
			switch {
			case strings.EqualFold(name, "CONTROLLER"):
				controller = addr
			case client != "":
				return "", "", fmt.Errorf("--%s: one client listener is served, got a second: %q", flag, l)
			default:
				client = addr
			}
		}
		return client, controller, nil
	}
	client, controller, err := parse(listeners, "listeners")
	if err != nil {
		return err
	}
	if client != "" {
		cfg.Listen = client
	}
	if controller != "" {
		cfg.ControllerListen = controller
	}
	if client, _, err = parse(advertised, "advertised-listeners"); err != nil {
		return err
	}
	if client != "" {
		cfg.Advertise = client
	}
	return nil
}

func msDuration(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// applyEnvAndFile fills the flags not given on the command line from
// STRAND_<NAME> variables, then from the config file.
func applyEnvAndFile(flags *pflag.FlagSet, file string) error {
	fileValues := map[string]string{}
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return fmt.Errorf("%s:%d: want flag = value", file, n)
			}
			fileValues[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	var err error
	flags.VisitAll(func(fl *pflag.Flag) {
		if err != nil || fl.Changed || fl.Name == "config" {
			return
		}
		env := "STRAND_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		v, ok := os.LookupEnv(env)
		src := env
		if !ok {
			v, ok = fileValues[fl.Name]
			src = file
		}
		delete(fileValues, fl.Name)
		if ok {
			if serr := fl.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s: %s: %v", src, fl.Name, serr)
			}
		}
	})
	if err != nil {
		return err
	}
	for k := range fileValues {
		if flags.Lookup(k) == nil {
			return fmt.Errorf("%s: unknown setting %q", file, k)
		}
	}
	return nil
}

func serve(cfg config.Broker, logger *slog.Logger) error {
	start := time.Now()
	srv, err := server.New(cfg, logger)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		srv.Shutdown(context.Background())
		return err
	}
	logger.Info("strand ready", "listen", srv.Addr().String(), "data_dir", cfg.DataDir,
		"fsync", cfg.Log.FlushPolicy.String(), "startup", time.Since(start).Round(time.Microsecond).String())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	var failed error
	select {
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
	case failed = <-srv.Failed():
		logger.Error("shutting down", "err", failed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return errors.Join(failed, err)
	}
	if failed != nil {
		return failed
	}
	logger.Info("stopped")
	return nil
}

// newLogger writes the broker's log to w at level, as text (key=value) or
// JSON lines.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: text or json", format)
}
