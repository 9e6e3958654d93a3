package server

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/admin"
	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/console"
	"github.com/strandlog/strand/internal/group"
	"github.com/strandlog/strand/internal/inspect"
	"github.com/strandlog/strand/internal/ledger"
	"github.com/strandlog/strand/internal/ledger/reader"
	"github.com/strandlog/strand/internal/model"
	"github.com/strandlog/strand/internal/peer"
	"github.com/strandlog/strand/internal/protocol"
	"github.com/strandlog/strand/internal/replica"
)

// startAdmin opens the admin HTTP listener, when configured. When it
// fails it has closed the console it made, so that Shutdown, which stops
// what startAdmin left running, closes nothing twice.
func (s *Server) startAdmin() error {
	if s.cfg.AdminListen == "" {
		return nil
	}
	// The API reads the groups other brokers coordinate through this
	// broker's own listener, as a client would.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.selfAddr())}, s.selfClientOpts()...)...)
	if err != nil {
		return err
	}
	s.adminClient = cl
	cfg := admin.Config{
		Listen:      s.cfg.AdminListen,
		Groups:      s.groups,
		Cluster:     adminClusterGroups{kadm.NewClient(cl)},
		Partitions:  adminPartitions{self: s.cfg.NodeID, metadata: s.cluster, replicas: s.replicas, peers: s.peers},
		Health:      adminHealth{cfg: s.cfg, metadata: s.cluster},
		Metrics:     s.metrics,
		Logger:      s.logger.With("component", "admin"),
		Links:       s.adminLinks(),
		Connections: s.adminLocal(),
		Replicas:    s.adminLocal(),
		Telemetry:   s.broker.Telemetry,
		Shares:      adminShares{shares: s.broker.Shares, metadata: s.cluster, replicas: s.replicas},
	}
	if s.ledger != nil {
		cfg.Ledger = adminLedger{addr: s.selfAddr(), clientOpts: s.selfClientOpts()}
	}
	var c *console.Console
	if s.cfg.AdminConsole {
		// The console reads the cluster through this broker's own
		// listener, as a client would.
		var err error
		c, err = console.New(console.Config{Brokers: []string{s.selfAddr()},
			ClientOpts: s.selfClientOpts(),
			Actions:    s.cfg.AdminConsoleActions, SampleEvery: s.cfg.AdminConsoleSample, Logger: s.logger.With("component", "console"),
			Links: s.adminLinks()})
		if err != nil {
			s.adminClient.Close()
			return err
		}
		cfg.Console = c
	}
	a, err := admin.Start(cfg)
	if err != nil {
		if c != nil {
			c.Close()
		}
		s.adminClient.Close()
		return err
	}
	s.admin, s.console = a, c
	s.logger.Info("admin listener started", "addr", a.Addr().String())
	return nil
}

// stopAdmin stops the admin listener and the console, once.
func (s *Server) stopAdmin(ctx context.Context) {
	if s.admin != nil {
		s.admin.Close(ctx)
		s.admin = nil
	}
	if s.console != nil {
		s.console.Close()
		s.console = nil
	}
	if s.adminClient != nil {
		s.adminClient.Close()
	}
}

// AdminAddr is where the admin listener listens; nil without one.
func (s *Server) AdminAddr() net.Addr {
	if s.admin == nil {
		return nil
	}
	return s.admin.Addr()
}

// adminPartitions reads partitions for the admin listener: from the
// replica when this broker leads the partition, else from its leader.
type adminPartitions struct {
	self     int32
	metadata *cluster.Store
	replicas *replica.Manager
	peers    *peer.Client
}

func (a adminPartitions) leader(tp model.TopicPartition) (int32, bool) {
	p, ok := a.metadata.Partition(tp.Topic, tp.Partition)
	return p.Leader, ok && p.Leader != cluster.NoLeader
}

