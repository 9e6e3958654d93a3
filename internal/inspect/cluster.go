package inspect

import (
	"cmp"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Which broker is "the controller": a Kafka broker in KRaft mode names a
// live broker (often itself) as controller in Metadata and
// DescribeCluster, and so does Strand, so that admin requests go to any
// broker. Asking the cluster that way names a different broker on each
// call. The active controller is the metadata quorum's leader, which
// DescribeQuorum names (kafka-metadata-quorum.sh); every broker forwards
// it to the leader, so every broker names the same one. A cluster that
// does not answer it (ZooKeeper-era Kafka, or a principal without
// DESCRIBE on the cluster) is asked Metadata's controller id instead.
//
// Brokers: Metadata lists only the live brokers. DescribeCluster v2
// (KIP-1073) lists the fenced ones too when asked: a broker that stopped,
// or that the controller has not heard from for the session timeout. They
// are listed as down, with the partitions that have a replica on them
// (from Metadata). A cluster that does not list its fenced brokers still
// names them in its partitions' replicas: those are listed as down too,
// without an address.

// Cluster is a cluster's id, active controller, brokers and features.
type Cluster struct {
	ClusterID string `json:"cluster_id"`
	// Controller is the active controller, the metadata quorum's leader;
	// -1 while there is none.
	Controller int32 `json:"controller"`
	// Brokers are the registered brokers, live and down, by node id.
	Brokers []Broker `json:"brokers"`
	// Features are the cluster's finalized feature levels (ApiVersions).
	Features map[string]int16 `json:"features"`
}

// Broker is one broker of the cluster.
type Broker struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
	// Status is "up", or "down" for a registered broker that is fenced (or
	// that a partition names as a replica but the cluster no longer lists).
	Status string `json:"status"`
	// Partitions are the partitions with a replica on the broker
	// ("topic-partition"), sorted; Leads how many of them it leads.
	Partitions []string `json:"partitions"`
	Leads      int      `json:"leads"`
}

// Broker statuses.
const (
	BrokerUp   = "up"
	BrokerDown = "down"
)

// Down says whether the broker is down.
func (b Broker) Down() bool { return b.Status == BrokerDown }

// Live counts the brokers that are up.
func (c Cluster) Live() int {
	n := 0
	for _, b := range c.Brokers {
		if !b.Down() {
			n++
		}
	}
	return n
}

// ReadCluster reads the cluster's controller, brokers and features.
func ReadCluster(ctx context.Context, cl *kgo.Client) (Cluster, error) {
	md, err := readMetadata(ctx, cl)
	if err != nil {
		return Cluster{}, err
	}
	c := Cluster{ClusterID: deref(md.ClusterID), Controller: ReadController(ctx, cl, md.ControllerID),
		Brokers: brokersOf(ctx, cl, md), Features: finalizedFeatures(ctx, kadm.NewClient(cl))}
	return c, nil
}

// ReadController is the cluster's active controller: the metadata
// quorum's leader (DescribeQuorum's LeaderId), or metadataController (a
// Metadata answer's controller id) when the cluster does not answer
// DescribeQuorum; -1 while the quorum has no leader.
func ReadController(ctx context.Context, cl *kgo.Client, metadataController int32) int32 {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return metadataController
	}
	// A broker that could not reach the leader still names it (with
	// NOT_LEADER_OR_FOLLOWER); -1 is no leader.
	return max(resp.Topics[0].Partitions[0].LeaderID, -1)
}

// readMetadata asks a broker for every topic's metadata now. kadm answers
// Metadata from the client's cache of brokers and topics, which franz-go
// refreshes only every metadata.max.age (5 minutes): a client that stays
// open, as the console's does, would go on listing a broker that died and
// miss one that joined.
func readMetadata(ctx context.Context, cl *kgo.Client) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // every topic, internal ones too
	return req.RequestWith(ctx, cl)
}

