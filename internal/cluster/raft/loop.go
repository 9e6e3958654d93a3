package raft

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// run is the node's loop, the one goroutine that touches the RawNode, the
// storage and the state machine. Each turn takes one event (a tick, a
// message, a proposal, a transport report, a status request), then as many
// more as are waiting (so that one fsync covers them all), then handles
// every Ready Raft has.
func (n *Node) run() {
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	defer func() {
		n.finalStatus = n.status()
		// Stopped first, then no leader: a proposer woken by the leader
		// change then sees the stop, not a lost leader.
		close(n.donec)
		n.setLeader(0) // a stopped node knows no leader
	}()
	for {
		if err := n.handleReadies(); err != nil {
			n.loopErr = err
			n.log.Error("raft loop stopped", "err", err)
			return
		}
		select {
		case <-n.stopc:
			return
		case <-ticker.C:
			n.tick()
		case in := <-n.recvc:
			n.stepFrom(in)
		case p := <-n.propc:
			n.propose(p)
		case <-n.reports.notify:
			n.applyReports()
		case c := <-n.statusc:
			c <- n.status()
		}
		n.drain()
		if n.stepErr != nil {
			n.loopErr = n.stepErr
			n.log.Error("raft loop stopped", "err", n.stepErr)
			return
		}
	}
}

// drain takes the events already waiting, up to a bound, without blocking.
func (n *Node) drain() {
	for range 256 {
		select {
		case in := <-n.recvc:
			n.stepFrom(in)
		case p := <-n.propc:
			n.propose(p)
		default:
			return
		}
	}
}

// handleReadies processes Readies the way etcd's Raft documents it, in
// order: (1) persist the hard state, entries and snapshot, synced; (2) only
// then send the messages; (3) apply the snapshot and the committed entries;
// (4) Advance. Sending after the sync is the simple form of the rule that
// no message may leave before the state it reflects is durable: a vote
// before the vote is recorded, an append acknowledgement before the entries
// are.
func (n *Node) handleReadies() error {
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		if rd.SoftState != nil {
			n.setLeader(rd.SoftState.Lead)
		}
		if err := n.store.save(rd.HardState, rd.Entries, rd.Snapshot, rd.MustSync); err != nil {
			return err
		}
		if len(rd.Messages) > 0 {
			n.cfg.Transport.send(rd.Messages)
		}
		if !etcdraft.IsEmptySnap(rd.Snapshot) {
			if err := n.restore(rd.Snapshot); err != nil {
				return err
			}
			n.log.Info("installed a snapshot from the leader", "index", n.applied)
		}
		for _, e := range rd.CommittedEntries {
			if err := n.apply(e); err != nil {
				return err
			}
		}
		if err := n.maybeSnapshot(); err != nil {
			return err
		}
		n.rn.Advance(rd)
	}
	return nil
}

func (n *Node) setLeader(lead uint64) {
	if lead == n.lastLead {
		return
	}
	n.lastLead = lead
	n.leader.Store(lead)
	// The message that told this node of its leader came before the leader
	// was known here, so it was not counted as contact then.
	if at, ok := n.contact[lead]; ok && lead != 0 {
		n.touchQuorum(at)
	}
	n.leaderMu.Lock()
	close(n.leaderCh)
	n.leaderCh = make(chan struct{})
	n.leaderMu.Unlock()
	n.log.Info("leader changed", "leader", n.cfg.LogID(lead), "term", n.rn.BasicStatus().HardState.GetTerm())
}

// restore installs a snapshot into the state machine and the membership:
// at Start, and when the leader sent one.
func (n *Node) restore(snap *pb.Snapshot) error {
	meta := snap.GetMetadata()
	sd, err := decodeSnapshotData(snap.GetData())
	if err != nil {
		return err
	}
	if err := n.cfg.SM.Restore(meta.GetIndex(), sd.State); err != nil {
		return fmt.Errorf("cluster/raft: restoring snapshot %d: %w", meta.GetIndex(), err)
	}
	old := n.members
	n.members = sd.Members
	n.confState = proto.Clone(pb.EnsureConfState(meta.GetConfState())).(*pb.ConfState)
	n.applied, n.snapIndex = meta.GetIndex(), meta.GetIndex()
	if n.rn != nil { // the transport runs: tell it the new routes
		routes := n.routes()
		for id := range old {
			if _, ok := routes[id]; !ok && id != n.id {
				n.cfg.Transport.removePeer(id)
			}
		}
		for id, addr := range routes {
			n.cfg.Transport.addPeer(id, addr)
		}
	}
	return nil
}

