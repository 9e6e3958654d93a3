package raft

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/internal/log/vfs"
	"github.com/strandlog/strand/internal/testutil/poll"
)

// TestReplicationUnderFaults runs 3 and 5 voters over a network that loses
// a fifth of the messages and reorders them, with the leader cut off for a
// while: every node proposes many entries, and in the end every state
// machine holds the committed log exactly, each index once, with each
// successful proposal at the index it reported.
func TestReplicationUnderFaults(t *testing.T) {
	for _, tc := range []struct {
		voters, perNode int
	}{
		{3, 40},
		{5, 25},
	} {
		t.Run(fmt.Sprintf("voters=%d", tc.voters), func(t *testing.T) {
			before := runtime.NumGoroutine()
			c := newCluster(t, tc.voters, uint64(tc.voters), nil)
			c.net.SetLoss(0.2)
			c.net.SetDelay(0, 3*time.Millisecond)
			lead := c.waitLeader(10 * time.Second)

			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			var results map[string]uint64
			wg.Go(func() { results = c.proposeMany(ctx, "", c.voters, tc.perNode) })

			// Cut the leader off while proposals flow, long enough for
			// check-quorum to depose it and the others to elect anew.
			time.Sleep(150 * time.Millisecond)
			c.net.Partition([]uint64{lead})
			poll.Until(t, 5*time.Second, 10*time.Millisecond, func() error {
				for _, tn := range c.running() {
					if tn.id != lead && tn.node.Status().Role == "leader" {
						return nil
					}
				}
				return errors.New("no new leader while the old one was cut off")
			})
			time.Sleep(200 * time.Millisecond)
			c.net.Heal()
			wg.Wait()

			c.net.SetLoss(0)
			state := c.waitConverged(10 * time.Second)
			if want := c.committedLog(c.waitLeader(5 * time.Second)); !slices.Equal(state, want) {
				t.Errorf("state (%d entries) is not the committed log (%d entries)", len(state), len(want))
			}
			c.checkState(state)
			checkResults(t, state, results)
			if len(results) != tc.voters*tc.perNode {
				t.Errorf("%d proposals succeeded, want %d", len(results), tc.voters*tc.perNode)
			}
			c.closeAll()
			checkNoLeaks(t, before)
		})
	}
}

// TestCrashRestart crashes nodes (only synced data survives) while
// proposals flow and restarts them: no applied entry is lost or applied
// twice, each restarted state machine restores the snapshot and continues
// strictly upward, and what a node applied before its crash is a prefix of
// its state after.
func TestCrashRestart(t *testing.T) {
	c := newCluster(t, 3, 7, func(cfg *Config) { cfg.SnapshotEntries = 25 })
	c.waitLeader(10 * time.Second)
	rng := rand.New(rand.NewPCG(7, 7))
	results := map[string]uint64{}
	for round := range 6 {
		victim := uint64(rng.IntN(3) + 1)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var proposed [2]int
		for w := range 2 {
			wg.Go(func() {
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					default:
					}
					data := fmt.Sprintf("r%d-w%d-%d", round, w, k)
					idx, err := c.proposeAny(ctx, data)
					if err != nil {
						t.Errorf("propose %s: %v", data, err)
						return
					}
					mu.Lock()
					results[data] = idx
					proposed[w]++
					mu.Unlock()
				}
			})
		}
		// Crash the victim while proposals flow, and restart it while they
		// still do.
		time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		before, _, _, _ := c.nodes[victim].sm.state()
		c.crash(victim)
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
		c.start(victim)
		time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		close(stop)
		wg.Wait()
		cancel()
		if proposed[0]+proposed[1] < 20 {
			t.Errorf("round %d: only %v proposals", round, proposed)
		}

		state := c.waitConverged(10 * time.Second)
		c.checkState(state)
		if len(state) < len(before) || !slices.Equal(state[:len(before)], before) {
			t.Fatalf("round %d: node %d lost entries it had applied before its crash", round, victim)
		}
	}
	state := c.waitConverged(10 * time.Second)
	checkResults(t, state, results)
	restored := 0
	for _, tn := range c.running() {
		_, _, r, _ := tn.sm.state()
		restored += r
	}
	if restored == 0 {
		t.Error("no restarted node restored a snapshot; SnapshotEntries too large for the test")
	}
}

