package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/testutil"
)

// Every advertised version of the group APIs, over a raw connection.

// rawJoin joins group g as a new consumer at JoinGroup version v (the
// MEMBER_ID_REQUIRED round trip from v4) and returns the answer.
func rawJoin(t *testing.T, c *rawConn, v int16, g string) *kmsg.JoinGroupResponse {
	t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(v)
	req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = g, 10000, 10000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	resp := c.do(req).(*kmsg.JoinGroupResponse)
	if v >= 4 {
		if resp.ErrorCode != kerr.MemberIDRequired.Code || resp.MemberID == "" {
			t.Fatalf("JoinGroup v%d: first join %v %q", v, kerr.ErrorForCode(resp.ErrorCode), resp.MemberID)
		}
		req.MemberID = resp.MemberID
		resp = c.do(req).(*kmsg.JoinGroupResponse)
	}
	if resp.ErrorCode != 0 || resp.Generation != 1 || resp.LeaderID != resp.MemberID || len(resp.Members) != 1 ||
		resp.Protocol == nil || *resp.Protocol != "range" {
		t.Fatalf("JoinGroup v%d: %+v", v, resp)
	}
	if v >= 7 && (resp.ProtocolType == nil || *resp.ProtocolType != "consumer") {
		t.Fatalf("JoinGroup v%d: protocol type %v", v, resp.ProtocolType)
	}
	return resp
}

func rawSync(t *testing.T, c *rawConn, v int16, g string, gen int32, member string, assignment []byte) *kmsg.SyncGroupResponse {
	t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.SetVersion(v)
	req.Group, req.Generation, req.MemberID = g, gen, member
	if v >= 5 {
		req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range") // rawJoin's
	}
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = member, assignment
	req.GroupAssignment = append(req.GroupAssignment, a)
	return c.do(req).(*kmsg.SyncGroupResponse)
}

func groupProtocolBroker(t *testing.T) (*testutil.Broker, *rawConn) {
	b := groupBroker(t)
	createTopic(t, b.Addr, "t", 2)
	return b, dialRaw(t, b.Addr)
}

