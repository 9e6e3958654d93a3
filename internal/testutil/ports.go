package testutil

import (
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// FreePort returns a loopback address with a port that no other test
// process, and no earlier call in this one, has been given: tests pick
// ports before the brokers bind them (a cluster's members must know each
// other's addresses first), and two test runs on one machine, or two
// brokers of one test, must not pick the same one in that window.
//
// Each port handed out is claimed by an exclusive flock on a file named
// after it in a directory of the machine's temporary directory, held by
// this process until it exits, so every test process skips the ports
// another holds. The ports are below the kernel's ephemeral range: a port
// the kernel hands out for port 0 could, once released, become the local
// port of some connection the tests open before the broker binds it.
func FreePort(t testing.TB) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	if low <= 11000 {
		t.Fatalf("the kernel's ephemeral ports start at %d: no range below it to take test ports from", low)
	}
	for range 1000 {
		port := 10000 + mrand.IntN(low-10000)
		if !claimPort(port) {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use by something that is no test's: keep it claimed and skip it
		}
		ln.Close()
		return addr
	}
	t.Fatal("no free port to claim")
	return ""
}

var (
	claimsMu sync.Mutex
	claims   []*os.File // held open, and so locked, until the process exits
)

// claimPort takes port for this process, unless another test process (or
// an earlier call) holds it.
func claimPort(port int) bool {
	dir := filepath.Join(os.TempDir(), "strand-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return false
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return false
	}
	// flock belongs to the open file: a second open of the same file in
	// this process is refused too.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	claimsMu.Lock()
	claims = append(claims, f)
	claimsMu.Unlock()
	return true
}
