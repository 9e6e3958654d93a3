package compat

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/testutil"
)

// TestProfileCLI: profiles made, listed, switched and deleted through the
// real binary decide which cluster the tools talk to, and --profile picks
// one for a single command.
func TestProfileCLI(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	profiles := filepath.Join(t.TempDir(), "profiles.yaml")
	strand := func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, testutil.Binary(t), args...)
		cmd.Env = append(os.Environ(), "STRAND_PROFILES="+profiles)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		return result{cmdline: strings.Join(args, " "), stdout: string(out), err: err, elapsed: time.Since(start)}
	}
	wantCLI(t, strand("topic", "create", "profiled", "--brokers", b.Addr), true)
	wantCLI(t, strand("profile", "create", "local", "--brokers", b.Addr), true, "the current profile")
	wantCLI(t, strand("profile", "create", "nowhere", "--brokers", testutil.FreePort(t)), true)
	list := strand("profile", "list", "--format", "json")
	wantCLI(t, list, true, `"local"`, `"nowhere"`)

	wantCLI(t, strand("topic", "list"), true, "profiled")
	wantCLI(t, strand("profile", "use", "nowhere"), true, "using profile nowhere")
	wantCLI(t, strand("topic", "list", "--timeout", "2s"), false)
	wantCLI(t, strand("topic", "list", "--profile", "local"), true, "profiled")
	wantCLI(t, strand("profile", "delete", "nowhere"), true)
	if l := strand("profile", "list"); l.err != nil || strings.Contains(l.stdout, "nowhere") {
		t.Fatalf("the profiles after deleting nowhere: %v", l)
	}
	wantCLI(t, strand("profile", "use", "local"), true)
	wantCLI(t, strand("topic", "list"), true, "profiled")
	wantCLI(t, strand("profile", "use", "gone"), false, "gone")
}

// TestCompletion: the shells' completion scripts are generated, and the
// completions they ask the binary for name its commands.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish"} {
		wantCLI(t, run(time.Minute, "", "", testutil.Binary(t), "completion", shell), true, "strand")
	}
	r := run(time.Minute, "", "", testutil.Binary(t), "__complete", "topic", "de")
	wantCLI(t, r, true, "delete\t", "describe\t")
	if strings.Contains(r.stdout, "create") {
		t.Errorf("completing \"topic de\" offers create: %v", r)
	}
}