func (a adminPartitions) HighWatermarks(ctx context.Context, tps []model.TopicPartition) map[model.TopicPartition]int64 {
	out := make(map[model.TopicPartition]int64, len(tps))
	remote := map[int32]*kmsg.ListOffsetsRequest{}
	for _, tp := range tps {
		if p, ok := a.replicas.Get(tp); ok && p.IsLeader() {
			out[tp] = p.HighWatermark()
			continue
		}
		node, ok := a.leader(tp)
		if !ok || node == a.self {
			continue
		}
		req := remote[node]
		if req == nil {
			req = kmsg.NewPtrListOffsetsRequest()
			req.SetVersion(4)
			req.ReplicaID = -1
			remote[node] = req
		}
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = tp.Topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = tp.Partition, -1 // the high watermark
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	for node, req := range remote {
		resp, err := a.peers.Request(ctx, node, req)
		if err != nil {
			continue
		}
		for _, rt := range resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode == 0 {
					out[model.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.Offset
				}
			}
		}
	}
	return out
}

func (a adminPartitions) Timestamp(ctx context.Context, tp model.TopicPartition, offset int64) (time.Time, bool) {
	var header []byte
	if p, ok := a.replicas.Get(tp); ok && p.IsLeader() {
		sec, err := p.Read(offset, 1, false)
		if err != nil || sec.Size < model.BatchHeaderSize {
			return time.Time{}, false
		}
		header = make([]byte, model.BatchHeaderSize)
		if n, _ := sec.File.ReadAt(header, sec.Pos); n < len(header) {
			return time.Time{}, false
		}
	} else if header = a.remoteBatch(ctx, tp, offset); len(header) < model.BatchHeaderSize {
		return time.Time{}, false
	}
	b := model.Batch(header)
	ms := b.BaseTimestamp()
	if b.IsLogAppendTime() {
		ms = b.MaxTimestamp()
	}
	return time.UnixMilli(ms), true
}

// consumerFetch is a consumer's Fetch (no session) of one partition from
// offset, of up to maxBytes, waiting up to maxWait for data.
func consumerFetch(tp model.TopicPartition, offset int64, maxBytes int32, maxWait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, maxBytes, -1
	req.MaxWaitMillis, req.MinBytes = int32(maxWait.Milliseconds()), 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = tp.Partition, offset, maxBytes, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// remoteBatch fetches the batch holding offset from the partition's leader.
func (a adminPartitions) remoteBatch(ctx context.Context, tp model.TopicPartition, offset int64) []byte {
	node, ok := a.leader(tp)
	if !ok || node == a.self {
		return nil
	}
	resp, err := a.peers.Request(ctx, node, consumerFetch(tp, offset, 1, 0))
	if err != nil {
		return nil
	}
	for _, t := range resp.(*kmsg.FetchResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				return p.RecordBatches
			}
		}
	}
	return nil
}

// adminLedger reads the hand-off ledger through this broker's own
// listener, as any Kafka client would.
type adminLedger struct {
	addr       string // this broker's own listener, read as a client would
	clientOpts []kgo.Opt
}

func (a adminLedger) Read(ctx context.Context, group string, since time.Time) ([]ledger.Entry, error) {
	return reader.Read(ctx, []string{a.addr}, group, since, a.clientOpts...)
}

// adminClusterGroups reads the cluster's groups through this broker's
// own listener with internal/inspect, the path the console and `strand
// group` take, so that each group is described by its coordinator.
type adminClusterGroups struct{ adm *kadm.Client }

func (a adminClusterGroups) List(ctx context.Context) ([]string, error) {
	gs, err := inspect.ListGroups(ctx, a.adm)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(gs))
	for i, g := range gs {
		ids[i] = g.Group
	}
	return ids, nil
}