// brokersOf is every broker: the live ones md lists, the fenced ones
// DescribeCluster lists, and any other md's partitions name, each with
// the partitions it holds a replica of.
func brokersOf(ctx context.Context, cl *kgo.Client, md *kmsg.MetadataResponse) []Broker {
	byID := map[int32]*Broker{}
	for _, b := range md.Brokers {
		byID[b.NodeID] = &Broker{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: deref(b.Rack), Status: BrokerUp}
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = true
	if resp, err := req.RequestWith(ctx, cl); err == nil && resp.ErrorCode == 0 {
		for _, b := range resp.Brokers {
			if _, listed := byID[b.NodeID]; listed || !b.IsFenced {
				continue // Metadata's answer is the newer of the two, or as new
			}
			byID[b.NodeID] = &Broker{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: deref(b.Rack), Status: BrokerDown}
		}
	}
	type held struct {
		p    Partition
		lead bool
	}
	holds := map[int32][]held{}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				holds[r] = append(holds[r], held{Partition{deref(t.Topic), p.Partition}, p.Leader == r})
			}
		}
	}
	for id := range holds {
		if byID[id] == nil {
			byID[id] = &Broker{NodeID: id, Status: BrokerDown}
		}
	}
	out := make([]Broker, 0, len(byID))
	for id, b := range byID {
		hs := holds[id]
		slices.SortFunc(hs, func(a, b held) int { return ComparePartitions(a.p, b.p) })
		b.Partitions = make([]string, 0, len(hs))
		for _, h := range hs {
			b.Partitions = append(b.Partitions, h.p.String())
			if h.lead {
				b.Leads++
			}
		}
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b Broker) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return out
}

// finalizedFeatures is the feature levels the brokers finalized (the
// highest epoch's, should brokers differ a moment); none when no broker
// answers with them.
func finalizedFeatures(ctx context.Context, adm *kadm.Client) map[string]int16 {
	out := map[string]int16{}
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		return out
	}
	epoch := int64(-1)
	for _, v := range vs {
		raw := v.Raw()
		if v.Err != nil || raw == nil || raw.FinalizedFeaturesEpoch < epoch {
			continue
		}
		epoch = raw.FinalizedFeaturesEpoch
		clear(out)
		for _, f := range raw.FinalizedFeatures {
			out[f.Name] = f.MaxVersionLevel
		}
	}
	return out
}

// Health is whether every partition has a leader and a full in-sync set,
// and the quorum a leader.
type Health struct {
	Healthy    bool  `json:"healthy"`
	Brokers    int   `json:"brokers"` // those up
	Controller int32 `json:"controller"`
	// DownBrokers are the registered brokers that are down, with the
	// partitions they hold. A down broker makes the cluster unhealthy
	// through its partitions, which are offline or under-replicated.
	DownBrokers               []Broker `json:"down_brokers"`
	Partitions                int      `json:"partitions"`
	OfflinePartitions         []string `json:"offline_partitions"`
	UnderReplicatedPartitions []string `json:"under_replicated_partitions"`
}

// ReadHealth reads every topic's partitions, internal ones too.
func ReadHealth(ctx context.Context, cl *kgo.Client) (Health, error) {
	md, err := readMetadata(ctx, cl)
	if err != nil {
		return Health{}, err
	}
	h := Health{Controller: ReadController(ctx, cl, md.ControllerID), DownBrokers: []Broker{},
		OfflinePartitions: []string{}, UnderReplicatedPartitions: []string{}}
	for _, b := range brokersOf(ctx, cl, md) {
		if b.Down() {
			h.DownBrokers = append(h.DownBrokers, b)
		} else {
			h.Brokers++
		}
	}
	topics := slices.SortedFunc(slices.Values(md.Topics), func(a, b kmsg.MetadataResponseTopic) int {
		return cmp.Compare(deref(a.Topic), deref(b.Topic))
	})
	for _, t := range topics {
		parts := slices.SortedFunc(slices.Values(t.Partitions), func(a, b kmsg.MetadataResponseTopicPartition) int {
			return cmp.Compare(a.Partition, b.Partition)
		})
		for _, p := range parts {
			h.Partitions++
			name := Partition{deref(t.Topic), p.Partition}.String()
			switch {
			case p.Leader < 0 || p.ErrorCode != 0:
				h.OfflinePartitions = append(h.OfflinePartitions, name)
			case len(p.ISR) < len(p.Replicas):
				h.UnderReplicatedPartitions = append(h.UnderReplicatedPartitions, name)
			}
		}
	}
	h.Healthy = len(h.OfflinePartitions) == 0 && len(h.UnderReplicatedPartitions) == 0 && h.Controller >= 0
	return h, nil
}

// LiveBrokers asks a broker for the cluster's live brokers now, through
// kadm: asking for the authorized operations makes kadm send the request
// rather than answer from the client's cache (see readMetadata).
func LiveBrokers(ctx context.Context, adm *kadm.Client) (kadm.Metadata, error) {
	return adm.BrokerMetadata(kadm.WithAuthorizedOps(ctx))
}
