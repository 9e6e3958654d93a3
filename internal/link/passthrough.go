package link

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/model"
)

// Group pass-through: while a link passes a group through
// (cluster.Link.GroupPassThrough), the group lives on the source and its
// members connected here join it there, so that consumers move between
// clusters one by one, in one group. The protocol layer hands this
// package the group's requests (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, OffsetCommit, OffsetFetch) and answers with what the
// source's coordinator answered.
//
// Each member has its own client of the source, under its own client id,
// as it would connect there itself: the source parks a JoinGroup until the
// rebalance's join phase ends and reads nothing else of that connection
// meanwhile, so members sharing one would wait for each other. Requests
// that name no member (OffsetFetch, an OffsetCommit outside the group's
// generation) go through the link's client.
//
// A member whose client here goes away without leaving (killed, cut off)
// is taken out of the source's group by a LeaveGroup sent for it once the
// disconnect grace has passed since the connection its last group request
// came on closed, as a native member is (package group, presence.go), so
// that its partitions go back to the other members at once instead of at
// the end of its session at the source.

// passThrough is a runner's forwarded members.
type passThrough struct {
	mu      lockrank.Mutex[lockrank.LinkPassThrough]
	members map[memberKey]*passMember
	// lastErr is the last failure to reach the source's coordinator,
	// cleared by a success.
	lastErr error
}

type memberKey struct{ group, member string }

// passMember is a member of a passed-through group connected here.
type passMember struct {
	cl         *kgo.Client
	instanceID *string
	conn       string      // the connection its last group request came on
	grace      *time.Timer // set while that connection is closed
	consumer   bool        // of a consumer group (KIP-848): it leaves by heartbeat
	// clientID and host tell its fetches apart (handoffs.go); owned are
	// its partitions in the source's group.
	clientID, host string
	software       [2]string // its library's name and version
	// protocolType and protocolName are the classic group's, as the
	// source's JoinGroup answered the member (sent in its SyncGroup).
	protocolType, protocolName *string
	owned                      map[model.TopicPartition]*ownership
}

// groupVersions caps the group requests sent to a source at the versions
// this cluster serves, whose forms the members' requests are in
// (OffsetCommit and OffsetFetch v10 name topics by id only).
func groupVersions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(8, 9) // OffsetCommit
	v.SetMaxKeyVersion(9, 9) // OffsetFetch
	return v
}

// GroupRequest is a request of a passed-through group, from a client
// connected here.
type GroupRequest struct {
	Group    string
	MemberID string // the member the request is of: "" for a first join or none
	ClientID string
	// SoftwareName and SoftwareVersion are the client's library (KIP-511).
	SoftwareName, SoftwareVersion string
	Conn                          string // the address of the client's connection
	Req                           kmsg.Request
}

// PassesThrough reports whether the group's requests go to a link's
// source: a running link passes groups through and its group filter
// matches.
func (m *Manager) PassesThrough(group string) bool {
	return m.passRunner(group) != nil
}

// passRunner returns the runner of the first link, by name, that passes
// the group through.
func (m *Manager) passRunner(group string) *runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	var (
		best     *runner
		bestName string
	)
	for name, r := range m.runners {
		if !r.passes(group) {
			continue
		}
		if best == nil || name < bestName {
			best, bestName = r, name
		}
	}
	return best
}

// passes reports whether the runner's link passes the group through.
func (r *runner) passes(group string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := &r.link
	return l.GroupPassThrough && !l.Paused && !l.Promoted(group) && r.groupMatch != nil && r.groupMatch(group)
}

// ErrNoPassThrough: the group is not passed through (any more).
var ErrNoPassThrough = errors.New("link: the group is not passed through to a source")