func TestGroupAPIVersionsAdvertised(t *testing.T) {
	_, c := groupProtocolBroker(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
	want := map[int16][2]int16{8: {2, 9}, 9: {1, 9}, 10: {0, 6}, 11: {0, 9}, 12: {0, 4}, 13: {0, 5}, 14: {0, 5},
		15: {0, 5}, 16: {0, 5}, 42: {0, 3}, 47: {0, 0}}
	for _, k := range c.do(req).(*kmsg.ApiVersionsResponse).ApiKeys {
		if w, ok := want[k.ApiKey]; ok {
			if k.MinVersion != w[0] || k.MaxVersion != w[1] {
				t.Errorf("%s: %d-%d, want %d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, w[0], w[1])
			}
			delete(want, k.ApiKey)
		}
	}
	if len(want) > 0 {
		t.Errorf("not advertised: %v", want)
	}
}

func TestFindCoordinatorEveryVersion(t *testing.T) {
	b, c := groupProtocolBroker(t)
	for v := int16(0); v <= 6; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(v)
		req.CoordinatorKey = "g"
		req.CoordinatorKeys = []string{"g", "h"}
		resp := c.do(req).(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			if resp.ErrorCode != 0 || resp.NodeID != b.Config.NodeID || resp.Port == 0 || resp.Host == "" {
				t.Fatalf("v%d: %+v", v, resp)
			}
			continue
		}
		if len(resp.Coordinators) != 2 || resp.Coordinators[1].Key != "h" || resp.Coordinators[1].ErrorCode != 0 || resp.Coordinators[1].Port == 0 {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	for _, tc := range []struct {
		typ  int8
		want int16
	}{{1, 0}, {2, kerr.InvalidRequest.Code}, {9, kerr.InvalidRequest.Code}} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(6)
		req.CoordinatorType, req.CoordinatorKeys = tc.typ, []string{"k"}
		if resp := c.do(req).(*kmsg.FindCoordinatorResponse); resp.Coordinators[0].ErrorCode != tc.want {
			t.Errorf("key type %d: %+v", tc.typ, resp.Coordinators[0])
		}
	}
	// The first FindCoordinator created the offsets topic: internal.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.SetVersion(12)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("__consumer_offsets")
	mreq.Topics = append(mreq.Topics, mt)
	m := c.do(mreq).(*kmsg.MetadataResponse)
	if m.Topics[0].ErrorCode != 0 || !m.Topics[0].IsInternal || len(m.Topics[0].Partitions) != int(b.Config.OffsetsTopicPartitions) {
		t.Fatalf("%+v", m.Topics[0])
	}
	// Only the coordinator writes it.
	preq := kmsg.NewPtrProduceRequest()
	preq.SetVersion(9)
	preq.Acks = -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "__consumer_offsets"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = makeBatch("x")
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	if resp := c.do(preq).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to __consumer_offsets: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
}

func TestJoinSyncHeartbeatLeaveEveryVersion(t *testing.T) {
	_, c := groupProtocolBroker(t)
	for v := int16(0); v <= 9; v++ {
		g := fmt.Sprint("join-v", v)
		j := rawJoin(t, c, v, g)
		sv := min(v, 5)
		s := rawSync(t, c, sv, g, j.Generation, j.MemberID, []byte("assigned"))
		if s.ErrorCode != 0 || string(s.MemberAssignment) != "assigned" {
			t.Fatalf("SyncGroup v%d: %+v", sv, s)
		}
		if sv >= 5 && (s.Protocol == nil || *s.Protocol != "range" || *s.ProtocolType != "consumer") {
			t.Fatalf("SyncGroup v%d: %+v", sv, s)
		}
		if sv >= 5 {
			// Without the protocol type and name, as Kafka answers.
			req := kmsg.NewPtrSyncGroupRequest()
			req.SetVersion(sv)
			req.Group, req.Generation, req.MemberID = g, j.Generation, j.MemberID
			if resp := c.do(req).(*kmsg.SyncGroupResponse); resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
				t.Fatalf("SyncGroup v%d without its protocol: %v", sv, kerr.ErrorForCode(resp.ErrorCode))
			}
		}
		hv := min(v, 4)
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.SetVersion(hv)
		hb.Group, hb.Generation, hb.MemberID = g, j.Generation, j.MemberID
		if r := c.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
			t.Fatalf("Heartbeat v%d: %v", hv, kerr.ErrorForCode(r.ErrorCode))
		}
		hb.Generation++
		if r := c.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.IllegalGeneration.Code {
			t.Fatalf("Heartbeat v%d, wrong generation: %v", hv, kerr.ErrorForCode(r.ErrorCode))
		}
		lv := min(v, 5)
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.SetVersion(lv)
		leave.Group = g
		if lv < 3 {
			leave.MemberID = j.MemberID
		} else {
			for _, id := range []string{j.MemberID, "unknown"} {
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = id
				leave.Members = append(leave.Members, m)
			}
		}
		r := c.do(leave).(*kmsg.LeaveGroupResponse)
		if lv < 3 && r.ErrorCode != 0 || lv >= 3 && (r.ErrorCode != 0 || len(r.Members) != 2 || r.Members[0].ErrorCode != 0 ||
			r.Members[1].ErrorCode != kerr.UnknownMemberID.Code) {
			t.Fatalf("LeaveGroup v%d: %+v", lv, r)
		}
	}
}

