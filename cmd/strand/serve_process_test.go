package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/testutil"
)

// runStrand runs the binary to its end (30 s at most) and returns what it
// wrote and how it exited.
func runStrand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, testutil.Binary(t), args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("strand %s did not exit within 30 s:\n%s", strings.Join(args, " "), out)
	}
	return string(out), err
}

// wantRefused checks that a run exited non-zero, without a panic, with an
// error that says want.
func wantRefused(t *testing.T, what, out string, err error, want string) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("%s: %v, want a non-zero exit\n%s", what, err, out)
	}
	if strings.Contains(out, "panic") || strings.Contains(out, "strand ready") {
		t.Errorf("%s panicked or served:\n%s", what, out)
	}
	if !strings.Contains(out, want) {
		t.Errorf("%s does not say %q:\n%s", what, want, out)
	}
}

// TestServeRefusesDataDirInUse: a second strand serve on the data
// directory of a running one, and strand user create on it, exit non-zero
// naming the directory and the running broker's pid; once that broker is
// gone, even killed with -9, both work.
func TestServeRefusesDataDirInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("processes: not in -short")
	}
	first := testutil.StartProcess(t, "")
	dir := first.DataDir
	want := fmt.Sprintf("data directory %s is in use: process %d holds", dir, first.PID())
	out, err := runStrand(t, "serve", "--data-dir", dir, "--listen", testutil.FreePort(t), "--admin-listen", testutil.FreePort(t))
	wantRefused(t, "a second strand serve", out, err, want)
	out, err = runStrand(t, "user", "create", "alice", "--password", "secret", "--data-dir", dir)
	wantRefused(t, "strand user create beside a running broker", out, err, want)

	first.Kill()
	if out, err := runStrand(t, "user", "create", "alice", "--password", "secret", "--data-dir", dir); err != nil {
		t.Fatalf("strand user create once the broker was killed: %v\n%s", err, out)
	}
	first.Restart(t) // fails the test unless it gets to ready
	if err := first.Stop(); err != nil {
		t.Fatalf("the restarted broker's clean stop: %v\n%s", err, first.Output)
	}
}

// TestServeListenerTaken: with the address of one of its listeners held
// by another socket, strand serve exits non-zero with one error naming
// that listener and its address, without a panic; once the address is
// free, the same command line serves.
func TestServeListenerTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("processes: not in -short")
	}
	for _, tc := range []struct {
		name, label string
		args        func(taken string) []string
	}{
		{"client", "listener PLAINTEXT", func(taken string) []string {
			return []string{"--listen", taken, "--admin-listen", testutil.FreePort(t)}
		}},
		{"admin", "admin listener", func(taken string) []string {
			return []string{"--listen", testutil.FreePort(t), "--admin-listen", taken}
		}},
		{"controller", "controller listener", func(taken string) []string {
			return []string{"--node-id", "0", "--listeners", "PLAINTEXT://" + testutil.FreePort(t) + ",CONTROLLER://" + taken,
				"--controller-quorum-voters", "0@" + taken, "--admin-listen", testutil.FreePort(t)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken, err := net.Listen("tcp", testutil.FreePort(t))
			if err != nil {
				t.Fatal(err)
			}
			addr := taken.Addr().String()
			args := append([]string{"serve", "--data-dir", t.TempDir()}, tc.args(addr)...)
			out, err := runStrand(t, args...)
			wantRefused(t, "strand serve with its "+tc.name+" listener's address taken", out, err,
				tc.label+": listen tcp "+addr+": bind: address already in use")
			taken.Close()
			p := testutil.StartCommand(t, args...)
			if err := p.Stop(); err != nil {
				t.Fatalf("clean stop: %v\n%s", err, p.Output)
			}
		})
	}
}

// TestDevClusterAdminPortTaken: dev-cluster with one broker's admin port
// held by another socket exits non-zero naming the broker, the admin
// listener and the address, and stops the brokers it had started, without
// a panic.
func TestDevClusterAdminPortTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("processes: not in -short")
	}
	for attempt := 0; ; attempt++ {
		taken, err := net.Listen("tcp", testutil.FreePort(t))
		if err != nil {
			t.Fatal(err)
		}
		addr := taken.Addr().String()
		_, port, _ := net.SplitHostPort(addr)
		admin, _ := strconv.Atoi(port)
		// Broker 1's admin port is the taken one. The client and
		// controller ports are below the kernel's ephemeral range, where
		// another test may hold one: then this start fails on that one,
		// and the test tries other ports.
		base := 20000 + rand.IntN(12000)
		out, err := runStrand(t, "dev-cluster", "--brokers", "2", "--data-dir", t.TempDir(), "--port", strconv.Itoa(base),
			"--admin-port", strconv.Itoa(admin-1), "--log-level", "warn")
		taken.Close()
		want := "broker 1: admin listener: listen tcp " + addr + ": bind: address already in use"
		if !strings.Contains(out, want) && strings.Contains(out, "address already in use") && attempt < 4 {
			continue
		}
		wantRefused(t, "dev-cluster with broker 1's admin port taken", out, err, want)
		return
	}
}
