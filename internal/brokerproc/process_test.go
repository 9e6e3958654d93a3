package brokerproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/testutil"
)

func TestProcess(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "out.log")
	p, err := Start("sh", []string{"-c", "echo started; exec sleep 30"}, dir, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		b, err := os.ReadFile(log)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "started") {
			return fmt.Errorf("the log file holds %q, want %q in it", b, "started")
		}
		return nil
	})
	if p.Exited() || p.PeakRSS() <= 0 || p.CPU() < 0 {
		t.Fatalf("running: exited %v, peak RSS %d, CPU %v", p.Exited(), p.PeakRSS(), p.CPU())
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !p.Exited() {
		t.Fatal("not exited after Stop")
	}

	// One that ignores SIGTERM is killed after the grace.
	p, err = Start("sh", []string{"-c", "trap '' TERM; echo ready; while :; do sleep 1; done"}, dir, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		b, err := os.ReadFile(log)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "ready") {
			return fmt.Errorf("the log file holds %q, want %q in it", b, "ready")
		}
		return nil
	})
	if err := p.Stop(200 * time.Millisecond); !errors.Is(err, ErrKilled) {
		t.Fatalf("stop of a process ignoring SIGTERM: %v", err)
	}
	if err := p.Kill(); err == nil {
		t.Fatal("kill of an ended process succeeded")
	}
}

func TestLastLines(t *testing.T) {
	if got := LastLines("a\nb\nc\n", 2); got != "b\nc" {
		t.Fatalf("%q", got)
	}
	if got := LastLines("a", 5); got != "a" {
		t.Fatalf("%q", got)
	}
}

// One id in 64 would start with "-" without the check, and kafka-storage
// format would refuse it as an option.
func TestClusterIDIsNoOption(t *testing.T) {
	for range 5000 {
		if id := NewClusterID(); strings.HasPrefix(id, "-") || len(id) != 22 {
			t.Fatalf("cluster id %q", id)
		}
	}
}
