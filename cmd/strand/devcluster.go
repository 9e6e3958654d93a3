package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/server"
)

// devClusterCommand runs several brokers in one process, for trying a
// cluster on one machine: each with its own data directory and ports, all
// voters of one metadata quorum (Kafka's combined mode).
func devClusterCommand() *cobra.Command {
	var (
		brokers             int
		dataDir             string
		host                string
		basePort, adminPort int
		logLevel, logFormat string
	)
	cmd := &cobra.Command{
		Use:   "dev-cluster",
		Short: "Run a local cluster of brokers in one process",
		Long: `Run a local cluster for trying Strand as a cluster: --brokers brokers in one
process, node ids 0..n-1, broker i serving clients on --port+i and its metadata
quorum traffic on --port+100+i, its admin API and metrics on --admin-port+i,
with its data in --data-dir/broker-i. It prints
the bootstrap address and runs until interrupted; run it again on the same
directory to get the same cluster back.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(os.Stderr, logLevel, logFormat)
			if err != nil {
				return err
			}
			return devCluster(brokers, dataDir, host, basePort, adminPort, logger)
		},
	}
	f := cmd.Flags()
	f.IntVar(&brokers, "brokers", 3, "how many brokers")
	f.StringVar(&dataDir, "data-dir", "strand-dev-cluster", "directory holding every broker's data directory")
	f.StringVar(&host, "host", "127.0.0.1", "the host every broker listens on")
	f.IntVar(&basePort, "port", 9092, "broker 0's client port; broker i takes port+i, and port+100+i for its controller listener")
	f.IntVar(&adminPort, "admin-port", 9644, "broker 0's admin HTTP port (JSON API and /metrics); broker i takes admin-port+i; 0 turns them off")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "text", "text (key=value) or json, one object per line")
	return cmd
}

// devClusterConfigs returns the brokers' settings.
func devClusterConfigs(brokers int, dataDir, host string, basePort, adminPort int) ([]config.Broker, error) {
	if brokers < 1 || basePort < 1 || basePort+100+brokers > 65535 {
		return nil, fmt.Errorf("need at least one broker and ports %d..%d within 1..65535", basePort, basePort+100+brokers)
	}
	if adminPort < 0 || adminPort+brokers > 65535 {
		return nil, fmt.Errorf("admin ports %d..%d are not within 1..65535 (0 turns them off)", adminPort, adminPort+brokers-1)
	}
	addr := func(port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
	var voters []string
	for i := range brokers {
		voters = append(voters, fmt.Sprintf("%d@%s", i, addr(basePort+100+i)))
	}
	cfgs := make([]config.Broker, brokers)
	for i := range cfgs {
		cfg := config.Defaults()
		cfg.NodeID = int32(i)
		cfg.DataDir = filepath.Join(dataDir, fmt.Sprintf("broker-%d", i))
		cfg.Listen = addr(basePort + i)
		cfg.ControllerListen = addr(basePort + 100 + i)
		cfg.AdminListen = ""
		if adminPort > 0 {
			cfg.AdminListen = addr(adminPort + i)
		}
		cfg.QuorumVoters = strings.Join(voters, ",")
		cfgs[i] = cfg
	}
	return cfgs, nil
}

func devCluster(brokers int, dataDir, host string, basePort, adminPort int, logger *slog.Logger) error {
	cfgs, err := devClusterConfigs(brokers, dataDir, host, basePort, adminPort)
	if err != nil {
		return err
	}
	start := time.Now()
	var (
		servers []*server.Server
		seeds   []string
	)
	shutdown := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var errs []error
		for _, s := range servers {
			errs = append(errs, s.Shutdown(ctx))
		}
		return errors.Join(errs...)
	}
	for _, cfg := range cfgs {
		srv, err := server.New(cfg, logger.With("broker", cfg.NodeID))
		if err == nil {
			if err = srv.Start(); err != nil {
				srv.Shutdown(context.Background())
			}
		}
		if err != nil {
			return errors.Join(fmt.Errorf("broker %d: %w", cfg.NodeID, err), shutdown())
		}
		servers = append(servers, srv)
		seeds = append(seeds, srv.Addr().String())
	}
	// Ready once every broker is registered and unfenced.
	for deadline := time.Now().Add(30 * time.Second); servers[0].Metadata().LiveBrokers() < brokers; {
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("the brokers did not all register within 30 s"), shutdown())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Caught before the ready lines, as serve does.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	logger.Info("strand dev cluster ready", "brokers", brokers, "bootstrap", strings.Join(seeds, ","),
		"data_dir", dataDir, "startup", time.Since(start).Round(time.Millisecond).String())
	fmt.Println(strings.Join(seeds, ","))
	s := <-sig
	logger.Info("shutting down", "signal", s.String())
	return shutdown()
}