// proposeAny proposes through any running node, another on each attempt.
func (c *tcluster) proposeAny(ctx context.Context, data string) (uint64, error) {
	for i := 0; ; i++ {
		nodes := c.running()
		if len(nodes) == 0 {
			return 0, errors.New("no node running")
		}
		n := nodes[i%len(nodes)].node
		actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		r, err := n.Propose(actx, []byte(data))
		cancel()
		switch {
		case err == nil:
			return r.(uint64), nil
		case ctx.Err() != nil:
			return 0, err
		case Retriable(err) || errors.Is(err, ErrStopped): // a node crashed under us
		default:
			return 0, err
		}
	}
}

// walBytes returns the number and total size of a node's WAL segments and
// its snapshot files.
func walBytes(t *testing.T, fsys vfs.FS) (segments int, bytes int64, snaps []string) {
	t.Helper()
	des, err := fsys.ReadDir("/raft/wal")
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		info, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		segments++
		bytes += info.Size()
	}
	des, err = fsys.ReadDir("/raft/snap")
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		snaps = append(snaps, de.Name())
	}
	return segments, bytes, snaps
}

// TestSnapshotCatchUp: with a snapshot every 20 entries, a node that was
// down for 200 catches up through the leader's snapshot, since the log it
// misses is compacted away, and the WAL stays small.
func TestSnapshotCatchUp(t *testing.T) {
	c := newCluster(t, 3, 3, func(cfg *Config) { cfg.SnapshotEntries = 20 })
	c.waitLeader(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results := c.proposeMany(ctx, "a", []uint64{1}, 10)
	c.waitConverged(10 * time.Second)
	c.stop(3)

	payload := string(make([]byte, 64))
	for k := range 200 {
		data := fmt.Sprintf("b%d-%s", k, payload)
		idx, err := c.proposeAny(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		results[data] = idx
	}
	segs, size, snaps := walBytes(t, c.nodes[1].fs)
	// 200 entries of over 64 bytes each, had they all stayed.
	if size > 200*64/3 || len(snaps) != 1 {
		t.Errorf("WAL holds %d bytes in %d segments, snapshots %v: the log was not compacted", size, segs, snaps)
	}
	if first, _ := c.node(1).store.ms.FirstIndex(); first <= 30 {
		t.Errorf("the leader's log still starts at %d", first)
	}

	c.start(3)
	state := c.waitConverged(10 * time.Second)
	c.checkState(state)
	checkResults(t, state, results)
	if _, _, restores, _ := c.nodes[3].sm.state(); restores == 0 {
		t.Error("node 3 caught up without a snapshot")
	}
}

// TestLearnerJoin: a node with Join set and empty storage joins a running
// 3-voter quorum as a learner, catches up (from the log, or from a
// snapshot when the log was compacted), learns and is known by its address,
// proposes through the leader, and is promoted.
func TestLearnerJoin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snapshot uint64
	}{
		{"from-log", 1 << 40},
		{"from-snapshot", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, 4, func(cfg *Config) { cfg.SnapshotEntries = tc.snapshot })
			c.waitLeader(10 * time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			results := c.proposeMany(ctx, "a", c.voters, 10)

			c.addJoiner(4)
			poll.Until(t, 10*time.Second, 10*time.Millisecond, func() error {
				if !slices.Contains(c.node(c.waitLeader(time.Second)).Status().Learners, 4) {
					return errors.New("node 4 was not added as a learner")
				}
				return nil
			})
			state := c.waitConverged(10 * time.Second)
			c.checkState(state)
			if _, _, restores, _ := c.nodes[4].sm.state(); (restores > 0) != (tc.snapshot < 1<<40) {
				t.Errorf("learner restored %d snapshots", restores)
			}

			idx, err := c.propose(ctx, 4, "from-learner")
			if err != nil {
				t.Fatal(err)
			}
			results["from-learner"] = idx
			lead := c.waitLeader(5 * time.Second)
			if err := c.node(lead).PromoteVoter(ctx, 4); err != nil {
				t.Fatal(err)
			}
			state = c.waitConverged(10 * time.Second)
			c.checkState(state)
			checkResults(t, state, results)
			for _, tn := range c.running() {
				st := tn.node.Status()
				if !slices.Equal(st.Voters, []uint64{1, 2, 3, 4}) || len(st.Learners) != 0 {
					t.Errorf("node %d: voters %v learners %v", tn.id, st.Voters, st.Learners)
				}
				for id := uint64(1); id <= 4; id++ {
					if st.Members[id] != addrOf(id) {
						t.Errorf("node %d knows member %d at %q", tn.id, id, st.Members[id])
					}
				}
			}

			// A learner's join cannot demote a voter.
			if err := c.node(lead).AddLearner(ctx, 2, "n2"); !errors.Is(err, ErrMembership) {
				t.Errorf("adding voter 2 as a learner: %v, want ErrMembership", err)
			}
		})
	}
}

