package grouptest

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ProcMember is a group member in its own process (the Java helper,
// Python, kcat) whose standard output is its log.
type ProcMember struct {
	name string
	// Cmd is the member's process; a setup function may rewire its
	// output before it starts.
	Cmd *exec.Cmd
	// LogLines is the member's log as it prints it; Stderr the rest of
	// its output.
	LogLines, Stderr Lines
	// ClosedLine: the client prints no "closed" line of its own (kcat),
	// so Stop adds one after a clean exit.
	ClosedLine bool
	done       chan struct{}
	err        error
	stopOnce   sync.Once
	ended      atomic.Bool // by Stop or Kill
}

// StartProcMember starts bin with args in dir ("": the test's directory)
// as the member name. Its stdout is its log and its stderr is kept, unless
// setup, which runs before the start, rewires them. The process is killed
// when the test ends; if the test failed, its stderr and its log's events
// are logged.
func StartProcMember(t testing.TB, name, dir string, setup func(*ProcMember), bin string, args ...string) *ProcMember {
	t.Helper()
	p := &ProcMember{name: name, done: make(chan struct{})}
	p.Cmd = exec.Command(bin, args...)
	// Killed with the test binary, even one ended by its -timeout.
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.Cmd.Dir = dir
	p.Cmd.Stdout, p.Cmd.Stderr = &p.LogLines, &p.Stderr
	if setup != nil {
		setup(p)
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s (%s) exited with %v; stderr:\n%s\nlog (events but processed):\n%s", name, strings.Join(p.Cmd.Args, " "),
				p.err, HeadLines(p.Stderr.String(), 60), EventsOf(p.Log(), 40))
		}
	})
	return p
}

func (p *ProcMember) Name() string { return p.name }
func (p *ProcMember) Log() *Log    { return Parse(p.name, p.LogLines.String()) }

// Crashed implements Crasher.
func (p *ProcMember) Crashed() error {
	select {
	case <-p.done:
		if !p.ended.Load() {
			return fmt.Errorf("exited on its own: %v; stderr:\n%s", p.err, HeadLines(p.Stderr.String(), 20))
		}
	default:
	}
	return nil
}

// Stop sends SIGTERM and waits for the process to close cleanly.
func (p *ProcMember) Stop() error {
	var err error
	p.stopOnce.Do(func() {
		p.ended.Store(true)
		p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if p.ClosedLine {
				p.LogLines.Printf("closed %s", Micros(time.Now()))
			}
		case <-time.After(30 * time.Second):
			p.Cmd.Process.Kill()
			<-p.done
			err = fmt.Errorf("%s did not exit within 30s of SIGTERM", p.name)
		}
	})
	return err
}

// Kill sends SIGKILL and waits for the process to end.
func (p *ProcMember) Kill() {
	p.stopOnce.Do(func() {
		p.ended.Store(true)
		p.Cmd.Process.Kill()
		<-p.done
	})
}

// EventsOf is a log's events but the processed ones, one a line, the last
// n of them, and how many records were processed.
func EventsOf(l *Log, n int) string {
	var out []string
	processed := 0
	for _, e := range l.Events {
		switch e.Kind {
		case Processed:
			processed++
			continue
		case Committed:
			out = append(out, fmt.Sprintf("%s %s %s", e.Kind, e.Time.Format("15:04:05.000"), FormatOffsets(e.Offsets)))
		default:
			out = append(out, fmt.Sprintf("%s %s %s %s", e.Kind, e.Time.Format("15:04:05.000"), FormatParts(e.Partitions), e.Detail))
		}
	}
	if len(out) > n {
		out = append([]string{fmt.Sprintf("... %d earlier", len(out)-n)}, out[len(out)-n:]...)
	}
	return strings.Join(out, "\n") + fmt.Sprintf("\n(%d records processed)", processed)
}

// HeadLines is the first n lines of s and how many more there were (a
// client retrying in a loop repeats itself).
func HeadLines(s string, n int) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) <= n {
		return s
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n... (%d more lines)\n", len(lines)-n)
}
