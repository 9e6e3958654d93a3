package inspect

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Cluster is a cluster's id, controller, brokers and features.
type Cluster struct {
	ClusterID  string   `json:"cluster_id"`
	Controller int32    `json:"controller"`
	Brokers    []Broker `json:"brokers"`
	// Features are the cluster's finalized feature levels (ApiVersions).
	Features map[string]int16 `json:"features"`
}

// Broker is one broker of the cluster.
type Broker struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
}

// ReadCluster reads the cluster's brokers and features.
func ReadCluster(ctx context.Context, adm *kadm.Client) (Cluster, error) {
	md, err := LiveBrokers(ctx, adm)
	if err != nil {
		return Cluster{}, err
	}
	c := Cluster{ClusterID: md.Cluster, Controller: md.Controller, Brokers: []Broker{}, Features: finalizedFeatures(ctx, adm)}
	for _, b := range md.Brokers {
		c.Brokers = append(c.Brokers, Broker{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: deref(b.Rack)})
	}
	return c, nil
}

// LiveBrokers asks a broker for the cluster's live brokers now.
// kadm's BrokerMetadata answers from the client's cache of brokers, which
// franz-go refreshes only every metadata.max.age (5 minutes): a client
// that stays open, as the console's does, would go on listing a broker
// that died and miss one that joined. Asking for the authorized
// operations makes kadm send the request.
func LiveBrokers(ctx context.Context, adm *kadm.Client) (kadm.Metadata, error) {
	return adm.BrokerMetadata(kadm.WithAuthorizedOps(ctx))
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

// Health is whether every partition has a leader and a full in-sync set.
type Health struct {
	Healthy                   bool     `json:"healthy"`
	Brokers                   int      `json:"brokers"`
	Controller                int32    `json:"controller"`
	Partitions                int      `json:"partitions"`
	OfflinePartitions         []string `json:"offline_partitions"`
	UnderReplicatedPartitions []string `json:"under_replicated_partitions"`
}

// ReadHealth reads every topic's partitions, internal ones too.
func ReadHealth(ctx context.Context, adm *kadm.Client) (Health, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return Health{}, err
	}
	h := Health{Brokers: len(md.Brokers), Controller: md.Controller, OfflinePartitions: []string{},
		UnderReplicatedPartitions: []string{}}
	for _, td := range md.Topics.Sorted() {
		for _, p := range td.Partitions.Sorted() {
			h.Partitions++
			name := fmt.Sprintf("%s-%d", td.Topic, p.Partition)
			switch {
			case p.Leader < 0 || p.Err != nil:
				h.OfflinePartitions = append(h.OfflinePartitions, name)
			case len(p.ISR) < len(p.Replicas):
				h.UnderReplicatedPartitions = append(h.UnderReplicatedPartitions, name)
			}
		}
	}
	h.Healthy = len(h.OfflinePartitions) == 0 && len(h.UnderReplicatedPartitions) == 0 && md.Controller >= 0
	return h, nil
}