// TestLostQuorum: with two of three voters down, Propose on the third
// returns a retriable error within its deadline, and the node still
// answers Status and keeps its state readable.
func TestLostQuorum(t *testing.T) {
	c := newCluster(t, 3, 6, nil)
	c.waitLeader(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.proposeMany(ctx, "", []uint64{1, 2, 3}, 5)
	c.waitConverged(10 * time.Second)
	c.stop(2)
	c.stop(3)
	n := c.node(1)

	for i := range 2 {
		start := time.Now()
		pctx, pcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := n.Propose(pctx, []byte(fmt.Sprint("lost-", i)))
		pcancel()
		if !Retriable(err) {
			t.Fatalf("Propose without quorum: %v, want a retriable error", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("Propose without quorum took %v, past its 300ms deadline", d)
		}
		if i == 0 {
			// Check-quorum makes a leader without followers step down.
			poll.Until(t, 2*time.Second, 10*time.Millisecond, func() error {
				if l := n.Leader(); l != 0 {
					return fmt.Errorf("the isolated node still sees leader %d", l)
				}
				return nil
			})
		} else if !errors.Is(err, ErrNoLeader) {
			t.Errorf("Propose with no leader: %v, want ErrNoLeader", err)
		}
	}
	st := n.Status()
	if st.Leader != 0 || st.Role == "leader" {
		t.Errorf("status %+v: still leading", st)
	}
	// Nothing proposed without a quorum applied, and everything before
	// did. The harness retries a proposal whose attempt timed out
	// (ErrTimeout: its outcome unknown), so on a slow disk one may have
	// applied twice: the entries are counted once each.
	entries, _, _, _ := c.nodes[1].sm.state()
	distinct := map[string]bool{}
	for _, e := range entries {
		if strings.HasPrefix(e.Data, "lost-") {
			t.Errorf("%q applied without a quorum", e.Data)
		}
		distinct[e.Data] = true
	}
	if len(distinct) != 15 {
		t.Errorf("state holds %d distinct entries, want 15", len(distinct))
	}
}

// TestStatus checks what the leader reports of its peers.
func TestStatus(t *testing.T) {
	c := newCluster(t, 3, 9, nil)
	lead := c.waitLeader(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.proposeMany(ctx, "", []uint64{lead}, 3)
	c.waitConverged(10 * time.Second)
	// The followers applied everything; the leader learns so with their
	// next acknowledgements.
	var st Status
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		st = c.node(lead).Status()
		caughtUp := len(st.Peers) == 2
		for _, p := range st.Peers {
			caughtUp = caughtUp && p.Match == st.Commit
		}
		if caughtUp {
			break
		}
	}
	if st.Role != "leader" || st.Leader != lead || st.Term == 0 || st.Commit != st.Applied {
		t.Errorf("leader status %+v", st)
	}
	if !slices.Equal(st.Voters, []uint64{1, 2, 3}) || len(st.Peers) != 2 {
		t.Fatalf("leader status %+v", st)
	}
	for id, p := range st.Peers {
		if p.Match != st.Commit || p.LastContact.IsZero() || time.Since(p.LastContact) > 5*time.Second || p.Learner {
			t.Errorf("peer %d: %+v (commit %d)", id, p, st.Commit)
		}
	}
	for _, tn := range c.running() {
		if tn.id != lead && tn.node.Status().Peers != nil {
			t.Errorf("follower %d reports peers", tn.id)
		}
	}
}

// TestRestartKeepsState: a node closed cleanly and started again restores
// its snapshot and replays the rest, applying nothing twice.
func TestRestartKeepsState(t *testing.T) {
	c := newCluster(t, 1, 1, func(cfg *Config) { cfg.SnapshotEntries = 7 })
	c.waitLeader(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	results := c.proposeMany(ctx, "", []uint64{1}, 30)
	want := c.waitConverged(5 * time.Second)
	c.stop(1)
	c.start(1)
	c.waitLeader(10 * time.Second)
	state := c.waitConverged(5 * time.Second)
	if !slices.Equal(state, want) {
		t.Fatalf("after restart: %d entries, want %d", len(state), len(want))
	}
	c.checkState(want)
	checkResults(t, state, results)
	if _, _, restores, _ := c.nodes[1].sm.state(); restores != 1 {
		t.Errorf("restart restored %d snapshots, want 1", restores)
	}
	if _, err := vfs.ReadFile(c.nodes[1].fs, filepath.Join("/raft/snap", snapshotName(c.node(1).Status().SnapshotIndex))); err != nil {
		t.Errorf("newest snapshot file: %v", err)
	}
}

// TestClusterPowerLoss crashes every node at once while proposals flow:
// each keeps only what it had synced. After the restart, every proposal
// that had returned success before the crash is in every state machine;
// that holds only if entries and votes are synced before the messages that
// depend on them leave.
func TestClusterPowerLoss(t *testing.T) {
	for round := range 3 {
		c := newCluster(t, 3, uint64(10+round), func(cfg *Config) { cfg.SnapshotEntries = 30 })
		c.waitLeader(10 * time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		results := map[string]uint64{}
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Go(func() {
				for k := 0; ctx.Err() == nil; k++ {
					data := fmt.Sprintf("w%d-%d", w, k)
					idx, err := c.proposeAny(ctx, data)
					if err != nil {
						return
					}
					mu.Lock()
					results[data] = idx
					mu.Unlock()
				}
			})
		}
		time.Sleep(time.Duration(100+50*round) * time.Millisecond)
		// The results so far were all reported before any clone is taken.
		mu.Lock()
		acked := maps.Clone(results)
		mu.Unlock()
		// One instant for all: no message crosses between the clones (a
		// node cloned later could otherwise hold commits that another
		// persisted only after its own clone).
		for _, tn := range c.running() {
			c.net.Kill(tn.id)
		}
		clones := map[uint64]*vfs.MemFS{}
		for _, tn := range c.running() {
			clones[tn.id] = tn.fs.CrashClone(vfs.CrashOptions{})
		}
		cancel()
		wg.Wait()
		c.closeAll()
		for id, fs := range clones {
			c.nodes[id].fs = fs
		}
		c.startAll()
		c.waitLeader(10 * time.Second)
		state := c.waitConverged(10 * time.Second)
		c.checkState(state)
		checkResults(t, state, acked)
		if len(acked) < 20 {
			t.Errorf("round %d: only %d proposals before the crash", round, len(acked))
		}
	}
}

// LeaderContact tells a node cut off from the quorum from one in an
// election: a leader or follower cut off from the others stops being in
// touch, the majority's side stays in touch as it elects a new leader,
// and a node cut off from its leader alone is not in touch, however well
// it reaches the others.
func TestLeaderContact(t *testing.T) {
	c := newCluster(t, 5, 11, nil)
	defer c.closeAll()
	lead := c.waitLeader(10 * time.Second)
	// The election timeout is 10 ticks of 10 ms. A healthy node goes
	// without contact for up to twice that (the randomized timer) and an
	// election's round trips: bound it at four times, with room for a
	// busy machine.
	timeout := 4 * 10 * 10 * time.Millisecond
	silent := func(id uint64) time.Duration { return time.Since(c.node(id).LeaderContact()) }
	// A follower has no contact to measure until the new leader's first
	// message reaches it.
	for _, tn := range c.running() {
		poll.Until(t, 10*time.Second, 5*time.Millisecond, func() error {
			if c.node(tn.id).LeaderContact().IsZero() {
				return fmt.Errorf("node %d never heard from leader %d", tn.id, lead)
			}
			return nil
		})
	}

	// The leader and one follower on one side, three on the other.
	var follower uint64
	var majority []uint64
	for _, tn := range c.running() {
		switch {
		case tn.id == lead:
		case follower == 0:
			follower = tn.id
		default:
			majority = append(majority, tn.id)
		}
	}
	c.net.Partition([]uint64{lead, follower}, majority)
	deadline := time.Now().Add(3 * timeout)
	for time.Now().Before(deadline) {
		for _, id := range majority {
			if s := silent(id); s > timeout {
				t.Fatalf("node %d of the majority out of touch for %v while electing", id, s)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range []uint64{lead, follower} {
		if s := silent(id); s < timeout {
			t.Fatalf("node %d of the minority in touch %v ago", id, s)
		}
	}

	// Cut a follower off from the new leader alone: its peers ignore its
	// votes while they hear from their leader, and it stays out of touch.
	c.net.Heal()
	newLead := c.waitLeader(10 * time.Second)
	var lone uint64
	var rest []uint64
	for _, tn := range c.running() {
		if tn.id != newLead && lone == 0 {
			lone = tn.id
		} else if tn.id != newLead {
			rest = append(rest, tn.id)
		}
	}
	c.net.Cut(lone, newLead)
	time.Sleep(3 * timeout)
	if s := silent(lone); s < timeout {
		t.Fatalf("a node cut off from its leader, hearing only refusals, in touch %v ago", s)
	}
	for _, id := range rest {
		if s := silent(id); s > timeout {
			t.Fatalf("node %d, in touch with the leader, silent for %v", id, s)
		}
	}
}