// ForwardGroup sends a passed-through group's request to the source's
// coordinator of the group, as the member it is of, and returns the
// answer. The request is not changed: a copy at the version the source
// takes is sent.
func (m *Manager) ForwardGroup(ctx context.Context, gr GroupRequest) (kmsg.Response, error) {
	r := m.passRunner(gr.Group)
	if r == nil {
		return nil, ErrNoPassThrough
	}
	if r.cl == nil {
		return nil, fmt.Errorf("link %s has no client of its source: %v", r.current().Name, r.clientEr)
	}
	resp, err := r.pass.forward(ctx, r, gr)
	var ke *kerr.Error
	switch {
	case err == nil || errors.As(err, &ke):
		// The source answered (an error of its own goes to the member).
		r.pass.setErr(nil)
	case ctx.Err() == nil:
		// The source's coordinator could not be reached: the member is
		// told to find its coordinator again and retries; it keeps its
		// partitions while its session at the source lasts.
		r.pass.setErr(err)
		r.warnOnce("pass-through:"+err.Error(), "a passed-through group's request did not reach the source's coordinator",
			"group", gr.Group, "err", err)
	}
	return resp, err
}

func (p *passThrough) setErr(err error) {
	p.mu.Lock()
	p.lastErr = err
	p.mu.Unlock()
}

// status lists the members connected here and the last failure.
func (p *passThrough) status() ([]PassedMember, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []PassedMember
	for key, pm := range p.members {
		m := PassedMember{Group: key.group, MemberID: key.member, ClientID: pm.clientID, Host: pm.host,
			SoftwareName: pm.software[0], SoftwareVersion: pm.software[1], Partitions: []string{}}
		for tp := range pm.owned {
			m.Partitions = append(m.Partitions, tp.String())
		}
		slices.Sort(m.Partitions)
		if pm.grace != nil {
			m.Held = "its connection closed: it leaves the source's group at the end of the disconnect grace"
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b PassedMember) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.ClientID, b.ClientID))
	})
	lastErr := ""
	if p.lastErr != nil {
		lastErr = p.lastErr.Error()
	}
	return out, lastErr
}

// forward sends one request through the member's client.
func (p *passThrough) forward(ctx context.Context, r *runner, gr GroupRequest) (kmsg.Response, error) {
	switch req := gr.Req.(type) {
	case *kmsg.JoinGroupRequest:
		return p.join(ctx, r, gr, req)
	case *kmsg.LeaveGroupRequest:
		return p.leave(ctx, r, gr, req)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return p.heartbeat(ctx, r, gr, req)
	}
	cl := r.cl
	var pm *passMember
	if gr.MemberID != "" {
		if pm = p.heard(gr.Group, gr.MemberID, gr.Conn); pm != nil {
			cl = pm.cl
		}
	}
	fwd, err := copyRequest(gr.Req)
	if err != nil {
		return nil, err
	}
	if sync, ok := fwd.(*kmsg.SyncGroupRequest); ok && sync.Version < 5 && pm != nil {
		// Kafka requires the protocol type and name from v5, the version
		// sent; a member of an older version sends none: they are the
		// ones the source's JoinGroup answered it.
		sync.ProtocolType, sync.Protocol = pm.protocolType, pm.protocolName
	}
	resp, err := cl.Request(ctx, fwd)
	if err != nil {
		return nil, err
	}
	if gr.MemberID != "" && memberGone(resp) {
		p.drop(r, gr.Group, gr.MemberID, "member-unknown")
	}
	p.observe(r, gr, resp)
	return resp, nil
}