// apply applies one committed entry.
func (n *Node) apply(e *pb.Entry) error {
	idx := e.GetIndex()
	if idx <= n.applied {
		return nil
	}
	switch e.GetType() {
	case pb.EntryNormal:
		// Empty entries are the leader's at the start of its term, and
		// membership changes Raft refused (it turns them into these).
		if len(e.GetData()) > 0 {
			proposer, req, data, err := decodeProposal(e.GetData())
			if err != nil {
				return fmt.Errorf("entry %d: %w", idx, err)
			}
			result := n.cfg.SM.Apply(idx, data)
			if proposer == n.id {
				n.wait.trigger(req, result)
			}
		}
	case pb.EntryConfChange:
		cc := &pb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("%w: entry %d: conf change does not decode: %v", ErrCorrupt, idx, err)
		}
		if err := n.applyConfChange(cc); err != nil {
			return fmt.Errorf("entry %d: %w", idx, err)
		}
	case pb.EntryConfChangeV2:
		// Not proposed by this package; applied for Raft's sake.
		cc := &pb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("%w: entry %d: conf change does not decode: %v", ErrCorrupt, idx, err)
		}
		n.confState = n.rn.ApplyConfChange(cc)
	}
	n.applied = idx
	return nil
}

// applyConfChange applies one membership change. A change that would demote
// a voter by a learner's join, or remove the last voter, is cancelled (Raft's
// way: node id zero), which is decided from the applied membership only, so
// every node decides alike.
func (n *Node) applyConfChange(cc *pb.ConfChange) error {
	ctx, err := decodeChangeContext(cc.GetContext())
	if err != nil {
		return err
	}
	id := cc.GetNodeId()
	var refused error
	switch cc.GetType() {
	case pb.ConfChangeAddLearnerNode:
		if slices.Contains(n.confState.GetVoters(), id) {
			refused = fmt.Errorf("%w: node %d is a voter", ErrMembership, id)
		}
	case pb.ConfChangeRemoveNode:
		if v := n.confState.GetVoters(); len(v) == 1 && v[0] == id {
			refused = fmt.Errorf("%w: node %d is the last voter", ErrMembership, id)
		}
	}
	if refused != nil {
		cc.NodeId = new(uint64(0))
	}
	n.confState = n.rn.ApplyConfChange(cc)
	if refused == nil && id != 0 {
		n.membersChanged = true
		switch cc.GetType() {
		case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode, pb.ConfChangeUpdateNode:
			if ctx.Addr != "" {
				n.members[id] = ctx.Addr
			}
			if addr := n.routes()[id]; addr != "" {
				n.cfg.Transport.addPeer(id, addr)
			}
			n.log.Info("membership changed", "change", cc.GetType().String(), "member", n.cfg.LogID(id), "addr", ctx.Addr)
		case pb.ConfChangeRemoveNode:
			delete(n.members, id)
			delete(n.contact, id)
			delete(n.heard, id)
			if id != n.id {
				n.cfg.Transport.removePeer(id)
			}
			n.log.Info("membership changed", "change", cc.GetType().String(), "member", n.cfg.LogID(id))
		}
	}
	if refused != nil {
		n.log.Warn("membership change refused", "err", refused)
	}
	if ctx.Proposer == n.id && ctx.Req != 0 {
		n.wait.trigger(ctx.Req, refused)
	}
	return nil
}