func TestOffsetCommitAndFetchEveryVersion(t *testing.T) {
	_, c := groupProtocolBroker(t)
	j := rawJoin(t, c, 9, "g")
	rawSync(t, c, 5, "g", j.Generation, j.MemberID, nil)
	commit := func(v int16, g string, gen int32, member string, off int64) *kmsg.OffsetCommitResponse {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(v)
		req.Group, req.Generation, req.MemberID = g, gen, member
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		for p := range int32(3) { // partition 2 does not exist
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, off, 4, kmsg.StringPtr(fmt.Sprint("v", v))
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return c.do(req).(*kmsg.OffsetCommitResponse)
	}
	for v := int16(2); v <= 9; v++ {
		r := commit(v, "g", j.Generation, j.MemberID, int64(v*10))
		ps := r.Topics[0].Partitions
		if ps[0].ErrorCode != 0 || ps[1].ErrorCode != 0 || ps[2].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("OffsetCommit v%d: %+v", v, ps)
		}
		// Fenced: a stale generation, an unknown member.
		if r := commit(v, "g", j.Generation-1, j.MemberID, 1); r.Topics[0].Partitions[0].ErrorCode != kerr.IllegalGeneration.Code {
			t.Fatalf("OffsetCommit v%d, stale generation: %+v", v, r.Topics[0].Partitions[0])
		}
		if r := commit(v, "g", j.Generation, "someone", 1); r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownMemberID.Code {
			t.Fatalf("OffsetCommit v%d, unknown member: %+v", v, r.Topics[0].Partitions[0])
		}
		want := kerr.IllegalGeneration.Code
		if v >= 9 {
			want = kerr.GroupIDNotFound.Code
		}
		if r := commit(v, "none", 3, "someone", 1); r.Topics[0].Partitions[0].ErrorCode != want {
			t.Fatalf("OffsetCommit v%d, unknown group: %+v", v, r.Topics[0].Partitions[0])
		}
	}
	// A simple commit (generation -1) to a group of its own.
	if r := commit(8, "simple", -1, "", 5); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("%+v", r)
	}

	for v := int16(1); v <= 9; v++ {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(v)
		req.RequireStable = true
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0, 1, 5}
		req.Group, req.Topics = "g", []kmsg.OffsetFetchRequestTopic{rt}
		for _, g := range []string{"g", "simple", "none"} {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = g
			if g != "simple" {
				gt := kmsg.NewOffsetFetchRequestGroupTopic()
				gt.Topic, gt.Partitions = "t", []int32{0, 1, 5}
				rg.Topics = append(rg.Topics, gt)
			}
			req.Groups = append(req.Groups, rg)
		}
		resp := c.do(req).(*kmsg.OffsetFetchResponse)
		check := func(g string, p, off int64, epoch int32, meta *string, code int16) {
			if code != 0 || meta == nil || (off != p && p >= 0) {
				t.Fatalf("OffsetFetch v%d %s: offset %d, want %d; metadata %v; %v", v, g, off, p, meta, kerr.ErrorForCode(code))
			}
			if v >= 5 && off >= 0 && epoch != 4 {
				t.Fatalf("OffsetFetch v%d %s: leader epoch %d", v, g, epoch)
			}
		}
		if v < 8 {
			ps := resp.Topics[0].Partitions
			check("g", 90, ps[0].Offset, ps[0].LeaderEpoch, ps[0].Metadata, ps[0].ErrorCode)
			check("g", -1, ps[2].Offset, ps[2].LeaderEpoch, ps[2].Metadata, ps[2].ErrorCode)
			if *ps[0].Metadata != "v9" || resp.ErrorCode != 0 {
				t.Fatalf("OffsetFetch v%d: %+v", v, resp)
			}
			continue
		}
		if len(resp.Groups) != 3 {
			t.Fatalf("OffsetFetch v%d: %+v", v, resp)
		}
		ps := resp.Groups[0].Topics[0].Partitions
		check("g", 90, ps[1].Offset, ps[1].LeaderEpoch, ps[1].Metadata, ps[1].ErrorCode)
		simple := resp.Groups[1].Topics
		if len(simple) != 1 || len(simple[0].Partitions) != 2 || simple[0].Partitions[0].Offset != 5 {
			t.Fatalf("OffsetFetch v%d, all of simple's offsets: %+v", v, simple)
		}
		none := resp.Groups[2].Topics[0].Partitions
		check("none", -1, none[0].Offset, none[0].LeaderEpoch, none[0].Metadata, none[0].ErrorCode)
	}
}