// join forwards a JoinGroup: a member without an id gets a client of its
// own, kept under the id the source gives it.
func (p *passThrough) join(ctx context.Context, r *runner, gr GroupRequest, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	pm := p.heard(gr.Group, req.MemberID, gr.Conn)
	fresh := pm == nil
	if fresh {
		var err error
		if pm, err = newPassMember(r, gr, req.InstanceID, false); err != nil {
			return nil, err
		}
	}
	fwd := *req
	kresp, err := pm.cl.Request(ctx, &fwd)
	if err == nil && req.Version < 4 {
		// A member of a version before KIP-394 does not know to join
		// again with the id it is given: join for it.
		if resp := kresp.(*kmsg.JoinGroupResponse); resp.ErrorCode == kerr.MemberIDRequired.Code {
			fwd = *req
			fwd.MemberID = resp.MemberID
			kresp, err = pm.cl.Request(ctx, &fwd)
		}
	}
	if err != nil {
		if fresh {
			pm.cl.Close()
		}
		return nil, err
	}
	resp := kresp.(*kmsg.JoinGroupResponse)
	if resp.ErrorCode == 0 {
		p.mu.Lock()
		pm.protocolType, pm.protocolName = resp.ProtocolType, resp.Protocol
		if pm.protocolType == nil {
			pm.protocolType = &req.ProtocolType
		}
		p.mu.Unlock()
	}
	switch {
	case resp.MemberID == "" || memberGone(resp):
		if fresh {
			pm.cl.Close()
		} else {
			p.drop(r, gr.Group, req.MemberID, "member-unknown")
		}
	case fresh || resp.MemberID != req.MemberID:
		p.keep(gr.Group, req.MemberID, resp.MemberID, pm)
	}
	return resp, nil
}

// heartbeat forwards a consumer group's heartbeat (KIP-848): a member
// joining (epoch 0) or not known here gets a client of its own, kept
// under the id it has at the source; one leaving (epoch -1, or -2 for a
// static member) lets it go.
func (p *passThrough) heartbeat(ctx context.Context, r *runner, gr GroupRequest, req *kmsg.ConsumerGroupHeartbeatRequest) (kmsg.Response, error) {
	pm := p.heard(gr.Group, req.MemberID, gr.Conn)
	fresh := pm == nil
	if fresh {
		var err error
		if pm, err = newPassMember(r, gr, req.InstanceID, true); err != nil {
			return nil, err
		}
	}
	fwd := *req
	kresp, err := pm.cl.Request(ctx, &fwd)
	if err != nil {
		if fresh {
			pm.cl.Close()
		}
		if sourceLacks(ctx, r.cl, req.Key()) {
			// A source without consumer groups: the member is told as
			// that source would tell it.
			return nil, kerr.UnsupportedVersion
		}
		return nil, err
	}
	resp := kresp.(*kmsg.ConsumerGroupHeartbeatResponse)
	member := req.MemberID
	if resp.MemberID != nil && *resp.MemberID != "" {
		member = *resp.MemberID
	}
	gone := resp.ErrorCode == kerr.UnknownMemberID.Code || resp.ErrorCode == kerr.FencedMemberEpoch.Code ||
		resp.ErrorCode == kerr.FencedInstanceID.Code
	switch {
	case req.MemberEpoch < 0 || gone || member == "":
		if fresh {
			pm.cl.Close()
		} else {
			p.drop(r, gr.Group, req.MemberID, "member-left")
		}
	case fresh && resp.ErrorCode != 0:
		pm.cl.Close() // not a member: the next heartbeat joins afresh
	case fresh || member != req.MemberID:
		p.keep(gr.Group, req.MemberID, member, pm)
	}
	p.observe(r, gr, resp)
	return resp, nil
}

// sourceLacks reports whether no broker of the source serves an API.
func sourceLacks(ctx context.Context, cl *kgo.Client, key int16) bool {
	versions, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return false
	}
	lacks := len(versions) > 0
	versions.Each(func(v kadm.BrokerApiVersions) {
		if _, ok := v.KeyMaxVersion(key); ok {
			lacks = false
		}
	})
	return lacks
}

// forwardedMembers is how many members of passed-through groups are
// connected here.
func (m *Manager) forwardedMembers(name string) int {
	r := m.runner(name)
	if r == nil {
		return 0
	}
	r.pass.mu.Lock()
	defer r.pass.mu.Unlock()
	return len(r.pass.members)
}

