package raft

// The test harness: a state machine that records every index it applies
// and checks that they only go up, and a cluster of nodes on a MemNetwork,
// each on its own MemFS, that can be crashed (CrashClone while the loop
// runs, so only synced data survives) and restarted.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/testutil/poll"
)

var testLogger = slog.New(slog.DiscardHandler)

type smEntry struct {
	Index uint64
	Data  string
}

// testSM is a state machine whose state is the list of entries it applied.
// Apply returns the index, so a proposer can check that its result is its
// own entry's.
type testSM struct {
	mu         sync.Mutex
	entries    []smEntry
	last       uint64
	restores   int
	violations []string
}

func (s *testSM) Apply(index uint64, data []byte) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index <= s.last {
		s.violations = append(s.violations, fmt.Sprintf("applied %d after %d", index, s.last))
	}
	s.last = index
	s.entries = append(s.entries, smEntry{index, string(data)})
	return index
}

type smSnapshot struct {
	Last    uint64
	Entries []smEntry
}

func (s *testSM) Snapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return json.Marshal(smSnapshot{s.last, s.entries})
}

func (s *testSM) Restore(index uint64, data []byte) error {
	var snap smSnapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if index < s.last {
		s.violations = append(s.violations, fmt.Sprintf("restored %d after applying %d", index, s.last))
	}
	if snap.Last > index {
		s.violations = append(s.violations, fmt.Sprintf("snapshot %d holds state up to %d", index, snap.Last))
	}
	s.entries, s.last = snap.Entries, index
	s.restores++
	return nil
}

func (s *testSM) state() (entries []smEntry, last uint64, restores int, violations []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entries), s.last, s.restores, slices.Clone(s.violations)
}

type tnode struct {
	id   uint64
	fs   *vfs.MemFS
	sm   *testSM
	node *Node // nil while down
	join bool
	// starts counts the node's starts; each is a new incarnation.
	starts int
}

type tcluster struct {
	t      *testing.T
	net    *MemNetwork
	voters []uint64
	tweak  func(*Config)
	// addrs and transport, when set, replace the MemNetwork: each node's
	// address and a new transport for it at each start.
	addrs     map[uint64]string
	transport func(id uint64) Transport
	mu        sync.Mutex // guards nodes' node and sm fields against the proposer goroutines
	nodes     map[uint64]*tnode
}

func addrOf(id uint64) string { return fmt.Sprintf("n%d", id) }

// newCluster starts voters 1..size on a MemNetwork seeded with seed.
func newCluster(t *testing.T, size int, seed uint64, tweak func(*Config)) *tcluster {
	t.Helper()
	c := &tcluster{t: t, net: NewMemNetwork(seed), tweak: tweak, nodes: map[uint64]*tnode{}}
	for id := uint64(1); id <= uint64(size); id++ {
		c.voters = append(c.voters, id)
	}
	c.startAll()
	return c
}

// startAll starts every voter, on a new MemFS for a voter never started.
func (c *tcluster) startAll() {
	for _, id := range c.voters {
		if c.nodes[id] == nil {
			c.nodes[id] = &tnode{id: id, fs: vfs.NewMem()}
		}
		c.start(id)
	}
	c.t.Cleanup(c.closeAll)
}

func (c *tcluster) addr(id uint64) string {
	if c.addrs != nil {
		return c.addrs[id]
	}
	return addrOf(id)
}

