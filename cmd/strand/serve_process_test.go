package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
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