func TestDescribeListDeleteEveryVersion(t *testing.T) {
	_, c := groupProtocolBroker(t)
	j := rawJoin(t, c, 9, "g")
	rawSync(t, c, 5, "g", j.Generation, j.MemberID, []byte("a"))
	for v := int16(0); v <= 5; v++ {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.SetVersion(v)
		req.Groups = []string{"g", "none"}
		req.IncludeAuthorizedOperations = true
		resp := c.do(req).(*kmsg.DescribeGroupsResponse)
		g, none := resp.Groups[0], resp.Groups[1]
		if g.ErrorCode != 0 || g.State != "Stable" || g.Protocol != "range" || g.ProtocolType != "consumer" ||
			len(g.Members) != 1 || string(g.Members[0].MemberAssignment) != "a" || g.Members[0].ClientHost != "/127.0.0.1" ||
			g.Members[0].ClientID != "raw-test" || none.State != "Dead" || none.ErrorCode != 0 {
			t.Fatalf("DescribeGroups v%d: %+v", v, resp)
		}
		if v >= 3 && g.AuthorizedOperations != 1<<3|1<<6|1<<8|1<<10|1<<11 {
			t.Fatalf("DescribeGroups v%d: authorized operations %b", v, g.AuthorizedOperations)
		}
	}
	for v := int16(0); v <= 5; v++ {
		req := kmsg.NewPtrListGroupsRequest()
		req.SetVersion(v)
		resp := c.do(req).(*kmsg.ListGroupsResponse)
		if resp.ErrorCode != 0 || len(resp.Groups) != 1 || resp.Groups[0].Group != "g" || resp.Groups[0].ProtocolType != "consumer" {
			t.Fatalf("ListGroups v%d: %+v", v, resp)
		}
		if v >= 4 && resp.Groups[0].GroupState != "Stable" || v >= 5 && resp.Groups[0].GroupType != "classic" {
			t.Fatalf("ListGroups v%d: %+v", v, resp)
		}
		if v >= 4 {
			req.StatesFilter = []string{"empty"}
			if resp := c.do(req).(*kmsg.ListGroupsResponse); len(resp.Groups) != 0 {
				t.Fatalf("ListGroups v%d, states filter: %+v", v, resp)
			}
		}
		if v >= 5 {
			req.StatesFilter, req.TypesFilter = nil, []string{"consumer"}
			if resp := c.do(req).(*kmsg.ListGroupsResponse); len(resp.Groups) != 0 {
				t.Fatalf("ListGroups v%d, types filter: %+v", v, resp)
			}
		}
	}

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "none"
	if r := c.do(od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("OffsetDelete: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	for v := int16(0); v <= 3; v++ {
		g := fmt.Sprint("del-v", v)
		cr := kmsg.NewPtrOffsetCommitRequest()
		cr.SetVersion(8)
		cr.Group, cr.Generation = g, -1
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = "t"
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Offset = 3
		ct.Partitions = append(ct.Partitions, cp)
		cr.Topics = append(cr.Topics, ct)
		c.do(cr)
		if v == 0 {
			// OffsetDelete v0 on the way.
			od.Group = g
			dt := kmsg.NewOffsetDeleteRequestTopic()
			dt.Topic = "t"
			dt.Partitions = append(dt.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
			od.Topics = append(od.Topics, dt)
			if r := c.do(od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("OffsetDelete: %+v", r)
			}
		}
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.SetVersion(v)
		req.Groups = []string{g, "g", "none"}
		resp := c.do(req).(*kmsg.DeleteGroupsResponse)
		if resp.Groups[0].ErrorCode != 0 || resp.Groups[1].ErrorCode != kerr.NonEmptyGroup.Code || resp.Groups[2].ErrorCode != kerr.GroupIDNotFound.Code {
			t.Fatalf("DeleteGroups v%d: %+v", v, resp)
		}
		// v3 (KIP-1331) says why; before, the message is not sent.
		if msg := resp.Groups[1].ErrorMessage; (v >= 3) != (msg != nil) || resp.Groups[0].ErrorMessage != nil {
			t.Fatalf("DeleteGroups v%d messages: %v, %v", v, resp.Groups[0].ErrorMessage, msg)
		}
	}
}

// Asked for by name before any group exists, __consumer_offsets is made
// as the coordinator needs it, not as a plain auto-created topic. As
// Kafka, the answer that creates it is LEADER_NOT_AVAILABLE without
// partitions; the next one describes it.
func TestOffsetsTopicAutoCreatedByMetadata(t *testing.T) {
	b := testutil.StartBroker(t, func(c *config.Broker) { c.OffsetsTopicPartitions = 7 })
	c := dialRaw(t, b.Addr)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.AllowAutoTopicCreation = true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("__consumer_offsets")
	req.Topics = append(req.Topics, mt)
	m := c.do(req).(*kmsg.MetadataResponse)
	if m.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code || !m.Topics[0].IsInternal || len(m.Topics[0].Partitions) != 0 {
		t.Fatalf("the answer that creates it: %+v", m.Topics[0])
	}
	m = c.do(req).(*kmsg.MetadataResponse)
	if m.Topics[0].ErrorCode != 0 || !m.Topics[0].IsInternal || len(m.Topics[0].Partitions) != 7 {
		t.Fatalf("the next answer: %+v", m.Topics[0])
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.SetVersion(4)
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "__consumer_offsets"
	r.ConfigNames = []string{"cleanup.policy"}
	dc.Resources = append(dc.Resources, r)
	d := c.do(dc).(*kmsg.DescribeConfigsResponse)
	if len(d.Resources) != 1 || len(d.Resources[0].Configs) != 1 || *d.Resources[0].Configs[0].Value != "compact" {
		t.Fatalf("%+v", d.Resources)
	}
}

// A JoinGroup parked in a rebalance is answered NOT_COORDINATOR when the
// broker shuts down, as Kafka answers when a coordinator unloads a group:
// the client finds the coordinator again and rejoins.
func TestShutdownAnswersParkedJoin(t *testing.T) {
	b := testutil.StartBroker(t, func(c *config.Broker) { c.GroupInitialRebalanceDelay = time.Minute })
	c := dialRaw(t, b.Addr)
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(3)
	req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = "g", 10000, 120000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	req.Protocols = append(req.Protocols, p)
	corr := c.send(req)
	if _, err := c.readFrame(200 * time.Millisecond); err == nil {
		t.Fatal("answered before the initial delay")
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		b.Stop(t)
	}()
	resp := c.recv(req, corr).(*kmsg.JoinGroupResponse)
	<-stopped
	if resp.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("%v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
