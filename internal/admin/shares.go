package admin

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Shares is this broker's part of the share groups (KIP-932): the groups
// it coordinates, and the share-partitions of the partitions it leads.
type Shares interface {
	ShareGroups() []ShareGroupFigures
	SharePartitions() []SharePartitionFigures
}

// ShareGroupFigures is a share group as its coordinator counts it.
type ShareGroupFigures struct {
	Group, State string
	Members      int
}

// SharePartitionFigures is one group's share-partition as the partition's
// leader counts it: Lag is the records from its start offset to the high
// watermark not yet delivered for good (accepted, rejected or given up),
// Acquired those held under a lock now, InFlight those between its start
// and end offsets (acquired, available again, or done past an undone one).
type SharePartitionFigures struct {
	Group, Topic            string
	Partition               int32
	Lag, Acquired, InFlight int64
}

var (
	shareLagDesc = prometheus.NewDesc("strand_share_partition_lag",
		"Records of a share-partition, from its start offset to the high watermark, not yet delivered for good."+eachShareLeader,
		[]string{"group", "topic", "partition"}, nil)
	shareAcquiredDesc = prometheus.NewDesc("strand_share_partition_acquired",
		"Records of a share-partition held by a member under a lock now."+eachShareLeader, []string{"group", "topic", "partition"}, nil)
	shareInFlightDesc = prometheus.NewDesc("strand_share_partition_in_flight",
		"Records of a share-partition between its start and end offsets: acquired, to deliver again, or done past an undone one."+eachShareLeader,
		[]string{"group", "topic", "partition"}, nil)
)

// eachShareLeader says where a share-partition's figures come from.
const eachShareLeader = " Each broker reports the share-partitions of the partitions it leads: scrape every broker."

// shareCollector exports, at each scrape, the share groups this broker
// coordinates (their members, beside the other groups') and the
// share-partitions it leads.
type shareCollector struct{ shares Shares }

func (c shareCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- shareLagDesc
	ch <- shareAcquiredDesc
	ch <- shareInFlightDesc
}

func (c shareCollector) Collect(ch chan<- prometheus.Metric) {
	for _, g := range c.shares.ShareGroups() {
		ch <- prometheus.MustNewConstMetric(groupMembersDesc, prometheus.GaugeValue, float64(g.Members), g.Group, "share", g.State)
	}
	for _, p := range c.shares.SharePartitions() {
		part := itoa(p.Partition)
		ch <- prometheus.MustNewConstMetric(shareLagDesc, prometheus.GaugeValue, float64(p.Lag), p.Group, p.Topic, part)
		ch <- prometheus.MustNewConstMetric(shareAcquiredDesc, prometheus.GaugeValue, float64(p.Acquired), p.Group, p.Topic, part)
		ch <- prometheus.MustNewConstMetric(shareInFlightDesc, prometheus.GaugeValue, float64(p.InFlight), p.Group, p.Topic, part)
	}
}
