package raft

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
)

// TestTCPTransport runs three voters over TCP on 127.0.0.1 through a few
// hundred proposals from every node, restarting one midway (its peers
// reconnect with backoff), and checks they converge.
func TestTCPTransport(t *testing.T) {
	before := runtime.NumGoroutine()
	c := &tcluster{t: t, net: NewMemNetwork(0), voters: []uint64{1, 2, 3}, nodes: map[uint64]*tnode{}, addrs: map[uint64]string{}}
	listeners := map[uint64]*TCPTransport{}
	for _, id := range c.voters {
		tr, err := NewTCPTransport(TCPConfig{Listen: "127.0.0.1:0", Logger: testLogger, MaxBackoff: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		listeners[id] = tr
		c.addrs[id] = tr.Addr()
	}
	c.transport = func(id uint64) Transport {
		if tr := listeners[id]; tr != nil {
			delete(listeners, id)
			return tr
		}
		// A restart listens on the same address again.
		tr, err := NewTCPTransport(TCPConfig{Listen: c.addrs[id], Logger: testLogger})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	for _, id := range c.voters {
		c.nodes[id] = &tnode{id: id, fs: vfs.NewMem()}
	}
	c.startAll()
	c.waitLeader(10 * time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results := c.proposeMany(ctx, "a", c.voters, 50)
	c.stop(2)
	for k, v := range c.proposeMany(ctx, "b", []uint64{1, 3}, 50) {
		results[k] = v
	}
	c.start(2)
	for k, v := range c.proposeMany(ctx, "c", c.voters, 30) {
		results[k] = v
	}
	state := c.waitConverged(10 * time.Second)
	if want := c.committedLog(c.waitLeader(time.Second)); len(want) != len(state) {
		t.Errorf("state of %d entries, committed log of %d", len(state), len(want))
	}
	c.checkState(state)
	checkResults(t, state, results)
	// The leader tells the processes apart: node 2's restart is a new
	// incarnation, heard after the one before.
	leader := c.waitLeader(time.Second)
	for id, ps := range c.nodes[leader].node.Status().Peers {
		now, ok := ps.Heard[incarnation(id, c.nodes[id].starts)]
		if !ok || time.Since(now) > 5*time.Second {
			t.Errorf("peer %d: current incarnation not heard: %v", id, ps.Heard)
		}
		if before, ok := ps.Heard[incarnation(id, 1)]; id == 2 && leader != 2 && (!ok || !before.Before(now)) {
			t.Errorf("peer 2: first incarnation not heard before the second: %v", ps.Heard)
		}
	}
	if len(results) != 3*50+2*50+3*30 {
		t.Errorf("%d proposals succeeded", len(results))
	}
	c.closeAll()
	checkNoLeaks(t, before)
}