func (c *tcluster) config(tn *tnode) Config {
	peers := map[uint64]string{}
	for _, id := range c.voters {
		peers[id] = c.addr(id)
	}
	var tr Transport
	if c.transport != nil {
		tr = c.transport(tn.id)
	} else {
		tr = c.net.Endpoint(tn.id)
	}
	cfg := Config{
		NodeID:          tn.id,
		Voters:          c.voters,
		Join:            tn.join,
		Addr:            c.addr(tn.id),
		Peers:           peers,
		FS:              tn.fs,
		Dir:             "/raft",
		SM:              tn.sm,
		Transport:       tr,
		Incarnation:     incarnation(tn.id, tn.starts),
		TickInterval:    10 * time.Millisecond,
		SnapshotEntries: math.MaxUint64 / 2,
		Logger:          testLogger,
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	return cfg
}

// incarnation names a node's nth start.
func incarnation(id uint64, start int) string { return fmt.Sprintf("node%d-start%d", id, start) }

// start starts node id (new or down) with a fresh state machine on its FS.
func (c *tcluster) start(id uint64) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	tn := c.nodes[id]
	if tn.node != nil {
		c.t.Fatalf("node %d already running", id)
	}
	tn.sm = &testSM{}
	tn.starts++
	n, err := Start(c.config(tn))
	if err != nil {
		c.t.Fatalf("start node %d: %v", id, err)
	}
	tn.node = n
}

// addJoiner adds node id, which joins as a learner.
func (c *tcluster) addJoiner(id uint64) {
	c.mu.Lock()
	c.nodes[id] = &tnode{id: id, fs: vfs.NewMem(), join: true}
	c.mu.Unlock()
	c.start(id)
}

// crash kills node id as a power loss would: its FS keeps only what was
// synced at the moment of the crash, taken while the loop runs.
func (c *tcluster) crash(id uint64) {
	c.t.Helper()
	c.mu.Lock()
	tn := c.nodes[id]
	n := tn.node
	tn.node = nil
	c.mu.Unlock()
	c.net.Kill(id)
	clone := tn.fs.CrashClone(vfs.CrashOptions{})
	if err := n.Close(); err != nil {
		c.t.Errorf("close crashed node %d: %v", id, err)
	}
	tn.fs = clone
}

// stop closes node id cleanly.
func (c *tcluster) stop(id uint64) {
	c.t.Helper()
	c.mu.Lock()
	tn := c.nodes[id]
	n := tn.node
	tn.node = nil
	c.mu.Unlock()
	c.net.Kill(id)
	if err := n.Close(); err != nil {
		c.t.Errorf("close node %d: %v", id, err)
	}
}

func (c *tcluster) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tn := range c.nodes {
		if tn.node != nil {
			if err := tn.node.Close(); err != nil {
				c.t.Errorf("close node %d: %v", tn.id, err)
			}
			tn.node = nil
		}
	}
}

func (c *tcluster) node(id uint64) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id].node
}

// running returns copies of the running nodes, safe to read while others
// crash and restart nodes.
func (c *tcluster) running() []tnode {
	c.mu.Lock()
	defer c.mu.Unlock()
	var r []tnode
	for _, id := range slices.Sorted(maps.Keys(c.nodes)) {
		if c.nodes[id].node != nil {
			r = append(r, *c.nodes[id])
		}
	}
	return r
}

// waitLeader waits until a running node is leader and every running node
// knows it.
func (c *tcluster) waitLeader(timeout time.Duration) uint64 {
	c.t.Helper()
	var lead uint64
	poll.Until(c.t, timeout, 5*time.Millisecond, func() error {
		lead = 0
		agreed := true
		for _, tn := range c.running() {
			l := tn.node.Leader()
			if lead == 0 {
				lead = l
			}
			agreed = agreed && l != 0 && l == lead
		}
		if !agreed || lead == 0 || c.node(lead) == nil || c.node(lead).Status().Role != "leader" {
			return errors.New("no leader the running nodes agree on")
		}
		return nil
	})
	return lead
}

// propose proposes data through node id, retrying retriable errors (each
// attempt bounded, so a proposal lost on the way is proposed again) until
// ctx ends. It returns the index the entry applied at. A retry after a
// timeout may commit the data twice; the checks allow that.
func (c *tcluster) propose(ctx context.Context, id uint64, data string) (uint64, error) {
	for {
		n := c.node(id)
		if n == nil {
			return 0, fmt.Errorf("node %d is down", id)
		}
		actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		r, err := n.Propose(actx, []byte(data))
		cancel()
		if err == nil {
			return r.(uint64), nil
		}
		if !Retriable(err) || ctx.Err() != nil {
			return 0, err
		}
	}
}

