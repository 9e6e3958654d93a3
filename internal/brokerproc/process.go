package brokerproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Process is a broker running as a child process.
type Process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	logFile *os.File
}

// Start runs name with args in dir (the current one when empty), its
// output going to the file logPath, with env added to this process's.
func Start(name string, args []string, dir, logPath string, env []string) (*Process, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, so that it can be ended whole; killed with
	// this process, so that a test binary ended by its -timeout leaves
	// no JVM behind to load the machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), logFile: lf}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Exited says whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// PeakRSS reads VmHWM, the process's peak resident set, from /proc; -1
// when it cannot.
func (p *Process) PeakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// CPU reads the process's user and system CPU time from /proc/PID/stat;
// -1 when it cannot.
func (p *Process) CPU() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces; fields after ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut) // utime, field 14
	fmt.Sscan(f[12], &st) // stime, field 15
	const userHZ = 100    // USER_HZ: clock ticks per second on Linux
	return time.Duration(ut+st) * time.Second / userHZ
}

// ErrKilled is Stop's error for a process that had to be killed.
var ErrKilled = errors.New("killed")

// Stop sends SIGTERM and waits up to grace for a clean exit, then kills
// the process group (ErrKilled). A process that had already ended is an
// error too.
func (p *Process) Stop(grace time.Duration) error {
	defer p.logFile.Close()
	if p.Exited() {
		return fmt.Errorf("exited early: %v", p.waitErr)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%w: did not stop within %s", ErrKilled, grace)
	}
}

// Kill ends the process group with SIGKILL and waits for it.
func (p *Process) Kill() error {
	defer p.logFile.Close()
	if p.Exited() {
		return fmt.Errorf("exited early: %v", p.waitErr)
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return nil
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
