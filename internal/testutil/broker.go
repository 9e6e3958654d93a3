package testutil

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/server"
)

// Broker is an in-process broker.
type Broker struct {
	Addr    string
	DataDir string
	Config  config.Broker
	srv     *server.Server
}

// StartBroker starts an in-process broker on a free loopback port with a
// fresh data directory (or cfg.DataDir when set); edit applies settings
// first. It stops at the end of the test.
func StartBroker(t testing.TB, edit func(*config.Broker)) *Broker {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	// No admin listener unless a test asks for one (127.0.0.1:0).
	cfg.AdminListen = ""
	if edit != nil {
		edit(&cfg)
	}
	b := &Broker{DataDir: cfg.DataDir, Config: cfg}
	b.start(t)
	t.Cleanup(func() { b.Stop(t) })
	return b
}

func (b *Broker) start(t testing.TB) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(b.Config, logger)
	if err != nil {
		t.Fatalf("starting broker: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("starting broker: %v", err)
	}
	b.srv = srv
	b.Addr = srv.Addr().String()
}

// Stop shuts the broker down cleanly (idempotent).
func (b *Broker) Stop(t testing.TB) {
	if b.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		t.Errorf("shutting down broker: %v", err)
	}
	b.srv = nil
}

// Restart stops the broker cleanly and starts it again on the same data
// directory and port.
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	b.Stop(t)
	b.Config.Listen = b.Addr
	b.start(t)
}

// ListenerAddr is where the running broker's listener called name listens.
func (b *Broker) ListenerAddr(t testing.TB, name string) string {
	t.Helper()
	a, ok := b.srv.ListenerAddr(name)
	if !ok {
		t.Fatalf("broker %d has no listener %s", b.Config.NodeID, name)
	}
	return a.String()
}

// Server is the running broker (nil while stopped).
func (b *Broker) Server() *server.Server { return b.srv }

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Binary builds cmd/strand once per test binary and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "strand-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "strand")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/strand")
		cmd.Dir = moduleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Main runs a package's tests and then removes the binary Binary built for
// them, so that runs do not fill the temporary directory: a package whose
// tests run the binary has `func TestMain(m *testing.M) { testutil.Main(m) }`.
func Main(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Process is the real binary running as a child process.
type Process struct {
	Addr    string
	Admin   string // the admin listener's host:port
	DataDir string
	Args    []string
	// Prefix runs the binary through a command (ip netns exec NS).
	Prefix []string
	cmd    *exec.Cmd
	done   chan error
	Output *SyncBuffer
}

// StartProcess runs `strand serve --data-dir D --listen ADDR` plus extra
// args, and waits for its ready line. dataDir "" makes a fresh one.
func StartProcess(t testing.TB, dataDir string, extra ...string) *Process {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	p := &Process{Addr: FreePort(t), Admin: FreePort(t), DataDir: dataDir, Output: &SyncBuffer{}}
	p.Args = append([]string{"serve", "--data-dir", dataDir, "--listen", p.Addr, "--admin-listen", p.Admin}, extra...)
	p.start(t)
	t.Cleanup(func() { p.Kill() })
	return p
}

// StartCommand runs the binary with exactly args (a strand serve command
// line as documented, say) and waits for its ready line. Addr and Admin are
// left for the caller, who chose them.
func StartCommand(t testing.TB, args ...string) *Process {
	t.Helper()
	p := &Process{Args: args, Output: &SyncBuffer{}}
	p.start(t)
	t.Cleanup(func() { p.Kill() })
	return p
}

// PID is the running process's id, 0 when it is not running.
func (p *Process) PID() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *Process) start(t testing.TB) {
	t.Helper()
	argv := append(append(slices.Clone(p.Prefix), Binary(t)), p.Args...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	// Killed with the test binary, even one ended by its -timeout.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = p.Output
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			p.Output.Write([]byte(line + "\n"))
			if strings.Contains(line, "strand ready") {
				once.Do(func() { close(ready) })
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	p.done = make(chan error, 1)
	go func() { p.done <- p.cmd.Wait() }()
	select {
	case <-ready:
	case err := <-p.done:
		t.Fatalf("strand exited before ready: %v\n%s", err, p.Output.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("strand not ready after 30s\n%s", p.Output.String())
	}
}

// PeakRSS is the process's peak resident set (VmHWM) in bytes, -1 when it
// cannot be read.
func (p *Process) PeakRSS() int64 {
	if p.cmd == nil || p.cmd.Process == nil {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb); err == nil {
				return kb << 10
			}
		}
	}
	return -1
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Process) Kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// Stop sends SIGTERM and waits for a clean exit, returning its error.
func (p *Process) Stop() error {
	if p.cmd == nil {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	err := <-p.done
	p.cmd = nil
	return err
}

// Interrupt sends SIGINT, as Ctrl-C in a terminal does, and waits for
// the process to end, returning its error.
func (p *Process) Interrupt() error {
	if p.cmd == nil {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	err := <-p.done
	p.cmd = nil
	return err
}

// Pause stops the process with SIGSTOP: it holds its sockets and state but
// does nothing, as a process stalled by its machine would.
func (p *Process) Pause() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Resume lets a paused process run again (SIGCONT).
func (p *Process) Resume() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Restart starts the process again with the same arguments (after Kill or
// Stop).
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	p.start(t)
}

// SyncBuffer is a buffer that a writer (a process's output, a logger) and
// a test share.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Tail returns the last n lines written.
func (s *SyncBuffer) Tail(n int) string {
	out := s.String()
	lines := strings.SplitAfter(out, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}
