package testutil

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestFreePortClaims: the ports FreePort hands out are distinct within a
// process, and another test process cannot claim them while this one
// lives (what two test runs side by side on one machine need).
func TestFreePortClaims(t *testing.T) {
	if ports := os.Getenv("STRAND_TEST_CLAIM_PORTS"); ports != "" {
		// The other process: try each of the parent's ports.
		for _, p := range strings.Split(ports, ",") {
			n, _ := strconv.Atoi(p)
			if claimPort(n) {
				t.Errorf("claimed port %d, which the parent holds", n)
			}
		}
		return
	}
	seen := map[string]bool{}
	var ports []string
	for range 300 {
		addr := FreePort(t)
		if seen[addr] {
			t.Fatalf("FreePort gave %s twice", addr)
		}
		seen[addr] = true
		_, port, _ := net.SplitHostPort(addr)
		ports = append(ports, port)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreePortClaims$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STRAND_TEST_CLAIM_PORTS="+strings.Join(ports, ","))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("another process claimed this one's ports: %v\n%s", err, out)
	}
}
