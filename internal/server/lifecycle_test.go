package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/dirlock"
	"github.com/strandlog/strand/internal/server"
	"github.com/strandlog/strand/internal/testutil"
)

// TestDataDirLockedWhileServing: a second broker on the data directory of
// a running one, in the same process, fails in New, naming the directory
// and the holder's pid; once the first has shut down, the directory opens.
func TestDataDirLockedWhileServing(t *testing.T) {
	b := testutil.StartBroker(t, nil)
	cfg := b.Config
	cfg.Listen = "127.0.0.1:0"
	srv, err := server.New(cfg, quietLogger())
	if err == nil {
		srv.Shutdown(context.Background())
		t.Fatal("a second broker opened the data directory of a running one")
	}
	if msg := err.Error(); !strings.Contains(msg, "data directory "+b.DataDir) || !strings.Contains(msg, "process "+strconv.Itoa(os.Getpid())) {
		t.Errorf("error %q does not name the directory and the holder's pid %d", msg, os.Getpid())
	}
	if _, err := testutil.BrokerMetadata(b.Addr); err != nil {
		t.Errorf("the running broker after the refused one: %v", err)
	}
	b.Stop(t)
	srv, err = server.New(cfg, quietLogger())
	if err != nil {
		t.Fatalf("the directory after its broker stopped: %v", err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestMetadataDirLocked: a quorum member also holds the metadata quorum's
// directory. Held by someone else, New fails naming it, and releases the
// data directory it had already taken.
func TestMetadataDirLocked(t *testing.T) {
	cfg := quorumConfig(t)
	metaDir := filepath.Join(cfg.DataDir, cluster.MetadataDir)
	if err := os.MkdirAll(metaDir, 0o755); err != nil {
		t.Fatal(err)
	}
	held, err := dirlock.Acquire(metaDir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = server.New(cfg, quietLogger())
	if err == nil || !strings.Contains(err.Error(), "metadata quorum directory "+metaDir) {
		t.Fatalf("New with the metadata directory held: %v", err)
	}
	data, err := dirlock.Acquire(cfg.DataDir)
	if err != nil {
		t.Fatalf("the failed New kept the data directory: %v", err)
	}
	data.Release()
	held.Release()
	srv, err := server.New(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestNewFailsCleanly: a New that fails after the metadata quorum's
// member started (here the log's journal cannot be opened) stops that
// member, closing its controller listener and its goroutines, and
// releases the data directory.
func TestNewFailsCleanly(t *testing.T) {
	cfg := quorumConfig(t)
	journal := filepath.Join(cfg.DataDir, "journal")
	if err := os.WriteFile(journal, nil, 0o644); err != nil { // a file where the journal's directory goes
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	if _, err := server.New(cfg, quietLogger()); err == nil || !strings.Contains(err.Error(), "journal") {
		t.Fatalf("New with no journal directory possible: %v", err)
	}
	waitGoroutines(t, before)
	ln, err := net.Listen("tcp", cfg.ControllerListen)
	if err != nil {
		t.Fatalf("the failed New kept its controller listener: %v", err)
	}
	ln.Close()
	if err := os.Remove(journal); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, quietLogger())
	if err != nil {
		t.Fatalf("the same directory once the journal can be made: %v", err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestListenerTaken: when another socket holds a listener's address (a
// client listener, the controller listener, the admin listener), the broker
// fails with an error naming the listener and the address, Shutdown after
// the failed Start closes each thing once (no panic), no goroutine is left
// behind, and the data directory is released: the same directory starts on
// a free address.
func TestListenerTaken(t *testing.T) {
	// Slow: each case starts and fails a broker and checks that no goroutine is left, so it runs alone.
	for _, tc := range []struct {
		name      string
		clustered bool
		label     string
		set       func(cfg *config.Broker, addr string)
	}{
		{"client", false, "listener PLAINTEXT", func(cfg *config.Broker, addr string) { cfg.Listen = addr }},
		{"client in a cluster", true, "listener PLAINTEXT", func(cfg *config.Broker, addr string) { cfg.Listen = addr }},
		{"controller", true, "controller listener", func(cfg *config.Broker, addr string) {
			cfg.ControllerListen, cfg.QuorumVoters = addr, "0@"+addr
		}},
		{"admin", false, "admin listener", func(cfg *config.Broker, addr string) { cfg.AdminListen = addr }},
		{"admin in a cluster", true, "admin listener", func(cfg *config.Broker, addr string) { cfg.AdminListen = addr }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.DataDir = t.TempDir()
			cfg.Listen = testutil.FreePort(t)
			cfg.AdminListen = testutil.FreePort(t) // the console too: its sampler once stopped twice
			if tc.clustered {
				cfg = quorumConfig(t)
				cfg.AdminListen = testutil.FreePort(t)
			}
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			addr := taken.Addr().String()
			tc.set(&cfg, addr)

			before := runtime.NumGoroutine()
			err = startAndShutDown(cfg)
			if err == nil {
				t.Fatalf("the broker started with its %s on a taken address", tc.name)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.label) || !strings.Contains(msg, addr) || !strings.Contains(msg, "address already in use") {
				t.Errorf("error %q does not name the %s and its address %s", msg, tc.label, addr)
			}
			waitGoroutines(t, before)

			tc.set(&cfg, testutil.FreePort(t))
			srv, err := server.New(cfg, quietLogger())
			if err != nil {
				t.Fatalf("the same directory on a free address: %v", err)
			}
			if err := srv.Start(); err != nil {
				srv.Shutdown(context.Background())
				t.Fatalf("the same directory on a free address: %v", err)
			}
			if err := srv.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// waitGoroutines waits until no more goroutines run than before, and
// fails with every goroutine's stack if some stay.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			return fmt.Errorf("%d goroutines, %d before the broker:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
		return nil
	})
}

// startAndShutDown is what strand serve does up to serving: New, Start, and
// Shutdown after a failed Start.
func startAndShutDown(cfg config.Broker) error {
	srv, err := server.New(cfg, quietLogger())
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return errors.Join(err, srv.Shutdown(context.Background()))
	}
	srv.Shutdown(context.Background())
	return nil
}

// quorumConfig is a broker that is the one voter of its metadata quorum.
func quorumConfig(t *testing.T) config.Broker {
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = testutil.FreePort(t)
	cfg.AdminListen = ""
	cfg.ControllerListen = testutil.FreePort(t)
	cfg.QuorumVoters = "0@" + cfg.ControllerListen
	return cfg
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