// newPassMember is a member not known here yet, of the client of gr, with
// a client of the source of its own under its client id; consumer: of a
// consumer group (KIP-848).
func newPassMember(r *runner, gr GroupRequest, instanceID *string, consumer bool) (*passMember, error) {
	cl, err := sourceClient(r.current().Source, append(r.m.cfg.ClientOpts, kgo.ClientID(gr.ClientID),
		kgo.MaxVersions(groupVersions()))...)
	if err != nil {
		return nil, err
	}
	return &passMember{cl: cl, instanceID: instanceID, conn: gr.Conn, consumer: consumer, clientID: gr.ClientID,
		host: hostOf(gr.Conn), software: [2]string{gr.SoftwareName, gr.SoftwareVersion}}, nil
}

// keep files a member under the id the source knows it by (was: the id
// its request had, "" for a first join).
func (p *passThrough) keep(group, was, id string, pm *passMember) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.members == nil {
		p.members = map[memberKey]*passMember{}
	}
	if was != "" {
		delete(p.members, memberKey{group, was})
	}
	p.members[memberKey{group, id}] = pm
}

// leave forwards a LeaveGroup and lets the members go. A request of a
// version before batched leaves (KIP-345) names one member; it is sent in
// the batched form and answered in its own.
func (p *passThrough) leave(ctx context.Context, r *runner, gr GroupRequest, req *kmsg.LeaveGroupRequest) (kmsg.Response, error) {
	fwd := *req
	if req.Version < 3 {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = req.MemberID
		fwd.Members = []kmsg.LeaveGroupRequestMember{m}
	}
	cl := r.cl
	if len(fwd.Members) > 0 {
		if pm := p.heard(gr.Group, fwd.Members[0].MemberID, gr.Conn); pm != nil {
			cl = pm.cl
		}
	}
	kresp, err := cl.Request(ctx, &fwd)
	if err != nil {
		return nil, err
	}
	for _, m := range fwd.Members {
		p.drop(r, gr.Group, m.MemberID, "member-left")
	}
	resp := kresp.(*kmsg.LeaveGroupResponse)
	if req.Version < 3 && resp.ErrorCode == 0 && len(resp.Members) == 1 {
		resp.ErrorCode = resp.Members[0].ErrorCode
	}
	return resp, nil
}

// heard returns the member, noting the connection its request came on
// (which ends a grace), or nil when it is not known here.
func (p *passThrough) heard(group, member, conn string) *passMember {
	if member == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pm := p.members[memberKey{group, member}]
	if pm == nil {
		return nil
	}
	pm.conn = conn
	if pm.grace != nil {
		pm.grace.Stop()
		pm.grace = nil
	}
	return pm
}

// drop forgets a member that left or that the source no longer knows;
// reason says which, in the ledger.
func (p *passThrough) drop(r *runner, group, member, reason string) {
	key := memberKey{group, member}
	p.mu.Lock()
	pm := p.members[key]
	delete(p.members, key)
	var entries []ledger.Entry
	if pm != nil {
		entries = p.lostLocked(r, key, pm, reason)
	}
	p.mu.Unlock()
	r.record(entries)
	if pm != nil {
		if pm.grace != nil {
			pm.grace.Stop()
		}
		pm.cl.Close()
	}
}

// disconnected starts the grace of each member whose last group request
// came on the connection conn, which closed: static members only when
// static says so, as for native members.
func (p *passThrough) disconnected(r *runner, conn string, grace time.Duration, static bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, pm := range p.members {
		if pm.conn != conn || pm.grace != nil || pm.instanceID != nil && !static {
			continue
		}
		r.logger.Info("a passed-through member's connection closed: it leaves the source's group unless heard from",
			"group", key.group, "member", key.member, "grace", grace)
		pm.grace = time.AfterFunc(grace, func() { p.expire(r, key, pm) })
	}
}