// maybeSnapshot snapshots the state machine once SnapshotEntries entries
// applied since the last snapshot, and compacts the log. It also does so
// after a membership change once the log was compacted: a node catching up
// accepts only a snapshot whose membership includes it, and the leader
// sends the one in storage, so a learner added after the last snapshot
// could otherwise never catch up. (etcd instead builds a fresh snapshot for
// each MsgSnap.)
func (n *Node) maybeSnapshot() error {
	due := n.applied-n.snapIndex >= n.cfg.SnapshotEntries
	if n.membersChanged && n.applied > n.snapIndex {
		first, _ := n.store.ms.FirstIndex()
		due = due || first > 1
	}
	if !due {
		return nil
	}
	n.membersChanged = false
	state, err := n.cfg.SM.Snapshot()
	if err != nil {
		return fmt.Errorf("cluster/raft: state machine snapshot: %w", err)
	}
	data := snapshotData{Members: maps.Clone(n.members), State: state}.encode()
	// Keep some entries before the snapshot in memory, so a follower a
	// little behind gets entries rather than the whole snapshot.
	var compactTo uint64
	if keep := n.cfg.SnapshotEntries / 2; n.applied > keep {
		compactTo = n.applied - keep
	}
	if err := n.store.createSnapshot(n.applied, n.confState, data, compactTo); err != nil {
		return err
	}
	n.snapIndex = n.applied
	n.log.Debug("snapshot written, log compacted", "index", n.applied)
	return nil
}

func (n *Node) tick() {
	n.rn.Tick()
	if n.lastLead == n.id {
		n.touchQuorum(time.Now())
	}
	if !n.cfg.Join || n.isMember(n.id) {
		return
	}
	// A joining node asks the voters to add it, at start and then once
	// per election timeout, until its own log shows it as a member.
	if n.joinTicks--; n.joinTicks > 0 {
		return
	}
	n.joinTicks = n.cfg.ElectionTicks
	data, err := proto.Marshal(&pb.ConfChange{
		Type:    pb.ConfChangeAddLearnerNode.Enum(),
		NodeId:  new(n.id),
		Context: changeContext{Addr: n.cfg.Addr}.encode(),
	})
	if err != nil {
		panic(err)
	}
	var msgs []*pb.Message
	for _, id := range slices.Sorted(maps.Keys(n.cfg.Peers)) {
		if id == n.id {
			continue
		}
		msgs = append(msgs, &pb.Message{
			Type:    pb.MsgProp.Enum(),
			From:    new(n.id),
			To:      new(id),
			Entries: []*pb.Entry{{Type: pb.EntryConfChange.Enum(), Data: data}},
		})
	}
	n.cfg.Transport.send(msgs)
}

func (n *Node) isMember(id uint64) bool {
	return slices.Contains(n.confState.GetVoters(), id) || slices.Contains(n.confState.GetLearners(), id)
}

// joinRequest returns the membership change a joining node asks for: a
// MsgProp from it holding one change that adds itself as a learner.
func joinRequest(m *pb.Message) *pb.ConfChange {
	if m.GetType() != pb.MsgProp || len(m.GetEntries()) != 1 || m.GetEntries()[0].GetType() != pb.EntryConfChange {
		return nil
	}
	cc := &pb.ConfChange{}
	if proto.Unmarshal(m.GetEntries()[0].GetData(), cc) != nil ||
		cc.GetType() != pb.ConfChangeAddLearnerNode || cc.GetNodeId() != m.GetFrom() {
		return nil
	}
	return cc
}

// heardLimit bounds the incarnations remembered per peer: the current
// process and a few before it are enough to judge a restart.
const heardLimit = 4

// stepFrom notes when the sender's process was heard from, then steps the
// message.
func (n *Node) stepFrom(in inbound) {
	if from := in.m.GetFrom(); from != 0 && in.incarnation != "" && n.isMember(from) {
		h := n.heard[from]
		if h == nil {
			h = map[string]time.Time{}
			n.heard[from] = h
		}
		if _, ok := h[in.incarnation]; !ok && len(h) >= heardLimit {
			var oldest string
			for inc, t := range h {
				if oldest == "" || t.Before(h[oldest]) {
					oldest = inc
				}
			}
			delete(h, oldest)
		}
		h[in.incarnation] = time.Now()
	}
	n.step(in.m)
}