func (a adminClusterGroups) Read(ctx context.Context, id string) (group.View, bool, error) {
	g, err := inspect.ReadGroup(ctx, a.adm, id)
	if err != nil || !g.Exists() {
		return group.View{}, false, err
	}
	v := group.View{Group: g.Group, Type: g.Type, State: g.State, ProtocolType: g.ProtocolType, Protocol: g.Protocol,
		Generation: -1} // a classic group's generation is not in DescribeGroups
	kinds := map[string]string{}
	if g.Type == "consumer" {
		// ConsumerGroupDescribe has the group's epoch, and whether each
		// member speaks the consumer protocol or joined as a classic one.
		ds, err := a.adm.DescribeConsumerGroups(ctx, id)
		if err != nil {
			return group.View{}, false, err
		}
		if d := ds[id]; d.Err == nil {
			v.Generation = d.Epoch
			for _, m := range d.Members {
				kinds[m.MemberID] = map[int8]string{0: "classic", 1: "consumer"}[m.MemberType]
			}
		}
	}
	for _, m := range g.Members {
		protocol := "classic"
		if g.Type == "consumer" {
			protocol = kinds[m.MemberID]
		}
		mv := group.MemberView{Owner: group.Owner{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID,
			ClientHost: m.Host}, Protocol: protocol}
		for _, p := range m.Owned {
			mv.Assignment = append(mv.Assignment, model.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
		v.Members = append(v.Members, mv)
	}
	for _, p := range g.Partitions {
		v.Offsets = append(v.Offsets, group.OffsetView{TopicPartition: model.TopicPartition{Topic: p.Topic, Partition: p.Partition},
			Committed: p.Committed, Owner: p.MemberID})
	}
	return v, true, nil
}

// adminLocal is this broker's own figures: its connections, fetch
// sessions and replicas (admin.Connections, admin.LocalReplicas).
type adminLocal struct {
	connections   func() map[string]int
	fetchSessions func() []protocol.FetchSessionStatus
	replicas      *replica.Manager
}

func (s *Server) adminLocal() adminLocal {
	return adminLocal{connections: s.Connections, fetchSessions: s.FetchSessions, replicas: s.replicas}
}

func (a adminLocal) Connections() map[string]int { return a.connections() }

func (a adminLocal) FetchSessions() (consumers, followers int) {
	for _, fs := range a.fetchSessions() {
		if fs.Replica >= 0 {
			followers++
		} else {
			consumers++
		}
	}
	return consumers, followers
}

// LocalReplicas lists the replicas this broker holds (admin.LocalReplicas).
func (a adminLocal) LocalReplicas() []admin.ReplicaState {
	var out []admin.ReplicaState
	for _, p := range a.replicas.Partitions() {
		out = append(out, admin.ReplicaState{Topic: p.TP.Topic, Partition: p.TP.Partition, Leader: p.IsLeader(),
			LogStart: p.StartOffset(), LogEnd: p.EndOffset(), HighWatermark: p.HighWatermark(), SizeBytes: p.Size()})
	}
	return out
}

// adminHealth reports the cluster as this broker's metadata shows it:
// the controller is the quorum's leader as this broker's member of the
// quorum knows it.
type adminHealth struct {
	cfg      config.Broker // the static settings
	metadata *cluster.Store
}

func (a adminHealth) Health() admin.HealthReport {
	st := a.metadata
	r := admin.HealthReport{Status: "ok", NodeID: a.cfg.NodeID, ClusterID: st.ClusterID(), Controller: st.Controller(),
		DownBrokers: []admin.DownBroker{}}
	down := map[int32]*admin.DownBroker{}
	for _, b := range st.Brokers() {
		if !b.Fenced {
			r.Brokers++
			continue
		}
		r.DownBrokers = append(r.DownBrokers, admin.DownBroker{NodeID: b.NodeID, Partitions: []string{}})
	}
	for i := range r.DownBrokers {
		down[r.DownBrokers[i].NodeID] = &r.DownBrokers[i]
	}
	defaults, err := config.ApplyDynamic(a.cfg, st.BrokerConfigs(), st.NodeConfigs(a.cfg.NodeID))
	if err != nil {
		defaults = a.cfg // stored configs were checked when set
	}
	for _, t := range st.Topics() { // sorted by name
		minISR := defaults.Topic.MinInSyncReplicas
		if lc, err := config.TopicConfig(defaults.Topic, t.Configs); err == nil {
			minISR = lc.MinInSyncReplicas
		}
		for i, p := range t.States {
			r.Partitions++
			led := p.Leader == r.NodeID
			if led {
				r.Led.Partitions++
			}
			switch {
			case p.Leader == cluster.NoLeader:
				r.OfflinePartitions++
			case len(p.ISR) < len(p.Replicas):
				r.UnderReplicatedPartitions++
				if led {
					r.Led.UnderReplicated++
				}
			}
			if p.Leader != cluster.NoLeader && len(p.ISR) < minISR {
				r.UnderMinISRPartitions++
				if led {
					r.Led.UnderMinISR++
				}
			}
			for _, id := range p.Replicas {
				if d := down[id]; d != nil {
					d.Partitions = append(d.Partitions, t.Name+"-"+strconv.Itoa(i))
				}
			}
		}
	}
	if r.OfflinePartitions > 0 || r.UnderReplicatedPartitions > 0 {
		r.Status = "degraded"
	}
	return r
}