// expire takes a member not heard from within its grace out of the
// source's group.
func (p *passThrough) expire(r *runner, key memberKey, pm *passMember) {
	p.mu.Lock()
	if p.members[key] != pm || pm.grace == nil {
		p.mu.Unlock()
		return // heard from, or gone
	}
	delete(p.members, key)
	entries := p.lostLocked(r, key, pm, "member-disconnected")
	p.mu.Unlock()
	r.record(entries)
	defer pm.cl.Close()
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	err := leaveSource(ctx, pm, key)
	if err != nil {
		r.logger.Warn("taking a passed-through member out of the source's group failed: it stays until its session ends",
			"group", key.group, "member", key.member, "err", err)
		return
	}
	r.logger.Info("took a passed-through member whose connection closed out of the source's group",
		"group", key.group, "member", key.member)
}

// leaveSource takes a member out of the source's group for good: a
// LeaveGroup, or a consumer group member's leave heartbeat (epoch -1, for
// a static member too: -2 would keep its partitions for its session).
func leaveSource(ctx context.Context, pm *passMember, key memberKey) error {
	if pm.consumer {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.InstanceID, req.MemberEpoch = key.group, key.member, pm.instanceID, -1
		resp, err := req.RequestWith(ctx, pm.cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = key.group
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID, m.InstanceID = key.member, pm.instanceID
	m.Reason = kmsg.StringPtr("strand: the member's connection closed and the disconnect grace passed")
	req.Members = append(req.Members, m)
	resp, err := req.RequestWith(ctx, pm.cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	for _, m := range resp.Members {
		if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
			return err
		}
	}
	return nil
}

// closeAll closes the members' clients (the runner stops). They stay in
// the source's group until their sessions end there.
func (p *passThrough) closeAll() {
	p.mu.Lock()
	ms := p.members
	p.members = nil
	p.mu.Unlock()
	for _, pm := range ms {
		if pm.grace != nil {
			pm.grace.Stop()
		}
		pm.cl.Close()
	}
}

// ClientDisconnected reports that a client's connection closed: members
// whose last group request came on it leave the source's group after the
// grace unless heard from.
func (m *Manager) ClientDisconnected(conn string) {
	if m.cfg.DisconnectGrace <= 0 {
		return
	}
	for _, r := range m.runnerList() {
		r.pass.disconnected(r, conn, m.cfg.DisconnectGrace, m.cfg.DisconnectGraceStatic)
	}
}

// runnerList returns the running runners.
func (m *Manager) runnerList() []*runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := make([]*runner, 0, len(m.runners))
	for _, r := range m.runners {
		rs = append(rs, r)
	}
	return rs
}

// memberGone reports whether an answer says the source no longer knows
// the member.
func memberGone(resp kmsg.Response) bool {
	var code int16
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		code = r.ErrorCode
	case *kmsg.SyncGroupResponse:
		code = r.ErrorCode
	case *kmsg.HeartbeatResponse:
		code = r.ErrorCode
	}
	return code == kerr.UnknownMemberID.Code || code == kerr.FencedInstanceID.Code
}

// copyRequest returns a shallow copy of a request: the client sets the
// version it sends on it, and the original's version is the answer's.
func copyRequest(req kmsg.Request) (kmsg.Request, error) {
	switch r := req.(type) {
	case *kmsg.SyncGroupRequest:
		c := *r
		return &c, nil
	case *kmsg.HeartbeatRequest:
		c := *r
		return &c, nil
	case *kmsg.OffsetCommitRequest:
		c := *r
		return &c, nil
	case *kmsg.OffsetFetchRequest:
		c := *r
		return &c, nil
	}
	return nil, fmt.Errorf("link: %T is not a group request passed through", req)
}

// SourceHighWatermark returns, for a mirror partition this broker leads,
// the source's high watermark as its last fetch answer said.
func (m *Manager) SourceHighWatermark(tp model.TopicPartition) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.runners {
		r.mu.Lock()
		mp := r.parts[tp]
		r.mu.Unlock()
		if mp == nil {
			continue
		}
		mp.mu.Lock()
		hw := mp.sourceHW
		mp.mu.Unlock()
		return hw, hw >= 0
	}
	return -1, false
}
