package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/cluster/raft"
	"github.com/strandlog/strand/internal/log/vfs"
)

// leaderLines keeps the leader a node's "leader changed" lines named, and
// the node each line said it came from.
type leaderLines struct {
	mu    sync.Mutex
	lines []leaderLine
	attrs []slog.Attr
}

type leaderLine struct{ node, leader int64 }

func (l *leaderLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *leaderLines) WithGroup(string) slog.Handler            { return l }
func (l *leaderLines) WithAttrs(as []slog.Attr) slog.Handler {
	return &leaderView{l, as}
}
func (l *leaderLines) Handle(ctx context.Context, r slog.Record) error {
	return (&leaderView{l, nil}).Handle(ctx, r)
}

// leaderView is the handler with the attributes a logger was given.
type leaderView struct {
	l     *leaderLines
	attrs []slog.Attr
}

func (v *leaderView) Enabled(context.Context, slog.Level) bool { return true }
func (v *leaderView) WithGroup(string) slog.Handler            { return v }
func (v *leaderView) WithAttrs(as []slog.Attr) slog.Handler {
	return &leaderView{v.l, append(append([]slog.Attr{}, v.attrs...), as...)}
}
func (v *leaderView) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "leader changed" {
		return nil
	}
	line := leaderLine{node: -100, leader: -100}
	take := func(a slog.Attr) bool {
		switch a.Key {
		case "node_id":
			line.node = a.Value.Int64()
		case "leader":
			line.leader = a.Value.Int64()
		}
		return true
	}
	for _, a := range v.attrs {
		take(a)
	}
	r.Attrs(take)
	v.l.mu.Lock()
	v.l.lines = append(v.l.lines, line)
	v.l.mu.Unlock()
	return nil
}

func (l *leaderLines) last() (leaderLine, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return leaderLine{}, false
	}
	return l.lines[len(l.lines)-1], true
}

// A leader change is logged with node ids: the node's own and its new
// leader's, the ids the rest of Strand (Metadata, DescribeQuorum, the
// admin API) names them by, not the Raft ids underneath.
func TestLeaderChangeLogsNodeIDs(t *testing.T) {
	net := raft.NewMemNetwork(17)
	voters := map[int32]string{0: "n0", 1: "n1", 2: "n2"}
	stores := map[int32]*Store{}
	logs := map[int32]*leaderLines{}
	for node := range voters {
		logs[node] = &leaderLines{}
		s, err := OpenRaft(RaftConfig{NodeID: node, Voters: voters, Listen: voters[node], Dir: "/d", FS: vfs.NewMem(),
			Transport: net.Endpoint(raftID(node)), TickInterval: 5 * time.Millisecond, SessionTimeout: -1,
			Logger: slog.New(logs[node])})
		if err != nil {
			t.Fatal(err)
		}
		stores[node] = s
		t.Cleanup(func() { s.Close() })
	}
	// logged says whether node's last leader line names leader, from
	// itself.
	logged := func(node, leader int32) bool {
		l, ok := logs[node].last()
		return ok && l.node == int64(node) && l.leader == int64(leader)
	}
	waitUntil(t, "a leader", func() bool { return stores[0].Controller() >= 0 })
	first := stores[0].Controller()
	for node := range voters {
		waitUntil(t, fmt.Sprintf("node %d logging leader %d", node, first), func() bool {
			return stores[node].Controller() == first && logged(node, first)
		})
	}

	net.Kill(raftID(first))
	survivor := (first + 1) % 3
	waitUntil(t, "a new leader", func() bool {
		c := stores[survivor].Controller()
		return c >= 0 && c != first
	})
	second := stores[survivor].Controller()
	for node := range voters {
		if node == first {
			continue
		}
		waitUntil(t, fmt.Sprintf("node %d logging leader %d", node, second), func() bool {
			return stores[node].Controller() == second && logged(node, second)
		})
	}
}