// step hands a message from a peer to Raft, except a join request, which
// the leader turns into a proposal of its own and a follower forwards to
// the leader.
func (n *Node) step(m *pb.Message) {
	from := m.GetFrom()
	if cc := joinRequest(m); cc != nil {
		if n.isMember(from) {
			return // already added; it will learn so from the log
		}
		st := n.rn.BasicStatus()
		switch {
		case st.RaftState == etcdraft.StateLeader:
			// Raft itself refuses it while another change is pending.
			if err := n.rn.ProposeConfChange(cc); err != nil {
				n.log.Debug("join request not proposed", "from", n.cfg.LogID(from), "err", err)
			}
		case st.Lead != 0:
			m.To = new(st.Lead)
			n.cfg.Transport.send([]*pb.Message{m})
		}
		return
	}
	if from != 0 {
		n.noteContact(m, time.Now())
	}
	if err := n.stepRaft(m); err != nil && !errors.Is(err, etcdraft.ErrStepPeerNotFound) {
		n.log.Debug("message not stepped", "type", m.GetType().String(), "from", n.cfg.LogID(from), "err", err)
	}
}

// noteContact records a message from a peer, and with it when this node
// last heard from its leader.
func (n *Node) noteContact(m *pb.Message, now time.Time) {
	from := m.GetFrom()
	n.contact[from] = now
	if from == n.lastLead {
		n.touchQuorum(now)
	}
}

// touchQuorum moves the time of the last contact with the quorum forward
// to at.
func (n *Node) touchQuorum(at time.Time) {
	if ns := at.UnixNano(); ns > n.leaderContact.Load() {
		n.leaderContact.Store(ns)
	}
}

// stepRaft steps a message into Raft. Raft panics on a message its log
// cannot take, such as a leader's commit index past the end of a log that
// was lost (a process started for a member on an empty or older disk);
// that stops the node with an error instead of the whole process.
func (n *Node) stepRaft(m *pb.Message) (err error) {
	defer func() {
		if r := recover(); r != nil && n.stepErr == nil {
			n.stepErr = fmt.Errorf("%w: the leader's log does not fit this node's (%v): "+
				"this node's log was lost, or another process runs as this node; "+
				"a node that lost its log must join again under a new node id", ErrCorrupt, r)
		}
	}()
	if n.stepErr != nil {
		return nil // stopping: nothing more goes into Raft
	}
	return n.rn.Step(m)
}

func (n *Node) propose(p *proposal) {
	var err error
	if p.cc != nil {
		err = n.rn.ProposeConfChange(p.cc)
	} else {
		err = n.rn.Propose(p.data)
	}
	if errors.Is(err, etcdraft.ErrProposalDropped) {
		if n.rn.BasicStatus().Lead == 0 {
			err = errNoLeaderYet
		} else {
			err = fmt.Errorf("%w: %w", ErrDropped, err)
		}
	}
	p.errc <- err
}

func (n *Node) applyReports() {
	unreachable, snaps := n.reports.take()
	for id := range unreachable {
		n.rn.ReportUnreachable(id)
	}
	for _, r := range snaps {
		status := etcdraft.SnapshotFinish
		if r.failed {
			status = etcdraft.SnapshotFailure
		}
		n.rn.ReportSnapshot(r.id, status)
	}
}

func (n *Node) status() Status {
	st := n.rn.Status()
	s := Status{
		ID:            n.id,
		Role:          roleName(st.RaftState),
		Term:          st.HardState.GetTerm(),
		Vote:          st.HardState.GetVote(),
		Leader:        st.Lead,
		Commit:        st.HardState.GetCommit(),
		Applied:       n.applied,
		SnapshotIndex: n.snapIndex,
		Voters:        slices.Sorted(slices.Values(n.confState.GetVoters())),
		Learners:      slices.Sorted(slices.Values(n.confState.GetLearners())),
		Members:       n.routes(),
	}
	if a := n.cfg.Addr; a != "" {
		s.Members[n.id] = a
	} else if a := n.members[n.id]; a != "" {
		s.Members[n.id] = a
	}
	if st.RaftState == etcdraft.StateLeader {
		s.Peers = map[uint64]PeerStatus{}
		for id, pr := range st.Progress {
			if id == n.id {
				continue
			}
			s.Peers[id] = PeerStatus{Match: pr.Match, Learner: pr.IsLearner, Active: pr.RecentActive,
				LastContact: n.contact[id], Heard: maps.Clone(n.heard[id]), Refused: n.refusedSince(id)}
		}
	}
	return s
}

func roleName(s etcdraft.StateType) string {
	switch s {
	case etcdraft.StateLeader:
		return "leader"
	case etcdraft.StateCandidate:
		return "candidate"
	case etcdraft.StatePreCandidate:
		return "pre-candidate"
	}
	return "follower"
}
