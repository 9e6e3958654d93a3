package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// NetCluster is a cluster of real broker processes, each in a network
// namespace of its own, all on one bridge that the test's own namespace
// reaches too. Cutting the links between brokers leaves every broker
// reachable by the test's clients: a network partition between brokers,
// not between brokers and clients. The namespaces, the bridge and the
// routes are the test's own, made at the start and removed at its end.
type NetCluster struct {
	*ProcessCluster
	hub    string   // the namespace of the bridge
	spaces []string // each broker's namespace
	ips    []string

	mu  sync.Mutex
	cut map[[2]int]bool // a → b traffic dropped
}

// StartNetCluster starts n brokers (node ids 0..n-1), each in its own
// network namespace, with extra arguments each, and waits until every one
// lists n live brokers. It needs root (ip netns, veth pairs, a bridge).
func StartNetCluster(t testing.TB, n int, extra ...string) *NetCluster {
	t.Helper()
	NeedRoot(t, "a cluster in network namespaces (ip netns, veth pairs, a bridge)")
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("network namespaces need iproute2's ip: %v", err)
	}
	pid := os.Getpid()
	name := fmt.Sprintf("strand%d", pid)
	subnet := fmt.Sprintf("10.211.%d", pid%200+20)
	c := &NetCluster{ProcessCluster: &ProcessCluster{}, hub: name + "-hub", cut: map[[2]int]bool{}}
	client := fmt.Sprintf("st%dc", pid%10_000_000)
	t.Cleanup(func() {
		for _, ns := range append(c.spaces, c.hub) {
			exec.Command("ip", "netns", "del", ns).Run()
		}
		exec.Command("ip", "link", "del", client).Run()
	})
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	in := func(ns string, args ...string) { run(append([]string{"netns", "exec", ns, "ip"}, args...)...) }
	run("netns", "add", c.hub)
	in(c.hub, "link", "set", "lo", "up")
	in(c.hub, "link", "add", "br0", "type", "bridge")
	in(c.hub, "link", "set", "br0", "up")
	for i := range n {
		ns := fmt.Sprintf("%s-b%d", name, i)
		c.spaces = append(c.spaces, ns)
		c.ips = append(c.ips, fmt.Sprintf("%s.%d", subnet, i+1))
		run("netns", "add", ns)
		in(ns, "link", "set", "lo", "up")
		in(c.hub, "link", "add", fmt.Sprintf("b%d", i), "type", "veth", "peer", "name", "eth0", "netns", ns)
		in(c.hub, "link", "set", fmt.Sprintf("b%d", i), "master", "br0", "up")
		in(ns, "addr", "add", c.ips[i]+"/24", "dev", "eth0")
		in(ns, "link", "set", "eth0", "up")
	}
	run("link", "add", client, "type", "veth", "peer", "name", "client", "netns", c.hub)
	in(c.hub, "link", "set", "client", "master", "br0", "up")
	run("addr", "add", subnet+".254/24", "dev", client)
	run("link", "set", client, "up")

	var voters []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@%s:9093", i, c.ips[i]))
	}
	for i := range n {
		p := &Process{Addr: c.ips[i] + ":9092", DataDir: t.TempDir(), Output: &SyncBuffer{},
			Prefix: []string{"ip", "netns", "exec", c.spaces[i]}}
		p.Args = append([]string{"serve", "--data-dir", p.DataDir, "--listen", p.Addr, "--node-id", fmt.Sprint(i),
			"--listeners", "CONTROLLER://" + c.ips[i] + ":9093", "--controller-quorum-voters", strings.Join(voters, ",")}, extra...)
		p.start(t)
		t.Cleanup(func() { p.Kill() })
		c.Procs = append(c.Procs, p)
	}
	c.WaitLive(t, n, 30*time.Second)
	return c
}

// Cut drops all traffic between brokers a and b, both ways; connections
// between them stall as on a broken network.
func (c *NetCluster) Cut(t testing.TB, a, b int) {
	t.Helper()
	c.route(t, "add", a, b)
	c.route(t, "add", b, a)
}

// Isolate cuts broker victim off from every other broker.
func (c *NetCluster) Isolate(t testing.TB, victim int) {
	t.Helper()
	for i := range c.Procs {
		if i != victim {
			c.Cut(t, victim, i)
		}
	}
}

// Split cuts every broker of side off from every broker not of it.
func (c *NetCluster) Split(t testing.TB, side []int) {
	t.Helper()
	in := map[int]bool{}
	for _, i := range side {
		in[i] = true
	}
	for a := range c.Procs {
		for b := range c.Procs {
			if in[a] && !in[b] {
				c.Cut(t, a, b)
			}
		}
	}
}

// Heal restores every link cut.
func (c *NetCluster) Heal(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	var cut [][2]int
	for k := range c.cut {
		cut = append(cut, k)
	}
	c.mu.Unlock()
	for _, k := range cut {
		c.route(t, "del", k[0], k[1])
	}
}

// route adds or deletes, in a's namespace, the blackhole route that drops
// what a sends to b.
func (c *NetCluster) route(t testing.TB, op string, a, b int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]int{a, b}
	if c.cut[k] == (op == "add") {
		return
	}
	out, err := exec.Command("ip", "netns", "exec", c.spaces[a], "ip", "route", op, "blackhole", c.ips[b]+"/32").CombinedOutput()
	if err != nil {
		t.Fatalf("ip route %s blackhole %s in %s: %v\n%s", op, c.ips[b], c.spaces[a], err, out)
	}
	c.cut[k] = op == "add"
	if op == "del" {
		delete(c.cut, k)
	}
}