// waitConverged waits until every running node applied the leader's whole
// committed log and holds the same state, and returns that state.
func (c *tcluster) waitConverged(timeout time.Duration) []smEntry {
	c.t.Helper()
	poll.Until(c.t, timeout, 10*time.Millisecond, func() error {
		if why := c.converged(); why != "" {
			return errors.New("not converged: " + why)
		}
		return nil
	})
	entries, _, _, _ := c.running()[0].sm.state()
	return entries
}

func (c *tcluster) converged() string {
	nodes := c.running()
	var lead *tnode
	for i := range nodes {
		if nodes[i].node.Status().Role == "leader" {
			lead = &nodes[i]
		}
	}
	if lead == nil {
		return "no leader"
	}
	commit := lead.node.Status().Commit
	want, _, _, _ := lead.sm.state()
	for _, tn := range nodes {
		if st := tn.node.Status(); st.Applied != commit {
			return fmt.Sprintf("node %d applied %d, leader %d committed %d", tn.id, st.Applied, lead.id, commit)
		}
		got, _, _, _ := tn.sm.state()
		if !slices.Equal(got, want) {
			return fmt.Sprintf("node %d state differs from leader %d's", tn.id, lead.id)
		}
	}
	return ""
}

// checkState checks every running node's state machine: no violations,
// and the state equal to want.
func (c *tcluster) checkState(want []smEntry) {
	c.t.Helper()
	for _, tn := range c.running() {
		got, _, _, violations := tn.sm.state()
		for _, v := range violations {
			c.t.Errorf("node %d: %s", tn.id, v)
		}
		if !slices.Equal(got, want) {
			c.t.Errorf("node %d: state of %d entries differs from the expected %d", tn.id, len(got), len(want))
		}
	}
}

// committedLog returns the proposals in node id's log up to its commit
// index, as the state machine should hold them. The log must not have been
// compacted.
func (c *tcluster) committedLog(id uint64) []smEntry {
	c.t.Helper()
	n := c.node(id)
	commit := n.Status().Commit
	ents, err := n.store.ms.Entries(1, commit+1, math.MaxUint64)
	if err != nil {
		c.t.Fatalf("node %d log: %v", id, err)
	}
	var out []smEntry
	for _, e := range ents {
		if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
			continue
		}
		_, _, data, err := decodeProposal(e.GetData())
		if err != nil {
			c.t.Fatal(err)
		}
		out = append(out, smEntry{e.GetIndex(), string(data)})
	}
	return out
}

// checkResults checks that each successful proposal's data is in state at
// the index its Propose returned.
func checkResults(t *testing.T, state []smEntry, results map[string]uint64) {
	t.Helper()
	at := map[uint64]string{}
	for _, e := range state {
		at[e.Index] = e.Data
	}
	for data, idx := range results {
		if at[idx] != data {
			t.Errorf("proposal %q returned index %d, which holds %q", data, idx, at[idx])
		}
	}
}

// checkNoLeaks waits for the goroutine count to fall back to before.
func checkNoLeaks(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines after close, %d before:\n%s", runtime.NumGoroutine(), before, raftStacks(string(buf)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// raftStacks keeps the goroutine stacks that mention this package.
func raftStacks(all string) string {
	var keep []string
	for _, g := range strings.Split(all, "\n\n") {
		if strings.Contains(g, "cluster/raft") && !strings.Contains(g, "checkNoLeaks") {
			keep = append(keep, g)
		}
	}
	return strings.Join(keep, "\n\n")
}

// proposeMany has each of the given nodes propose count entries named
// "<prefix>n<id>-<k>" concurrently, and returns the successes' indexes.
func (c *tcluster) proposeMany(ctx context.Context, prefix string, ids []uint64, count int) map[string]uint64 {
	c.t.Helper()
	var mu sync.Mutex
	results := map[string]uint64{}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			for k := range count {
				data := fmt.Sprintf("%sn%d-%d", prefix, id, k)
				idx, err := c.propose(ctx, id, data)
				if err != nil {
					c.t.Errorf("propose %s: %v", data, err)
					return
				}
				mu.Lock()
				results[data] = idx
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return results
}
